// The locksim command line. Exit codes: 0 as expected / safe, 1 violation or expectation not met, 2 input
// error.
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>

#include "reports/report.hpp"
#include "scenarios/catalog.hpp"
#include "scenarios/expectation.hpp"
#include "scenarios/explore.hpp"
#include "scenarios/loader/schema.hpp"
#include "scenarios/runner.hpp"

#if defined(LOCKSIM_HAVE_BENCH)
#include "bench/bench.hpp"
#endif

namespace fs = std::filesystem;
using namespace locksim;

namespace {

constexpr int kOk = 0, kFail = 1, kInput = 2;
constexpr std::uint64_t kU32Max = std::numeric_limits<std::uint32_t>::max();

[[noreturn]] void input_error(const std::string& msg) {
  fmt::print(stderr, "locksim: error: {}\n", msg);
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

TextStyle text_style(bool no_color, bool to_file = false) {
  return TextStyle{!to_file && use_color(no_color), to_file ? 0 : term_width()};
}

/// `run --step`: one trace event at a time, each followed by a wait for Enter on stdin ('q' + Enter quits; at
/// the end of stdin the rest runs without waiting). Returns false when the user quit.
bool step_through(const RunOutput& r, const Scenario& sc, TextStyle style) {
  fmt::print("{} with {}: {} events. Enter = next event, q + Enter = quit.\n\n", sc.name, r.protocol,
             r.trace.size());
  bool wait = true;
  for (std::size_t i = 0; i < r.trace.size(); ++i) {
    fmt::print("[{:>{}}/{}] {}\n", i + 1, std::to_string(r.trace.size()).size(), r.trace.size(),
               describe_event(r, r.trace[i], style));
    if (!wait || i + 1 == r.trace.size()) continue;
    std::fflush(stdout);
    std::string line;
    if (!std::getline(std::cin, line)) {
      wait = false;  // no more input: run to the end
      continue;
    }
    if (line == "q" || line == "Q") {
      fmt::print("stopped after event {} of {}.\n", i + 1, r.trace.size());
      return false;
    }
  }
  fmt::print("\n");
  return true;
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
      if (found.empty()) input_error(fmt::format("{}: no .toml scenario files in this directory", p));
      out.insert(out.end(), found.begin(), found.end());
    } else {
      out.push_back(p);
    }
  }
  return out;
}

/// One scenario × protocol judged against its expectation (over its seeds, when it names a range).
struct Cell {
  std::string scenario, protocol;
  Verdict got = Verdict::safe;  ///< unsafe if any run was
  std::string got_text;         ///< "unsafe", or "unsafe in 3 of 20 seed(s) run"
  std::optional<Expectation> expected;
  bool met = true;
  std::string why;  ///< when not met
  std::uint64_t seed = 0;
  bool ok() const { return met; }
};

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
  return c;
}

int cmd_list() {
  fmt::print("scenarios:\n");
  for (const auto& e : catalog()) {
    Scenario sc = load_scenario(std::string(e.name));
    fmt::print("  {:<34} {}\n  {:<34} source: {}\n", sc.name, sc.title, "", sc.source);
  }
  fmt::print("\nprotocols:\n");
  auto& reg = ProtocolRegistry::instance();
  for (const auto& n : protocol_names()) {
    fmt::print("  {:<14} {}\n", n, reg.summary(n));
    for (const Variant& v : reg.make(n)->variants())
      fmt::print("  {:<14}   variant {}: {}\n", "", v.name, v.doc);
  }
  fmt::print("\nresource (store) variants:\n");
  for (const Variant& v : resource_variants()) fmt::print("  {:<22} {}\n", v.name, v.doc);
  return kOk;
}

