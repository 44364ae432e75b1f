// A client's reads and writes when the resource is a job queue (scenarios/workload.hpp): a read lists the
// queue (fenced: claims it with the token), a write enqueues the job of one period, with the records around
// each.
#include <fmt/format.h>

#include "locksim/protocols/job_queue.hpp"
#include "locksim/scenarios/workload.hpp"

namespace locksim::workload {

namespace {
/// floor(a / b) for b > 0.
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - (a % b != 0 && (a < 0) != (b < 0) ? 1 : 0);
}
}  // namespace

std::int64_t current_period(const WorkloadEnv& env, Context& ctx) {
  return floor_div(ctx.wall().count(), env.job_period.count());
}

std::string job_id(const WorkloadEnv& env, std::int64_t period) {
  const std::int64_t start_ns = period * env.job_period.count();
  const std::int64_t abs_ns = start_ns < 0 ? -start_ns : start_ns;
  const std::int64_t s = abs_ns / 1'000'000'000, ms = abs_ns / 1'000'000 % 1000;
  std::string id = fmt::format("{}-{}{:02}:{:02}:{:02}", env.job_name, start_ns < 0 ? "-" : "", s / 3600,
                               s / 60 % 60, s % 60);
  if (abs_ns % 1'000'000'000 != 0) id += fmt::format(".{:03}", ms);
  return id;
}

Listed list_job_queue(const WorkloadEnv& env, Context& ctx, std::uint64_t grant,
                      const std::optional<std::uint64_t>& token, std::optional<std::int64_t>& latest) {
  History& h = *env.history;
  ReadRecord rr;
  rr.client = ctx.name();
  rr.grant = grant;
  rr.key = env.resource_key;
  rr.token = token;
  rr.sent = env.world->now();
  const std::uint64_t read_id = h.add_read(rr);
  auto rep = ctx.call(env.resource,
                      Message::of(kListQueueType, ListQueue{env.resource_key, token, read_id},
                                  fmt::format("queue={}", env.resource_key)),
                      5s);
  const auto* l = rep && !is_refusal(*rep) ? rep->as<QueueListing>() : nullptr;
  if (!l) {
    ctx.note(rep ? "read-refused" : "read-timeout");
    return Listed::no_answer;
  }
  if (l->refused) {
    ctx.note("read-rejected", l->reason);
    return Listed::refused;
  }
  h.reads[read_id].answered = true;
  h.reads[read_id].observed = fmt::format("{}", l->jobs);
  latest = l->latest_period;
  ctx.note("queue-read", fmt::format("queue={} jobs={} latest={}", env.resource_key, l->jobs,
                                     l->latest_period ? job_id(env, *l->latest_period) : "none"));
  return Listed::answered;
}

Enqueued enqueue_job(const WorkloadEnv& env, Context& ctx, std::uint64_t grant, std::int64_t period,
                     const std::optional<std::uint64_t>& token, Time checked, bool lease_checked) {
  History& h = *env.history;
  const std::string job = job_id(env, period);
  WriteRecord wr;
  wr.client = ctx.name();
  wr.grant = grant;
  wr.key = env.resource_key;
  wr.value = job;
  wr.token = token;
  wr.sent = env.world->now();
  wr.checked = checked;
  wr.lease_checked = lease_checked;
  const std::uint64_t wid = h.add_write(wr);
  const std::string token_text = token ? fmt::format("{}", *token) : "none";
  ctx.note("write", fmt::format("enqueue job={} token={}", job, token_text));
  h.writes[wid].sent = env.world->now();  // after any pause the note triggered
  auto rep =
      ctx.call(env.resource,
               Message::of(kEnqueueType, Enqueue{env.resource_key, job, period, token, ctx.name(), wid},
                           fmt::format("job={} token={}", job, token_text)),
               5s);
  if (rep && is_refusal(*rep)) {
    ctx.note("write-refused", "connection refused: the resource is not running");
    return Enqueued::no_answer;
  }
  if (!rep) {
    ctx.note("write-timeout");
    return Enqueued::no_answer;
  }
  const auto* r = rep->as<EnqueueReply>();
  const bool accepted = r && r->accepted;
  h.writes[wid].acknowledged = accepted;
  ctx.note(accepted ? "write-accepted" : "write-rejected", r ? r->reason : "");
  return accepted ? Enqueued::accepted : Enqueued::refused;
}

}  // namespace locksim::workload
