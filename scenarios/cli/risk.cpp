// `locksim risk`: how often a scenario's own distributions make a protocol unsafe, per acquisition and per
// hour, with importance sampling of the tails; its shards and their merge, the progress bar and the proposal
// scenario that replays every weighted run. The engine is scenarios/risk.hpp.
#include <fmt/format.h>

#include <filesystem>

#include "locksim/scenarios/cli/cli.hpp"
#include "locksim/scenarios/command_name.hpp"
#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/risk.hpp"

namespace fs = std::filesystem;

namespace locksim::cli {

namespace {

constexpr const char* kCmd = "<command line>";

/// The report, and the proposal file its replay commands name (written when a tilted estimate has unsafe
/// runs to replay).
int report(const RiskArgs& a, const RiskResult& r, bool complete) {
  std::string proposal_file;
  if (r.tilted() && r.sums.unsafe > 0) {
    proposal_file =
        a.proposal.empty() ? fs::path(r.spec.scenario).stem().string() + "-proposal.toml" : a.proposal;
    write_file(proposal_file, r.proposal_toml, "--proposal");
  }
  const std::string text = risk_report(r, [&](std::uint64_t seed) {
    return fmt::format("{} run {} -p {} --seed {}", command_name(),
                       proposal_file.empty() ? r.spec.scenario : proposal_file, r.spec.protocol, seed);
  });
  fmt::print("{}", text);
  if (!proposal_file.empty())
    fmt::print(stderr, "wrote {} (the scenario with the tilted distributions the runs drew from)\n",
               proposal_file);
  if (!complete) return kFail;
  return r.sums.unsafe > 0 ? kFail : kOk;
}

int cmd_risk_merge(const RiskArgs& a) {
  if (a.inputs.empty()) throw InputError(kCmd, 0, "FILES", "--merge needs the JSONL files of the shards");
  const RiskMerge m = merge_risk_jsonl(a.inputs);
  if (m.duplicates) fmt::print(stderr, "{} duplicate shard line(s) counted once\n", m.duplicates);
  if (!m.missing.empty()) {
    fmt::print("INCOMPLETE  {} of {} shard(s) came in\n", m.result->spec.shards - m.missing.size(),
               m.result->spec.shards);
    for (const std::string& s : m.missing) fmt::print("            {}\n", s);
    if (!a.allow_partial) {
      fmt::print("the estimate is incomplete (--allow-partial estimates from the shards present)\n");
      return kFail;
    }
  }
  const int rc = report(a, *m.result, true);
  return m.missing.empty() ? rc : (a.allow_partial ? rc : kFail);
}

}  // namespace

void add_risk_options(CLI::App& cmd, RiskArgs& a) {
  constexpr std::uint64_t kU32Max = 0xffff'ffffULL;
  cmd.add_option("SCENARIO", a.inputs, "catalog name or path to a .toml file (with --merge: the JSONL files)")
      ->required();
  cmd.add_option("-p,--protocol", a.protocol, "the protocol (one)");
  cmd.add_option("--hours", a.hours,
                 "simulated hours of operation to sample (runs = H / the simulated time of a run, from the "
                 "pilot)");
  cmd.add_option("--acquisitions", a.acquisitions,
                 "acquisitions to sample (runs = N / the grants of a run, from the pilot)")
      ->transform(whole_number(1, 1'000'000'000'000ULL));
  cmd.add_option("--runs", a.runs, "runs to sample")->transform(whole_number(1, kMaxRiskRuns));
  cmd.add_option("--tilt", a.tilt,
                 "auto (default): the tail of each pareto/exponential/lognormal fault duration past the TTL "
                 "made as likely as not, then one cross-entropy step; none: plain Monte Carlo; or "
                 "fault[K].duration.alpha=A (pareto), .mean=D (exponential), .median=D (lognormal)");
  cmd.add_option("--first-seed", a.first_seed, "seed of the first run (default: the scenario's)")
      ->transform(whole_number(0, Scenario::kMaxSeed - kPilotSeedOffset - kMaxRiskRuns));
  cmd.add_option("--pilot", a.pilot, "pilot runs (sizing, the cross-entropy step)")
      ->transform(whole_number(10, 100'000));
  cmd.add_option(
      "--proposal", a.proposal,
      "where the tilted scenario goes, which the replay commands run (default: NAME-proposal.toml)");
  cmd.add_option("-j,--jobs", a.jobs, "threads (default or 0: one per core); results do not depend on it")
      ->transform(whole_number(0, ExploreArgs::kMaxJobs));
  cmd.add_option("--shard", a.shard.shard, "K/N: run only the runs i = K mod N (0-based K)");
  cmd.add_option("--shard-number", a.shard.shard_number,
                 "K/N: shard K (1-based, a GitHub matrix, GitLab) of N");
  cmd.add_option(
         "--shards", a.shard.shards,
         "N shards, K from JOB_COMPLETION_INDEX (Kubernetes, 0-based) or CI_NODE_INDEX (GitLab, 1-based)")
      ->transform(whole_number(1, kU32Max));
  cmd.add_option("--jsonl", a.jsonl, "this shard's sums as one JSONL line, for --merge ({shard} = index)");
  cmd.add_flag("--merge", a.merge, "merge the --jsonl lines of shards into one estimate");
  cmd.add_flag("--allow-partial", a.allow_partial,
               "with --merge: estimate from the shards present (a missing shard is then no failure)");
  cmd.add_flag("--no-progress", a.no_progress, "no progress bar even on a terminal");
}

int cmd_risk(const RiskArgs& a) {
  if (a.merge) return cmd_risk_merge(a);
  if (a.inputs.size() != 1)
    throw InputError(
        kCmd, 0, "SCENARIO",
        a.inputs.empty() ? "give one scenario" : "give one scenario (several files are for --merge)");
  RiskSpec spec;
  spec.scenario = a.inputs[0];
  std::tie(spec.toml, spec.file) = scenario_text(spec.scenario);
  const Scenario sc = load_scenario_text(spec.toml, spec.file);
  if (a.protocol.empty()) throw InputError(kCmd, 0, "--protocol", "give the protocol: -p redlock");
  spec.protocol = a.protocol;
  spec.budget.hours = a.hours;
  spec.budget.acquisitions = a.acquisitions;
  spec.budget.runs = a.runs;
  if (a.tilt.empty() || (a.tilt.size() == 1 && a.tilt[0] == "auto")) {
    spec.mode = TiltMode::automatic;
  } else if (a.tilt.size() == 1 && a.tilt[0] == "none") {
    spec.mode = TiltMode::none;
  } else {
    for (const std::string& t : a.tilt)
      if (t == "auto" || t == "none")
        throw InputError(kCmd, 0, "--tilt", fmt::format("'{}' stands alone: not beside other --tilt", t));
    spec.mode = TiltMode::given;
    spec.tilts = a.tilt;
  }
  spec.first_seed = a.first_seed.value_or(sc.seed);
  if (spec.first_seed > Scenario::kMaxSeed - kPilotSeedOffset - kMaxRiskRuns)
    throw InputError(spec.file, 0, "seed", "too large a seed for risk's seed ranges: give --first-seed");
  spec.pilot = a.pilot;
  std::tie(spec.shard, spec.shards) = parse_shard(a.shard);
  if (spec.shards > 1 && a.jsonl.empty())
    throw InputError(
        kCmd, 0, "--shard",
        fmt::format("a shard writes its sums with --jsonl FILE ({{shard}} = its index); `{} risk "
                    "--merge FILES` estimates from them",
                    command_name()));
  const std::uint32_t jobs = jobs_of(a.jobs);
  fmt::print(stderr, "{} risk {} -p {} on {} thread(s){}\n", command_name(), sc.name, spec.protocol, jobs,
             spec.shards > 1 ? fmt::format(", shard {}/{}", spec.shard, spec.shards) : "");
  ProgressBar bar(!a.no_progress && stderr_is_terminal());
  RiskResult r;
  try {
    r = run_risk(spec, jobs, [&](std::uint64_t d, std::uint64_t t) { bar.update(d, t); });
  } catch (...) {
    bar.finish();
    throw;
  }
  bar.finish();
  if (!a.jsonl.empty()) {
    std::string path = a.jsonl;
    if (const auto p = path.find("{shard}"); p != std::string::npos)
      path.replace(p, 7, std::to_string(spec.shard));
    write_file(path, risk_jsonl(r), "--jsonl");
    fmt::print(stderr, "wrote {}\n", path);
  }
  if (spec.shards > 1) {
    fmt::print("shard {} of {}: {} of {} run(s), {} unsafe; merge the shards with `{} risk --merge FILES`\n",
               spec.shard, spec.shards, r.sums.runs, r.runs, r.sums.unsafe, command_name());
    return kOk;
  }
  return report(a, r, true);
}

}  // namespace locksim::cli
