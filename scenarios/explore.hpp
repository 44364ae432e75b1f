#pragma once
/// Chaos exploration: many seeds, one world per seed, each with its own nemesis plan (scenarios/nemesis.hpp);
/// a JSONL line per run written in seed order as runs finish; a summary with a confidence interval; shrinking
/// of the first failure into a replay file. The commands that drive it (`locksim explore`, `replay`, `merge`)
/// are in scenarios/cli/: the engine holds no terminal code and never reads the wall clock.
///
/// Threads: worlds run on `jobs` threads, one world per thread at a time; nothing is shared but read-only
/// inputs and the ordered output queue (one mutex). Results do not depend on `jobs`: a seed's run depends on
/// the seed only and lines are written in seed order.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "locksim/scenarios/nemesis.hpp"
#include "locksim/scenarios/runner.hpp"

namespace locksim {

/// The sweep a run belongs to: seeds first_seed..last_seed cut into `shards` shards (shard k, 0-based, runs
/// first_seed + k + j * shards). Every JSONL line carries it so `merge` can tell a complete sweep from one
/// with shards or seeds missing.
struct SweepInfo {
  std::uint64_t first_seed = 0, last_seed = 0;
  std::uint32_t shard = 0, shards = 1;
  bool operator==(const SweepInfo&) const = default;
  /// How many seeds shard k has.
  std::uint64_t seeds_in(std::uint32_t k) const {
    const std::uint64_t count = last_seed - first_seed + 1;
    return k < count ? (count - k - 1) / shards + 1 : 0;
  }
  /// The shard a seed of the sweep belongs to.
  std::uint32_t shard_of(std::uint64_t seed) const {
    return static_cast<std::uint32_t>((seed - first_seed) % shards);
  }
};

/// One run of a sweep: what a JSONL line holds. No wall-clock value ever goes in (lines are reproducible).
struct RunRecord {
  std::string scenario, protocol, mode;
  std::uint64_t seed = 0;
  bool safe = true;
  std::string
      error;  ///< non-empty: the run threw (a bug in a protocol or the simulator); counts as a failure
  /// No anomaly, but the run stopped at a limit with its history cut short: neither safe nor unsafe.
  bool inconclusive = false;
  std::uint32_t violations = 0;                    ///< anomalies of every kind
  std::map<std::string, std::uint32_t> anomalies;  ///< by kind (kinds with none absent)
  std::uint32_t overlaps = 0;
  std::optional<std::int64_t> slack_ns;  ///< CheckResult::slack
  std::uint64_t trace_hash = 0;
  std::uint64_t events = 0;
  std::int64_t end_ns = 0;
  std::string stop;  ///< why the world stopped (StopReason)
  std::uint32_t faults = 0;
  std::string mix;  ///< SwarmMix::describe()
  /// The sweep this run is part of (absent in lines written by locksim before 0.2 and by explore_one alone).
  std::optional<SweepInfo> sweep;

  bool failed() const { return !safe || !error.empty(); }
  /// One line of JSON, no newline. Keys in a fixed order.
  std::string to_json() const;
  /// Parses a line written by to_json. Throws std::invalid_argument saying what is wrong.
  static RunRecord from_json(std::string_view line);
};

struct ExploreOptions {
  std::string protocol;
  NemesisOptions nemesis;
  bool keep_scripted = false;  ///< keep the scenario's own faults and add the nemesis plan after them
};

/// The plan and the run of one seed.
RunRecord explore_one(const Scenario& sc, const NemesisTargets& targets, std::uint64_t seed,
                      const ExploreOptions& opts);

/// The seeds of one sweep, computed, not stored (a sweep of a billion seeds costs no memory for them): shard
/// `shard` (0-based) of `shards` of first + i for i in [0, count), that is first + shard + j * shards, in
/// that order, without the `done` seeds (a resumed sweep; seeds outside the sweep are ignored). The caller
/// makes sure first + count - 1 does not overflow.
class SeedSequence {
 public:
  SeedSequence(std::uint64_t first, std::uint64_t count, std::uint32_t shard = 0, std::uint32_t shards = 1,
               std::vector<std::uint64_t> done = {});
  /// How many seeds are left to run.
  std::uint64_t size() const { return all_ - skipped_.size(); }
  /// The i-th seed left to run (i < size()).
  std::uint64_t operator[](std::uint64_t i) const;

 private:
  std::uint64_t first_;  // first + shard
  std::uint64_t step_;   // shards
  std::uint64_t all_;    // seeds in the shard, done or not
  /// For the k-th skipped index s_k (ascending), s_k - k: the i-th seed left is index i + (how many of
  /// these are <= i).
  std::vector<std::uint64_t> skipped_;
};

/// Runs `seeds` on `jobs` threads. `sink` gets every record in the order of `seeds` (called under the output
/// lock, from whichever thread completed the prefix). Memory stays bounded whatever the number of seeds:
/// finished runs wait for the ones before them in a window of `window` runs (0: 256 per thread), and a
/// thread that gets that far ahead waits. `progress(done, total)` is called from the calling thread about
/// five times a second while runs are going (never from a world). Rethrows the first InputError.
void explore_seeds(const Scenario& sc, const ExploreOptions& opts, const SeedSequence& seeds,
                   std::uint32_t jobs, const std::function<void(const RunRecord&)>& sink,
                   const std::function<void(std::uint64_t, std::uint64_t)>& progress = {},
                   std::uint64_t window = 0);

/// Wilson score interval for k successes in n trials (z = 1.96: 95 %). {0, 0} for n = 0.
std::pair<double, double> wilson_interval(std::uint64_t k, std::uint64_t n, double z = 1.96);

/// Counts of a sweep (or of many JSONL files of the same scenario × protocol × mode).
struct ExploreSummary {
  std::string scenario, protocol, mode;
  std::uint64_t runs = 0, unsafe = 0, errors = 0;
  std::uint64_t inconclusive = 0;  ///< runs with no anomaly that stopped at a limit (not counted safe)
  std::map<std::string, std::uint64_t> anomalies;  ///< anomalies by kind over every run
  std::optional<std::int64_t> min_slack_ns;
  std::uint64_t min_slack_seed = 0;
  /// Whether the run of min_slack_seed was unsafe: a slack of exactly 0 is then a stale write that arrived
  /// at the same instant as the first newer one and was taken after it (a line crossed at a tie).
  bool min_slack_unsafe = false;
  std::set<std::uint64_t> failing;  ///< the smallest failing seeds (at most kKeepFailing)
  std::optional<std::uint64_t> seed_min, seed_max;
  static constexpr std::size_t kKeepFailing = 10;

  void add(const RunRecord& r);
  std::uint64_t failures() const { return unsafe + errors; }
  /// The summary as a person reads it (several lines).
  std::string render() const;
};

/// Reads a JSONL file one line at a time (memory: one line), calling `fn` with each record. A last line cut
/// short (a killed run) is skipped and reported through `truncated_at` (the byte offset where the complete
/// lines end); any other bad line is an InputError naming file and line.
void for_each_jsonl(const std::string& path, const std::function<void(const RunRecord&)>& fn,
                    std::optional<std::uint64_t>* truncated_at = nullptr);
/// for_each_jsonl into a vector (for small files).
std::vector<RunRecord> read_jsonl(const std::string& path,
                                  std::optional<std::uint64_t>* truncated_at = nullptr);

}  // namespace locksim
