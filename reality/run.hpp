#pragma once
/// One scenario × protocol run against real servers on this machine: redis-server(s) on loopback ports in
/// a temporary folder, the store thread, one forked OS process per client; faults the real way (pause =
/// SIGSTOP/SIGCONT at the scenario's trigger, crash = SIGKILL, restart = the same server again on its
/// folder); the history assembled exactly as the simulator's and judged by the same checker.
#include <cstdint>
#include <string>

#include "locksim/scenarios/runner.hpp"
#include "locksim/scenarios/scenario.hpp"

namespace locksim::reality {

struct RealOptions {
  /// The run must end within this much real time (else std::runtime_error, everything killed).
  std::int64_t deadline_ns = 60'000'000'000;
};

/// Runs `sc` (already scaled: plan.hpp) with `protocol` for real. The RunOutput holds the real history, the
/// checker's verdict on it, and a trace of the notes and faults with real times (ns since the run's start);
/// trace_hash is 0 (a real run has none). Throws StartError (a server would not start), Interrupted
/// (Ctrl-C), std::runtime_error (the deadline passed); in every case no child process is left.
RunOutput run_real(const Scenario& sc, const std::string& protocol, const RealOptions& opts = {});

}  // namespace locksim::reality
