#include "locksim/protocols/job_queue.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace locksim {

namespace {
struct Queue {
  std::uint64_t highest_token = 0;
  std::optional<std::int64_t> latest_period;
  std::uint64_t jobs = 0;
};

/// The fence of a fenced queue: a token at least the highest seen; raises the highest. Unfenced: always.
bool fence(const ResourceOptions& opts, Queue& q, const std::optional<std::uint64_t>& token,
           std::string& reason) {
  if (opts.mode != ResourceMode::fenced) return true;
  if (!token) {
    reason = "no token";
    return false;
  }
  const bool ok = *token >= q.highest_token;
  if (!ok) {
    reason = fmt::format("token {} < highest {}", *token, q.highest_token);
    return false;
  }
  q.highest_token = *token;
  return true;
}
}  // namespace

ProcId spawn_job_queue(World& world, const std::string& name, ResourceOptions opts, History& history) {
  World* w = &world;
  History* h = &history;
  return world.spawn(
      name,
      [w, h, opts, name](Context& ctx) {
        std::map<std::string, Queue> queues;  // queue name (the resource key) -> its state
        for (;;) {
          auto m = ctx.receive();
          if (!m) continue;
          if (const auto* lq = m->as<ListQueue>()) {
            Queue& q = queues[lq->queue];
            QueueListing rep;
            rep.refused = !fence(opts, q, lq->token, rep.reason);
            if (!rep.refused) {
              rep.latest_period = q.latest_period;
              rep.jobs = q.jobs;
            }
            h->log(ResourceEntry{.op = ResourceEntry::Op::read,
                                 .time = w->now(),
                                 .resource = name,
                                 .key = lq->queue,
                                 .request = lq->read_id,
                                 .token = lq->token,
                                 .accepted = !rep.refused,
                                 .value = fmt::format("{}", rep.jobs),
                                 .reason = rep.reason,
                                 .kind = ResourceKind::job_queue});
            ctx.reply(*m, Message::of(rep.refused ? "list-refused" : "queue-listing", rep,
                                      rep.refused ? rep.reason : fmt::format("jobs={}", rep.jobs)));
            continue;
          }
          const auto* eq = m->as<Enqueue>();
          if (!eq) continue;
          Queue& q = queues[eq->queue];
          EnqueueReply rep;
          rep.accepted = fence(opts, q, eq->token, rep.reason);
          if (rep.accepted) {
            ++q.jobs;
            q.latest_period = std::max(q.latest_period.value_or(eq->period), eq->period);
          }
          h->log(ResourceEntry{.op = ResourceEntry::Op::write,
                               .time = w->now(),
                               .resource = name,
                               .key = eq->queue,
                               .request = eq->write_id,
                               .token = eq->token,
                               .accepted = rep.accepted,
                               .applied = rep.accepted,
                               .value = eq->job,
                               .reason = rep.reason,
                               .kind = ResourceKind::job_queue,
                               .offset = eq->period,
                               .worker = eq->client});
          ctx.reply(*m, Message::of(rep.accepted ? "enqueued" : "enqueue-refused", rep,
                                    rep.accepted ? eq->job : rep.reason));
        }
      },
      ProcessOptions{.daemon = true});
}

std::vector<Variant> job_queue_variants() {
  return {};
}

}  // namespace locksim
