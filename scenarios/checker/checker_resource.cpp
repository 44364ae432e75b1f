// The anomalies the resource's own log shows: stale-write-accepted, lost-update, fresh-write-rejected; the
// lost-update figures and the write slack. Reads History::resource_log only (plus the client-side records
// that say which grant and which read each write came from).
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "locksim/scenarios/checker/checker.hpp"

namespace locksim::checker_detail {
namespace {

using Op = ResourceEntry::Op;
using Place = std::pair<std::string, std::string>;  // (resource, key)

bool is_write_entry(const History& h, const ResourceEntry& e) {
  return e.kind == ResourceKind::store && (e.op == Op::write || e.op == Op::land) &&
         e.request < h.writes.size();
}

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

void keep_smaller(std::optional<NearMiss>& best, NearMiss candidate) {
  if (!best || candidate.margin < best->margin) best = std::move(candidate);
}

/// stale-write-accepted and the write slack, over one place's applied copies in processing order.
void check_order(const History& h, CheckResult& r, const std::string& key,
                 const std::vector<const ResourceEntry*>& applied) {
  auto epoch = [&](const ResourceEntry* e) { return r.epoch_of_grant[h.writes[e->request].grant]; };
  const ResourceEntry* top = nullptr;  // first applied copy carrying the running maximum epoch
  for (const ResourceEntry* e : applied) {
    if (!top || epoch(e) > epoch(top)) {
      top = e;
    } else if (epoch(e) < epoch(top)) {
      r.violations.push_back(Violation{.kind = kStaleWriteAccepted,
                                       .key = key,
                                       .earlier = ref_of(h, r, *top),
                                       .later = ref_of(h, r, *e),
                                       .time = e->time});
    }
  }
  // Write slack: for each epoch, the first applied copy of any strictly higher epoch (a suffix minimum of
  // first positions over epochs taken in descending order).
  std::map<std::uint64_t, std::size_t> first_pos_of_epoch;
  for (std::size_t p = 0; p < applied.size(); ++p) first_pos_of_epoch.emplace(epoch(applied[p]), p);
  std::map<std::uint64_t, std::size_t> first_higher;
  std::optional<std::size_t> best_pos;
  for (auto it = first_pos_of_epoch.rbegin(); it != first_pos_of_epoch.rend(); ++it) {
    if (best_pos) first_higher[it->first] = *best_pos;
    if (!best_pos || it->second < *best_pos) best_pos = it->second;
  }
  for (const ResourceEntry* e : applied) {
    auto fh = first_higher.find(epoch(e));
    if (fh == first_higher.end()) continue;
    const ResourceEntry* newer = applied[fh->second];
    keep_smaller(
        r.write_near_miss,
        NearMiss{.margin = newer->time - e->time, .key = key, .older = e->request, .newer = newer->request});
  }
}

/// The log entry of the read a write was computed from: the latest served copy of that read that returned
/// the value the client got (a duplicated read is served twice; the client used one of the answers).
std::vector<std::uint64_t> read_seqs(const History& h) {
  std::vector<std::uint64_t> seq(h.reads.size(), kNoId);
  for (const ResourceEntry& e : h.resource_log) {
    if (e.kind != ResourceKind::store || e.op != Op::read || !e.accepted || e.request >= h.reads.size())
      continue;
    const ReadRecord& rd = h.reads[e.request];
    if (rd.answered && e.value != rd.observed) continue;
    seq[e.request] = e.seq;
  }
  return seq;
}

/// lost-update, over one place's applied copies in processing order.
void check_lost(const History& h, CheckResult& r, const std::string& key,
                const std::vector<const ResourceEntry*>& applied,
                const std::vector<std::uint64_t>& read_seq) {
  // The read an applied read–modify–write copy was computed from (kNoId: not one, or its read is unknown).
  auto read_of = [&](const ResourceEntry* e) -> std::uint64_t {
    const WriteRecord& w = h.writes[e->request];
    if (!w.read_modify_write || w.read >= read_seq.size()) return kNoId;
    return read_seq[w.read];
  };
  // Walking backwards: per later applied write, the oldest read it was computed from, ordered by that read.
  std::map<std::uint64_t, std::uint64_t> min_read_of;  // write id -> smallest read seq among its later copies
  std::set<std::pair<std::uint64_t, std::uint64_t>> by_read;  // (read seq, write id)
  std::vector<bool> is_first(applied.size(), false);
  {
    std::set<std::uint64_t> seen;
    for (std::size_t p = 0; p < applied.size(); ++p) is_first[p] = seen.insert(applied[p]->request).second;
  }
  std::vector<std::size_t> lost_pos;
  for (std::size_t p = applied.size(); p-- > 0;) {
    const ResourceEntry* e = applied[p];
    const WriteRecord& w = h.writes[e->request];
    if (is_first[p] && w.read_modify_write && w.acknowledged) {
      ++r.lost.acknowledged;
      // Another write applied later, computed from a read served before this copy took effect?
      for (auto it = by_read.begin(); it != by_read.end() && it->first < e->seq; ++it) {
        if (it->second == w.id) continue;
        lost_pos.push_back(p);
        break;
      }
    }
    const std::uint64_t rs = read_of(e);
    if (rs == kNoId) continue;
    auto [it, fresh] = min_read_of.emplace(w.id, rs);
    if (!fresh && rs < it->second) {
      by_read.erase({it->second, w.id});
      it->second = rs;
      fresh = true;
    }
    if (fresh) by_read.emplace(rs, w.id);
  }
  std::reverse(lost_pos.begin(), lost_pos.end());
  for (std::size_t p : lost_pos) {
    const ResourceEntry* e = applied[p];
    // The first later copy that overwrote it: computed from a read served before e took effect.
    for (std::size_t q = p + 1; q < applied.size(); ++q) {
      const ResourceEntry* x = applied[q];
      if (x->request == e->request) continue;
      const std::uint64_t rs = read_of(x);
      if (rs == kNoId || rs >= e->seq) continue;
      r.violations.push_back(Violation{.kind = kLostUpdate,
                                       .key = key,
                                       .earlier = ref_of(h, r, *e),
                                       .later = ref_of(h, r, *x),
                                       .time = x->time});
      break;
    }
    ++r.lost.lost;
    r.lost.lost_writes.push_back(e->request);
  }
}

}  // namespace

void check_resource(const History& h, CheckResult& r) {
  // Applied copies per place, in processing order; which writes ever took effect.
  std::map<Place, std::vector<const ResourceEntry*>> applied;
  std::vector<bool> ever_applied(h.writes.size(), false);
  for (const ResourceEntry& e : h.resource_log) {
    if (!is_write_entry(h, e) || !e.applied) continue;
    applied[{e.resource, e.key}].push_back(&e);
    ever_applied[e.request] = true;
  }
  const std::vector<std::uint64_t> read_seq = read_seqs(h);
  for (const auto& [place, entries] : applied) {
    check_order(h, r, place.second, entries);
    check_lost(h, r, place.second, entries, read_seq);
  }
  r.lost.percent = r.lost.acknowledged == 0
                       ? 0.0
                       : 100.0 * static_cast<double>(r.lost.lost) / static_cast<double>(r.lost.acknowledged);

  // fresh-write-rejected. The newest epoch on each lock key over time: (ordering time, running max epoch).
  std::map<std::string, std::vector<std::pair<Time, std::uint64_t>>> newest;
  for (std::uint64_t g : r.grant_of_epoch) {
    auto& v = newest[h.grants[g].key];
    const std::uint64_t e = r.epoch_of_grant[g];
    v.emplace_back(r.service_grant_time[g], v.empty() ? e : std::max(e, v.back().second));
  }
  auto newest_at = [&](const std::string& lock, Time t) -> std::uint64_t {
    const auto& v = newest[lock];
    auto it = std::upper_bound(v.begin(), v.end(), t,
                               [](Time x, const std::pair<Time, std::uint64_t>& p) { return x < p.first; });
    return it == v.begin() ? 0 : std::prev(it)->second;
  };
  std::map<Place, const ResourceEntry*> fence_setter;  // accepted write copy with the highest token so far
  for (const ResourceEntry& e : h.resource_log) {
    if (!is_write_entry(h, e)) continue;
    const Place place{e.resource, e.key};
    if (e.op == Op::write && !e.accepted && !ever_applied[e.request]) {
      const WriteRecord& w = h.writes[e.request];
      const GrantRecord& g = h.grants[w.grant];
      if (r.epoch_of_grant[w.grant] >= newest_at(g.key, e.time)) {
        Violation v{.kind = kFreshWriteRejected,
                    .key = e.key,
                    .later = ref_of(h, r, e),
                    .time = e.time,
                    .reason = e.reason};
        if (auto it = fence_setter.find(place); it != fence_setter.end())
          v.earlier = ref_of(h, r, *it->second);
        r.violations.push_back(std::move(v));
      }
    }
    if (e.accepted && e.token) {
      auto& best = fence_setter[place];
      if (!best || *e.token > *best->token) best = &e;
    }
  }
}

}  // namespace locksim::checker_detail
