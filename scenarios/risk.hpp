#pragma once
/// How often does it break? `locksim risk` runs a scenario many times, each run one world with a fresh seed,
/// its pauses, delays and work times drawn from the scenario's own distributions, and estimates the
/// probability of an unsafe run (the checker's verdict) per acquisition and per hour of operation, with a 95%
/// interval and the most common stories of the unsafe runs.
///
/// Rare events by importance sampling: the duration of a fault whose distribution has a tail (pareto,
/// exponential, lognormal) is drawn from a heavier-tailed member of the same family (the proposal), written
/// into the scenario's text, so the world draws it from its own seeded stream and `locksim run PROPOSAL.toml
/// --seed S` replays the run exactly. Each run is weighted by the likelihood ratio of every tilted draw; the
/// weights are summed as fixed-point integers (scenarios/risk_sum.hpp), so the estimate is byte-identical for
/// any --jobs, shard split and merge order. The engine holds no terminal code and never reads the wall clock.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "locksim/scenarios/risk_sum.hpp"
#include "locksim/scenarios/scenario.hpp"
#include "locksim/sim/distribution.hpp"

namespace locksim {

/// One tilted fault duration: the scenario's distribution and the proposal drawn instead.
struct RiskTilt {
  std::size_t fault = 0;   ///< index in Scenario::faults
  std::string field;       ///< the proposal's parameter: "fault[0].duration.alpha" (.mean, .median)
  double value = 0;        ///< its value (alpha; nanoseconds for mean and median)
  Dist nominal, proposal;  ///< proposal: set when the proposal scenario is loaded
  /// "fault[0].duration.alpha=0.1416": the --tilt text and the --set of the proposal scenario.
  std::string setting() const;
};

/// The likelihood ratio nominal(x) / proposal(x) of a drawn value x (nanoseconds, as the world drew it). Both
/// of one tiltable kind with the same min and max; a value at the cap gets the ratio of the cap's masses.
double likelihood_ratio(const Dist& nominal, const Dist& proposal, Duration x);
/// Whether a distribution has a tail risk can tilt, and which parameter ("alpha", "mean", "median").
std::optional<std::string> tilt_parameter(const Dist& d);

/// How the proposal is chosen.
enum class TiltMode : std::uint8_t {
  none,       ///< plain Monte Carlo: every weight is 1
  automatic,  ///< the tail past the lock's TTL made as likely as not, then one cross-entropy step
  given,      ///< the --tilt values
};

/// How many runs: exactly one of these.
struct RiskBudget {
  std::optional<double> hours;                ///< of simulated operation (runs = hours / time per run)
  std::optional<std::uint64_t> acquisitions;  ///< grants (runs = acquisitions / grants per run)
  std::optional<std::uint64_t> runs;
};

struct RiskSpec {
  std::string scenario;  ///< as given on the command line (commands print it)
  std::string toml;      ///< its text
  std::string file;      ///< its file name (messages)
  std::string protocol;
  RiskBudget budget;
  TiltMode mode = TiltMode::automatic;
  std::vector<std::string> tilts;  ///< TiltMode::given: "FIELD=VALUE" each
  std::uint64_t first_seed = 1;
  std::uint32_t pilot = 400;  ///< runs of the pilot (sizing, the cross-entropy step)
  std::uint32_t shard = 0, shards = 1;
};

/// The most runs one estimate may take.
inline constexpr std::uint64_t kMaxRiskRuns = 100'000'000;
/// Pilot runs use seeds first_seed + kPilotSeedOffset + j, apart from the estimate's own.
inline constexpr std::uint64_t kPilotSeedOffset = 1'000'000'000'000ULL;

/// What one run contributes.
struct RiskRun {
  std::uint64_t seed = 0;
  bool unsafe = false, inconclusive = false, error = false;
  double weight = 1;  ///< the likelihood ratio of its tilted draws
  std::uint64_t grants = 0;
  Duration simulated{0};
  std::uint64_t trace_hash = 0;
  std::string story;  ///< for unsafe runs: anomaly kinds and the faults that fired
};

/// The unsafe runs of one story.
struct RiskStory {
  std::string story;
  std::uint64_t runs = 0;
  Fixed weight;                            ///< the sum of their weights: the story's share of the probability
  std::uint64_t seed = 0, trace_hash = 0;  ///< the smallest seed among them, and its trace hash
};

/// The sums of a set of runs: integers, so any split and order give the same bits.
struct RiskSums {
  std::uint64_t runs = 0, unsafe = 0, inconclusive = 0, errors = 0;
  Fixed w, w2;    ///< Σ w, Σ w² over all runs
  Fixed wu, w2u;  ///< Σ w, Σ w² over unsafe runs
  Fixed wg, wt;   ///< Σ w · grants, Σ w · simulated seconds
  std::map<std::string, RiskStory> stories;
  void add(const RiskRun& r);
  void add(const RiskSums& o);
};

/// A 95% interval and how it was made.
struct Interval {
  double lo = 0, hi = 0;
  std::string method;  ///< "Wilson score" or "normal (weighted)"
};

/// The estimate from sums.
struct RiskEstimate {
  double p_run = 0;  ///< probability that a run is unsafe
  Interval run;
  double grants_per_run = 0, hours_per_run = 0;
  double p_acquisition = 0, per_hour = 0;  ///< p_run / grants_per_run; p_run / hours_per_run
  Interval acquisition, hour;
  double ess = 0;         ///< Kish's effective sample size of all runs, (Σw)² / Σw²
  double ess_unsafe = 0;  ///< of the unsafe runs, (Σwu)² / Σw²u
};
/// Plain Monte Carlo (`weighted` false): Wilson's score interval on the count. Weighted: the normal interval
/// on the mean of w·u with its sample variance. Acquisition and hour divide the run's interval by the
/// (weighted) mean grants and simulated hours per run.
RiskEstimate estimate(const RiskSums& s, bool weighted);

/// Wilson's 95% score interval for k successes in n trials.
Interval wilson(std::uint64_t k, std::uint64_t n);

struct RiskResult {
  RiskSpec spec;
  std::vector<RiskTilt> tilts;  ///< empty: plain Monte Carlo (and after a merge: see tilt_settings)
  /// Each tilt's setting ("fault[0].duration.alpha=0.14") and the scenario's distribution it replaces.
  std::vector<std::string> tilt_settings, tilt_nominals;
  std::string proposal_toml;  ///< the scenario the runs drew from (the spec's text when not tilted)
  std::uint64_t runs = 0;     ///< runs of the whole estimate (every shard)
  double pilot_grants_per_run = 0, pilot_hours_per_run = 0;
  std::string note;  ///< how the proposal was chosen, in words
  RiskSums sums;     ///< this shard's runs (every run when not sharded)
  bool tilted() const { return !tilt_settings.empty(); }
};

using RiskProgress = std::function<void(std::uint64_t done, std::uint64_t total)>;

/// Checks the spec (a protocol of the registry, something random to sample, a budget, the tilts), runs the
/// pilot and this shard's runs on `jobs` threads. Throws InputError naming the option or field.
RiskResult run_risk(const RiskSpec& spec, std::uint32_t jobs, const RiskProgress& progress = {});

/// The story of an unsafe run: "stale-write-accepted after fault[0] pause client1".
std::string risk_story(const Scenario& sc, const struct RunOutput& r);

/// The text report: the estimate per run, per acquisition and per hour with its interval, how the hour is
/// derived, and the three most common stories with their replay commands (`replay(seed)`).
std::string risk_report(const RiskResult& r, const std::function<std::string(std::uint64_t seed)>& replay);

/// One JSONL line of a shard: the estimate's identity, the shard and its sums.
std::string risk_jsonl(const RiskResult& r);
/// The identity lines of one estimate share (scenario, text hash, protocol, tilts, runs, seeds, shards).
std::string risk_key(const RiskResult& r);

struct RiskMerge {
  std::optional<RiskResult> result;  ///< the merged sums (partial when shards are missing)
  std::vector<std::string> missing;  ///< one line per missing shard
  std::uint64_t duplicates = 0;
};
/// Reads JSONL files of risk_jsonl. Throws InputError for a bad line or lines of different estimates.
RiskMerge merge_risk_jsonl(const std::vector<std::string>& files);

}  // namespace locksim