/// `run --compare P1,P2,...`: the identical fault plan against several protocols, side by side.
int cmd_compare(const std::string& scenario, const std::vector<std::string>& ps,
                std::optional<std::uint64_t> seed, const std::string& out_file, bool no_color) {
  if (ps.size() < 2)
    input_error("--compare needs at least two protocols, e.g. --compare redlock,lease+fence");
  validate_protocols(ps);
  Scenario sc = load_scenario(scenario);
  std::vector<RunOutput> runs;
  bool any_unsafe = false;
  for (const auto& p : ps) {
    RunOptions ro;
    ro.seed = seed;
    runs.push_back(run_scenario(sc, p, ro));
    any_unsafe |= !runs.back().check.safe;
  }
  emit(compare_report(runs, sc, text_style(no_color, !out_file.empty())), out_file);
  return any_unsafe ? kFail : kOk;
}

int cmd_run(const std::string& scenario, const std::vector<std::string>& ps_in,
            std::optional<std::uint64_t> seed, const std::string& report, const std::string& out_file,
            bool no_color, bool trace, bool step) {
  Scenario sc = load_scenario(scenario);
  auto ps = protocols_for(sc, ps_in);
  validate_protocols(ps);
  if (report == "html" && ps.size() > 1)
    input_error(
        fmt::format("--report html draws one run; choose one protocol with -p (this scenario runs {})",
                    fmt::join(ps, ", ")));
  bool any_unsafe = false;
  std::string text;
  std::vector<std::string> jsons;
  std::vector<JUnitCase> cases;
  for (const auto& p : ps) {
    RunOptions ro;
    ro.seed = seed;
    const WallTimer timer;  // JUnit durations only
    RunOutput r = run_scenario(sc, p, ro);
    require_within_limits(r, sc);
    any_unsafe |= !r.check.safe;
    if (step && !step_through(r, sc, text_style(no_color))) return r.check.safe ? kOk : kFail;
    if (report == "html") {
      text = html_report(r, sc);
    } else if (report == "junit") {
      auto exp = sc.expect.find(p);
      JUnitCase jc{sc.name,
                   p,
                   exp == sc.expect.end() ? "" : exp->second.describe(),
                   std::string(to_string(r.verdict())),
                   timer.seconds(),
                   ""};
      if (!r.check.safe)
        jc.message = story(r) + fmt::format("replay: locksim run {} -p {} --seed {}", scenario, p, r.seed);
      cases.push_back(std::move(jc));
    } else if (report == "json") {
      jsons.push_back(json_report(r, sc));
    } else {
      if (!text.empty()) text += "\n" + std::string(78, '-') + "\n\n";
      text += text_report(r, sc, text_style(no_color, !out_file.empty()));
      if (trace)
        for (const auto& ev : r.trace)
          text += Trace::format(ev, r.name_of(ev.proc), r.name_of(ev.peer)) + "\n";
    }
  }
  if (report == "junit") text = junit_report(cases);
  if (report == "json") {
    if (jsons.size() == 1)
      text = jsons[0];
    else {
      text = "[\n";
      for (std::size_t i = 0; i < jsons.size(); ++i) text += jsons[i] + (i + 1 < jsons.size() ? ",\n" : "\n");
      text += "]\n";
    }
  }
  emit(text, out_file);
  return any_unsafe ? kFail : kOk;
}

int cmd_matrix(const std::vector<std::string>& scenarios_in, const std::vector<std::string>& ps_in,
               const std::string& format) {
  validate_protocols(ps_in);
  std::vector<Scenario> scs;
  for (const auto& s : scenario_inputs(scenarios_in)) scs.push_back(load_scenario(s));
  std::vector<std::string> cols = ps_in;
  if (cols.empty()) {
    for (const auto& sc : scs)
      for (const auto& p : protocols_for(sc, {}))
        if (std::find(cols.begin(), cols.end(), p) == cols.end()) cols.push_back(p);
  }
  std::size_t w0 = 8;
  for (const auto& sc : scs) w0 = std::max(w0, sc.name.size());
  const bool md = format == "md";
  std::string out;
  auto row = [&](const std::string& first, const std::vector<std::string>& cells) {
    if (md) {
      out += "| " + first + " |";
      for (const auto& c : cells) out += " " + c + " |";
    } else {
      out += fmt::format("{:<{}}", first, w0);
      for (std::size_t i = 0; i < cells.size(); ++i)
        out += fmt::format("  {:<{}}", cells[i], std::max<std::size_t>(cols[i].size(), 10));
    }
    out += "\n";
  };
  row("scenario", cols);
  if (md) {
    out += "|---|";
    for (std::size_t i = 0; i < cols.size(); ++i) out += "---|";
    out += "\n";
  }
  int mismatches = 0;
  for (const auto& sc : scs) {
    std::vector<std::string> cells;
    auto mine = protocols_for(sc, {});
    for (const auto& p : cols) {
      if (ps_in.empty() && std::find(mine.begin(), mine.end(), p) == mine.end()) {
        cells.push_back("—");
        continue;
      }
      Cell c = run_cell(sc, p);
      if (!c.ok()) ++mismatches;
      std::string mark = !c.expected ? "" : c.ok() ? " ✓" : " ✗";
      cells.push_back(std::string(to_string(c.got)) + mark);
    }
    row(sc.name, cells);
  }
  out += fmt::format("\n✓ = as expected, ✗ = NOT as expected; {} mismatch(es)\n", mismatches);
  fmt::print("{}", out);
  return mismatches ? kFail : kOk;
}

