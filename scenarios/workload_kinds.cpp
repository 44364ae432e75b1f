// The read and write steps of a client of a cas-row or a job queue (scenarios/workload.hpp), and whether a
// program runs without a lock.
#include <utility>

#include "locksim/scenarios/workload.hpp"

namespace locksim::workload {

bool acquires(const std::vector<ClientStep>& steps) {
  for (const ClientStep& s : steps)
    if (s.kind == ClientStep::Kind::acquire || acquires(s.steps)) return true;
  return false;
}

StepEnd read_step(const WorkloadEnv& env, Context& ctx, std::uint64_t grant,
                  const std::optional<std::uint64_t>& token, KindHold& hold) {
  if (env.resource_kind == ResourceKind::cas_row) {
    hold.cas_read = read_cas_row(env, ctx, grant, false);
    return hold.cas_read ? StepEnd::done : StepEnd::read_missed;
  }
  // A job queue: a leader that does not know what the queue holds must not enqueue.
  std::optional<std::int64_t> latest;
  const Listed listed = list_job_queue(env, ctx, grant, token, latest);
  if (listed == Listed::refused) return StepEnd::fenced_out;
  if (listed == Listed::no_answer) return StepEnd::no_answer;
  if (latest) hold.next_period = *latest + 1;
  return StepEnd::done;
}

StepEnd write_step(const WorkloadEnv& env, Context& ctx, std::uint64_t grant,
                   const std::optional<std::uint64_t>& token, Time checked, bool lease_checked,
                   KindHold& hold) {
  if (env.resource_kind == ResourceKind::cas_row) {  // a write without a read of its own reads first
    std::optional<CasSeen> seen = std::exchange(hold.cas_read, std::nullopt);
    if (!seen) seen = read_cas_row(env, ctx, grant, true);
    if (seen) cas_update(env, ctx, grant, *seen, token, checked, lease_checked);
    return StepEnd::done;
  }
  const std::int64_t due = current_period(env, ctx);
  const std::int64_t period = hold.next_period.value_or(due);
  if (period > due) return StepEnd::done;  // this hold enqueued the job of the current period already
  const Enqueued done = enqueue_job(env, ctx, grant, period, token, checked, lease_checked);
  hold.next_period = period + 1;  // no answer: it may have been enqueued; it is not sent again
  return done == Enqueued::refused ? StepEnd::fenced_out : StepEnd::done;
}

}  // namespace locksim::workload
