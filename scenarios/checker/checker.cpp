#include "locksim/scenarios/checker/checker.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <fmt/format.h>

namespace locksim {
namespace {

/// When the client stops acting as holder: its own end or its validity estimate, whichever is first.
Time belief_end_of(const GrantRecord& g) {
  return std::min(g.belief_end, g.believed_valid_until);
}

/// Assigns service grant times, backing and epochs.
void assign_epochs(const History& h, CheckResult& r) {
  const std::size_t n = h.grants.size();
  r.service_grant_time.assign(n, Time{});
  r.backed.assign(n, 0);
  r.backing_records.assign(n, 0);
  r.backing_record.assign(n, kNoId);
  const std::size_t quorum = std::max<std::uint32_t>(h.service_quorum, 1);
  const std::set<std::string_view> declared(h.service_nodes.begin(), h.service_nodes.end());

  // Declared service sets and grants, grouped by (key, value).
  using KeyValue = std::pair<std::string, std::string>;
  std::map<KeyValue, std::vector<std::size_t>> sets_by_kv;
  for (std::size_t i = 0; i < h.service_sets.size(); ++i) {
    const auto& s = h.service_sets[i];
    if (!declared.count(s.node)) {
      ++r.undeclared_records;
      continue;
    }
    sets_by_kv[{s.key, s.value}].push_back(i);  // in record order, which is the service's own sequence
  }
  std::map<KeyValue, std::vector<std::size_t>> grants_by_kv;
  for (std::size_t i = 0; i < n; ++i) grants_by_kv[{h.grants[i].key, h.grants[i].value}].push_back(i);

  for (auto& [kv, grants] : grants_by_kv) {
    std::sort(grants.begin(), grants.end(), [&](std::size_t a, std::size_t b) {
      return std::tie(h.grants[a].granted, a) < std::tie(h.grants[b].granted, b);
    });
    auto found = sets_by_kv.find(kv);
    std::vector<std::size_t> sets;
    if (found != sets_by_kv.end()) sets = std::move(found->second);
    std::stable_sort(sets.begin(), sets.end(), [&](std::size_t a, std::size_t b) {
      return h.service_sets[a].time < h.service_sets[b].time;
    });
    auto time_of = [&](std::size_t s) { return h.service_sets[s].time; };
    auto first_at_or_after = [&](Time t) {
      return std::partition_point(sets.begin(), sets.end(), [&](std::size_t s) { return time_of(s) < t; });
    };
    auto first_after = [&](Time t) {
      return std::partition_point(sets.begin(), sets.end(), [&](std::size_t s) { return time_of(s) <= t; });
    };

    std::optional<Time> previous_granted;
    for (std::size_t gi : grants) {
      const auto& g = h.grants[gi];
      auto lo = first_at_or_after(g.requested);
      if (previous_granted) lo = std::max(lo, first_after(*previous_granted));
      auto hi = first_after(g.granted);
      previous_granted = g.granted;

      r.service_grant_time[gi] = g.granted;
      std::set<std::string_view> nodes;
      for (auto it = lo; it < hi; ++it) {
        nodes.insert(h.service_sets[*it].node);
        if (nodes.size() >= quorum) {
          r.service_grant_time[gi] = time_of(*it);
          r.backing_record[gi] = *it;
          r.backed[gi] = 1;
          break;
        }
      }
      r.backing_records[gi] = static_cast<std::uint32_t>(nodes.size());
      if (!r.backed[gi]) ++r.unbacked_grants;
    }
  }

  r.grant_of_epoch.resize(n);
  std::iota(r.grant_of_epoch.begin(), r.grant_of_epoch.end(), std::uint64_t{0});
  std::sort(r.grant_of_epoch.begin(), r.grant_of_epoch.end(), [&](std::uint64_t a, std::uint64_t b) {
    return std::tie(r.service_grant_time[a], r.backing_record[a], a) <
           std::tie(r.service_grant_time[b], r.backing_record[b], b);
  });
  r.epoch_of_grant.assign(n, 0);
  for (std::size_t e = 0; e < n; ++e) r.epoch_of_grant[r.grant_of_epoch[e]] = e + 1;
}

GrantRef grant_ref(const History& h, const CheckResult& r, std::uint64_t g) {
  return GrantRef{.grant = g,
                  .client = h.grants[g].client,
                  .epoch = r.epoch_of_grant[g],
                  .token = h.grants[g].token,
                  .ordered_at = r.service_grant_time[g]};
}

/// token-regression: per lock key, in epoch order, a token no greater than the highest earlier one.
void check_tokens(const History& h, CheckResult& r) {
  if (!h.tokens_fence) return;
  std::map<std::string, std::optional<std::uint64_t>> top;  // lock key -> grant with the highest token so far
  for (std::uint64_t g : r.grant_of_epoch) {
    const GrantRecord& gr = h.grants[g];
    if (!gr.token) continue;
    auto& best = top[gr.key];
    if (best && *gr.token <= *h.grants[*best].token) {
      r.violations.push_back(Violation{.kind = kTokenRegression,
                                       .key = gr.key,
                                       .grant_earlier = grant_ref(h, r, *best),
                                       .grant_later = grant_ref(h, r, g),
                                       .time = r.service_grant_time[g]});
    }
    if (!best || *gr.token > *h.grants[*best].token) best = g;
  }
}

/// Keeps the smaller near miss; ties keep the one found first (the callers iterate in a fixed order).
void keep_smaller(std::optional<NearMiss>& best, NearMiss candidate) {
  if (!best || candidate.margin < best->margin) best = std::move(candidate);
}

/// Lock-level overlaps and lease slack, per lock key.
void check_beliefs(const History& h, CheckResult& r) {
  std::map<std::string, std::vector<std::size_t>> grants_by_key;
  for (std::size_t i = 0; i < h.grants.size(); ++i) grants_by_key[h.grants[i].key].push_back(i);

  for (auto& [key, gs] : grants_by_key) {
    // Lease slack over consecutive epochs on this key.
    std::sort(gs.begin(), gs.end(),
              [&](std::size_t a, std::size_t b) { return r.epoch_of_grant[a] < r.epoch_of_grant[b]; });
    for (std::size_t p = 1; p < gs.size(); ++p) {
      const auto& older = h.grants[gs[p - 1]];
      const auto& newer = h.grants[gs[p]];
      keep_smaller(r.lease_near_miss, NearMiss{.margin = newer.granted - belief_end_of(older),
                                               .key = key,
                                               .older = gs[p - 1],
                                               .newer = gs[p]});
    }

    // Overlaps: sweep belief intervals by start; the active set is ordered by end.
    std::vector<std::size_t> intervals;
    for (std::size_t g : gs) {
      if (belief_end_of(h.grants[g]) > h.grants[g].granted) intervals.push_back(g);
    }
    std::sort(intervals.begin(), intervals.end(), [&](std::size_t a, std::size_t b) {
      return std::tie(h.grants[a].granted, a) < std::tie(h.grants[b].granted, b);
    });
    std::set<std::pair<Time, std::size_t>> active;
    for (std::size_t g : intervals) {
      const auto& b = h.grants[g];
      while (!active.empty() && active.begin()->first <= b.granted) active.erase(active.begin());
      for (const auto& [end_a, ga] : active) {
        const auto& a = h.grants[ga];
        if (a.client == b.client) continue;
        const Time end = std::min(end_a, belief_end_of(b));
        r.overlaps.push_back(Overlap{.key = key,
                                     .grant_a = ga,
                                     .grant_b = g,
                                     .client_a = a.client,
                                     .client_b = b.client,
                                     .epoch_a = r.epoch_of_grant[ga],
                                     .epoch_b = r.epoch_of_grant[g],
                                     .start = b.granted,
                                     .end = end,
                                     .duration = end - b.granted});
      }
      active.emplace(belief_end_of(b), g);
    }
  }
  std::sort(r.overlaps.begin(), r.overlaps.end(), [](const Overlap& a, const Overlap& b) {
    return std::tie(a.start, a.key, a.grant_a, a.grant_b) < std::tie(b.start, b.key, b.grant_a, b.grant_b);
  });
}

/// The writes a log entry of a kind other than cas-row names: they must name a grant (a cas-row is the only
/// kind whose clients may write without a lock).
std::vector<bool> written_to_other_kinds(const History& h) {
  std::vector<bool> out(h.writes.size(), false);
  for (const ResourceEntry& e : h.resource_log)
    if (e.op != ResourceEntry::Op::read && e.request < out.size() && e.kind != ResourceKind::cas_row)
      out[e.request] = true;
  return out;
}

}  // namespace

CheckResult check(const History& history) {
  std::vector<bool> needs_grant;
  for (const auto& w : history.writes) {
    if (w.grant == kNoId) {  // a cas-row's client without a lock, unless another kind's log names the write
      if (needs_grant.empty()) needs_grant = written_to_other_kinds(history);
      if (!needs_grant[w.id]) continue;
    }
    if (w.grant >= history.grants.size()) {
      throw std::invalid_argument(
          fmt::format("history: write {} by {} names grant {}, but only {} grants exist", w.id, w.client,
                      w.grant, history.grants.size()));
    }
  }
  for (const auto& rd : history.reads) {
    if (rd.grant == kNoId) continue;  // a cas-row's client without a lock (its writes are checked above)
    if (rd.grant >= history.grants.size()) {
      throw std::invalid_argument(
          fmt::format("history: read {} by {} names grant {}, but only {} grants exist", rd.id, rd.client,
                      rd.grant, history.grants.size()));
    }
  }
  CheckResult r;
  assign_epochs(history, r);
  checker_detail::explain_unbacked(history, r);
  check_tokens(history, r);
  checker_detail::check_resource(history, r);
  checker_detail::check_checkpoints(history, r);
  checker_detail::check_object_store(history, r);
  checker_detail::check_external_api(history, r);
  checker_detail::check_cas_rows(history, r);
  checker_detail::check_job_queues(history, r);
  check_beliefs(history, r);
  std::stable_sort(r.violations.begin(), r.violations.end(), [](const Violation& a, const Violation& b) {
    return std::tie(a.time, a.kind, a.later.seq, a.grant_later.grant, a.earlier.seq) <
           std::tie(b.time, b.kind, b.later.seq, b.grant_later.grant, b.earlier.seq);
  });
  for (Violation& v : r.violations) {
    ++r.anomaly_counts[v.kind];
    // The resource whose log holds it (a scenario may have several): the later copy's entry.
    if (v.later.seq < history.resource_log.size()) v.resource = history.resource_log[v.later.seq].resource;
  }
  r.safe = r.violations.empty();
  if (r.lease_near_miss) r.slack = r.lease_near_miss->margin;
  if (r.write_near_miss && (!r.slack || r.write_near_miss->margin < *r.slack))
    r.slack = r.write_near_miss->margin;
  return r;
}

}  // namespace locksim
