// consul+fence under generated fault plans of every kind (clients, servers and their leader, the network,
// the clocks): the resource stays safe. Kleppmann's scenario, its scripted pause replaced by each plan.
// ctest runs 1,000 plans (RC_PARAMS=max_success=1000, tests/protocols/consul/CMakeLists.txt).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <locksim/rapidcheck.hpp>

#include "locksim/scenarios/catalog.hpp"

namespace {

const locksim::Scenario& scenario() {
  static const locksim::Scenario sc = locksim::load_scenario("kleppmann-gc-pause");
  return sc;
}

}  // namespace

RC_GTEST_PROP(ConsulFence, NoAnomalyUnderAnyFaultPlan, ()) {
  const auto targets = locksim::nemesis_targets(scenario(), "consul+fence");
  const auto plan = *locksim::rcgen::fault_plan(targets, scenario(), locksim::NemesisMode::anything);
  locksim::rcgen::check_safe(scenario(), "consul+fence", plan, *locksim::rcgen::seed());
}