int cmd_check(const std::vector<std::string>& paths, const std::string& junit_file) {
  int passed = 0, failed = 0;
  std::vector<JUnitCase> cases;
  for (const auto& s : scenario_inputs(paths)) {
    Scenario sc = load_scenario(s);
    if (sc.expect.empty()) {
      fmt::print("SKIP  {}: no expected verdicts\n", sc.name);
      continue;
    }
    for (const auto& [p, e] : sc.expect) {
      const WallTimer timer;  // JUnit durations only
      Cell c = run_cell(sc, p);
      (c.ok() ? passed : failed)++;
      JUnitCase jc{sc.name, p, e.describe(), c.got_text, timer.seconds(), "", c.met};
      if (!c.ok())
        jc.message = fmt::format("expected {}, got {}: {}; replay: locksim run {} -p {} --seed {}",
                                 e.describe(), c.got_text, c.why, s, p, c.seed);
      cases.push_back(std::move(jc));
      fmt::print(
          "{}  {} × {}: {} (expected {}){}\n", c.ok() ? "PASS" : "FAIL", sc.name, p, c.got_text, e.describe(),
          c.ok() ? ""
                 : fmt::format("\n      {}; replay: locksim run {} -p {} --seed {}", c.why, s, p, c.seed));
    }
  }
  fmt::print("{} passed, {} failed\n", passed, failed);
  if (!junit_file.empty()) emit(junit_report(cases), junit_file);
  return failed ? kFail : kOk;
}

