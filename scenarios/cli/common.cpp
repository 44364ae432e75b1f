// The command line's shared pieces (scenarios/cli/cli.hpp).
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/cli/cli.hpp"
#include "locksim/scenarios/command_name.hpp"

namespace fs = std::filesystem;

namespace locksim::cli {

[[noreturn]] void input_error(const std::string& msg) {
  fmt::print(stderr, "{}: error: {}\n", command_name(), msg);
  std::exit(kInput);
}

/// An integer option's check. CLI11 2.1 (Debian 12) converts with strtoull/strtoll in base 0: "-1" wraps
/// around for an unsigned option, "010" is octal, and a number too big for the type saturates silently.
/// This accepts decimal digits only, within [lo, hi], and hands CLI11 the number without leading zeros.
CLI::Validator whole_number(std::uint64_t lo, std::uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        std::uint64_t v = 0;
        const bool digits =
            !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (!digits || ec != std::errc{} || end != s.data() + s.size() || v < lo || v > hi)
          return fmt::format("expected a whole number from {} to {}, not '{}'", lo, hi, s);
        s = std::to_string(v);
        return {};
      },
      fmt::format("{}..{}", lo, hi));
}

CLI::Validator one_of(std::vector<std::string> words) {
  const std::string desc = fmt::format("{}", fmt::join(words, "|"));
  return CLI::Validator(
      [words = std::move(words)](std::string& s) -> std::string {
        if (std::find(words.begin(), words.end(), s) != words.end()) return {};
        const std::string near = nearest(s, words);
        return fmt::format("'{}' is not one of {}{}", s, fmt::join(words, ", "),
                           near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near));
      },
      desc);
}

std::vector<std::string> protocol_names() {
  register_builtin_protocols();
  return ProtocolRegistry::instance().names();
}

void validate_protocols(const std::vector<std::string>& ps) {
  auto names = protocol_names();
  for (const auto& p : ps) {
    if (std::find(names.begin(), names.end(), p) != names.end()) continue;
    std::string near = nearest(p, names);
    input_error(fmt::format("unknown protocol '{}'{}; known: {}", p,
                            near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near),
                            fmt::join(names, ", ")));
  }
}

/// Protocols to run for a scenario: the ones asked for, else the scenario's own list, else all registered.
std::vector<std::string> protocols_for(const Scenario& sc, const std::vector<std::string>& asked) {
  if (!asked.empty()) return asked;
  if (!sc.protocols.empty()) return sc.protocols;
  std::vector<std::string> out;
  for (const auto& [p, v] : sc.expect) out.push_back(p);
  return out.empty() ? protocol_names() : out;
}

bool use_color(bool no_color) {
  return !no_color && isatty(fileno(stdout)) && std::getenv("NO_COLOR") == nullptr;
}

/// Columns for the terminal timeline: $COLUMNS, else the terminal's width, else 0 (the report's default,
/// 100).
int term_width() {
  if (const char* c = std::getenv("COLUMNS")) {
    const int n = std::atoi(c);
    if (n > 0) return std::clamp(n, 60, 400);
  }
  winsize ws{};
  if (isatty(fileno(stdout)) && ioctl(fileno(stdout), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return std::clamp(static_cast<int>(ws.ws_col), 60, 400);
  return 0;
}

TextStyle text_style(bool no_color, bool to_file) {
  return TextStyle{!to_file && use_color(no_color), to_file ? 0 : term_width()};
}

void emit(const std::string& text, const std::string& out_file) {
  if (out_file.empty()) {
    fmt::print("{}", text);
    return;
  }
  std::ofstream f(out_file, std::ios::binary);
  if (!f) input_error(fmt::format("{}: cannot open for writing", out_file));
  f << text;
}

/// Every .toml under the given paths (files or directories, recursively), sorted; the catalog when empty.
std::vector<std::string> scenario_inputs(const std::vector<std::string>& paths) {
  if (paths.empty()) return catalog_names();
  std::vector<std::string> out;
  for (const auto& p : paths) {
    if (fs::is_directory(p)) {
      std::vector<std::string> found;
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file() && e.path().extension() == ".toml") found.push_back(e.path().string());
      std::sort(found.begin(), found.end());
      if (found.empty()) throw InputError(p, 0, "PATH", "no .toml scenario files in this directory");
      out.insert(out.end(), found.begin(), found.end());
    } else {
      out.push_back(p);
    }
  }
  return out;
}

/// A run that stopped at a limit (events, simulated time, mailbox) with no anomaly recorded is inconclusive:
/// its history was cut short wherever the limit fell, with clients still running, so it gets no verdict (a
/// recorded anomaly is unsafe wherever the run stopped). Throws InputError
/// ("FILE: limit: ..."): exit 2. A scenario that means to observe for a fixed time says so with its clients'
/// `give_up_at` (the Jepsen workload does), so its clients finish and the run ends as "done" before
/// `max_time`.
void require_within_limits(const RunOutput& r, const Scenario& sc) {
  if (!r.inconclusive()) return;  // finished, or unsafe wherever it stopped: a recorded anomaly is a verdict
  std::string which;
  switch (r.run.reason) {
    case StopReason::time_limit:
      which = fmt::format("max_time = {} with clients still running", format_time(sc.max_time));
      break;
    case StopReason::event_limit:
      which = fmt::format("max_events = {}", sc.max_events);
      break;
    default:
      which = "a mailbox over its limit (a process flooded with messages)";
      break;
  }
  throw InputError(
      sc.file.empty() ? sc.name : sc.file, 0, "limit",
      fmt::format("{} with {} stopped at {} after {} events at {}: inconclusive, no verdict; raise "
                  "[limits] or shorten the scenario",
                  sc.name, r.protocol, which, r.run.events, format_time(r.run.end)));
}

Cell run_cell(const Scenario& sc, const std::string& p) {
  Cell c;
  c.scenario = sc.name;
  c.protocol = p;
  c.seed = sc.seed;
  auto one = [&](std::uint64_t seed) {
    RunOptions ro;
    ro.keep_trace = false;
    ro.seed = seed;
    RunOutput r = run_scenario(sc, p, ro);
    require_within_limits(r, sc);
    if (r.verdict() == Verdict::unsafe) c.got = Verdict::unsafe;
    for (std::string& w : run_warnings(r))
      if (std::find(c.warnings.begin(), c.warnings.end(), w) == c.warnings.end())
        c.warnings.push_back(std::move(w));
    return r;
  };
  auto it = sc.expect.find(p);
  if (it == sc.expect.end()) {
    one(sc.seed);
    c.got_text = std::string(to_string(c.got));
    return c;
  }
  c.expected = it->second;
  const ExpectationOutcome o = judge_expectation(it->second, sc.seed, one);
  c.met = o.met;
  c.why = o.why;
  c.got_text = o.got;
  c.seed = o.first_seed;
  if (!c.met) {  // what happened in the run that did not meet it, for people (the story needs the trace)
    RunOptions ro;
    ro.seed = c.seed;
    const RunOutput r = run_scenario(sc, p, ro);
    c.story = r.check.safe ? fmt::format("seed {}: no anomaly ({})", c.seed, c.why) : story(r);
  }
  return c;
}

}  // namespace locksim::cli
