// `locksim merge`: the combined summary of `explore --out` JSONL files, and whether the sweep they came from
// is complete: every shard present, no seed missing inside a shard, no file cut short.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <tuple>
#include <unordered_map>

#include "locksim/scenarios/cli/cli.hpp"
#include "locksim/scenarios/command_name.hpp"
#include "locksim/scenarios/replay.hpp"

namespace locksim::cli {
namespace {

/// The seeds of one sweep that came in, by shard.
struct SweepSeen {
  SweepInfo info;
  std::map<std::uint32_t, std::vector<std::uint64_t>> seeds;  // shard -> its seeds (distinct)
};

/// Seeds first, first + step, ... (n of them), as a person reads them.
std::string seed_range(std::uint64_t first, std::uint64_t n, std::uint32_t step) {
  if (n == 1) return fmt::format("{}", first);
  const std::uint64_t last = first + (n - 1) * step;
  return step == 1 ? fmt::format("{}..{} ({} seeds)", first, last, n)
                   : fmt::format("{}..{} ({} seeds, one in {})", first, last, n, step);
}

/// What is missing from one sweep, one line per missing shard or shard with gaps; empty when complete.
std::vector<std::string> missing_parts(SweepSeen& s, std::uint64_t* missing_seeds) {
  std::vector<std::string> out;
  const SweepInfo& w = s.info;
  for (std::uint32_t k = 0; k < w.shards; ++k) {
    const std::uint64_t expected = w.seeds_in(k);
    if (expected == 0) continue;
    const std::string rerun =
        w.shards > 1 ? fmt::format("--shard {}/{}, --shard-number {}/{}, JOB_COMPLETION_INDEX={}", k,
                                   w.shards, k + 1, w.shards, k)
                     : std::string("the whole sweep");
    auto it = s.seeds.find(k);
    if (it == s.seeds.end()) {
      *missing_seeds += expected;
      out.push_back(fmt::format("shard {} of {} missing: no file has its {} seed(s) ({})", k, w.shards,
                                expected, rerun));
      continue;
    }
    std::vector<std::uint64_t>& v = it->second;
    std::sort(v.begin(), v.end());
    // Walk the shard's seeds in order: a jump of more than one step is a gap.
    std::vector<std::string> gaps;
    std::uint64_t gap_seeds = 0, j = 0;
    const std::uint64_t base = w.first_seed + k;
    const auto gap = [&](std::uint64_t from, std::uint64_t to) {  // indices [from, to)
      gap_seeds += to - from;
      if (gaps.size() < 6) gaps.push_back(seed_range(base + from * w.shards, to - from, w.shards));
    };
    for (std::uint64_t seed : v) {
      const std::uint64_t idx = (seed - base) / w.shards;
      if (idx > j) gap(j, idx);
      j = idx + 1;
    }
    if (j < expected) gap(j, expected);
    if (gap_seeds == 0) continue;
    *missing_seeds += gap_seeds;
    out.push_back(fmt::format(
        "shard {} of {}: {} of its {} seed(s) missing: {}{} (re-run it with --resume: {})", k, w.shards,
        gap_seeds, expected, fmt::join(gaps, ", "), gaps.size() == 6 ? ", ..." : "", rerun));
  }
  return out;
}

}  // namespace

int cmd_merge(const std::vector<std::string>& files, bool allow_partial) {
  if (files.empty()) throw InputError("<command line>", 0, "FILES", "no JSONL files given");
  // Files are read one line at a time; what stays in memory is each group's summary and, to find seeds
  // that come twice and seeds that are missing, one entry per run (the hash map is looked up only: its order
  // never reaches output).
  struct Group {
    ExploreSummary summary;
    std::unordered_map<std::uint64_t, std::uint64_t> seen;  // seed -> trace hash
    std::map<std::tuple<std::uint64_t, std::uint64_t, std::uint32_t>, SweepSeen> sweeps;  // (first, last, N)
    std::uint64_t without_sweep = 0;  // lines written before runs carried their sweep
  };
  std::map<std::string, Group> groups;
  std::uint64_t duplicates = 0, conflicts = 0;
  std::vector<std::string> truncated;
  for (const std::string& f : files) {
    std::optional<std::uint64_t> cut;
    for_each_jsonl(
        f,
        [&](const RunRecord& r) {
          Group& g = groups[fmt::format("{}\x1f{}\x1f{}", r.scenario, r.protocol, r.mode)];
          auto [it, fresh] = g.seen.emplace(r.seed, r.trace_hash);
          if (!fresh) {
            ++duplicates;
            if (it->second != r.trace_hash) {
              ++conflicts;
              fmt::print(stderr,
                         "{}: seed {} of {} × {} has two different trace hashes ({} and {}): not "
                         "deterministic\n",
                         command_name(), r.seed, r.scenario, r.protocol, hash_text(it->second),
                         hash_text(r.trace_hash));
            }
            return;
          }
          g.summary.add(r);
          if (!r.sweep) {
            ++g.without_sweep;
            return;
          }
          SweepSeen& s = g.sweeps[{r.sweep->first_seed, r.sweep->last_seed, r.sweep->shards}];
          s.info = *r.sweep;
          s.seeds[r.sweep->shard].push_back(r.seed);
        },
        &cut);
    if (cut && *cut < std::filesystem::file_size(f)) truncated.push_back(f);
  }
  if (groups.empty()) {
    // Nothing was checked: a CI job that merges the output of shards that all died must not pass.
    throw InputError(files.front(), 0, "FILES",
                     files.size() == 1 ? "no runs in this file"
                                       : fmt::format("no runs in any of the {} files", files.size()));
  }
  std::uint64_t failures = 0, runs = 0;
  bool incomplete = !truncated.empty();
  for (auto& [key, g] : groups) {
    fmt::print("{}", g.summary.render());
    failures += g.summary.failures();
    runs += g.summary.runs;
    for (auto& [k, s] : g.sweeps) {
      std::uint64_t missing = 0;
      const std::vector<std::string> parts = missing_parts(s, &missing);
      const std::uint64_t all = s.info.last_seed - s.info.first_seed + 1;
      const std::string what =
          fmt::format("seeds {}..{} in {} shard(s)", s.info.first_seed, s.info.last_seed, s.info.shards);
      if (parts.empty()) {
        fmt::print("  sweep       {}: complete\n", what);
        continue;
      }
      incomplete = true;
      fmt::print("  INCOMPLETE  {}: {} of {} seed(s) missing\n", what, missing, all);
      for (const std::string& p : parts) fmt::print("              {}\n", p);
    }
    if (g.sweeps.size() > 1)
      fmt::print("  note        runs of {} different sweeps (seed ranges or shard counts) merged\n",
                 g.sweeps.size());
    if (g.without_sweep)
      fmt::print(
          "  note        {} run(s) carry no shard and seed range (an older locksim): not checked for gaps\n",
          g.without_sweep);
  }
  for (const std::string& f : truncated)
    fmt::print(
        "  INCOMPLETE  {}: its last line was cut short and is skipped (a killed run; re-run its shard with "
        "--resume)\n",
        f);
  if (groups.size() > 1)
    fmt::print("total: {} run(s), {} failing, in {} group(s)\n", runs, failures, groups.size());
  if (duplicates) fmt::print("{} duplicate seed(s) counted once\n", duplicates);
  if (incomplete) {
    if (allow_partial)
      fmt::print("partial sweep accepted (--allow-partial)\n");
    else
      fmt::print("the sweep is incomplete: what is missing was not checked (--allow-partial to accept it)\n");
  }
  return failures || conflicts || (incomplete && !allow_partial) ? 1 : 0;
}

}  // namespace locksim::cli