int cmd_demo(bool no_color) {
  const std::string name = "kleppmann-gc-pause";
  Scenario sc = load_scenario(name);
  const TextStyle style = text_style(no_color);
  fmt::print("{}\n{}\n\n", sc.title, sc.teaches);
  int mismatches = 0;
  std::string summary;
  for (const auto& p : protocols_for(sc, {})) {
    RunOutput r = run_scenario(sc, p);
    fmt::print("{}\n", std::string(78, '='));
    fmt::print("{}", text_report(r, sc, style));
    auto exp = sc.expect.find(p);
    const bool ok = exp == sc.expect.end() || unmet_in_run(exp->second, r).empty();
    if (!ok) ++mismatches;
    summary += fmt::format("  {:<12} {:<7} {}\n", p, to_string(r.verdict()),
                           exp == sc.expect.end() ? ""
                           : ok                   ? "(as the literature says)"
                                                  : "(NOT as expected)");
  }
  fmt::print("{}\nverdicts for {}:\n{}", std::string(78, '='), name, summary);
  fmt::print("\nnext: `locksim run {} -p redis --report json`, `locksim matrix`, `locksim list`\n", name);
  return mismatches ? kFail : kOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"locksim: deterministic simulation and chaos testing of distributed locks"};
  app.set_version_flag("--version", std::string("locksim ") + LOCKSIM_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);

  auto* list = app.add_subcommand("list", "List catalog scenarios and registered protocols");

  std::string explain_field;
  auto* explain =
      app.add_subcommand("explain", "What a scenario-file table or field means: type, default, doc");
  explain->add_option("FIELD", explain_field,
                      "a table (client), a field (client.work, fault.after.nth), or nothing");

  std::string scenario, report = "text", out_file;
  std::vector<std::string> protocols;
  std::optional<std::uint64_t> seed;
  bool no_color = false, trace = false, step = false;
  auto* run = app.add_subcommand("run", "Run a scenario against one or more protocols and judge it");
  run->add_option("SCENARIO", scenario, "catalog name (see `locksim list`) or path to a .toml file")
      ->required();
  run->add_option("-p,--protocol", protocols,
                  "protocol(s) to run (default: those the scenario has expectations for)");
  run->add_option("--seed", seed, "seed (default: the scenario's)")
      ->transform(whole_number(0, Scenario::kMaxSeed));
  run->add_option("--report", report,
                  "report format: text (terminal), json, html (one page with a space-time "
                  "diagram; use -o FILE), junit (one test case per protocol)")
      ->check(CLI::IsMember({"text", "json", "html", "junit"}));
  run->add_option("-o,--output", out_file, "write the report to FILE");
  run->add_flag("--no-color", no_color, "plain text even on a terminal");
  run->add_flag("--trace", trace, "append the full event trace (text report)");
  std::vector<std::string> compare;
  run->add_option(
         "--compare", compare,
         "run the identical fault plan against these protocols (comma-separated) and show where their "
         "histories part")
      ->delimiter(',');
  run->add_flag("--step", step, "print the run one event at a time, waiting for Enter (q + Enter quits)");

  std::vector<std::string> mscen, mprot;
  std::string mformat = "text";
  auto* matrix = app.add_subcommand("matrix", "Verdict table: scenarios × protocols, against expectations");
  matrix->add_option("SCENARIO", mscen, "scenarios (default: the catalog)");
  matrix->add_option("-p,--protocol", mprot, "protocols (default: every protocol a scenario expects)");
  matrix->add_option("--format", mformat, "table format")->check(CLI::IsMember({"text", "md"}));

  std::vector<std::string> cpaths;
  std::string cjunit;
  auto* check = app.add_subcommand("check", "Check every scenario's expected verdicts (what CI runs)");
  check->add_option("PATH", cpaths, "scenario files or directories (default: the catalog)");
  check->add_option("--junit", cjunit,
                    "also write JUnit XML to FILE (one test case per scenario × protocol)");

  bool dno_color = false;
  auto* demo =
      app.add_subcommand("demo", "Kleppmann's GC-pause scenario against every protocol, with verdicts");
  demo->add_flag("--no-color", dno_color, "plain text even on a terminal");

  std::vector<std::string> bench_args;
  auto* bench = app.add_subcommand("bench", "Performance figures (not a test): kernel, churn, scale");
  // No positional: a positional would swallow option values ("--clients 3" losing its 3). As a prefix
  // command, the name and everything after it go, in order, to remaining() and on to run_bench.
  bench->footer("usage: locksim bench [kernel|churn|scale [OPTIONS...]]   (NAME --help for its options)");
  bench->prefix_command();

  // Chaos exploration (scenarios/explore.hpp holds the implementations).
  ExploreArgs xa;
  auto* explore =
      app.add_subcommand("explore", "Random fault plans over many seeds; shrink the first failure");
  explore->add_option("SCENARIO", xa.scenario, "catalog name or path to a .toml file")->required();
  explore->add_option("-p,--protocol", xa.protocol, "protocol to explore")->required();
  explore->add_option("--seeds", xa.seeds, "number of seeds (runs)")
      ->transform(whole_number(1, Scenario::kMaxSeed + 1));
  explore->add_option("--first-seed", xa.first_seed, "first seed")
      ->transform(whole_number(0, Scenario::kMaxSeed));
  explore
      ->add_option("-j,--jobs", xa.jobs, "threads (default or 0: one per core); results do not depend on it")
      ->transform(whole_number(0, ExploreArgs::kMaxJobs));
  explore->add_option("--shard", xa.shard, "K/N: run only shard K (0-based) of N");
  explore->add_option("--shards", xa.shards, "N shards, the index K from JOB_COMPLETION_INDEX (Kubernetes)")
      ->transform(whole_number(1, kU32Max));
  explore->add_option("-o,--out", xa.out,
                      "JSONL file, one line per run in seed order ({shard} = shard index)");
  explore->add_flag("--resume", xa.resume, "skip the seeds already in --out and append the rest");
  explore->add_option("--mode", xa.mode, "within: the protocol's timing assumptions; anything: anything goes")
      ->check(CLI::IsMember({"within", "anything"}));
  explore->add_option("--max-faults", xa.max_faults, "most timed faults in one plan")
      ->transform(whole_number(1, ExploreArgs::kMaxFaults));
  explore->add_flag("--keep-faults", xa.keep_scripted,
                    "keep the scenario's own faults and add the nemesis's");
  explore->add_flag("!--no-shrink", xa.shrink, "do not shrink the first failure into a replay file");
  explore->add_option("--shrink-runs", xa.shrink_runs, "run budget for shrinking")
      ->transform(whole_number(0, kU32Max));
  explore->add_option("--replay-out", xa.replay_out, "where to write the replay file of the first failure");
  explore->add_flag("--no-progress", xa.no_progress, "no progress bar even on a terminal");

  std::string replay_file;
  bool rno_color = false;
  auto* replay_cmd =
      app.add_subcommand("replay", "Re-run a replay file; fail loudly if its trace hash differs");
  replay_cmd->add_option("FILE", replay_file, "replay file written by `locksim explore`")->required();
  replay_cmd->add_flag("--no-color", rno_color, "plain text even on a terminal");

  std::vector<std::string> merge_files;
  auto* merge = app.add_subcommand("merge", "Combined summary of `explore --out` JSONL files (shards)");
  merge->add_option("FILES", merge_files, "JSONL files")->required();

  // A typo in the subcommand gets the nearest valid one.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> subs;
    for (auto* s : app.get_subcommands({})) subs.push_back(s->get_name());
    if (std::find(subs.begin(), subs.end(), argv[1]) == subs.end()) {
      std::string near = nearest(argv[1], subs);
      fmt::print(stderr, "locksim: error: unknown command '{}'{}\nrun `locksim --help` for the list\n",
                 argv[1], near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near));
      return kInput;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kOk : kInput;
  }
  try {
    if (list->parsed()) return cmd_list();
    if (explain->parsed()) {
      try {
        fmt::print("{}", explain_schema(explain_field));
      } catch (const std::invalid_argument& e) {
        input_error(e.what());
      }
      return kOk;
    }
    if (run->parsed() && !compare.empty()) return cmd_compare(scenario, compare, seed, out_file, no_color);
    if (run->parsed()) return cmd_run(scenario, protocols, seed, report, out_file, no_color, trace, step);
    if (matrix->parsed()) return cmd_matrix(mscen, mprot, mformat);
    if (check->parsed()) return cmd_check(cpaths, cjunit);
    if (demo->parsed()) return cmd_demo(dno_color);
    if (explore->parsed()) return cmd_explore(xa);
    if (replay_cmd->parsed()) {
      return cmd_replay(replay_file, [&](const RunOutput& r, const Scenario& sc) {
        return text_report(r, sc, text_style(rno_color));
      });
    }
    if (merge->parsed()) return cmd_merge(merge_files);
    if (bench->parsed()) {
#if defined(LOCKSIM_HAVE_BENCH)
      std::vector<std::string> rest = bench->remaining();
      std::vector<char*> args{argv[0]};
      for (auto& a : bench_args) args.push_back(a.data());
      for (auto& a : rest) args.push_back(a.data());
      return run_bench(static_cast<int>(args.size()), args.data());
#else
      input_error("this build has no benchmarks (configure with -DLOCKSIM_BENCH=ON)");
#endif
    }
  } catch (const InputError& e) {
    fmt::print(stderr, "locksim: error: {}\n", e.what());
    return kInput;
  } catch (const std::exception& e) {
    fmt::print(stderr, "locksim: internal error: {}\n", e.what());
    return kInput;
  }
  return kOk;
}
