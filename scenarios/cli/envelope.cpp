// `locksim envelope`: the safety envelope over one or two fields, its shards and their merge, the progress
// bar, and the files (HTML, CSV, JSON, JSONL, the scenarios of unsafe points). The engine is
// scenarios/envelope.hpp; the picture reports/envelope_html.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "locksim/reports/envelope_html.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/cli/cli.hpp"
#include "locksim/scenarios/command_name.hpp"
#include "locksim/scenarios/envelope.hpp"
#include "locksim/scenarios/loader.hpp"

namespace fs = std::filesystem;

namespace locksim::cli {

/// The text of a catalog scenario or a file, and the file name messages use.
std::pair<std::string, std::string> scenario_text(const std::string& name_or_path) {
  for (const CatalogEntry& e : catalog())
    if (e.name == name_or_path) return {std::string(e.text), std::string(e.path)};
  (void)load_scenario(name_or_path);  // the loader's messages for a missing file or a typo in a name
  std::ifstream in(name_or_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return {ss.str(), name_or_path};
}

void write_file(const std::string& path, const std::string& text, const char* option) {
  std::ofstream f(path, std::ios::binary);
  if (!f || !(f << text) || !f.flush())
    throw InputError(path, 0, option, fmt::format("cannot write: {}", std::strerror(errno)));
}

std::uint32_t jobs_of(std::uint32_t j) {
  if (j > ExploreArgs::kMaxJobs)
    throw InputError("<command line>", 0, "--jobs",
                     fmt::format("must be from 0 (one per core) to {}, not {}", ExploreArgs::kMaxJobs, j));
  return j ? j : std::max(1u, std::thread::hardware_concurrency());
}

namespace {

/// Where the scenarios of unsafe points go: --points-dir, else beside the first output file.
std::string points_dir(const EnvelopeArgs& a) {
  if (!a.points_dir.empty()) return a.points_dir;
  for (const std::string* f : {&a.html, &a.json, &a.csv})
    if (!f->empty()) {
      fs::path p(*f);
      return (p.parent_path() / (p.stem().string() + "-points")).lexically_normal().string();
    }
  return {};
}

int write_outputs(const EnvelopeArgs& a, const EnvelopeResult& r) {
  const std::string dir = points_dir(a);
  // The scenario of every point with an unsafe run, written once, and the command that replays that run.
  std::set<std::string> written;
  const PointCommand command = [&](const std::string& protocol, const EnvelopePoint& p) -> std::string {
    if (dir.empty() || !p.first_unsafe_seed) return {};
    const std::string file = (fs::path(dir) / point_file_name(r.spec, p.at)).string();
    if (written.insert(file).second) {
      fs::create_directories(dir);
      write_file(file, vary_text(r.spec.toml, r.spec.file, r.spec.axes, p.at), "--points-dir");
    }
    return fmt::format("{} run {} -p {} --seed {}", command_name(), file, protocol, *p.first_unsafe_seed);
  };
  if (!a.csv.empty()) write_file(a.csv, envelope_csv(r, command), "--csv");
  if (!a.json.empty()) write_file(a.json, envelope_json(r, command), "--json");
  if (!a.html.empty()) write_file(a.html, envelope_html(r, command), "--output");
  bool unsafe = false;
  for (const ProtocolEnvelope& pe : r.protocols) {
    fmt::print("{}\n", pe.summary);
    for (const EnvelopePoint& p : pe.grid) unsafe = unsafe || p.is_unsafe();
  }
  for (const std::string* f : {&a.html, &a.csv, &a.json})
    if (!f->empty()) fmt::print(stderr, "wrote {}\n", *f);
  if (!written.empty())
    fmt::print(stderr, "wrote {} scenario file(s) of unsafe points under {}\n", written.size(), dir);
  return unsafe ? kFail : kOk;
}

int cmd_envelope_merge(const EnvelopeArgs& a) {
  if (a.inputs.empty())
    throw InputError("<command line>", 0, "FILES", "--merge needs the JSONL files of the shards");
  const EnvelopeMerge m = merge_envelope_jsonl(a.inputs, scenario_text);
  if (!m.missing.empty()) {
    fmt::print("INCOMPLETE  the envelope's grid: {} point(s) came in\n", m.points);
    for (const std::string& s : m.missing) fmt::print("            {}\n", s);
    fmt::print("the envelope is incomplete: nothing was refined or written\n");
    return kFail;
  }
  if (m.duplicates) fmt::print(stderr, "{} duplicate point(s) counted once\n", m.duplicates);
  EnvelopeResult r = *m.result;
  r.spec.refine = a.refine;
  const std::uint32_t jobs = jobs_of(a.jobs);
  ProgressBar bar(!a.no_progress && stderr_is_terminal());
  refine_envelope(r, jobs, [&](std::uint64_t d, std::uint64_t t) { bar.update(d, t); });
  bar.finish();
  return write_outputs(a, r);
}

}  // namespace

void add_envelope_options(CLI::App& cmd, EnvelopeArgs& a) {
  constexpr std::uint64_t kU32Max = 0xffff'ffffULL;
  cmd.add_option("SCENARIO", a.inputs, "catalog name or path to a .toml file (with --merge: the JSONL files)")
      ->required();
  cmd.add_option("-p,--protocol", a.protocols, "protocol(s), comma-separated (default: the scenario's)")
      ->delimiter(',');
  cmd.add_option(
      "--vary", a.vary,
      "FIELD=LO..HI: a numeric field by its path (lock.ttl, fault[0].duration, network.delay.mean, "
      "protocol.drift_factor, client[1].work); durations with units (1s..60s); once or twice");
  cmd.add_option("--set", a.set, "FIELD=VALUE: fix a field for the whole envelope (limits.max_time=200s)");
  cmd.add_option("--steps", a.steps, "grid points along each field")
      ->transform(whole_number(2, kMaxEnvelopeSteps));
  cmd.add_option("--seeds", a.seeds, "seeds per point (unsafe if any is; the fraction is kept)")
      ->transform(whole_number(1, kMaxEnvelopeSeeds));
  cmd.add_option("--first-seed", a.first_seed, "first seed of every point (default: the scenario's)")
      ->transform(whole_number(0, Scenario::kMaxSeed));
  cmd.add_option("--refine", a.refine, "bisections between each safe and unsafe neighbour")
      ->transform(whole_number(0, kMaxEnvelopeRefine));
  cmd.add_option("-o,--output", a.html, "the picture: a self-contained HTML page");
  cmd.add_option("--csv", a.csv, "every point as CSV");
  cmd.add_option("--json", a.json, "every point, the boundary and its fit as JSON");
  cmd.add_option("--jsonl", a.jsonl,
                 "the grid's points as JSONL with their shard, for --merge ({shard} = index)");
  cmd.add_option(
      "--points-dir", a.points_dir,
      "where the scenario files of unsafe points go (default: beside the first output, NAME-points)");
  cmd.add_option("-j,--jobs", a.jobs, "threads (default or 0: one per core); results do not depend on it")
      ->transform(whole_number(0, ExploreArgs::kMaxJobs));
  cmd.add_option("--shard", a.shard.shard, "K/N: run only the grid points of shard K (0-based) of N");
  cmd.add_option("--shard-number", a.shard.shard_number,
                 "K/N: shard K (1-based, a GitHub matrix, GitLab) of N");
  cmd.add_option(
         "--shards", a.shard.shards,
         "N shards, K from JOB_COMPLETION_INDEX (Kubernetes, 0-based) or CI_NODE_INDEX (GitLab, 1-based)")
      ->transform(whole_number(1, kU32Max));
  cmd.add_flag("--merge", a.merge,
               "merge the --jsonl files of shards, refine the boundary and write the outputs");
  cmd.add_flag("--no-progress", a.no_progress, "no progress bar even on a terminal");
}

int cmd_envelope(const EnvelopeArgs& a) {
  if (a.merge) return cmd_envelope_merge(a);
  if (a.inputs.size() != 1)
    throw InputError(
        "<command line>", 0, "SCENARIO",
        a.inputs.empty() ? "give one scenario" : "give one scenario (several files are for --merge)");
  if (a.vary.empty() || a.vary.size() > 2)
    throw InputError("<command line>", 0, "--vary", "give one or two --vary FIELD=LO..HI");
  EnvelopeSpec spec;
  spec.scenario = a.inputs[0];
  std::tie(spec.toml, spec.file) = scenario_text(spec.scenario);
  spec.sets = a.set;
  spec.toml = set_fields(spec.toml, spec.file, spec.sets);
  const Scenario sc = load_scenario_text(spec.toml, spec.file);
  for (const std::string& v : a.vary) spec.axes.push_back(parse_vary(v, spec.toml, spec.file));
  spec.protocols = protocols_for(sc, a.protocols);
  validate_protocols(spec.protocols);
  spec.steps = a.steps;
  spec.seeds = a.seeds;
  spec.refine = a.refine;
  spec.first_seed = a.first_seed.value_or(sc.seed);
  std::tie(spec.shard, spec.shards) = parse_shard(a.shard);
  if (spec.shards > 1 && a.jsonl.empty())
    throw InputError(
        "<command line>", 0, "--shard",
        "a shard writes its grid points with --jsonl FILE ({shard} = its index); `locksim envelope "
        "--merge FILES` refines and draws them");
  if (spec.shards > 1 && !(a.html.empty() && a.csv.empty() && a.json.empty()))
    throw InputError("<command line>", 0, "--shard",
                     "a shard's points are a part of the grid: -o, --csv and --json come from --merge");
  const std::uint64_t runs = spec.grid_points() * spec.protocols.size() * spec.seeds;
  constexpr std::uint64_t kMaxRuns = 100'000'000;
  if (runs > kMaxRuns)
    throw InputError("<command line>", 0, "--steps",
                     fmt::format("{} point(s) × {} protocol(s) × {} seed(s) is {} runs, more than {}: fewer "
                                 "--steps or --seeds (--refine sharpens the boundary instead)",
                                 spec.grid_points(), spec.protocols.size(), spec.seeds, runs, kMaxRuns));
  const std::uint32_t jobs = jobs_of(a.jobs);
  fmt::print(stderr, "{} envelope {}: {} point(s) × {} protocol(s) × {} seed(s) on {} thread(s){}\n",
             command_name(), sc.name, spec.grid_points(), spec.protocols.size(), spec.seeds, jobs,
             spec.shards > 1 ? fmt::format(", shard {}/{}", spec.shard, spec.shards) : "");
  ProgressBar bar(!a.no_progress && stderr_is_terminal());
  EnvelopeResult r;
  try {
    r = run_envelope(spec, jobs, [&](std::uint64_t d, std::uint64_t t) { bar.update(d, t); });
  } catch (...) {
    bar.finish();
    throw;
  }
  bar.finish();
  if (!a.jsonl.empty()) {
    std::string path = a.jsonl;
    if (const auto p = path.find("{shard}"); p != std::string::npos)
      path.replace(p, 7, std::to_string(spec.shard));
    write_file(path, envelope_jsonl(r), "--jsonl");
    fmt::print(stderr, "wrote {}\n", path);
  }
  if (spec.shards > 1) {
    fmt::print("shard {} of {}: {} grid point(s) run; merge the shards with `{} envelope --merge FILES`\n",
               spec.shard, spec.shards, r.protocols.empty() ? 0 : r.protocols.front().grid.size(),
               command_name());
    return kOk;
  }
  return write_outputs(a, r);
}

}  // namespace locksim::cli
