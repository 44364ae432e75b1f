#pragma once
/// The database lease of the design notes, literally, on the SQL-like database of protocols/dblease/sql.hpp:
///
///     AcquireLease(tx, name, owner, ttl):
///       row := SELECT * FROM leases WHERE name = $name FOR UPDATE
///       now := tx.Now()
///       if row.Owner == "" || row.Expires <= now:
///         row.Token++; row.Owner = owner; row.Expires = now + ttl
///         UPDATE leases SET ...; COMMIT; return (row.Token, row.Expires)
///
///  - `db-lease`: writes carry no token. The client takes the returned `Expires` (a database timestamp) as
///    its deadline on its own wall clock, as the notes' return value invites: a client whose wall clock is
///    behind the database's believes longer than the database keeps the lease.
///  - `db-lease+fence`: the same, and every write carries the token to the resource, which accepts it iff
///    token >= its highest (WriteWithFence; equal tokens accepted): the fenced store, or, with
///    `resource = "same-db"`, the database itself (the fence row and the write in one transaction).
/// Extend and release run in a transaction of the same shape, and change the row only for its owner with its
/// token. Variants: `monotonic-deadline` (the client measures the lease on its monotonic clock from before
/// the request) and `app-counter` (the token comes from the application's own in-memory counter).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "locksim/protocols/dblease/lease_algorithm.hpp"
#include "locksim/protocols/dblease/sql.hpp"
#include "locksim/protocols/lock.hpp"

namespace locksim {

/// Registers `db-lease` and `db-lease+fence`.
void register_dblease_protocols(ProtocolRegistry& registry);

namespace dblease {

/// The lease client in the simulator: LeaseAlgorithm (lease_algorithm.hpp) over an SqlConnection.
class DbLeaseClient final : public LockClient {
 public:
  DbLeaseClient(std::vector<ProcId> servers, std::shared_ptr<Connections> connections,
                LeaseClientOptions opts);
  std::optional<Grant> acquire(Context& ctx, const std::string& key, Duration ttl) override;
  bool extend(Context& ctx, Grant& grant, Duration ttl) override;
  void release(Context& ctx, const Grant& grant) override;
  /// Wall-clock deadline: the client's wall clock before the row's Expires (kept in Grant::lease_id);
  /// monotonic-deadline: its monotonic clock before Grant::valid_until.
  bool believes_valid(Context& ctx, const Grant& grant) override;

 private:
  SqlConnection conn_;
  LeaseAlgorithm algo_;
};

}  // namespace dblease
}  // namespace locksim
