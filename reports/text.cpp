#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "reports/report.hpp"

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

std::string paint(bool on, const char* code, const std::string& s) {
  return on ? fmt::format("\x1b[{}m{}\x1b[0m", code, s) : s;
}

}  // namespace

std::string story(const RunOutput& run) {
  const History& h = run.history;
  const CheckResult& c = run.check;
  if (c.violations.empty()) return {};
  const auto pauses = pauses_of(run);
  const std::string store = run.resource_mode == ResourceMode::fenced ? "fenced store" : "unfenced store";
  std::string out;
  for (const Violation& v : c.violations) {
    const WriteRecord& stale = h.writes.at(v.later.write);
    const WriteRecord& newer = h.writes.at(v.earlier.write);
    const GrantRecord& gs = h.grants.at(stale.grant);
    const GrantRecord& gn = h.grants.at(newer.grant);
    std::string s = fmt::format("{} acquired the lock at {} with {} (epoch {})", gs.client, secs(gs.granted),
                                tok(gs.token), v.later.epoch);
    if (gs.believed_valid_until != kTimeMax)
      s += fmt::format(" and believed it valid until {}", secs(gs.believed_valid_until));
    s += ".";
    std::string before, after;  // its pauses: while it was acquiring, and after it held the lock
    if (auto it = pauses.find(gs.client); it != pauses.end()) {
      for (const Pause& p : it->second) {
        if (p.to < gs.granted || p.from > stale.sent) continue;
        const std::string len = p.to == kTimeMax ? "until the end" : format_seconds(p.to - p.from, 3) + " s";
        if (p.from < gs.granted)
          before += fmt::format(" While it was acquiring, it was paused from {} to {} ({}).", secs(p.from),
                                secs(p.to), len);
        else
          after += fmt::format(" Then it was paused from {} to {} ({}).", secs(p.from), secs(p.to), len);
      }
    }
    s += before;
    s += fmt::format(" It checked its lease at {} and it looked valid.", secs(stale.checked));
    s += after;
    // What happened to the rest of the system meanwhile (servers, network): crashes, clock jumps, partitions.
    std::vector<std::string> meanwhile;
    for (const auto& ev : run.trace) {
      if (ev.time < gs.requested || ev.time > stale.arrived) continue;
      const std::string& n = run.name_of(ev.proc);
      if (ev.proc.valid() && std::find(run.clients.begin(), run.clients.end(), n) != run.clients.end())
        continue;
      const std::string at = secs(ev.time);
      auto value = [&](const char* prefix) {
        return ev.detail.rfind(prefix, 0) == 0 ? ev.detail.substr(std::string(prefix).size()) : ev.detail;
      };
      if (ev.kind == TraceKind::crash) meanwhile.push_back(fmt::format("{} crashed at {}", n, at));
      if (ev.kind == TraceKind::restart) meanwhile.push_back(fmt::format("{} restarted at {}", n, at));
      if (ev.kind == TraceKind::clock && ev.label == "jump")
        meanwhile.push_back(fmt::format("{}'s wall clock jumped by {} at {}", n, value("by="), at));
      if (ev.kind == TraceKind::clock && ev.label == "drift")
        meanwhile.push_back(fmt::format("{}'s clock drift became {} ppm at {}", n, value("ppm="), at));
      if (ev.kind == TraceKind::network)
        meanwhile.push_back(ev.label == "heal" ? fmt::format("the network healed at {}", at)
                                               : fmt::format("the network was partitioned at {}", at));
      if (ev.kind == TraceKind::fault && ev.label.find("delay") != std::string::npos)
        meanwhile.push_back(fmt::format("a network delay spike began at {}", at));
    }
    if (!meanwhile.empty()) s += fmt::format(" Meanwhile {}.", fmt::join(meanwhile, ", "));
    if (gs.believed_valid_until != kTimeMax && gs.believed_valid_until < newer.arrived)
      s += fmt::format(" Its lease ran out at {} while it could not notice.", secs(gs.believed_valid_until));
    s += fmt::format(
        " {} acquired the lock at {} with {} (epoch {}) and its write reached the store at {}: accepted.",
        gn.client, secs(gn.granted), tok(gn.token), v.earlier.epoch, secs(newer.arrived));
    if (stale.arrived - stale.sent > 1s)
      s += fmt::format(" {}'s write, sent at {}, spent {} in the network.", gs.client, secs(stale.sent),
                       format_seconds(stale.arrived - stale.sent, 3) + " s");
    s += fmt::format(
        " At {} {} wrote with {} and the {} ACCEPTED it: a write of epoch {} after a write of epoch {}.",
        secs(stale.arrived), gs.client, tok(stale.token), store, v.later.epoch, v.earlier.epoch);
    if (run.resource_mode == ResourceMode::unfenced)
      s += " Nothing checked that it still held the lock: a lease is not a mutex without fencing.";
    else
      s += " The tokens did not follow the order in which the service granted the lock, so fencing could not "
           "help.";
    out += s + "\n";
  }
  return out;
}

