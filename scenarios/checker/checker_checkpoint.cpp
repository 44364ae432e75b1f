// The checkpoint table's anomalies, from its own log (entries of kind checkpoint_table) only:
//  - checkpoint-rewind: an applied statement set a shard's offset below the offset the row held;
//  - duplicate-processing: one offset of a shard checkpointed (applied) in two different lock holds (two
//    workers, or one worker that lost the lock and took it again): the unit was processed twice.
// Refused statements are listed beside the verdict, marked when the newest holder's was refused.
#include <algorithm>
#include <map>
#include <utility>

#include "locksim/scenarios/checker/checker.hpp"

namespace locksim::checker_detail {
namespace {

using Place = std::pair<std::string, std::string>;  // (resource, shard)

WriteRef ref_of(const History& h, const CheckResult& r, const ResourceEntry& e) {
  const WriteRecord& w = h.writes[e.request];
  return WriteRef{.write = w.id,
                  .grant = w.grant,
                  .client = w.client,
                  .epoch = r.epoch_of_grant[w.grant],
                  .token = w.token,
                  .sent = w.sent,
                  .arrived = e.time,
                  .seq = e.seq,
                  .accepted = e.applied};
}

}  // namespace

std::uint64_t newest_epoch_at(const History& h, const CheckResult& r, const std::string& lock, Time t) {
  std::uint64_t best = 0;
  for (std::uint64_t g : r.grant_of_epoch) {
    if (r.service_grant_time[g] > t) break;  // grant_of_epoch is ordered by that time
    if (h.grants[g].key == lock) best = std::max(best, r.epoch_of_grant[g]);
  }
  return best;
}

void check_checkpoints(const History& h, CheckResult& r) {
  struct Shard {
    const ResourceEntry* current = nullptr;                        // the applied statement the row holds
    std::map<std::int64_t, const ResourceEntry*> first_of_offset;  // offset -> its first applied statement
  };
  std::map<Place, Shard> shards;
  for (const ResourceEntry& e : h.resource_log) {
    if (e.kind != ResourceKind::checkpoint_table || e.op != ResourceEntry::Op::write) continue;
    if (e.request >= h.writes.size()) continue;
    if (!e.applied) {
      const WriteRecord& w = h.writes[e.request];
      const std::uint64_t epoch = r.epoch_of_grant[w.grant];
      r.refused.push_back(
          CheckResult::Refusal{.write = ref_of(h, r, e),
                               .key = e.key,
                               .reason = e.reason,
                               .newest = epoch >= newest_epoch_at(h, r, h.grants[w.grant].key, e.time)});
      continue;
    }
    Shard& s = shards[{e.resource, e.key}];
    if (s.current && e.offset < s.current->offset) {
      r.violations.push_back(Violation{.kind = kCheckpointRewind,
                                       .key = e.key,
                                       .earlier = ref_of(h, r, *s.current),
                                       .later = ref_of(h, r, e),
                                       .time = e.time});
    }
    s.current = &e;
    auto [it, fresh] = s.first_of_offset.emplace(e.offset, &e);
    if (!fresh && h.writes[it->second->request].grant != h.writes[e.request].grant) {
      r.violations.push_back(Violation{.kind = kDuplicateProcessing,
                                       .key = e.key,
                                       .earlier = ref_of(h, r, *it->second),
                                       .later = ref_of(h, r, e),
                                       .time = e.time});
    }
  }
}

}  // namespace locksim::checker_detail
