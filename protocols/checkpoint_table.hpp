#pragma once
/// The checkpoint table of the design notes: one row per shard of a scheduler leader's work,
///
///   UPDATE shard_checkpoint SET highest_fence_token = :token, last_processed_offset = :offset,
///          updated_by = :worker WHERE shard_id = :shard AND highest_fence_token <= :token
///
/// run as one atomic statement. `fenced` runs it as written; `unfenced` drops the token condition (a plain
/// UPDATE: the checkpoint kept where nothing checks who writes it). Every row starts at token 0, offset 0
/// (nothing processed). Every delivered statement, applied or refused, and every read of a row goes into the
/// table's own append-only log (History::resource_log, kind checkpoint_table), in processing order: the only
/// ground truth the checker takes about it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "locksim/protocols/history.hpp"
#include "locksim/protocols/resource.hpp"
#include "locksim/protocols/variant.hpp"
#include "locksim/sim/world.hpp"

namespace locksim {

/// The UPDATE above. `write_id` indexes History::writes: recorded, never decided on.
struct CheckpointUpdate {
  std::string shard;
  std::int64_t offset = 0;
  std::optional<std::uint64_t> token;
  std::string worker;
  std::uint64_t write_id = kNoId;
};
/// Whether the UPDATE changed the row (one row updated) or not (zero rows: the WHERE clause refused it).
struct CheckpointReply {
  bool applied = false;
  std::string reason;
};
/// A new leader's read of its shard. Unfenced: SELECT last_processed_offset, highest_fence_token, updated_by
/// FROM shard_checkpoint WHERE shard_id = :shard. Fenced, the read claims the row first, in the same atomic
/// step: UPDATE shard_checkpoint SET highest_fence_token = :token WHERE shard_id = :shard AND
/// highest_fence_token <= :token RETURNING ... (refused: no row). Without the claim a fenced table cannot
/// stop a unit being committed twice: the old leader's checkpoint of the unit the new leader read as next
/// still passes the fence, which the new leader has not raised yet.
struct CheckpointRead {
  std::string shard;
  std::optional<std::uint64_t> token;
  std::uint64_t read_id = kNoId;
};
struct CheckpointRow {
  bool refused = false;
  std::string reason;
  std::int64_t offset = 0;
  std::uint64_t highest_token = 0;
  std::string updated_by;
};

inline constexpr const char* kCheckpointType = "checkpoint";
inline constexpr const char* kCheckpointReadType = "checkpoint-read";

/// The variants the table understands (ResourceOptions::variant): "lt-token" writes the WHERE clause with
/// `<` instead of `<=` (the holder's own second checkpoint is refused); "offset-guard" adds
/// `AND last_processed_offset <= :offset` (one holder's statements that arrive out of order cannot move the
/// offset back: the token check passes them all, since they carry the same token).
std::vector<Variant> checkpoint_table_variants();

/// Spawn the table as a daemon process named `name`.
ProcId spawn_checkpoint_table(World& world, const std::string& name, ResourceOptions opts, History& history);

}  // namespace locksim