std::string text_report(const RunOutput& run, const Scenario& sc, TextStyle style) {
  const bool col = style.color;
  std::string out;
  out += fmt::format("{} — {}\n", paint(col, "1", sc.name), sc.title);
  if (!sc.source.empty()) out += fmt::format("source: {}\n", sc.source);
  out += fmt::format("protocol: {}   resource: {} store   seed: {}\n\n", run.protocol,
                     run.resource_mode == ResourceMode::fenced ? "fenced" : "unfenced", run.seed);

  out += timeline(run, style);
  out += "\n";

  out += "events (true time):\n";
  std::size_t name_w = 10;
  for (const auto& n : run.process_names) name_w = std::max(name_w, n.size());
  static const char* interesting[] = {"acquired",       "lease-check", "write",   "write-accepted",
                                      "write-rejected", "released",    "expired", "extended",
                                      "extend-failed",  "gave-up"};
  for (const auto& ev : run.trace) {
    bool show = false;
    std::string what;
    switch (ev.kind) {
      case TraceKind::note:
        show = std::find(std::begin(interesting), std::end(interesting), ev.label) != std::end(interesting);
        what = ev.detail.empty() ? ev.label : fmt::format("{} ({})", ev.label, ev.detail);
        break;
      case TraceKind::pause:
        show = true;
        what = paint(col, "33", "PAUSED");
        break;
      case TraceKind::resume:
        show = true;
        what = paint(col, "33", "resumed");
        break;
      case TraceKind::crash:
        show = true;
        what = paint(col, "31", "CRASHED") + " (" + ev.detail + ")";
        break;
      case TraceKind::restart:
        show = true;
        what = "restarted";
        break;
      case TraceKind::clock:
        show = true;
        what = fmt::format("clock {} {}", ev.label, ev.detail);
        break;
      case TraceKind::network:
        show = true;
        what = fmt::format("network {} {}", ev.label, ev.detail);
        break;
      default:
        break;
    }
    if (!show) continue;
    if (ev.label == "write-accepted") what = paint(col, "32", what);
    if (ev.label == "write-rejected") what = paint(col, "36", what);
    out +=
        fmt::format("  {:>10}  {:<{}} {}\n", format_seconds(ev.time, 3), run.name_of(ev.proc), name_w, what);
  }
  out += "\n";

  const CheckResult& c = run.check;
  if (!c.violations.empty()) {
    out += paint(col, "1", "what happened:") + "\n";
    out += story(run);
    out += "\n";
  }
  for (const auto& o : c.overlaps)
    out +=
        fmt::format("lock overlap: {} and {} both believed they held '{}' for {} (from {} s)\n", o.client_a,
                    o.client_b, o.key, format_seconds(o.duration, 3) + " s", format_seconds(o.start, 3));
  if (c.lost.acknowledged > 0)
    out += fmt::format("lost updates: {} of {} acknowledged increments ({:.1f}%)\n", c.lost.lost,
                       c.lost.acknowledged, c.lost.percent);
  if (c.slack) out += fmt::format("slack (smallest margin): {}\n", format_seconds(*c.slack, 3) + " s");
  const bool safe = c.safe;
  out += fmt::format("verdict: {}", safe ? paint(col, "1;32", "SAFE") : paint(col, "1;31", "UNSAFE"));
  if (!safe) out += fmt::format(" — {} stale write(s) accepted out of epoch order", c.violations.size());
  auto exp = sc.expect.find(run.protocol);
  if (exp != sc.expect.end())
    out += fmt::format("   (expected {}: {})", to_string(exp->second),
                       exp->second == run.verdict() ? "as expected" : paint(col, "1;31", "NOT as expected"));
  out += "\n";
  out += fmt::format("trace hash: {:016x}   events: {}   simulated: {}   stop: {}\n", run.trace_hash,
                     run.events, format_seconds(run.run.end, 3) + " s", to_string(run.run.reason));
  if (run.trace_truncated)
    out += fmt::format("(the timeline shows the first {} events only: more are not kept in memory)\n",
                       run.trace.size());
  out += fmt::format("replay: locksim run {} -p {} --seed {}\n",
                     sc.file.starts_with("scenarios/catalog/") ? sc.name : sc.file, run.protocol, run.seed);
  return out;
}

}  // namespace locksim
