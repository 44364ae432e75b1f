#include "locksim/protocols/checkpoint_table.hpp"

#include <fmt/format.h>

#include <map>

namespace locksim {

namespace {
struct Row {
  std::uint64_t highest_fence_token = 0;
  std::int64_t last_processed_offset = 0;
  std::string updated_by;
};

/// The WHERE clause's token condition. No token is SQL's NULL: `highest_fence_token <= NULL` is not true,
/// so the row is not updated. `strict`: the lt-token variant's `<` (the checkpoint statement only; the claim
/// of a read is written with `<=`).
bool token_condition(const ResourceOptions& opts, const Row& row, const std::optional<std::uint64_t>& token,
                     bool strict, std::string& reason) {
  if (opts.mode != ResourceMode::fenced) return true;
  if (!token) {
    reason = "no token (highest_fence_token <= NULL is not true)";
    return false;
  }
  const bool ok = strict ? row.highest_fence_token < *token : row.highest_fence_token <= *token;
  if (!ok)
    reason = fmt::format("highest_fence_token {} {} token {} is false", row.highest_fence_token,
                         strict ? "<" : "<=", *token);
  return ok;
}
}  // namespace

ProcId spawn_checkpoint_table(World& world, const std::string& name, ResourceOptions opts, History& history) {
  World* w = &world;
  History* h = &history;
  return world.spawn(
      name,
      [w, h, opts, name](Context& ctx) {
        std::map<std::string, Row> rows;  // shard_id -> row; every shard's row exists from the start
        for (;;) {
          auto m = ctx.receive();
          if (!m) continue;
          if (const auto* rq = m->as<CheckpointRead>()) {
            Row& row = rows[rq->shard];
            CheckpointRow rep;
            rep.refused = !token_condition(opts, row, rq->token, false, rep.reason);
            if (!rep.refused && opts.mode == ResourceMode::fenced) row.highest_fence_token = *rq->token;
            rep.offset = row.last_processed_offset;
            rep.highest_token = row.highest_fence_token;
            rep.updated_by = row.updated_by;
            h->log(ResourceEntry{.op = ResourceEntry::Op::read,
                                 .time = w->now(),
                                 .resource = name,
                                 .key = rq->shard,
                                 .request = rq->read_id,
                                 .token = rq->token,
                                 .accepted = !rep.refused,
                                 .applied = false,
                                 .value = fmt::format("{}", row.last_processed_offset),
                                 .reason = rep.reason,
                                 .kind = ResourceKind::checkpoint_table,
                                 .offset = row.last_processed_offset,
                                 .worker = row.updated_by});
            const std::string detail =
                rep.refused ? rep.reason : fmt::format("offset={}", row.last_processed_offset);
            ctx.reply(*m,
                      Message::of(rep.refused ? "checkpoint-read-refused" : "checkpoint-row", rep, detail));
            continue;
          }
          const auto* up = m->as<CheckpointUpdate>();
          if (!up) continue;
          Row& row = rows[up->shard];
          CheckpointReply rep;
          rep.applied = token_condition(opts, row, up->token, opts.variant == "lt-token", rep.reason);
          if (rep.applied && opts.variant == "offset-guard" && row.last_processed_offset > up->offset) {
            rep.applied = false;
            rep.reason = fmt::format("last_processed_offset {} <= offset {} is false",
                                     row.last_processed_offset, up->offset);
          }
          if (rep.applied) {
            if (up->token) row.highest_fence_token = *up->token;
            row.last_processed_offset = up->offset;
            row.updated_by = up->worker;
          }
          h->log(ResourceEntry{.op = ResourceEntry::Op::write,
                               .time = w->now(),
                               .resource = name,
                               .key = up->shard,
                               .request = up->write_id,
                               .token = up->token,
                               .accepted = rep.applied,
                               .applied = rep.applied,
                               .value = fmt::format("{}", up->offset),
                               .reason = rep.reason,
                               .kind = ResourceKind::checkpoint_table,
                               .offset = up->offset,
                               .worker = up->worker});
          ctx.reply(*m, Message::of(rep.applied ? "checkpoint-applied" : "checkpoint-refused", rep,
                                    rep.applied ? fmt::format("offset={}", up->offset) : rep.reason));
        }
      },
      ProcessOptions{.daemon = true});
}

std::vector<Variant> checkpoint_table_variants() {
  return {{"lt-token", "WHERE highest_fence_token < :token: the holder's own second checkpoint is refused"},
          {"offset-guard",
           "WHERE ... AND last_processed_offset <= :offset as well: a statement that would move the offset "
           "back (the holder's own, landing late) is refused"}};
}

}  // namespace locksim
