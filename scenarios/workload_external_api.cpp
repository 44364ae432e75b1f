// A client's reads and requests when the resource is an external API (scenarios/workload.hpp): a read asks
// the API for the highest job it has performed, a write sends the request for the hold's next job (with its
// idempotency key when the clients send keys), with the records around each.
#include <fmt/format.h>

#include "locksim/protocols/external_api.hpp"
#include "locksim/scenarios/workload.hpp"

namespace locksim::workload {

std::optional<std::int64_t> read_last_job(const WorkloadEnv& env, Context& ctx, std::uint64_t grant) {
  History& h = *env.history;
  ReadRecord rr;
  rr.client = ctx.name();
  rr.grant = grant;
  rr.key = env.resource_key;
  rr.sent = env.world->now();
  const std::uint64_t read_id = h.add_read(rr);
  auto rep = ctx.call(env.resource,
                      Message::of(kApiReadType, ApiRead{env.resource_key, read_id},
                                  fmt::format("account={}", env.resource_key)),
                      5s);
  if (!rep || is_refusal(*rep)) {
    ctx.note(rep ? "read-refused" : "read-timeout");
    return std::nullopt;
  }
  const auto* last = rep->as<ApiLastJob>();
  if (!last) return std::nullopt;
  h.reads[read_id].answered = true;
  h.reads[read_id].observed = fmt::format("{}", last->job);
  ctx.note("api-read", fmt::format("account={} last_job={}", env.resource_key, last->job));
  return last->job;
}

bool request_job(const WorkloadEnv& env, Context& ctx, std::uint64_t grant, std::int64_t job, Time checked,
                 bool lease_checked) {
  History& h = *env.history;
  WriteRecord wr;
  wr.client = ctx.name();
  wr.grant = grant;
  wr.key = env.resource_key;
  wr.value = fmt::format("{}", job);
  wr.sent = env.world->now();
  wr.checked = checked;
  wr.lease_checked = lease_checked;
  const std::uint64_t wid = h.add_write(wr);
  // The API has no field for a fencing token: the request carries the job and, maybe, the key.
  std::optional<std::string> key;
  if (env.idempotency_keys) key = idempotency_key_for(env.resource_key, job);
  ctx.note("write", fmt::format("job {} of account {} idempotency_key={}", job, env.resource_key,
                                key.value_or("none")));
  h.writes[wid].sent = env.world->now();  // after any pause the note triggered
  auto rep = ctx.call(env.resource,
                      Message::of(kApiRequestType, ApiRequest{env.resource_key, job, key, ctx.name(), wid},
                                  fmt::format("job={} key={}", job, key.value_or("none"))),
                      5s);
  if (rep && is_refusal(*rep)) {
    ctx.note("write-refused", "connection refused: the API is not running");
    return false;
  }
  if (!rep) {
    ctx.note("write-timeout", "no answer: the job may or may not have been performed");
    return false;
  }
  const auto* r = rep->as<ApiReply>();
  if (!r) return false;
  h.writes[wid].acknowledged = true;
  ctx.note("write-accepted", fmt::format("{} result {}: {}", r->performed ? "performed" : "deduplicated",
                                         r->result, r->reason));
  return true;
}

}  // namespace locksim::workload
