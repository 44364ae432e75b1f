// `locksim explore`: a sweep of random fault plans over many seeds, its shards, its progress bar and the
// shrinking of its first failure into a replay file. The engine (scenarios/explore.hpp) runs the worlds; this
// file is the terminal side: arguments, environment, files, the wall clock for the progress bar.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/cli/cli.hpp"
#include "locksim/scenarios/command_name.hpp"
#include "locksim/scenarios/replay.hpp"
#include "locksim/scenarios/shrink.hpp"

namespace locksim::cli {

bool stderr_is_terminal() {
  return isatty(fileno(stderr)) != 0;
}

namespace {

std::string sanitize(std::string s) {
  for (char& c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.' || c == '+'))
      c = '_';
  return s;
}

std::string eta_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<std::uint64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

}  // namespace

ProgressBar::ProgressBar(bool on)
    : on_(on), start_(std::chrono::steady_clock::now()) {}  // wall time: progress bar

void ProgressBar::update(std::size_t done, std::size_t total) {
  if (!on_ || total == 0) return;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();  // wall time: ETA
  const double rate = secs > 0 ? static_cast<double>(done) / secs : 0.0;
  const double eta = rate > 0 ? static_cast<double>(total - done) / rate : NAN;
  constexpr std::size_t kWidth = 30;
  const std::size_t fill = done * kWidth / total;
  fmt::print(stderr, "\r[{}{}] {}/{} {:3}%  {:.0f} runs/s  ETA {}   ", std::string(fill, '#'),
             std::string(kWidth - fill, '.'), done, total, done * 100 / total, rate, eta_text(eta));
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (drawn_) fmt::print(stderr, "\r{}\r", std::string(90, ' '));
}

namespace {

/// A shard number: decimal digits only (no sign, no spaces), at most 2^32 - 1.
std::optional<std::uint32_t> shard_number(std::string_view s) {
  std::uint32_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || s.front() < '0' || s.front() > '9' || ec != std::errc{} || end != s.data() + s.size())
    return std::nullopt;
  return v;
}

}  // namespace

std::pair<std::uint32_t, std::uint32_t> parse_shard(const ShardArgs& a) {
  if (!a.shard.empty() + !a.shard_number.empty() + (a.shards > 0) > 1)
    throw InputError("<command line>", 0, "--shard",
                     "give one of --shard K/N (0-based), --shard-number K/N (1-based) or --shards N");
  if (!a.shard_number.empty()) {
    const std::string_view spec = a.shard_number;
    const auto slash = spec.find('/');
    const auto k = slash == std::string_view::npos ? std::nullopt : shard_number(spec.substr(0, slash));
    const auto n = slash == std::string_view::npos ? std::nullopt : shard_number(spec.substr(slash + 1));
    if (!k || !n || *n == 0 || *k == 0 || *k > *n) {
      throw InputError(
          "<command line>", 0, "--shard-number",
          fmt::format("'{}' is not K/N with 1 <= K <= N (e.g. --shard-number 1/4)", a.shard_number));
    }
    return {*k - 1, *n};
  }
  if (!a.shard.empty()) {
    const std::string_view spec = a.shard;
    const auto slash = spec.find('/');
    const auto k = slash == std::string_view::npos ? std::nullopt : shard_number(spec.substr(0, slash));
    const auto n = slash == std::string_view::npos ? std::nullopt : shard_number(spec.substr(slash + 1));
    if (!k || !n || *n == 0 || *k >= *n) {
      throw InputError("<command line>", 0, "--shard",
                       fmt::format("'{}' is not K/N with 0 <= K < N (e.g. --shard 0/4)", a.shard));
    }
    return {*k, *n};
  }
  if (a.shards > 0) {
    const char* env = std::getenv("JOB_COMPLETION_INDEX");
    if (!env) {
      if (const char* gl = std::getenv("CI_NODE_INDEX")) {  // GitLab parallel: 1..CI_NODE_TOTAL
        const auto k = shard_number(gl);
        if (!k || *k == 0 || *k > a.shards)
          throw InputError("<environment>", 0, "CI_NODE_INDEX",
                           fmt::format("'{}' is not a node index from 1 to {}", gl, a.shards));
        if (const char* total = std::getenv("CI_NODE_TOTAL"); total && shard_number(total) != a.shards)
          throw InputError(
              "<environment>", 0, "CI_NODE_TOTAL",
              fmt::format("'{}' is not --shards {}: the jobs would not cover the seeds", total, a.shards));
        return {*k - 1, a.shards};
      }
      throw InputError("<command line>", 0, "--shards",
                       "--shards N takes the shard index from JOB_COMPLETION_INDEX (Kubernetes, 0-based) or "
                       "CI_NODE_INDEX (GitLab, 1-based), and neither is set (use --shard K/N)");
    }
    const auto k = shard_number(env);
    if (!k || *k >= a.shards) {
      throw InputError("<environment>", 0, "JOB_COMPLETION_INDEX",
                       fmt::format("'{}' is not a shard index below {}", env, a.shards));
    }
    return {*k, a.shards};
  }
  return {0, 1};
}

namespace {

std::string replace_all(std::string s, std::string_view from, const std::string& to) {
  for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

}  // namespace

int cmd_explore(const ExploreArgs& a) {
  const auto mode = parse_nemesis_mode(a.mode);
  if (!mode)
    throw InputError("<command line>", 0, "--mode", fmt::format("'{}' is not within or anything", a.mode));
  if (a.seeds == 0) throw InputError("<command line>", 0, "--seeds", "must be at least 1");
  if (a.first_seed > Scenario::kMaxSeed || a.seeds - 1 > Scenario::kMaxSeed - a.first_seed)
    throw InputError("<command line>", 0, a.first_seed > Scenario::kMaxSeed ? "--first-seed" : "--seeds",
                     fmt::format("--first-seed {} and --seeds {} go past the largest seed, {} (2^63 - 1: "
                                 "replay files hold seeds as TOML integers)",
                                 a.first_seed, a.seeds, Scenario::kMaxSeed));
  if (a.max_faults == 0 || a.max_faults > ExploreArgs::kMaxFaults)
    throw InputError("<command line>", 0, "--max-faults",
                     fmt::format("must be from 1 to {}, not {}", ExploreArgs::kMaxFaults, a.max_faults));
  if (a.jobs > ExploreArgs::kMaxJobs)
    throw InputError(
        "<command line>", 0, "--jobs",
        fmt::format("must be from 0 (one per core) to {}, not {}", ExploreArgs::kMaxJobs, a.jobs));
  if (a.resume && a.out.empty()) throw InputError("<command line>", 0, "--resume", "needs --out FILE.jsonl");
  const auto [shard, shards] = parse_shard({a.shard, a.shard_number, a.shards});

  Scenario sc = load_scenario(a.scenario);
  register_builtin_protocols();
  const auto names = ProtocolRegistry::instance().names();
  if (std::find(names.begin(), names.end(), a.protocol) == names.end()) {
    const std::string near = nearest(a.protocol, names);
    throw InputError(
        "<command line>", 0, "--protocol",
        fmt::format("unknown protocol '{}'{}; known: {}", a.protocol,
                    near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), fmt::join(names, ", ")));
  }
  ExploreOptions opts;
  opts.protocol = a.protocol;
  opts.nemesis.mode = *mode;
  opts.nemesis.max_faults = a.max_faults;
  opts.keep_scripted = a.keep_scripted;

