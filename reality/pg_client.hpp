#pragma once
/// The database lease's calls over libpq, as a client process makes them (client.cpp runs the lock logic of
/// protocols/dblease/dblease.cpp's DbLeaseClient with these): each a transaction of one round trip per
/// statement on a connection of its own, made on demand and again after it broke.
///
///   AcquireLease: BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT … FROM leases WHERE name = $1 FOR UPDATE (the
///   row inserted, owner '' and token first_token - 1, when absent); free or expired by the database's now()?
///   UPDATE token = token + 1, owner, expires = now() + ttl; INSERT INTO lease_grants (… clock_timestamp());
///   COMMIT. A serialization failure (40001), a deadlock (40P01) or a concurrent insert of the row (23505)
///   rolls back and the transaction runs again at once, a few times, as pglock does.
///   release: the same shape; only the owner with its token sets owner '' and expires = now().
///   write: SELECT write_with_fence(...) (pg_server.hpp), the database's WriteWithFence.
/// Every statement is bounded by statement_timeout = the transaction timeout (the scenario's rpc_timeout, or
/// the TTL as cirello.io/pglock bounds each transaction by the lease duration).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

struct pg_conn;

namespace locksim::reality {

/// What AcquireLease returned: the row's token and Expires (the database's wall clock, ns since the epoch).
struct PgAcquired {
  std::uint64_t token = 0;
  std::int64_t expires_real_ns = 0;
};

class PgLeaseCalls {
 public:
  /// `note(label, detail)`: the client's note (serialization-retry, acquire-sent before the COMMIT leaves).
  using Note = std::function<void(const std::string&, const std::string&)>;
  PgLeaseCalls(std::string conninfo, std::int64_t tx_timeout_ns, Note note);
  ~PgLeaseCalls();
  PgLeaseCalls(const PgLeaseCalls&) = delete;
  PgLeaseCalls& operator=(const PgLeaseCalls&) = delete;

  /// The notes' AcquireLease. nullopt: the lease is held by another owner and has not expired, or the
  /// database did not answer, or the retries ran out.
  std::optional<PgAcquired> acquire(const std::string& name, const std::string& owner, std::int64_t ttl_ns,
                                    std::uint64_t first_token);
  /// Frees the row if it still names `owner` with `token`; false when it did not (or no answer).
  bool release(const std::string& name, const std::string& owner, std::uint64_t token);
  /// WriteWithFence: "A" (accepted), "R reason" (refused), empty (no answer).
  std::string write(const std::string& key, const std::string& client, std::uint64_t write_id,
                    const std::optional<std::uint64_t>& token, const std::string& value);

 private:
  enum class Outcome : std::uint8_t { done, refused, retry, failed };
  pg_conn* conn();
  void drop();
  template <class Body>
  Outcome with_retries(const std::string& name, Body&& body);
  std::string conninfo_;
  std::int64_t tx_timeout_ns_;
  Note note_;
  pg_conn* conn_ = nullptr;
};

}  // namespace locksim::reality
