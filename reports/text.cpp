#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "locksim/reports/report.hpp"
#include "locksim/scenarios/command_name.hpp"
#include "locksim/scenarios/expectation.hpp"

namespace locksim {

namespace {

std::string paint(bool on, const char* code, const std::string& s) {
  return on ? fmt::format("\x1b[{}m{}\x1b[0m", code, s) : s;
}

}  // namespace

bool is_story_event(const TraceEvent& ev) {
  static const char* interesting[] = {"acquired",       "lease-check", "write",   "write-accepted",
                                      "write-rejected", "released",    "expired", "extended",
                                      "extend-failed",  "gave-up"};
  switch (ev.kind) {
    case TraceKind::note:
      return std::find(std::begin(interesting), std::end(interesting), ev.label) != std::end(interesting);
    case TraceKind::pause:
    case TraceKind::resume:
    case TraceKind::crash:
    case TraceKind::restart:
    case TraceKind::clock:
    case TraceKind::network:
    case TraceKind::hold:
      return true;
    default:
      return false;
  }
}

std::string held_message_words(const TraceEvent& ev, std::string_view peer) {
  if (ev.detail.starts_with("released")) return fmt::format("{} from {} {}", ev.label, peer, ev.detail);
  return fmt::format("{} from {} HELD by the cut link ({})", ev.label, peer, ev.detail);
}

std::string text_report(const RunOutput& run, const Scenario& sc, TextStyle style) {
  const bool col = style.color;
  std::string out;
  out += fmt::format("{} — {}\n", paint(col, "1", sc.name), sc.title);
  if (!sc.source.empty()) out += fmt::format("source: {}\n", sc.source);
  // A cas-row compares versions, not tokens: it has no fenced or unfenced mode to name.
  auto label = [](ResourceKind kind, ResourceMode mode) {
    return kind == ResourceKind::cas_row ? std::string("cas-row (version column)")
           : kind == ResourceKind::object_store
               ? std::string(mode == ResourceMode::fenced
                                 ? "object-store (manifest written with If-Match)"
                                 : "object-store (manifest written without If-Match)")
               : fmt::format("{} {}", mode == ResourceMode::fenced ? "fenced" : "unfenced", to_string(kind));
  };
  std::string resource = label(run.resource_kind, run.resource_mode);
  if (!run.more_resources.empty()) {  // several: each by its name
    resource = fmt::format("{} {}", run.resource, resource);
    for (const RunOutput::MoreResource& m : run.more_resources)
      resource += fmt::format(", {} {}", m.name, label(m.kind, m.mode));
  }
  out += fmt::format("protocol: {}   resource: {}   seed: {}\n\n", run.protocol, resource, run.seed);

  out += timeline(run, style);
  out += "\n";

  out += "events (true time):\n";
  std::size_t name_w = 10;
  for (const auto& n : run.process_names) name_w = std::max(name_w, n.size());
  for (const auto& ev : run.trace) {
    bool show = false;
    std::string what;
    switch (ev.kind) {
      case TraceKind::note:
        show = is_story_event(ev);
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
      case TraceKind::hold:
        show = true;
        what = held_message_words(ev, run.name_of(ev.peer));
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
  for (const std::string& l : refusal_lines(run)) out += l + "\n";
  for (const std::string& l : missing_effect_lines(run)) out += l + "\n";
  for (const std::string& l : resource_figure_lines(run)) out += l + "\n";
  if (c.lost.acknowledged > 0)
    out += fmt::format("lost updates: {} of {} acknowledged read-modify-writes ({:.1f}%)\n", c.lost.lost,
                       c.lost.acknowledged, c.lost.percent);
  if (c.slack && slack_is_unbounded(*c.slack))
    out += fmt::format("slack (smallest margin): unbounded ({})\n", kUnboundedSlackMeaning);
  else if (c.slack)
    out += fmt::format("slack (smallest margin): {}\n", format_seconds(*c.slack, 3) + " s");
  for (const std::string& w : run_warnings(run)) out += paint(col, "1;33", "warning:") + " " + w + "\n";
  for (const std::string& o : orphan_grants(run)) out += "granted to nobody: " + o + "\n";
  if (c.undeclared_records > 0)
    out += fmt::format("service records from undeclared processes: {} (ignored)\n", c.undeclared_records);
  const bool safe = c.safe;
  out += fmt::format("verdict: {}", safe ? paint(col, "1;32", "SAFE") : paint(col, "1;31", "UNSAFE"));
  if (!safe) out += fmt::format(" — {}", anomaly_summary(c));
  if (safe && run.inconclusive())
    out += " — but INCONCLUSIVE: the run stopped at a limit before its clients finished";
  auto exp = sc.expect.find(run.protocol);
  if (exp != sc.expect.end()) {
    const Expectation& e = exp->second;
    if (e.seeds) {
      out += fmt::format("   (expected {}: judged over those seeds by `locksim check`)", e.describe());
    } else {
      const auto unmet = unmet_in_run(e, run);
      out += fmt::format("   (expected {}: {})", e.describe(),
                         unmet.empty() ? "as expected"
                                       : paint(col, "1;31",
                                               e.verdict_only() ? std::string("NOT as expected")
                                                                : fmt::format("NOT as expected: {}",
                                                                              fmt::join(unmet, "; "))));
    }
  }
  out += "\n";
  out += fmt::format("trace hash: {:016x}   events: {}   simulated: {}   stop: {}\n", run.trace_hash,
                     run.events, format_seconds(run.run.end, 3) + " s", to_string(run.run.reason));
  if (run.trace_truncated)
    out += fmt::format("(the timeline shows the first {} events only: more are not kept in memory)\n",
                       run.trace.size());
  out += fmt::format("replay: {} run {} -p {} --seed {}\n", command_name(),
                     sc.file.starts_with("scenarios/catalog/") ? sc.name : sc.file, run.protocol, run.seed);
  return out;
}

}  // namespace locksim
