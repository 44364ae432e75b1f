#pragma once
/// The database lease's client over libpq, as a client process runs it: protocols/dblease/
/// lease_algorithm.hpp's Link, so the real client runs the simulated client's own algorithm (LeaseAlgorithm:
/// AcquireLease, extend, release, its belief), one statement at a time on a connection of its own, made on
/// demand and again after it broke. The statements as PostgreSQL runs them:
///
///   begin              BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT now()      (tx.Now(), the database's
///   clock) select_for_update  SELECT owner, token, expires FROM leases WHERE name = $1 FOR UPDATE update
///   INSERT INTO leases … ON CONFLICT (name) DO UPDATE SET owner, token, expires commit / rollback  COMMIT
///   (the algorithm's note once it has left) / ROLLBACK
///
/// The service's record of a grant is the database's own: a trigger on leases inserts into lease_grants
/// (pg_server.cpp) when a row gets a new owner or token, in the same transaction, so it exists iff the grant
/// committed. A serialization failure (40001), a deadlock (40P01) or a concurrent insert of the row (23505)
/// is the algorithm's "serialization-failure": it runs the transaction again at once, a few times, as pglock
/// does. Every statement is bounded by statement_timeout = the transaction timeout (the scenario's
/// rpc_timeout, or the TTL as cirello.io/pglock bounds each transaction by the lease duration); a statement
/// that got no answer (a timeout, a lost connection) drops the connection.
///   write: SELECT write_with_fence(...) (pg_server.hpp), the database's WriteWithFence (the resource, not
///   the lock: not part of the Link).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "locksim/protocols/dblease/lease_algorithm.hpp"

struct pg_conn;

namespace locksim::reality {

class PgLink final : public dblease::Link {
 public:
  /// `note(label, detail)`: the client's note to the parent (returns once it may go on). `t0`: the run's
  /// start on CLOCK_MONOTONIC.
  using Note = std::function<void(const std::string&, const std::string&)>;
  PgLink(std::string conninfo, std::int64_t tx_timeout_ns, std::string name, std::int64_t t0, Note note);
  ~PgLink() override;
  PgLink(const PgLink&) = delete;
  PgLink& operator=(const PgLink&) = delete;

  Time now() override;
  Time wall() override;
  void note(std::string_view label, std::string detail) override;
  const std::string& name() const override { return name_; }
  std::uint64_t unique() override { return ++owners_; }
  std::optional<dblease::SqlReply> exec(dblease::SqlRequest rq, Time deadline,
                                        std::string_view note) override;

  /// WriteWithFence: "A" (accepted), "R reason" (refused), empty (no answer).
  std::string write(const std::string& key, const std::string& client, std::uint64_t write_id,
                    const std::optional<std::uint64_t>& token, const std::string& value);

 private:
  pg_conn* conn();
  void drop();
  std::string conninfo_;
  std::int64_t tx_timeout_ns_;
  std::string name_;
  std::int64_t t0_;
  Note note_;
  std::uint64_t owners_ = 0;
  pg_conn* conn_ = nullptr;
};

}  // namespace locksim::reality
