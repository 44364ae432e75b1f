#include "scenarios/checker/checker.hpp"

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

bool is_accepted(const WriteRecord& w) {
  return w.accepted && w.arrived != kTimeMax;
}

/// Orders write indices by (arrival, write id).
struct ByArrival {
  const std::vector<WriteRecord>* writes;
  bool operator()(std::size_t a, std::size_t b) const {
    const auto& wa = (*writes)[a];
    const auto& wb = (*writes)[b];
    return std::tie(wa.arrived, wa.id) < std::tie(wb.arrived, wb.id);
  }
};

/// Assigns service grant times, backed flags and epochs.
void assign_epochs(const History& h, CheckResult& r) {
  const std::size_t n = h.grants.size();
  r.service_grant_time.assign(n, Time{});
  r.backed.assign(n, 0);
  const std::size_t quorum = std::max<std::uint32_t>(h.service_quorum, 1);

  // Service sets and grants, grouped by (key, value).
  using KeyValue = std::pair<std::string, std::string>;
  std::map<KeyValue, std::vector<std::size_t>> sets_by_kv;
  for (std::size_t i = 0; i < h.service_sets.size(); ++i) {
    const auto& s = h.service_sets[i];
    sets_by_kv[{s.key, s.value}].push_back(i);
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
    std::sort(sets.begin(), sets.end(), [&](std::size_t a, std::size_t b) {
      return std::tie(h.service_sets[a].time, a) < std::tie(h.service_sets[b].time, b);
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
          r.backed[gi] = 1;
          break;
        }
      }
      if (!r.backed[gi]) ++r.unbacked_grants;
    }
  }

  r.grant_of_epoch.resize(n);
  std::iota(r.grant_of_epoch.begin(), r.grant_of_epoch.end(), std::uint64_t{0});
  std::sort(r.grant_of_epoch.begin(), r.grant_of_epoch.end(), [&](std::uint64_t a, std::uint64_t b) {
    return std::tie(r.service_grant_time[a], a) < std::tie(r.service_grant_time[b], b);
  });
  r.epoch_of_grant.assign(n, 0);
  for (std::size_t e = 0; e < n; ++e) r.epoch_of_grant[r.grant_of_epoch[e]] = e + 1;
}

WriteRef ref_of(const WriteRecord& w, const CheckResult& r) {
  return WriteRef{.write = w.id,
                  .grant = w.grant,
                  .client = w.client,
                  .epoch = r.epoch_of_grant[w.grant],
                  .token = w.token,
                  .sent = w.sent,
                  .arrived = w.arrived,
                  .accepted = w.accepted};
}

/// Keeps the smaller near miss; ties keep the one found first (the callers iterate in a fixed order).
void keep_smaller(std::optional<NearMiss>& best, NearMiss candidate) {
  if (!best || candidate.margin < best->margin) best = std::move(candidate);
}

