// The object store's anomaly, from its own log (entries of kind object_store) only:
//  - stale-manifest: an applied write of a manifest (the resource key) left out a batch that the manifest it
//    replaced had committed: its writer computed it from an older manifest, and the batches committed in
//    between are lost.
// Refused manifest writes (a failed If-Match) are listed beside the verdict, marked when the newest holder's
// was refused.
#include <algorithm>
#include <map>
#include <set>

#include "locksim/protocols/object_store.hpp"
#include "locksim/scenarios/checker/checker.hpp"

namespace locksim::checker_detail {
namespace {

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

std::vector<std::string> dropped_batches(const std::string& replaced, const std::string& written) {
  const std::vector<std::string> now = manifest_batches(written);
  const std::set<std::string> kept(now.begin(), now.end());
  std::vector<std::string> out;
  for (const std::string& b : manifest_batches(replaced))
    if (!kept.count(b)) out.push_back(b);
  return out;
}

void check_object_store(const History& h, CheckResult& r) {
  // (resource, manifest) -> the applied manifest write the object holds now
  std::map<std::pair<std::string, std::string>, const ResourceEntry*> current;
  for (const ResourceEntry& e : h.resource_log) {
    if (e.kind != ResourceKind::object_store || e.op != ResourceEntry::Op::write) continue;
    if (e.request >= h.writes.size()) continue;  // a batch object: nothing commits it but the manifest
    if (!e.applied) {
      const WriteRecord& w = h.writes[e.request];
      r.refused.push_back(CheckResult::Refusal{
          .write = ref_of(h, r, e),
          .key = e.key,
          .reason = e.reason,
          .newest = r.epoch_of_grant[w.grant] >= newest_epoch_at(h, r, h.grants[w.grant].key, e.time)});
      continue;
    }
    const ResourceEntry*& now = current[{e.resource, e.key}];
    if (now && !dropped_batches(now->value, e.value).empty()) {
      r.violations.push_back(Violation{.kind = kStaleManifest,
                                       .key = e.key,
                                       .earlier = ref_of(h, r, *now),
                                       .later = ref_of(h, r, e),
                                       .time = e.time});
    }
    now = &e;
  }
}

}  // namespace locksim::checker_detail
