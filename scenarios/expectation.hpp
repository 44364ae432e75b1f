#pragma once
/// Judging a scenario's expectation ([expect], Scenario::expect) against runs: the verdict, the anomaly
/// kinds, lost updates, token order and slack of each run, and the quantifier over a range of seeds. It reads
/// only what the checker concluded and the history the simulator recorded.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "locksim/scenarios/runner.hpp"
#include "locksim/scenarios/scenario.hpp"

namespace locksim {

/// The properties of `e` (all but the seed range) that run `r` does not meet, each in words; empty when it
/// meets them all.
std::vector<std::string> unmet_in_run(const Expectation& e, const RunOutput& r);

/// Whether the grants' tokens increase strictly in epoch order on every lock key (a grant without a token
/// breaks it).
bool tokens_increase(const RunOutput& r);

struct ExpectationOutcome {
  bool met = false;
  std::string got;               ///< what happened, in a few words: "unsafe", "unsafe in 3 of 20 seeds"
  std::string why;               ///< when not met: the first failing seed and property
  std::uint64_t first_seed = 0;  ///< the seed to replay: the witness (any) or the first failure (all)
  std::uint32_t runs = 0;
};

/// Judge `e` over its seed range (or `default_seed` alone when it has none); `run(seed)` runs one seed and
/// may throw InputError (an inconclusive run: exit 2). An `any` expectation stops at its first witness, an
/// `all` one at its first failure.
ExpectationOutcome judge_expectation(const Expectation& e, std::uint64_t default_seed,
                                     const std::function<RunOutput(std::uint64_t)>& run);

}  // namespace locksim
