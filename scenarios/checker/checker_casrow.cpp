// A cas-row's anomaly, from its own log (entries of kind cas_row) only:
//  - lost-update: the row applied an UPDATE whose :read_version is not the version the row held, counted from
//    the log itself (every row starts at version 0; each applied statement adds one). The write it replaced,
//    and every write applied since the version it was computed from, are lost: their effect is overwritten.
// With the version check in the WHERE clause this cannot happen whoever writes when; the checker verifies it
// all the same, so a row that drops the check is caught. Conflicts (statements that updated no row) are no
// anomaly: they are counted beside the verdict, with the clients' retries and give-ups.
#include <map>
#include <utility>
#include <vector>

#include "locksim/scenarios/checker/checker.hpp"

namespace locksim::checker_detail {
namespace {

using Place = std::pair<std::string, std::string>;  // (resource, row)

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

void check_cas_rows(const History& h, CheckResult& r) {
  struct Row {
    std::vector<const ResourceEntry*> applied;  // applied[v - 1] made version v
  };
  std::map<Place, Row> rows;
  std::vector<bool> retried(h.writes.size(), false);
  for (const WriteRecord& w : h.writes)
    if (w.retry_of < retried.size()) retried[w.retry_of] = true;
  bool any = false;
  for (const ResourceEntry& e : h.resource_log) {
    if (e.kind != ResourceKind::cas_row || e.op != ResourceEntry::Op::write) continue;
    if (e.request >= h.writes.size()) continue;
    any = true;
    ++r.cas.statements;
    const WriteRecord& w = h.writes[e.request];
    if (w.retry_of != kNoId) ++r.cas.retries;
    if (!e.applied) {
      ++r.cas.conflicts;
      if (!retried[e.request]) ++r.cas.gave_up;
      continue;
    }
    ++r.cas.applied;
    if (w.acknowledged) ++r.lost.acknowledged;
    Row& row = rows[{e.resource, e.key}];
    const std::uint64_t held = row.applied.size();  // the version the row held before this statement
    if (e.version != held) {
      Violation v{.kind = kLostUpdate, .key = e.key, .later = ref_of(h, r, e), .time = e.time};
      if (held > 0) v.earlier = ref_of(h, r, *row.applied.back());
      r.violations.push_back(std::move(v));
      // Overwritten: every write applied after the version this one was computed from.
      for (std::uint64_t ver = e.version; ver < held; ++ver) {
        const ResourceEntry* lost = row.applied[ver];
        if (!h.writes[lost->request].acknowledged) continue;
        ++r.lost.lost;
        r.lost.lost_writes.push_back(lost->request);
      }
    }
    row.applied.push_back(&e);
  }
  if (any)
    r.lost.percent = r.lost.acknowledged == 0 ? 0.0
                                              : 100.0 * static_cast<double>(r.lost.lost) /
                                                    static_cast<double>(r.lost.acknowledged);
}

}  // namespace locksim::checker_detail