  SweepInfo sweep;
  sweep.first_seed = a.first_seed;
  sweep.last_seed = a.first_seed + (a.seeds - 1);
  sweep.shard = shard;
  sweep.shards = shards;
  ExploreSummary summary;
  const std::string out_path = replace_all(a.out, "{shard}", std::to_string(shard));
  std::vector<std::uint64_t> done;  // seeds already in a resumed --out file
  if (a.resume && std::filesystem::exists(out_path)) {
    // One line at a time: a file of millions of runs is not held in memory. Its seeds come in ascending
    // order (lines are written in seed order), so a duplicate is found in the sorted list; a file that is
    // not in order (concatenated by hand) costs a set for the seeds out of order.
    std::optional<std::uint64_t> cut;
    std::set<std::uint64_t> unordered;
    for_each_jsonl(
        out_path,
        [&](const RunRecord& r) {
          if (r.scenario != sc.name || r.protocol != a.protocol || r.mode != a.mode) {
            throw InputError(out_path, 0, "--resume",
                             fmt::format("the file holds runs of {} × {} (mode {}), not {} × {} (mode {})",
                                         r.scenario, r.protocol, r.mode, sc.name, a.protocol, a.mode));
          }
          if (r.sweep && *r.sweep != sweep) {
            throw InputError(
                out_path, 0, "--resume",
                fmt::format(
                    "the file holds shard {} of {} of seeds {}..{}, not shard {} of {} of seeds {}..{}",
                    r.sweep->shard, r.sweep->shards, r.sweep->first_seed, r.sweep->last_seed, sweep.shard,
                    sweep.shards, sweep.first_seed, sweep.last_seed));
          }
          if (done.empty() || r.seed > done.back()) {
            done.push_back(r.seed);
          } else if (std::binary_search(done.begin(), done.end(), r.seed) ||
                     !unordered.insert(r.seed).second) {
            return;  // counted once
          }
          summary.add(r);
        },
        &cut);
    if (!unordered.empty()) {
      done.insert(done.end(), unordered.begin(), unordered.end());
      std::sort(done.begin(), done.end());
    }
    if (cut) {
      // Drop a half-written last line (or finish a complete one) so appended lines start on a line of their
      // own.
      const auto size = std::filesystem::file_size(out_path);
      if (*cut < size) {
        std::filesystem::resize_file(out_path, *cut);
        fmt::print(stderr, "{}: {}: dropped a partial last line (a killed run); that seed runs again\n",
                   command_name(), out_path);
      } else {
        std::ofstream(out_path, std::ios::app | std::ios::binary) << "\n";
      }
    }
  }
  const std::uint64_t resumed = done.size();
  const SeedSequence seeds(a.first_seed, a.seeds, shard, shards, std::move(done));

