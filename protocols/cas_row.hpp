#pragma once
/// A row with a version column, written by optimistic concurrency control (compare-and-set):
///
///   SELECT value, version FROM row WHERE id = :row                                     (a read)
///   UPDATE row SET value = :v, version = version + 1 WHERE id = :row AND version = :read_version
///
/// run as one atomic statement: zero rows updated is a conflict (another write moved the version since the
/// client read it), and the client re-reads and tries again. The row needs no lock and no token: a write
/// computed from an old read can never be applied, so no update is lost whoever writes when. Every row
/// starts at value 0, version 0. Every delivered statement, applied or not, and every read goes into the
/// row's own append-only log (History::resource_log, kind cas_row), in processing order: the only ground
/// truth the checker takes about it. The row ignores tokens (the version column is its fence).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "locksim/protocols/history.hpp"
#include "locksim/protocols/resource.hpp"
#include "locksim/protocols/variant.hpp"
#include "locksim/sim/world.hpp"

namespace locksim {

/// The SELECT above. `read_id` indexes History::reads: recorded, never decided on.
struct CasRead {
  std::string row;
  std::uint64_t read_id = kNoId;
};
struct CasRowValue {
  std::int64_t value = 0;
  std::uint64_t version = 0;
};
/// The UPDATE above. `write_id` indexes History::writes: recorded, never decided on.
struct CasUpdate {
  std::string row;
  std::int64_t value = 0;
  std::uint64_t read_version = 0;
  std::optional<std::uint64_t> token;  ///< carried for the record; the row does not compare it
  std::uint64_t write_id = kNoId;
};
/// Whether the UPDATE changed the row (one row updated: `version` is the new version) or not (a conflict:
/// `version` is the version the row holds).
struct CasReply {
  bool applied = false;
  std::uint64_t version = 0;
  std::string reason;
};

inline constexpr const char* kCasReadType = "cas-read";
inline constexpr const char* kCasUpdateType = "cas-update";

/// The variants the row understands (ResourceOptions::variant): "blind-update" leaves `AND version =
/// :read_version` out (every UPDATE is applied: the lost update the version column exists to prevent).
std::vector<Variant> cas_row_variants();

/// Spawn the row (every row of the table: one per key) as a daemon process named `name`.
ProcId spawn_cas_row(World& world, const std::string& name, ResourceOptions opts, History& history);

}  // namespace locksim
