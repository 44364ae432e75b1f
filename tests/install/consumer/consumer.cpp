// Uses an installed locksim: runs Kleppmann's GC pause against redis and lease+fence and checks the verdicts.
#include <cstdio>
#include <locksim/rapidcheck.hpp>  // the installed rapidcheck generators compile in a user's project

#include "locksim/reports/report.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/runner.hpp"

int main() {
  const locksim::Scenario sc = locksim::load_scenario("kleppmann-gc-pause");
  const auto redis = locksim::run_scenario(sc, "redis");
  const auto fenced = locksim::run_scenario(sc, "lease+fence");
  std::printf("redis: %s, lease+fence: %s\n", redis.check.safe ? "safe" : "unsafe",
              fenced.check.safe ? "safe" : "unsafe");
  return (!redis.check.safe && fenced.check.safe) ? 0 : 1;
}
