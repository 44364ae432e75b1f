// A client's reads and writes when the resource is the object store (scenarios/workload.hpp): a read GETs
// the manifest, a write uploads a batch object and commits it in the manifest, with the records around each.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "locksim/protocols/object_store.hpp"
#include "locksim/scenarios/workload.hpp"

namespace locksim::workload {

namespace {
std::string token_text(const std::optional<std::uint64_t>& t) {
  return t ? fmt::format("{}", *t) : "none";
}
}  // namespace

std::optional<ManifestView> read_manifest(const WorkloadEnv& env, Context& ctx, std::uint64_t grant,
                                          const std::optional<std::uint64_t>& token, bool& stale) {
  stale = false;
  History& h = *env.history;
  ReadRecord rr;
  rr.client = ctx.name();
  rr.grant = grant;
  rr.key = env.resource_key;
  rr.token = token;
  rr.sent = env.world->now();
  const std::uint64_t read_id = h.add_read(rr);
  auto rep = ctx.call(env.resource,
                      Message::of(kObjectGetType, ObjectGet{env.resource_key, read_id},
                                  fmt::format("GET {}", env.resource_key)),
                      5s);
  if (!rep || is_refusal(*rep)) {
    ctx.note(rep ? "read-refused" : "read-timeout");
    return std::nullopt;
  }
  const auto* row = rep->as<ObjectRow>();
  if (!row) return std::nullopt;
  h.reads[read_id].answered = true;
  h.reads[read_id].observed = row->content;
  ManifestView seen{row->generation, manifest_batches(row->content)};
  ctx.note("manifest-read", fmt::format("{} generation={} batches={} token={}", env.resource_key,
                                        row->generation, seen.batches.size(), token_text(row->token)));
  if (token && row->token && *row->token > *token) {
    ctx.note("read-rejected",
             fmt::format("the manifest carries token {} above this hold's {}", *row->token, *token));
    stale = true;
    return std::nullopt;
  }
  return seen;
}

Committed commit_batch(const WorkloadEnv& env, Context& ctx, std::uint64_t grant, ManifestView& seen,
                       const std::string& batch, const std::optional<std::uint64_t>& token, bool conditional,
                       Time checked, bool lease_checked) {
  History& h = *env.history;
  std::vector<std::string> next = seen.batches;
  next.push_back(batch);
  WriteRecord wr;
  wr.client = ctx.name();
  wr.grant = grant;
  wr.key = env.resource_key;
  wr.value = fmt::format("{}", fmt::join(next, " "));
  wr.token = token;
  wr.sent = env.world->now();
  wr.checked = checked;
  wr.lease_checked = lease_checked;
  const std::uint64_t wid = h.add_write(wr);
  ctx.note("write", fmt::format("commit {} into {} (generation {}) token={}", batch, env.resource_key,
                                seen.generation, token_text(token)));
  h.writes[wid].sent = env.world->now();  // after any pause the note triggered
  // The batch object first (a new name: nothing to condition on), then the manifest that commits it.
  auto up = ctx.call(env.resource,
                     Message::of(kObjectPutType, ObjectPut{batch, "batch", token, std::nullopt, kNoId},
                                 fmt::format("PUT {}", batch)),
                     5s);
  if (!up || is_refusal(*up)) {
    ctx.note(up ? "write-refused" : "write-timeout");
    return Committed::no_answer;
  }
  const std::optional<std::uint64_t> if_match =
      conditional ? std::optional<std::uint64_t>(seen.generation) : std::nullopt;
  auto rep = ctx.call(env.resource,
                      Message::of(kObjectPutType, ObjectPut{env.resource_key, wr.value, token, if_match, wid},
                                  if_match ? fmt::format("PUT {} If-Match {}", env.resource_key, *if_match)
                                           : fmt::format("PUT {}", env.resource_key)),
                      5s);
  if (rep && is_refusal(*rep)) {
    ctx.note("write-refused", "connection refused: the resource is not running");
    return Committed::no_answer;
  }
  if (!rep) {
    ctx.note("write-timeout");
    return Committed::no_answer;
  }
  const auto* r = rep->as<ObjectPutReply>();
  const bool applied = r && r->applied;
  h.writes[wid].acknowledged = applied;
  ctx.note(applied ? "write-accepted" : "write-rejected", r ? r->reason : "");
  if (!applied) return Committed::refused;
  seen.generation = r->generation;
  seen.batches = std::move(next);
  return Committed::applied;
}

StepEnd manifest_read_step(const WorkloadEnv& env, Context& ctx, std::uint64_t grant,
                           const std::optional<std::uint64_t>& token, std::optional<ManifestView>& manifest) {
  bool stale = false;
  manifest = read_manifest(env, ctx, grant, token, stale);
  if (stale) return StepEnd::fenced_out;
  return manifest ? StepEnd::done : StepEnd::read_missed;
}

StepEnd manifest_write_step(const WorkloadEnv& env, Context& ctx, std::uint64_t grant,
                            const std::optional<std::uint64_t>& token, const std::string& batch, Time checked,
                            bool lease_checked, std::optional<ManifestView>& manifest) {
  if (!manifest) {
    bool stale = false;
    manifest = read_manifest(env, ctx, grant, token, stale);
    if (stale) return StepEnd::fenced_out;
    if (!manifest) return StepEnd::done;  // no answer: nothing to commit into this time
  }
  const bool conditional = env.resource_mode == ResourceMode::fenced;
  const Committed done =
      commit_batch(env, ctx, grant, *manifest, batch, token, conditional, checked, lease_checked);
  if (done != Committed::applied) manifest.reset();
  return done == Committed::refused ? StepEnd::fenced_out : StepEnd::done;
}

}  // namespace locksim::workload
