#pragma once
// The shared toy protocol (tests/support/toy_protocol.hpp) for the explore tests. Its server is named
// "redis1" so replay files of its runs pass the scenario loader's process-name check (clients, the resource,
// redisN / replicaN / raftN).
#include "locksim/scenarios/runner.hpp"
#include "tests/support/toy_protocol.hpp"

namespace locksim::test {

using toy::ToyProtocol;

/// The built-in protocols and the toy one (once).
inline void register_toy() {
  static bool done = false;
  if (done) return;
  done = true;
  register_builtin_protocols();
  toy::register_toy("redis1");
}

/// Kleppmann's GC pause with the toy protocol (no fault when `pause` is zero).
inline Scenario toy_scenario(Duration pause = 0ns) {
  return toy::gc_pause(pause);
}

}  // namespace locksim::test
