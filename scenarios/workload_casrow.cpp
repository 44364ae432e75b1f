// A client's reads and writes when the resource is a cas-row (scenarios/workload.hpp): a read fetches the
// row's value and version, a write runs the compare-and-set UPDATE computed from that read (value + 1) and,
// on a conflict, re-reads and tries again, up to the scenario's max_retries; with the records around each.
#include <fmt/format.h>

#include "locksim/protocols/cas_row.hpp"
#include "locksim/scenarios/workload.hpp"

namespace locksim::workload {

std::optional<CasSeen> read_cas_row(const WorkloadEnv& env, Context& ctx, std::uint64_t grant, bool reread) {
  History& h = *env.history;
  ReadRecord rr;
  rr.client = ctx.name();
  rr.grant = grant;
  rr.key = env.resource_key;
  rr.sent = env.world->now();
  const std::uint64_t read_id = h.add_read(rr);
  auto rep = ctx.call(
      env.resource,
      Message::of(kCasReadType, CasRead{env.resource_key, read_id}, fmt::format("row={}", env.resource_key)),
      5s);
  const auto* row = rep && !is_refusal(*rep) ? rep->as<CasRowValue>() : nullptr;
  if (!row) {
    // A re-read's own labels: the notes a read step logs stay one per step.
    if (reread)
      ctx.note(rep ? "reread-refused" : "reread-timeout");
    else
      ctx.note(rep ? "read-refused" : "read-timeout");
    return std::nullopt;
  }
  h.reads[read_id].answered = true;
  h.reads[read_id].observed = fmt::format("{}", row->value);
  ctx.note("cas-read", fmt::format("row={} value={} version={}", env.resource_key, row->value, row->version));
  return CasSeen{read_id, row->value, row->version};
}

void cas_update(const WorkloadEnv& env, Context& ctx, std::uint64_t grant, CasSeen seen,
                const std::optional<std::uint64_t>& token, Time checked, bool lease_checked) {
  History& h = *env.history;
  std::uint64_t previous = kNoId;  // the statement this one retries
  for (std::uint32_t attempt = 0;; ++attempt) {
    WriteRecord wr;
    wr.client = ctx.name();
    wr.grant = grant;
    wr.key = env.resource_key;
    wr.value = fmt::format("{}", seen.value + 1);
    wr.token = token;
    wr.sent = env.world->now();
    wr.checked = checked;
    wr.lease_checked = lease_checked;
    wr.read_modify_write = true;
    wr.read = seen.read_id;
    wr.read_value = seen.value;
    wr.retry_of = previous;
    const std::uint64_t wid = h.add_write(wr);
    // The first statement of an update logs "write" (a fault can attach to it); each retry "write-retry".
    ctx.note(attempt == 0 ? "write" : "write-retry",
             fmt::format("row={} value={} where version={}{}", env.resource_key, wr.value, seen.version,
                         attempt == 0 ? "" : fmt::format(" (retry {} of {})", attempt, env.cas_max_retries)));
    h.writes[wid].sent = env.world->now();  // after any pause the note triggered
    auto rep = ctx.call(
        env.resource,
        Message::of(kCasUpdateType, CasUpdate{env.resource_key, seen.value + 1, seen.version, token, wid},
                    fmt::format("value={} version={}", wr.value, seen.version)),
        5s);
    if (rep && is_refusal(*rep)) {
      ctx.note("write-refused", "connection refused: the resource is not running");
      return;
    }
    if (!rep) {
      // Applied or not, nobody knows: writing again could apply the increment twice. The update is left.
      ctx.note("write-timeout");
      return;
    }
    const auto* r = rep->as<CasReply>();
    if (r && r->applied) {
      h.writes[wid].acknowledged = true;
      ctx.note("write-accepted", fmt::format("version={}", r->version));
      return;
    }
    ctx.note("write-conflict", r ? r->reason : "");
    if (attempt >= env.cas_max_retries) {
      ctx.note("write-gave-up", fmt::format("{} conflicts in a row", attempt + 1));
      return;
    }
    const std::optional<CasSeen> again = read_cas_row(env, ctx, grant, true);
    if (!again) return;
    seen = *again;
    previous = wid;
  }
}

}  // namespace locksim::workload
