// The job queue's anomaly, from its own log (entries of kind job_queue) only:
//  - duplicate-enqueue: one job id accepted twice by a queue (two leaders each enqueued the period's job, or
//    one leader's enqueue landed twice).
// Refused enqueues are listed beside the verdict (CheckResult::refused), marked when the newest holder's was
// refused; the figures go in CheckResult::queue.
#include <map>
#include <utility>

#include "locksim/scenarios/checker/checker.hpp"

namespace locksim::checker_detail {
namespace {

WriteRef ref_of(const History& h, const CheckResult& r, const ResourceEntry& e) {
  const WriteRecord& w = h.writes[e.request];
  return WriteRef{.write = w.id,
                  .grant = w.grant,
                  .client = w.client,
                  .epoch = w.grant < r.epoch_of_grant.size() ? r.epoch_of_grant[w.grant] : 0,
                  .token = w.token,
                  .sent = w.sent,
                  .arrived = e.time,
                  .seq = e.seq,
                  .accepted = e.applied};
}

}  // namespace

void check_job_queues(const History& h, CheckResult& r) {
  // (queue process, job id) -> its first accepted enqueue
  std::map<std::pair<std::string, std::string>, const ResourceEntry*> first;
  for (const ResourceEntry& e : h.resource_log) {
    if (e.kind != ResourceKind::job_queue || e.op != ResourceEntry::Op::write) continue;
    if (e.request >= h.writes.size()) continue;
    ++r.queue.enqueues;
    if (!e.applied) {
      ++r.queue.refused;
      const WriteRecord& w = h.writes[e.request];
      const bool granted = w.grant < h.grants.size();
      r.refused.push_back(CheckResult::Refusal{
          .write = ref_of(h, r, e),
          .key = e.value,
          .reason = e.reason,
          .newest =
              granted && r.epoch_of_grant[w.grant] >= newest_epoch_at(h, r, h.grants[w.grant].key, e.time)});
      continue;
    }
    ++r.queue.accepted;
    auto [it, fresh] = first.emplace(std::make_pair(e.resource, e.value), &e);
    if (!fresh) {
      r.violations.push_back(Violation{.kind = kDuplicateEnqueue,
                                       .key = e.value,
                                       .earlier = ref_of(h, r, *it->second),
                                       .later = ref_of(h, r, e),
                                       .time = e.time});
    }
  }
}

}  // namespace locksim::checker_detail
