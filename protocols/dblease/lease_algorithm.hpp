#pragma once
/// The database lease client's algorithm, written once against `Link`: the little it needs of the world it
/// runs in (its clocks, its notes, one SQL statement at a time). The simulated world implements Link over a
/// process's Context and the SQL-like database's messages (SqlConnection, dblease.cpp); `locksim reality`
/// over libpq to a real PostgreSQL (reality/pg_link.hpp). So the code the simulator judges is the code that
/// meets the real database.
///
///     AcquireLease(tx, name, owner, ttl):
///       row := SELECT * FROM leases WHERE name = $name FOR UPDATE
///       now := tx.Now()
///       if row.Owner == "" || row.Expires <= now:
///         row.Token++; row.Owner = owner; row.Expires = now + ttl
///         UPDATE leases SET ...; COMMIT; return (row.Token, row.Expires)
///
/// Extend and release run in a transaction of the same shape, and change the row only for its owner with its
/// token. The client takes the returned Expires (the database's timestamp) as its deadline on its own wall
/// clock; variants: `monotonic-deadline` (the lease measured on its monotonic clock from before the request)
/// and `app-counter` (the token from the application's own in-memory counter).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "locksim/protocols/dblease/sql.hpp"
#include "locksim/protocols/lock.hpp"

namespace locksim::dblease {

struct LeaseClientOptions {
  bool monotonic_deadline = false;  ///< variant: deadline = monotonic send time + ttl
  bool app_counter = false;         ///< variant: the token from this client's own counter
  /// How long one transaction may take, all its round trips (0: the TTL, as cirello.io/pglock bounds each
  /// of its transactions by the lease duration).
  Duration tx_timeout{0};
  std::uint64_t first_token = 0;  ///< ProtocolConfig::first_token
};

/// The world as a database lease client sees it.
class Link {
 public:
  virtual ~Link() = default;
  /// The client's monotonic clock.
  virtual Time now() = 0;
  /// The client's wall clock (may jump; compared with the database's Expires).
  virtual Time wall() = 0;
  /// A note in the trace: a point where a fault plan may pause the client.
  virtual void note(std::string_view label, std::string detail = {}) = 0;
  /// The client's name: its owner names start with it.
  virtual const std::string& name() const = 0;
  /// A number this client has not had before (owner names differ per acquire).
  virtual std::uint64_t unique() = 0;
  /// One statement; nothing if no answer came by `deadline` (the connection is then given up). `note`:
  /// logged once the statement has left (a pause there stops the client while the answer is in flight).
  virtual std::optional<SqlReply> exec(SqlRequest rq, Time deadline, std::string_view note = {}) = 0;
};

/// AcquireLease, extend and release, each one transaction, and the client's belief in its lease.
class LeaseAlgorithm {
 public:
  explicit LeaseAlgorithm(LeaseClientOptions opts);
  std::optional<Grant> acquire(Link& link, const std::string& key, Duration ttl);
  bool extend(Link& link, Grant& grant, Duration ttl);
  void release(Link& link, const Grant& grant);
  /// Wall-clock deadline: the client's wall clock before the row's Expires (kept in Grant::lease_id);
  /// monotonic-deadline: its monotonic clock before Grant::valid_until.
  bool believes_valid(Link& link, const Grant& grant) const;

 private:
  enum class Outcome : std::uint8_t { done, refused, retry, failed };
  /// One transaction on the lease row: BEGIN, SELECT FOR UPDATE, `change` (false: ROLLBACK), UPDATE,
  /// COMMIT. `now` gets tx.Now().
  template <class Change>
  Outcome transaction(Link& link, const std::string& key, Duration timeout, Change&& change, Row& row,
                      Time& now, std::string_view commit_note = {});
  /// The transaction again after a serialization failure, a few times (pglock retries at once).
  template <class Change>
  Outcome with_retries(Link& link, const std::string& key, Duration timeout, Change&& change, Row& row,
                       Time& now, std::string_view commit_note = {});
  Duration timeout_for(Duration ttl) const { return opts_.tx_timeout > 0ns ? opts_.tx_timeout : ttl; }
  void set_validity(Link& link, Grant& g, Time expires, Time sent, Duration ttl) const;

  LeaseClientOptions opts_;
  std::uint64_t app_counter_ = 0;
};

}  // namespace locksim::dblease
