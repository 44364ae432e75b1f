// Counterfactual replay: the identical scenario and fault plan against several protocols, side by side, with
// the first step at which their histories part.
#include <fmt/format.h>

#include <algorithm>

#include "locksim/reports/report.hpp"

namespace locksim {

namespace {

struct Step {
  Time time;
  std::string who;
  std::string what;  ///< the part compared across protocols (process + event, no times, no tokens)
  std::string text;  ///< what is shown
};

/// The client-level story of a run: what clients did and what happened to them (protocol internals left out,
/// so runs of different protocols line up).
std::vector<Step> steps_of(const RunOutput& run) {
  static const char* kept[] = {"acquired",       "lease-check",    "expired",       "write",
                               "write-accepted", "write-rejected", "read-rejected", "released",
                               "extended",       "extend-failed",  "gave-up"};
  std::vector<Step> out;
  for (const auto& ev : run.trace) {
    const std::string& who = run.name_of(ev.proc);
    const bool client = std::find(run.clients.begin(), run.clients.end(), who) != run.clients.end();
    std::string what;
    switch (ev.kind) {
      case TraceKind::note:
        if (client && std::find(std::begin(kept), std::end(kept), ev.label) != std::end(kept))
          what = ev.label;
        break;
      case TraceKind::pause:
        what = "paused";
        break;
      case TraceKind::resume:
        what = "resumed";
        break;
      case TraceKind::crash:
        what = "crashed";
        break;
      case TraceKind::restart:
        what = "restarted";
        break;
      case TraceKind::clock:
        what = "clock " + ev.label;
        break;
      default:
        break;
    }
    if (what.empty()) continue;
    std::string text = fmt::format("{:>7} {} {}", format_seconds(ev.time, 3), who, what);
    if (ev.kind == TraceKind::note && ev.label.starts_with("acquired")) {
      auto pos = ev.detail.find("token=");
      if (pos != std::string::npos) text += " " + ev.detail.substr(pos, ev.detail.find(' ', pos) - pos);
    }
    if (ev.label == "write-rejected" && !ev.detail.empty()) text += " (" + ev.detail + ")";
    out.push_back({ev.time, who, who + " " + what, std::move(text)});
  }
  return out;
}

std::string fit(const std::string& s, std::size_t w) {
  // Column width by code points would need a width table; the texts here are ASCII.
  if (s.size() <= w) return s + std::string(w - s.size(), ' ');
  return s.substr(0, w - 1) + "~";
}

}  // namespace

std::string compare_report(const std::vector<RunOutput>& runs, const Scenario& sc, TextStyle style) {
  std::string out;
  if (runs.empty()) return out;
  std::vector<std::vector<Step>> cols;
  for (const auto& r : runs) cols.push_back(steps_of(r));
  std::size_t part = ~std::size_t{0};  // first index where the compared sequences differ
  std::size_t longest = 0;
  for (const auto& c : cols) longest = std::max(longest, c.size());
  for (std::size_t i = 0; i < longest && part == ~std::size_t{0}; ++i)
    for (const auto& c : cols)
      if (i >= c.size() || i >= cols[0].size() || c[i].what != cols[0][i].what) part = i;

  // Each column as wide as its longest cell. On a terminal (style.width set) the columns share its width and
  // a longer cell is cut with '~' (said below the table); written to a file or a pipe nothing is cut.
  std::size_t needed = 0;
  for (const auto& r : runs) needed = std::max(needed, r.protocol.size());
  for (const auto& c : cols)
    for (const Step& s : c) needed = std::max(needed, s.text.size());
  std::size_t w = needed;
  if (style.width > 0)
    w = std::min(needed, static_cast<std::size_t>(
                             std::max(24, (style.width - 6) / static_cast<int>(runs.size()) - 2)));
  const bool cut = w < needed;
  out += fmt::format("counterfactual: {} (seed {}), the identical fault plan against {} protocols\n", sc.name,
                     runs[0].seed, runs.size());
  out += "      ";
  for (const auto& r : runs) out += fit(r.protocol, w) + "  ";
  while (!out.empty() && out.back() == ' ') out.pop_back();
  out += "\n";
  for (std::size_t i = 0; i < longest; ++i) {
    if (i == part) {
      const std::string msg = "-- the histories part here --";
      out += style.color ? fmt::format("\x1b[1;33m{}\x1b[0m\n", msg) : msg + "\n";
    }
    out += fmt::format("{:>4}  ", i + 1);
    for (const auto& c : cols) out += fit(i < c.size() ? c[i].text : "", w) + "  ";
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += "\n";
  }
  if (part == ~std::size_t{0})
    out += "the histories never part: every protocol saw the same client-level story\n";
  if (cut)
    out += fmt::format(
        "(cells cut to fit {} columns: widen the terminal, or write the comparison to a file "
        "with -o for every word)\n",
        style.width);
  out += "verdicts:";
  for (const auto& r : runs) {
    const std::string v(to_string(r.verdict()));
    out += fmt::format("  {} {}", r.protocol,
                       style.color ? fmt::format("\x1b[1;{}m{}\x1b[0m", r.check.safe ? 32 : 31, v) : v);
  }
  out += "\n";
  return out;
}

}  // namespace locksim
