// The external API's anomaly, from its own log (entries of kind external_api) only:
//  - duplicate-effect: one logical job of an account performed twice, by two clients or by one client twice
//    (a retry without an idempotency key, or after the API forgot the key: a second charge either way).
// Jobs never performed (none of their requests took effect) are listed beside the verdict.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "locksim/scenarios/checker/checker.hpp"

namespace locksim::checker_detail {
namespace {

using Place = std::pair<std::string, std::string>;  // (resource, account)

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

void check_external_api(const History& h, CheckResult& r) {
  struct Account {
    std::int64_t highest = 0;                                     // the highest job a request named
    std::map<std::int64_t, const ResourceEntry*> first_effect;    // job -> its first performed request
    std::map<std::int64_t, const ResourceEntry*> first_answered;  // job -> first request its client heard
  };
  std::map<Place, Account> accounts;
  for (const ResourceEntry& e : h.resource_log) {
    if (e.kind != ResourceKind::external_api || e.op != ResourceEntry::Op::write) continue;
    if (e.request >= h.writes.size()) continue;
    Account& a = accounts[{e.resource, e.key}];
    a.highest = std::max(a.highest, e.job);
    if (h.writes[e.request].acknowledged) a.first_answered.emplace(e.job, &e);
    if (!e.applied) continue;
    auto [it, fresh] = a.first_effect.emplace(e.job, &e);
    if (!fresh) {
      r.violations.push_back(Violation{.kind = kDuplicateEffect,
                                       .key = e.key,
                                       .earlier = ref_of(h, r, *it->second),
                                       .later = ref_of(h, r, e),
                                       .time = e.time,
                                       .reason = fmt::format("job {}", e.job)});
    }
  }
  for (const auto& [place, a] : accounts) {
    // The workload numbers an account's jobs 1, 2, 3...: every job up to the highest one named belongs to
    // the batch.
    for (std::int64_t job = 1; job <= a.highest; ++job) {
      if (a.first_effect.count(job)) continue;
      CheckResult::MissingEffect m{.resource = place.first, .key = place.second, .job = job};
      if (auto it = a.first_answered.find(job); it != a.first_answered.end())
        m.acknowledged = ref_of(h, r, *it->second);
      r.missing.push_back(std::move(m));
    }
  }
}

}  // namespace locksim::checker_detail
