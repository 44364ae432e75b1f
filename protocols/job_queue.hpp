#pragma once
/// A job queue a scheduler leader enqueues the jobs of each period into (job ids derived from the period,
/// e.g. "report-00:00:10"). A plain queue cannot check who enqueues: `unfenced` accepts every enqueue.
/// `fenced` refuses an enqueue whose token is below the highest token it has seen (no token: refused), and
/// raises that highest token with each accepted one, as the fenced store does, in one atomic step.
///
/// A leader lists the queue before it enqueues (a `read`): the listing says the latest period enqueued, so a
/// new leader goes on after it. Fenced, the listing carries the leader's token and is fenced like an enqueue
/// (refused below the highest token, else it raises the fence): a new leader's listing shuts out every older
/// leader's later enqueue, and every older leader's earlier enqueue is in the listing it got. Without that
/// claim, an old leader's enqueue of the very period the new leader is about to enqueue would still pass the
/// fence, which the new leader has not raised yet.
///
/// Every delivered enqueue, accepted or refused, and every listing goes into the queue's own append-only log
/// (History::resource_log, kind job_queue; `value` the job id, `worker` the client), in processing order: the
/// only ground truth the checker takes about it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "locksim/protocols/history.hpp"
#include "locksim/protocols/resource.hpp"
#include "locksim/protocols/variant.hpp"
#include "locksim/sim/world.hpp"

namespace locksim {

/// Enqueue `job` (the job of period `period`). `write_id` indexes History::writes: recorded, never decided
/// on.
struct Enqueue {
  std::string queue;
  std::string job;
  std::int64_t period = 0;
  std::optional<std::uint64_t> token;
  std::string client;
  std::uint64_t write_id = kNoId;
};
struct EnqueueReply {
  bool accepted = false;
  std::string reason;
};
/// List the queue (fenced: claim it with `token` first, in the same atomic step).
struct ListQueue {
  std::string queue;
  std::optional<std::uint64_t> token;
  std::uint64_t read_id = kNoId;
};
struct QueueListing {
  bool refused = false;
  std::string reason;
  std::optional<std::int64_t> latest_period;  ///< the latest period among the jobs enqueued (none: empty)
  std::uint64_t jobs = 0;                     ///< how many jobs the queue holds
};

inline constexpr const char* kEnqueueType = "enqueue";
inline constexpr const char* kListQueueType = "list-queue";

/// The variants the queue understands (none today).
std::vector<Variant> job_queue_variants();

/// Spawn the queue as a daemon process named `name`.
ProcId spawn_job_queue(World& world, const std::string& name, ResourceOptions opts, History& history);

}  // namespace locksim
