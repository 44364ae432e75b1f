// The locksim command line: its commands and options (CLI11), as the library entry point locksim::cli_main
// (include/locksim/cli.hpp) that both the shipped binary and a user's own binary call. Exit codes: 0 as
// expected (`run`: safe), 1 a violation or an expectation not met, 2 a usage or input error.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <limits>

#include <filesystem>

#include "locksim/cli.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/cli/cli.hpp"
#include "locksim/scenarios/command_name.hpp"
#include "locksim/scenarios/loader/schema.hpp"

namespace locksim {

using namespace locksim::cli;

namespace {

constexpr std::uint64_t kU32Max = std::numeric_limits<std::uint32_t>::max();

/// The command a parse error belongs to (the app itself when none was reached).
CLI::App* command_of(CLI::App& app) {
  for (CLI::App* s : app.get_subcommands({}))
    if (s->parsed()) return s;
  return &app;
}

/// An option the command does not have: "unknown option '--seeed' (did you mean '--seed'?)"; else the first
/// argument it did not expect.
std::string extras_message(CLI::App& cmd) {
  const std::vector<std::string> extra = cmd.remaining();
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd.get_options()) {
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : o->get_snames()) names.push_back("-" + s);
  }
  for (const std::string& a : extra) {
    if (a.size() < 2 || a[0] != '-') continue;
    const std::string name = a.substr(0, a.find('='));
    const std::string near = nearest(name, names);
    return fmt::format("unknown option '{}'{}", name,
                       near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near));
  }
  if (extra.empty()) return "unexpected arguments";
  return fmt::format("unexpected argument{} {}", extra.size() > 1 ? "s" : "",
                     fmt::format("'{}'", fmt::join(extra, "' '")));
}

/// CLI11's errors in our words: help and --version print and exit 0; anything else is "locksim: error: ..."
/// with where to look, exit 2.
int parse_error(CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == 0) return app.exit(e) == 0 ? kOk : kInput;  // --help, --version
  CLI::App* cmd = command_of(app);
  const std::string what =
      dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr ? extras_message(*cmd) : std::string(e.what());
  const std::string& me = command_name();
  const std::string where = cmd == &app ? me + " --help" : fmt::format("{} {} --help", me, cmd->get_name());
  fmt::print(stderr, "{}: error: {}\nrun `{}` for the options\n", me, what, where);
  return kInput;
}

}  // namespace

