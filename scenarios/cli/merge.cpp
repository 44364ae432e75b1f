// `locksim merge`: the combined summary of `explore --out` JSONL files, and whether the sweep they came from
// is complete.
#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <unordered_map>

#include "scenarios/cli/cli.hpp"
#include "scenarios/replay.hpp"
#include "scenarios/command_name.hpp"

namespace locksim::cli {

int cmd_merge(const std::vector<std::string>& files) {
  if (files.empty()) throw InputError("<command line>", 0, "FILES", "no JSONL files given");
  // Files are read one line at a time; what stays in memory is each group's summary and, to find seeds
  // that come twice, one (seed, trace hash) entry per run (looked up only: its order never reaches output).
  struct Group {
    ExploreSummary summary;
    std::unordered_map<std::uint64_t, std::uint64_t> seen;  // seed -> trace hash
  };
  std::map<std::string, Group> groups;
  std::uint64_t duplicates = 0, conflicts = 0;
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
        },
        &cut);
    if (cut && *cut < std::filesystem::file_size(f))
      fmt::print(stderr, "{}: {}: skipped a partial last line (a killed run)\n", command_name(), f);
  }
  if (groups.empty()) {
    // Nothing was checked: a CI job that merges the output of shards that all died must not pass.
    throw InputError(files.front(), 0, "FILES",
                     files.size() == 1 ? "no runs in this file"
                                       : fmt::format("no runs in any of the {} files", files.size()));
  }
  std::uint64_t failures = 0, runs = 0;
  for (const auto& [key, g] : groups) {
    fmt::print("{}", g.summary.render());
    failures += g.summary.failures();
    runs += g.summary.runs;
  }
  if (groups.size() > 1)
    fmt::print("total: {} run(s), {} failing, in {} group(s)\n", runs, failures, groups.size());
  if (duplicates) fmt::print("{} duplicate seed(s) counted once\n", duplicates);
  return failures || conflicts ? 1 : 0;
}

}  // namespace locksim::cli
