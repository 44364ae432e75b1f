#pragma once
/// A GoogleTest property over a lock protocol in one line:
///
///   #include <locksim/rapidcheck_gtest.hpp>
///
///   // For any fault plan rapidcheck draws, my-lock keeps Kleppmann's scenario safe.
///   LOCKSIM_PROPERTY(MyLock, SafeUnderAnyPlan, "kleppmann-gc-pause", "my-lock");
///
///   // The same with options: inside the protocol's stated assumptions, 1,000 cases.
///   TEST(MyLock, SafeWithinItsAssumptions) {
///     locksim::rcgen::PropertyOptions o;
///     o.mode = locksim::NemesisMode::within;
///     o.cases = 1000;
///     locksim::rcgen::expect_safe_under_any_plan(locksim::load_scenario("kleppmann-gc-pause"), "my-lock",
///     o);
///   }
///
/// The scenario is a catalog name or a path to a .toml file (load_scenario), and the protocol any name in
/// the ProtocolRegistry: register yours before the tests run (in main, or in a static initializer of the
/// test file). A failure reads as explore's does: the smallest plan (rapidcheck's shrink, then explore's
/// shrinker), the story of the violation as the text report tells it, a replay file ($LOCKSIM_REPLAY_DIR,
/// else the temporary directory) and the command that replays it, starting with the name of the binary that
/// runs locksim (locksim::command_name()). RC_PARAMS works as for any rapidcheck property ("seed=N",
/// "max_success=N", and the "reproduce=..." rapidcheck prints; the property's id is "Suite/Name").
///
/// Link with locksim::scenarios, locksim::reports, rapidcheck and GTest::gtest (or gtest_main).
#include <gtest/gtest.h>

#include <string>

#include "locksim/rapidcheck.hpp"
#include "locksim/scenarios/catalog.hpp"

namespace locksim::rcgen {

/// check_property, as a GoogleTest assertion of the running test: a non-fatal failure with the result's
/// message unless every case was safe. Returns the result (for tests that want to look at the plan).
inline PropertyResult expect_safe_under_any_plan(const Scenario& scenario, const std::string& protocol,
                                                 PropertyOptions opts = {}) {
  if (opts.id.empty()) {
    if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info())
      opts.id = std::string(info->test_suite_name()) + "/" + info->name();
  }
  PropertyResult r = check_property(scenario, protocol, opts);
  if (!r.passed()) ADD_FAILURE() << r.message;
  return r;
}

}  // namespace locksim::rcgen

/// TEST(Suite, Name) asserting that `protocol` keeps the scenario `scenario` (a catalog name or a .toml
/// path) safe under any fault plan; an optional fifth argument is a locksim::rcgen::PropertyOptions.
#define LOCKSIM_PROPERTY(Suite, Name, scenario, protocol, ...)                         \
  TEST(Suite, Name) {                                                                  \
    ::locksim::rcgen::expect_safe_under_any_plan(::locksim::load_scenario(scenario),   \
                                                 protocol __VA_OPT__(, ) __VA_ARGS__); \
  }
