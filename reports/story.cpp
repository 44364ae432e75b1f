// The plain-English story of every anomaly in a run: what each client did, what happened to the rest of the
// system meanwhile, and which rule of the safety contract (docs/safety.md) the history broke.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "locksim/reports/report.hpp"

namespace locksim {

namespace {

std::string secs(Time t) {
  return t == kTimeMax ? "never" : format_seconds(t, 3) + " s";
}
std::string tok(const std::optional<std::uint64_t>& t) {
  return t ? fmt::format("token {}", *t) : "no token";
}

struct Pause {
  Time from, to;
};

/// Pauses per process name, from the trace (pause → resume pairs).
std::map<std::string, std::vector<Pause>> pauses_of(const RunOutput& run) {
  std::map<std::string, std::vector<Pause>> out;
  std::map<std::string, Time> open;
  for (const auto& ev : run.trace) {
    const std::string& n = run.name_of(ev.proc);
    if (ev.kind == TraceKind::pause) open[n] = ev.time;
    if (ev.kind == TraceKind::resume && open.count(n)) {
      out[n].push_back({open[n], ev.time});
      open.erase(n);
    }
  }
  for (auto& [n, t] : open) out[n].push_back({t, kTimeMax});
  return out;
}

/// What happened to the rest of the system (servers, network) in [from, to]: crashes, clock changes,
/// partitions, delay spikes. Empty when nothing did.
std::string meanwhile(const RunOutput& run, Time from, Time to) {
  std::vector<std::string> out;
  for (const auto& ev : run.trace) {
    if (ev.time < from || ev.time > to) continue;
    const std::string& n = run.name_of(ev.proc);
    if (ev.proc.valid() && std::find(run.clients.begin(), run.clients.end(), n) != run.clients.end())
      continue;
    const std::string at = secs(ev.time);
    auto value = [&](const char* prefix) {
      return ev.detail.rfind(prefix, 0) == 0 ? ev.detail.substr(std::string(prefix).size()) : ev.detail;
    };
    if (ev.kind == TraceKind::crash) out.push_back(fmt::format("{} crashed at {}", n, at));
    if (ev.kind == TraceKind::restart) out.push_back(fmt::format("{} restarted at {}", n, at));
    if (ev.kind == TraceKind::clock && ev.label == "jump")
      out.push_back(fmt::format("{}'s wall clock jumped by {} at {}", n, value("by="), at));
    if (ev.kind == TraceKind::clock && ev.label == "drift")
      out.push_back(fmt::format("{}'s clock drift became {} ppm at {}", n, value("ppm="), at));
    if (ev.kind == TraceKind::network) {
      // Details name the partition ("#2 client1 | store"), or "all" for a heal of every partition.
      const std::string which =
          ev.detail.empty() || ev.detail == "all" ? std::string{} : " (" + ev.detail + ")";
      if (ev.label == "heal")
        out.push_back(which.empty() ? fmt::format("the network healed at {}", at)
                                    : fmt::format("a partition{} healed at {}", which, at));
      else
        out.push_back(fmt::format("the network was partitioned{} at {}", which, at));
    }
    if (ev.kind == TraceKind::fault && ev.label.find("delay") != std::string::npos)
      out.push_back(fmt::format("a network delay spike began at {}", at));
  }
  return out.empty() ? std::string{} : fmt::format(" Meanwhile {}.", fmt::join(out, ", "));
}

/// "client1 acquired the lock at 0.2 s with token 3 (epoch 1) and believed it valid until 10.2 s." and, in
/// `before` and `after`, the client's pauses while it was acquiring and after it held the lock, up to
/// `until`. With `check`, `after` also tells of that sentence (a lease check) in its place among the pauses.
std::string holder(const RunOutput& run, const std::map<std::string, std::vector<Pause>>& pauses,
                   const GrantRecord& g, std::uint64_t epoch, Time until, std::string* before = nullptr,
                   std::string* after = nullptr,
                   const std::optional<std::pair<Time, std::string>>& check = std::nullopt) {
  std::string s = fmt::format("{} acquired the lock at {} with {} (epoch {})", g.client, secs(g.granted),
                              tok(g.token), epoch);
  if (g.believed_valid_until != kTimeMax)
    s += fmt::format(" and believed it valid until {}", secs(g.believed_valid_until));
  s += ".";
  if (run.check.backed.size() > g.id && !run.check.backed[g.id])
    s += " (No service record backs this grant: its epoch follows the time the client heard of it.)";
  std::string b, a;
  bool told_check = false;
  if (auto it = pauses.find(g.client); it != pauses.end()) {
    for (const Pause& p : it->second) {
      if (p.to < g.granted || p.from > until) continue;
      const std::string len = p.to == kTimeMax ? "until the end" : format_seconds(p.to - p.from, 3) + " s";
      if (p.from < g.granted)
        b += fmt::format(" While it was acquiring, it was paused from {} to {} ({}).", secs(p.from),
                         secs(p.to), len);
      else {
        if (check && !told_check && p.from >= check->first) {
          a += check->second;
          told_check = true;
        }
        a += fmt::format(" Then it was paused from {} to {} ({}).", secs(p.from), secs(p.to), len);
      }
    }
  }
  if (check && !told_check) a += check->second;
  if (!before) return s + b + a;
  *before = b;
  *after = a;
  return s;
}

std::string copy_note(const WriteRecord& w) {
  return w.copies > 1 ? fmt::format(" (one of {} copies the network delivered)", w.copies) : std::string{};
}

std::string stale_story(const RunOutput& run, const std::map<std::string, std::vector<Pause>>& pauses,
                        const Violation& v) {
  const History& h = run.history;
  const std::string store = run.resource_mode == ResourceMode::fenced ? "fenced store" : "unfenced store";
  const WriteRecord& stale = h.writes.at(v.later.write);
  const WriteRecord& newer = h.writes.at(v.earlier.write);
  const GrantRecord& gs = h.grants.at(stale.grant);
  const GrantRecord& gn = h.grants.at(newer.grant);
  std::string before, after;
  const std::pair<Time, std::string> check =
      stale.lease_checked
          ? std::pair{stale.checked,
                      fmt::format(" It checked its lease at {} and it looked valid.", secs(stale.checked))}
          : std::pair{stale.sent, std::string(" It did not check its lease before it wrote.")};
  std::string s = holder(run, pauses, gs, v.later.epoch, stale.sent, &before, &after, check);
  s += before;
  s += after;
  s += meanwhile(run, gs.requested, v.later.arrived);
  if (gs.believed_valid_until != kTimeMax && gs.believed_valid_until < v.earlier.arrived)
    s += fmt::format(" Its lease ran out at {} while it could not notice.", secs(gs.believed_valid_until));
  s += fmt::format(
      " {} acquired the lock at {} with {} (epoch {}) and its write reached the store at {}: accepted.",
      gn.client, secs(gn.granted), tok(gn.token), v.earlier.epoch, secs(v.earlier.arrived));
  if (v.later.arrived - stale.sent > 1s)
    s += fmt::format(" {}'s write, sent at {}, spent {} in the network{}.", gs.client, secs(stale.sent),
                     format_seconds(v.later.arrived - stale.sent, 3) + " s", copy_note(stale));
  else if (stale.copies > 1)
    s += fmt::format(" {}'s write was delivered {} times by the network.", gs.client, stale.copies);
  s += fmt::format(
      " At {} {} wrote with {} and the {} ACCEPTED it: a write of epoch {} after a write of epoch {}.",
      secs(v.later.arrived), gs.client, tok(stale.token), store, v.later.epoch, v.earlier.epoch);
  if (v.later.arrived == v.earlier.arrived)
    s += " Both arrived in the same instant; the store processed the newer one first.";
  if (run.resource_mode == ResourceMode::unfenced)
    s += " Nothing checked that it still held the lock: a lease is not a mutex without fencing.";
  else
    s += " The tokens did not follow the order in which the service granted the lock, so fencing could not "
         "help.";
  return s;
}

std::string lost_story(const RunOutput& run, const std::map<std::string, std::vector<Pause>>& pauses,
                       const Violation& v) {
  const History& h = run.history;
  const WriteRecord& lost = h.writes.at(v.earlier.write);
  const WriteRecord& over = h.writes.at(v.later.write);
  const GrantRecord& gl = h.grants.at(lost.grant);
  const GrantRecord& go = h.grants.at(over.grant);
  std::string s = fmt::format("Lost update on '{}'. ", v.key);
  s += holder(run, pauses, go, v.later.epoch, over.sent);
  const std::string read_at =
      over.read < h.reads.size() ? fmt::format(" at {}", secs(h.reads[over.read].sent)) : std::string{};
  s += fmt::format(" It read '{}'{} (value {}) and computed its write from it.", v.key, read_at,
                   over.read_value ? fmt::format("{}", *over.read_value) : "none");
  s += meanwhile(run, std::min(gl.requested, go.requested), v.later.arrived);
  s += fmt::format(
      " {} (epoch {}, {}) then wrote {} at {}, computed from its own read; the store applied it and "
      "{} was told it succeeded.",
      gl.client, v.earlier.epoch, tok(gl.token), lost.value, secs(v.earlier.arrived), gl.client);
  s += fmt::format(
      " At {} the store applied {}'s write {}, computed from a value read before that: the acknowledged "
      "update of {} is gone.",
      secs(v.later.arrived), go.client, over.value, gl.client);
  s += " Two clients did read–modify–write at once: each believed it held the lock.";
  return s;
}

std::string regression_story(const RunOutput& run, const Violation& v) {
  const History& h = run.history;
  const GrantRecord& ge = h.grants.at(v.grant_earlier.grant);
  const GrantRecord& gl = h.grants.at(v.grant_later.grant);
  std::string s = fmt::format(
      "Token regression on lock '{}'. {} was granted the lock at {} with {} (epoch {}); later {} was granted "
      "it "
      "at {} with {} (epoch {}).",
      v.key, ge.client, secs(v.grant_earlier.ordered_at), tok(ge.token), v.grant_earlier.epoch, gl.client,
      secs(v.grant_later.ordered_at), tok(gl.token), v.grant_later.epoch);
  s += meanwhile(run, ge.granted, gl.granted);
  s += fmt::format(
      " A fencing token must grow with every grant; {} is not greater than {}, so a fenced store would take "
      "the older holder's writes over the newer one's: the fencing contract is broken even if no write has "
      "crossed yet.",
      tok(gl.token), tok(ge.token));
  return s;
}

std::string rejected_story(const RunOutput& run, const std::map<std::string, std::vector<Pause>>& pauses,
                           const Violation& v) {
  const History& h = run.history;
  const WriteRecord& w = h.writes.at(v.later.write);
  const GrantRecord& g = h.grants.at(w.grant);
  std::string s = fmt::format("Fresh write rejected on '{}'. ", v.key);
  s += holder(run, pauses, g, v.later.epoch, w.sent);
  s += fmt::format(
      " At {} its write with {} reached the store while it was the newest holder (no later grant existed), "
      "and the store REFUSED it ({}).",
      secs(v.later.arrived), tok(w.token), v.reason.empty() ? "no reason given" : v.reason);
  if (v.earlier.valid()) {
    const WriteRecord& e = h.writes.at(v.earlier.write);
    s += fmt::format(" The fence stood at {} from {}'s write at {} (epoch {}).", tok(e.token), e.client,
                     secs(v.earlier.arrived), v.earlier.epoch);
  }
  s += " A fence that refuses the rightful holder is checking the wrong thing: the older holder's write got "
       "in "
       "or the comparison is the wrong way round.";
  return s;
}

}  // namespace

static std::string kind_story(const RunOutput& run, const Violation& v) {
  const auto pauses = pauses_of(run);
  if (v.kind == kLostUpdate && run.kind_of(v.resource) == ResourceKind::cas_row) return cas_row_story(run, v);
  if (v.kind == kDuplicateEnqueue) return job_queue_story(run, v);
  if (v.kind == kLostUpdate) return lost_story(run, pauses, v);
  if (v.kind == kTokenRegression) return regression_story(run, v);
  if (v.kind == kFreshWriteRejected) return rejected_story(run, pauses, v);
  if (v.kind == kCheckpointRewind || v.kind == kDuplicateProcessing) return checkpoint_story(run, v);
  if (v.kind == kStaleManifest) return object_store_story(run, v);
  if (v.kind == kDuplicateEffect) return external_api_story(run, v);
  return stale_story(run, pauses, v);
}

std::string anomaly_story(const RunOutput& run, const Violation& v) {
  // Where a scenario has several resources, the story first says whose log shows it.
  if (run.more_resources.empty() || v.resource.empty()) return kind_story(run, v);
  return fmt::format("[{}, {}] {}", v.resource, to_string(run.kind_of(v.resource)), kind_story(run, v));
}

std::string story(const RunOutput& run) {
  std::string out;
  for (const Violation& v : run.check.violations) out += anomaly_story(run, v) + "\n";
  return out;
}

std::vector<std::string> orphan_grants(const RunOutput& run) {
  const History& h = run.history;
  const std::size_t quorum = std::max<std::uint32_t>(1, h.service_quorum);
  std::set<std::pair<std::string, std::string>> heard;  // (key, value) some client learned it holds
  for (const GrantRecord& g : h.grants) heard.insert({g.key, g.value});
  const std::set<std::string> declared(h.service_nodes.begin(), h.service_nodes.end());
  struct Held {
    std::set<std::string> nodes;
    Time at{};  // when the quorum-th node set it: the service granted it
  };
  std::map<std::pair<std::string, std::string>, Held> sets;
  for (const ServiceSet& s : h.service_sets) {
    if (!declared.empty() && declared.count(s.node) == 0) continue;
    Held& e = sets[{s.key, s.value}];
    if (e.nodes.insert(s.node).second && e.nodes.size() == quorum) e.at = s.time;
  }
  // One pass over the kept trace: each client's attempt notes in order, and which attempt sent which value
  // (its acquire-sent note names it: "key=lock value=V nodes=N").
  std::map<ProcId, std::vector<const TraceEvent*>> attempts;
  std::map<std::string, std::pair<ProcId, std::size_t>> sent_value;  // value -> (client, its note's place)
  for (const TraceEvent& ev : run.trace) {
    if (ev.kind != TraceKind::note) continue;
    if (ev.label != "acquire-sent" && ev.label != "acquire-failed" && ev.label != "gave-up" &&
        ev.label != "acquired")
      continue;
    auto& mine = attempts[ev.proc];
    if (ev.label == "acquire-sent") {
      const std::string_view d = ev.detail;
      if (const auto at = d.find("value="); at != std::string_view::npos) {
        const std::string_view v = d.substr(at + 6, d.find(' ', at) - (at + 6));
        sent_value.try_emplace(std::string(v), ev.proc, mine.size());  // the first attempt with it
      }
    }
    mine.push_back(&ev);
  }
  std::vector<std::pair<Time, std::string>> out;
  for (const auto& [kv, e] : sets) {
    if (e.nodes.size() < quorum || heard.count(kv) != 0) continue;
    const auto& [key, value] = kv;
    const auto it = sent_value.find(value);
    if (it == sent_value.end()) continue;  // not an attempt the trace names (the trace was not kept)
    const auto& mine = attempts.at(it->second.first);
    const TraceEvent* sent = mine[it->second.second];
    // What its client did next: a new attempt, another attempt's success, or giving up.
    const TraceEvent* next = it->second.second + 1 < mine.size() ? mine[it->second.second + 1] : nullptr;
    const std::string client = run.name_of(sent->proc);
    const std::string then =
        next == nullptr                 ? "nothing followed"
        : next->label == "acquire-sent" ? fmt::format("its next attempt came at {}", secs(next->time))
        : next->label == "acquired" ? fmt::format("it acquired with another attempt at {}", secs(next->time))
                                    : fmt::format("it gave up at {}", secs(next->time));
    out.emplace_back(
        e.at,
        fmt::format("The service granted '{}' to {}'s attempt sent at {} (at {}, {}), but {} never learned "
                    "it held it ({}): the lock was held for nobody, and no client could take it until it "
                    "expired ([lock] ttl {}) or was released.",
                    key, client, secs(sent->time), secs(e.at), fmt::join(e.nodes, ", "), client, then,
                    format_seconds(run.config.ttl, 3) + " s"));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> lines;
  for (auto& [t, s] : out) lines.push_back(std::move(s));
  return lines;
}

std::string anomaly_summary(const CheckResult& c) {
  std::vector<std::string> parts;
  for (const auto& [kind, n] : c.anomaly_counts) parts.push_back(fmt::format("{} {}", n, kind));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace locksim