int cli_main(int argc, char** argv, const CliHooks& hooks) {
  if (argc > 0 && argv[0] != nullptr && *argv[0] != '\0')
    set_command_name(std::filesystem::path(argv[0]).filename().string());
  const std::string& me = command_name();
  CLI::App app{"locksim: deterministic simulation and chaos testing of distributed locks", me};
  app.set_version_flag("--version", me == "locksim" ? fmt::format("locksim {}", LOCKSIM_VERSION)
                                                    : fmt::format("{} (locksim {})", me, LOCKSIM_VERSION));
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
      ->check(one_of({"text", "json", "html", "junit"}));
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
  matrix->add_option("--format", mformat, "table format")->check(one_of({"text", "md"}));
  bool mby_resource = false;
  matrix->add_flag(
      "--by-resource", mby_resource,
      "one table per kind of protected resource (store, checkpoint-table, …), each headed by what "
      "that resource promises");

  std::vector<std::string> cpaths;
  std::string cjunit;
  bool cno_color = false;
  auto* check = app.add_subcommand("check", "Check every scenario's expected verdicts (what CI runs)");
  check->add_option("PATH", cpaths, "scenario files or directories (default: the catalog)");
  check->add_option("--junit", cjunit,
                    "also write JUnit XML to FILE (one test case per scenario × protocol; written even when "
                    "a file is bad)");
  check->add_flag("--no-color", cno_color, "plain text even on a terminal");

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

  std::vector<std::string> reality_args;
  auto* reality = app.add_subcommand(
      "reality",
      "The scenario against real servers on this machine, beside the simulation (redis-server, etcd)");
  reality->footer(
      "usage: locksim reality SCENARIO -p PROTOCOL | --all [SCENARIO...]   (reality --help for options)");
  reality->prefix_command();
  reality->set_help_flag();  // `reality --help` goes to reality's own parser, which lists its options

  // Chaos exploration (scenarios/explore.hpp holds the implementations).
  ExploreArgs xa;
  auto* explore =
      app.add_subcommand("explore", "Random fault plans over many seeds; shrink the first failure");
  explore->add_option("SCENARIO", xa.scenario, "catalog name or path to a .toml file")->required();
  explore->add_option("-p,--protocol", xa.protocol, "protocol to explore")->required();
  explore->add_option("--seeds", xa.seeds, "number of seeds (runs)")
      ->transform(whole_number(1, Scenario::kMaxSeed));
  explore->add_option("--first-seed", xa.first_seed, "first seed")
      ->transform(whole_number(0, Scenario::kMaxSeed));
  explore
      ->add_option("-j,--jobs", xa.jobs, "threads (default or 0: one per core); results do not depend on it")
      ->transform(whole_number(0, ExploreArgs::kMaxJobs));
  explore->add_option("--shard", xa.shard, "K/N: run only shard K (0-based) of N");
  explore->add_option("--shard-number", xa.shard_number,
                      "K/N: run only shard K (1-based, as a GitHub matrix or GitLab numbers jobs) of N");
  explore
      ->add_option("--shards", xa.shards,
                   "N shards, the index K from JOB_COMPLETION_INDEX (Kubernetes, 0-based) or CI_NODE_INDEX "
                   "(GitLab, 1-based)")
      ->transform(whole_number(1, kU32Max));
  explore->add_option("-o,--out", xa.out,
                      "JSONL file, one line per run in seed order ({shard} = shard index)");
  explore->add_flag("--resume", xa.resume, "skip the seeds already in --out and append the rest");
  explore->add_option("--mode", xa.mode, "within: the protocol's timing assumptions; anything: anything goes")
      ->check(one_of({"within", "anything"}));
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
  bool allow_partial = false;
  merge->add_flag("--allow-partial", allow_partial,
                  "exit 0 even when shards or seeds of the sweep are missing (they are still reported)");

  EnvelopeArgs ea;
  auto* envelope = app.add_subcommand(
      "envelope", "Where a protocol turns unsafe over one or two scenario fields (docs/envelope.md)");
  add_envelope_options(*envelope, ea);

  RiskArgs ra;
  auto* risk = app.add_subcommand(
      "risk",
      "How often it breaks: unsafe runs per acquisition and per hour, with a 95% interval (docs/risk.md)");
  add_risk_options(*risk, ra);

  // A typo in the subcommand gets the nearest valid one.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> subs;
    for (auto* s : app.get_subcommands({})) subs.push_back(s->get_name());
    if (std::find(subs.begin(), subs.end(), argv[1]) == subs.end()) {
      std::string near = nearest(argv[1], subs);
      fmt::print(stderr, "{0}: error: unknown command '{1}'{2}\nrun `{0} --help` for the list\n", me, argv[1],
                 near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near));
      return kInput;
    }
  }
  // An option of locksim itself (not of a command) that it does not have.
  if (argc > 1 && argv[1][0] == '-') {
    const std::vector<std::string> own = {"--help", "-h", "--version"};
    const std::string a = argv[1];
    if (std::find(own.begin(), own.end(), a) == own.end()) {
      const std::string near = nearest(a, own);
      fmt::print(stderr, "{0}: error: unknown option '{1}'{2}\nrun `{0} --help` for the commands\n", me, a,
                 near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near));
      return kInput;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return parse_error(app, e);
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
    if (matrix->parsed()) return cmd_matrix(mscen, mprot, mformat, mby_resource);
    if (check->parsed()) return cmd_check(cpaths, cjunit, cno_color);
    if (demo->parsed()) return cmd_demo(dno_color);
    if (explore->parsed()) return cmd_explore(xa);
    if (replay_cmd->parsed()) {
      return cmd_replay(replay_file, [&](const RunOutput& r, const Scenario& sc) {
        return text_report(r, sc, text_style(rno_color));
      });
    }
    if (merge->parsed()) return cmd_merge(merge_files, allow_partial);
    if (envelope->parsed()) return cmd_envelope(ea);
    if (risk->parsed()) return cmd_risk(ra);
    if (reality->parsed()) {
      if (!hooks.reality)
        input_error("this build has no `reality`: install libhiredis-dev (Debian) and configure again");
      std::vector<std::string> rest = reality->remaining();
      std::vector<char*> args{argv[0]};
      for (auto& a : rest) args.push_back(a.data());
      return hooks.reality(static_cast<int>(args.size()), args.data());
    }
    if (bench->parsed()) {
      if (!hooks.bench)
        input_error("this build has no benchmarks (configure locksim with -DLOCKSIM_BENCH=ON)");
      std::vector<std::string> rest = bench->remaining();
      std::vector<char*> args{argv[0]};
      for (auto& a : bench_args) args.push_back(a.data());
      for (auto& a : rest) args.push_back(a.data());
      return hooks.bench(static_cast<int>(args.size()), args.data());
    }
  } catch (const InputError& e) {
    fmt::print(stderr, "{}: error: {}\n", me, e.what());
    return kInput;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: internal error: {}\n", me, e.what());
    return kInput;
  }
  return kOk;
}

}  // namespace locksim
