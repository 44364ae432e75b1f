// Why a grant is unbacked: read from the service records around it (the grant's window, as the checker's
// backing uses it: from its request to the moment its client heard).
#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "locksim/scenarios/checker/checker.hpp"

namespace locksim {

std::string_view to_string(UnbackedGrant::Why w) {
  switch (w) {
    case UnbackedGrant::Why::no_record:
      return "no-record";
    case UnbackedGrant::Why::value_mismatch:
      return "value-mismatch";
    case UnbackedGrant::Why::quorum_not_met:
      return "quorum-not-met";
    case UnbackedGrant::Why::undeclared_process:
      return "undeclared-process";
  }
  return "?";
}

namespace checker_detail {

void explain_unbacked(const History& h, CheckResult& r) {
  r.unbacked.clear();
  if (r.unbacked_grants == 0) return;
  const std::set<std::string_view> declared(h.service_nodes.begin(), h.service_nodes.end());
  const std::uint32_t quorum = std::max<std::uint32_t>(h.service_quorum, 1);
  // Records by lock key, in time order (stable: the service's own sequence at equal times).
  std::map<std::string_view, std::vector<std::size_t>> by_key;
  for (std::size_t i = 0; i < h.service_sets.size(); ++i) by_key[h.service_sets[i].key].push_back(i);
  for (auto& [k, v] : by_key)
    std::stable_sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) {
      return h.service_sets[a].time < h.service_sets[b].time;
    });

  for (std::size_t gi = 0; gi < h.grants.size() && gi < r.backed.size(); ++gi) {
    if (r.backed[gi]) continue;
    const GrantRecord& g = h.grants[gi];
    UnbackedGrant u{.grant = gi, .records = r.backing_records[gi]};
    if (u.records > 0) {
      u.why = UnbackedGrant::Why::quorum_not_met;
      u.detail = fmt::format("{} of the {} records needed", u.records, quorum);
      r.unbacked.push_back(std::move(u));
      continue;
    }
    const ServiceSet* other = nullptr;       // a declared record of another value in the window
    const ServiceSet* undeclared = nullptr;  // an undeclared record of this value in the window
    const ServiceSet* outside = nullptr;     // a declared record of this value outside the window
    if (auto it = by_key.find(g.key); it != by_key.end()) {
      for (std::size_t i : it->second) {
        const ServiceSet& s = h.service_sets[i];
        const bool in_window = s.time >= g.requested && s.time <= g.granted;
        const bool is_declared = declared.count(s.node) != 0;
        if (in_window && is_declared && s.value != g.value && !other) other = &s;
        if (in_window && !is_declared && s.value == g.value && !undeclared) undeclared = &s;
        if (!in_window && is_declared && s.value == g.value && !outside) outside = &s;
      }
    }
    if (other) {
      u.why = UnbackedGrant::Why::value_mismatch;
      u.detail =
          fmt::format("{} recorded '{}', the client was granted '{}'", other->node, other->value, g.value);
    } else if (undeclared) {
      u.why = UnbackedGrant::Why::undeclared_process;
      u.detail = fmt::format("only {}, not a declared service process, recorded it", undeclared->node);
    } else {
      u.why = UnbackedGrant::Why::no_record;
      u.detail = outside ? fmt::format("{} recorded it outside the grant's window (at {} ns)", outside->node,
                                       outside->time.count())
                         : std::string("no declared service process recorded the lock key");
    }
    r.unbacked.push_back(std::move(u));
  }
}

}  // namespace checker_detail
}  // namespace locksim