  FILE* out = nullptr;
  if (!out_path.empty()) {
    out = std::fopen(out_path.c_str(), a.resume ? "ab" : "wb");
    if (!out)
      throw InputError(out_path, 0, "--out",
                       fmt::format("cannot open for writing: {}", std::strerror(errno)));
  }
  const std::uint32_t jobs = a.jobs ? a.jobs : std::max(1u, std::thread::hardware_concurrency());
  fmt::print(stderr, "{} explore {} -p {} --mode {}: {} run(s) on {} thread(s){}{}\n", command_name(),
             sc.name, a.protocol, a.mode, seeds.size(), jobs,
             shards > 1 ? fmt::format(", shard {}/{}", shard, shards) : "",
             resumed ? fmt::format(", {} already in {}", resumed, out_path) : "");

  ProgressBar bar(!a.no_progress && stderr_is_terminal());
  const auto t0 = std::chrono::steady_clock::now();  // wall time: the throughput line, outside every world
  try {
    explore_seeds(
        sc, opts, seeds, jobs,
        [&](const RunRecord& run) {
          summary.add(run);
          if (out) {
            RunRecord r = run;
            r.sweep = sweep;
            const std::string line = r.to_json() + "\n";
            if (std::fwrite(line.data(), 1, line.size(), out) != line.size() || std::fflush(out) != 0) {
              throw InputError(out_path, 0, "--out", fmt::format("write failed: {}", std::strerror(errno)));
            }
          }
        },
        [&](std::uint64_t done_runs, std::uint64_t total) { bar.update(done_runs, total); });
  } catch (...) {
    bar.finish();
    if (out) std::fclose(out);
    throw;
  }
  bar.finish();
  if (out) std::fclose(out);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();  // wall time: throughput

  fmt::print("{}", summary.render());
  if (seeds.size() > 0) {
    fmt::print(stderr, "  throughput  {:.0f} runs/s ({} runs in {:.1f}s wall, {} thread(s))\n",
               static_cast<double>(seeds.size()) / std::max(secs, 1e-9), seeds.size(), secs, jobs);
  }
  if (summary.failures() == 0) return 0;

  const std::uint64_t first = *summary.failing.begin();
  const std::string again = fmt::format("{} explore {} -p {} --mode {} --first-seed {} --seeds 1",
                                        command_name(), a.scenario, a.protocol, a.mode, first);
  fmt::print("  reproduce   {}\n", again);
  if (a.shrink) {
    const NemesisTargets targets = nemesis_targets(sc, a.protocol);
    const FaultPlan plan = make_fault_plan(sc, targets, first, opts.nemesis);
    ShrinkOptions so;
    so.max_runs = a.shrink_runs;
    so.keep_scripted = a.keep_scripted;
    ShrinkResult sr = shrink_failure(sc, a.protocol, plan, first, so);
    if (!sr.failed_at_start) {
      fmt::print("  shrink      seed {} did not fail again (a run that threw?): nothing to shrink\n", first);
      return 1;
    }
    Scenario rs = sr.scenario;
    rs.seed = first;
    rs.name = sanitize(fmt::format("{}-{}-seed{}", sc.name, a.protocol, first));
    rs.expect.clear();
    rs.protocols.clear();
    ReplayInfo info;
    info.protocol = a.protocol;
    info.expected_trace_hash = sr.trace_hash;
    info.verdict = sr.verdict;
    info.found_by = again;
    info.story = describe(sr.plan);
    std::string path = replace_all(a.replay_out, "{shard}", std::to_string(shard));
    if (path.empty()) {
      const std::filesystem::path dir =
          out_path.empty() ? std::filesystem::path(".") : std::filesystem::path(out_path).parent_path();
      path = (dir.empty() ? std::filesystem::path(".") : dir) / fmt::format("replay-{}.toml", rs.name);
      path = std::filesystem::path(path).lexically_normal().string();
    }
    write_text_file(path, scenario_to_toml(rs, &info));
    fmt::print("  shrunk      {} ingredient(s) and {} client(s) -> {} and {} ({} runs):\n", sr.size_before,
               sr.clients_before, sr.plan.size(), sr.base.clients.size(), sr.runs);
    std::string story = describe(sr.plan);
    for (std::size_t p = 0, nl; p < story.size(); p = nl + 1) {
      nl = story.find('\n', p);
      if (nl == std::string::npos) nl = story.size();
      fmt::print("                {}\n", story.substr(p, nl - p));
    }
    fmt::print("  replay      {} replay {}\n", command_name(), path);
  }
  return 1;
}

}  // namespace locksim::cli
