#pragma once
/// Shrinking: reduce a failing run to the smallest story that still fails. Greedy passes to a fixed point, in
/// the order that removes the most first: drop faults, drop network noise and clock settings, drop clients,
/// then make what is left gentler: shorter pauses, delays and outages, smaller clock jumps and drift,
/// triggers with no delay, on the first occurrence, and timed faults as late as they can be. Every candidate
/// is one deterministic run with the same seed, so the result is the same on every machine.
#include <cstdint>
#include <functional>
#include <string>

#include "locksim/scenarios/nemesis.hpp"
#include "locksim/scenarios/runner.hpp"

namespace locksim {

struct ShrinkOptions {
  std::uint32_t max_runs = 400;  ///< budget of candidate runs
  bool keep_scripted = false;    ///< the plan was applied on top of the scenario's own faults (apply_plan)
  /// Whether a run still counts as failing. Default: unsafe (any violation).
  std::function<bool(const RunOutput&)> fails;
};

struct ShrinkResult {
  Scenario base;      ///< the scenario without the plan, with clients possibly removed
  FaultPlan plan;     ///< the minimized plan
  Scenario scenario;  ///< apply_plan(base, plan): what the replay file holds
  std::uint64_t seed = 0;
  std::uint64_t trace_hash = 0;  ///< of the final failing run
  Verdict verdict = Verdict::unsafe;
  std::uint32_t runs = 0;       ///< candidate runs spent
  std::size_t size_before = 0;  ///< plan.size() before
  std::size_t clients_before = 0;
  bool failed_at_start = false;  ///< false: the input did not fail; nothing was shrunk
};

/// Minimizes `plan` (applied to `base`, run with `protocol` and `seed`) while it still fails.
ShrinkResult shrink_failure(const Scenario& base, const std::string& protocol, const FaultPlan& plan,
                            std::uint64_t seed, const ShrinkOptions& opts = {});

}  // namespace locksim