/// Safety and write slack, per resource key over accepted writes in arrival order.
void check_writes(const History& h, CheckResult& r) {
  std::map<std::string, std::vector<std::size_t>> accepted_by_key;
  for (std::size_t i = 0; i < h.writes.size(); ++i) {
    if (is_accepted(h.writes[i])) accepted_by_key[h.writes[i].key].push_back(i);
  }
  auto epoch = [&](std::size_t w) { return r.epoch_of_grant[h.writes[w].grant]; };

  for (auto& [key, ws] : accepted_by_key) {
    std::sort(ws.begin(), ws.end(), ByArrival{&h.writes});

    // Safety: the running maximum epoch; any accepted write below it is stale.
    std::optional<std::size_t> top;  // first write (by arrival) carrying the running maximum epoch
    for (std::size_t w : ws) {
      if (!top || epoch(w) > epoch(*top)) {
        top = w;
      } else if (epoch(w) < epoch(*top)) {
        r.violations.push_back(
            Violation{.key = key, .earlier = ref_of(h.writes[*top], r), .later = ref_of(h.writes[w], r)});
      }
    }

    // Write slack: for each epoch, the first accepted write (by arrival) of any strictly higher epoch.
    // ws is in arrival order, so the first position of each epoch is its earliest write; a suffix minimum
    // over epochs sorted descending gives the earliest write of a higher epoch.
    std::map<std::uint64_t, std::size_t> first_pos_of_epoch;  // epoch -> position in ws
    for (std::size_t p = 0; p < ws.size(); ++p) first_pos_of_epoch.emplace(epoch(ws[p]), p);
    std::map<std::uint64_t, std::size_t> first_higher;  // epoch -> position of the first strictly newer write
    std::optional<std::size_t> best_pos;
    for (auto it = first_pos_of_epoch.rbegin(); it != first_pos_of_epoch.rend(); ++it) {
      if (best_pos) first_higher[it->first] = *best_pos;
      if (!best_pos || it->second < *best_pos) best_pos = it->second;
    }
    for (std::size_t w : ws) {
      auto fh = first_higher.find(epoch(w));
      if (fh == first_higher.end()) continue;
      const auto& newer = h.writes[ws[fh->second]];
      keep_smaller(r.write_near_miss, NearMiss{.margin = newer.arrived - h.writes[w].arrived,
                                               .key = key,
                                               .older = h.writes[w].id,
                                               .newer = newer.id});
    }
  }

  std::sort(r.violations.begin(), r.violations.end(), [](const Violation& a, const Violation& b) {
    return std::tie(a.later.arrived, a.later.write, a.key) < std::tie(b.later.arrived, b.later.write, b.key);
  });
  r.safe = r.violations.empty();
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

/// Lost updates of the counter workload, per resource key.
void check_lost_updates(const History& h, CheckResult& r) {
  std::map<std::string, std::vector<std::size_t>> rmw_by_key;
  for (std::size_t i = 0; i < h.writes.size(); ++i) {
    if (is_accepted(h.writes[i]) && h.writes[i].read_modify_write) rmw_by_key[h.writes[i].key].push_back(i);
  }
  LostUpdates& lost = r.lost;
  for (auto& [key, ws] : rmw_by_key) {
    std::sort(ws.begin(), ws.end(), ByArrival{&h.writes});
    // Walking backwards, `min_later_read` is the smallest read among accepted writes that arrived later.
    std::optional<std::int64_t> min_later_read;
    std::vector<std::uint64_t> lost_here;
    std::uint64_t acknowledged = 0;
    for (auto it = ws.rbegin(); it != ws.rend(); ++it) {
      const auto& w = h.writes[*it];
      if (w.acknowledged) {
        ++acknowledged;
        if (w.read_value && min_later_read && *min_later_read <= *w.read_value) lost_here.push_back(w.id);
      }
      if (w.read_value)
        min_later_read = min_later_read ? std::min(*min_later_read, *w.read_value) : *w.read_value;
    }
    std::reverse(lost_here.begin(), lost_here.end());

    lost.acknowledged += acknowledged;
    auto final_counter = h.final_counters.find(key);
    if (final_counter != h.final_counters.end()) {
      const std::int64_t missing = static_cast<std::int64_t>(acknowledged) - final_counter->second;
      lost.lost += missing > 0 ? static_cast<std::uint64_t>(missing) : 0;
    } else {
      lost.lost += lost_here.size();
    }
    lost.lost_writes.insert(lost.lost_writes.end(), lost_here.begin(), lost_here.end());
  }
  lost.percent = lost.acknowledged == 0
                     ? 0.0
                     : 100.0 * static_cast<double>(lost.lost) / static_cast<double>(lost.acknowledged);
}

}  // namespace

CheckResult check(const History& history) {
  for (const auto& w : history.writes) {
    if (w.grant >= history.grants.size()) {
      throw std::invalid_argument(
          fmt::format("history: write {} by {} names grant {}, but only {} grants exist", w.id, w.client,
                      w.grant, history.grants.size()));
    }
  }
  CheckResult r;
  assign_epochs(history, r);
  check_writes(history, r);
  check_beliefs(history, r);
  check_lost_updates(history, r);
  if (r.lease_near_miss) r.slack = r.lease_near_miss->margin;
  if (r.write_near_miss && (!r.slack || r.write_near_miss->margin < *r.slack))
    r.slack = r.write_near_miss->margin;
  return r;
}

}  // namespace locksim
