// A property test a user of locksim writes: "for ANY fault plan rapidcheck can come up with, my lock keeps
// the resource safe". rapidcheck generates plans (locksim/rapidcheck.hpp), runs each in a deterministic
// world, and on a counterexample shrinks it and fails with the command that replays it, e.g.
//
//   lease is unsafe under this plan (1 stale-write-accepted):
//   pause client1 for 10.1s after client1 logs 'lease-check'
//   <the story of the violation, as `locksim run` tells it>
//   replay it with: locksim replay /tmp/replay-kleppmann-gc-pause-lease-1a2b3c4d5e6f7a8b.toml
//
// Swap "lease+fence" for "lease" or "redlock" below to watch that happen.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <iostream>
#include <optional>

#include <locksim/rapidcheck.hpp>

#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/command_name.hpp"

namespace {

using locksim::NemesisMode;

/// Kleppmann's scenario: two clients, one lock, one store. Its scripted pause is replaced by each generated
/// plan.
const locksim::Scenario& scenario() {
  static const locksim::Scenario sc = locksim::load_scenario("kleppmann-gc-pause");
  return sc;
}

}  // namespace

// A fenced lease: whatever happens to clients, Raft nodes, the network and the clocks, no stale write is
// accepted.
RC_GTEST_PROP(LeaseFence, NoStaleWriteUnderAnyFaultPlan, ()) {
  const auto targets = locksim::nemesis_targets(scenario(), "lease+fence");
  const auto plan = *locksim::rcgen::fault_plan(targets, scenario(), NemesisMode::anything);
  locksim::rcgen::check_safe(scenario(), "lease+fence", plan, *locksim::rcgen::seed());
}

// Redlock, inside the timing assumptions it states (short pauses and delays, drift ≤ 1 %, no jumps, no
// crashes).
RC_GTEST_PROP(Redlock, NoStaleWriteWithinItsAssumptions, ()) {
  const auto targets = locksim::nemesis_targets(scenario(), "redlock");
  const auto plan = *locksim::rcgen::fault_plan(targets, scenario(), NemesisMode::within);
  locksim::rcgen::check_safe(scenario(), "redlock", plan, *locksim::rcgen::seed());
}

// Without fencing, some plan breaks the lease, and the failure message carries the replay command. (Sampling
// the same generator by hand: a check that the generators do reach the interesting corner, not only calm
// runs.)
TEST(Lease, SomeGeneratedPlanBreaksItWithoutFencing) {
  const auto targets = locksim::nemesis_targets(scenario(), "lease");
  const auto gen = locksim::rcgen::fault_plan(targets, scenario(), NemesisMode::anything);
  std::optional<std::string> why;
  for (std::uint64_t i = 1; i <= 2000 && !why; ++i) {
    why = locksim::rcgen::find_violation(scenario(), "lease", gen(rc::Random(i), 100).value(), i);
  }
  ASSERT_TRUE(why.has_value()) << "2000 generated plans and not one broke an unfenced lease";
  EXPECT_NE(why->find(locksim::command_name() + " replay "), std::string::npos) << *why;
  std::cout << "example failure message:\n" << *why << "\n";
}
