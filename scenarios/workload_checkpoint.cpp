// A client's reads and writes when the resource is the checkpoint table (scenarios/workload.hpp): a read
// fetches the shard's row, a write runs the notes' UPDATE for the next offset, with the records around each.
#include <fmt/format.h>

#include "locksim/protocols/checkpoint_table.hpp"
#include "locksim/scenarios/workload.hpp"

namespace locksim::workload {

std::optional<std::int64_t> read_checkpoint(const WorkloadEnv& env, Context& ctx, std::uint64_t grant,
                                            const std::optional<std::uint64_t>& token, bool& refused) {
  refused = false;
  History& h = *env.history;
  ReadRecord rr;
  rr.client = ctx.name();
  rr.grant = grant;
  rr.key = env.resource_key;
  rr.token = token;
  rr.sent = env.world->now();
  const std::uint64_t read_id = h.add_read(rr);
  auto rep = ctx.call(env.resource,
                      Message::of(kCheckpointReadType, CheckpointRead{env.resource_key, token, read_id},
                                  fmt::format("shard={}", env.resource_key)),
                      5s);
  if (!rep || is_refusal(*rep)) {
    ctx.note(rep ? "read-refused" : "read-timeout");
    return std::nullopt;
  }
  const auto* row = rep->as<CheckpointRow>();
  if (!row) return std::nullopt;
  if (row->refused) {
    ctx.note("read-rejected", row->reason);
    refused = true;
    return std::nullopt;
  }
  h.reads[read_id].answered = true;
  h.reads[read_id].observed = fmt::format("{}", row->offset);
  ctx.note("checkpoint-read", fmt::format("shard={} offset={} updated_by={}", env.resource_key, row->offset,
                                          row->updated_by.empty() ? "nobody" : row->updated_by));
  return row->offset;
}

Checkpointed write_checkpoint(const WorkloadEnv& env, Context& ctx, std::uint64_t grant, std::int64_t offset,
                              const std::optional<std::uint64_t>& token, Time checked, bool lease_checked) {
  History& h = *env.history;
  WriteRecord wr;
  wr.client = ctx.name();
  wr.grant = grant;
  wr.key = env.resource_key;
  wr.value = fmt::format("{}", offset);
  wr.token = token;
  wr.sent = env.world->now();
  wr.checked = checked;
  wr.lease_checked = lease_checked;
  const std::uint64_t wid = h.add_write(wr);
  const std::string token_text = token ? fmt::format("{}", *token) : "none";
  ctx.note("write",
           fmt::format("checkpoint shard={} offset={} token={}", env.resource_key, offset, token_text));
  h.writes[wid].sent = env.world->now();  // after any pause the note triggered
  auto rep = ctx.call(
      env.resource,
      Message::of(kCheckpointType, CheckpointUpdate{env.resource_key, offset, token, ctx.name(), wid},
                  fmt::format("offset={} token={}", offset, token_text)),
      5s);
  if (rep && is_refusal(*rep)) {
    ctx.note("write-refused", "connection refused: the resource is not running");
    return Checkpointed::no_answer;
  }
  if (!rep) {
    ctx.note("write-timeout");
    return Checkpointed::no_answer;
  }
  const auto* r = rep->as<CheckpointReply>();
  const bool applied = r && r->applied;
  h.writes[wid].acknowledged = applied;
  ctx.note(applied ? "write-accepted" : "write-rejected", r ? r->reason : "");
  return applied ? Checkpointed::applied : Checkpointed::refused;
}

}  // namespace locksim::workload
