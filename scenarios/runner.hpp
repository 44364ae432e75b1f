#pragma once
/// Build a world from a scenario, run it against one protocol, and judge the history.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocols/history.hpp"
#include "scenarios/checker/checker.hpp"
#include "scenarios/scenario.hpp"
#include "sim/world.hpp"

namespace locksim {

struct RunOptions {
  std::optional<std::uint64_t> seed;  ///< overrides the scenario's seed
  bool keep_trace = true;             ///< keep every trace event (reports need them; explore does not)
};

/// Everything a report needs about one finished run; the world itself is gone.
struct RunOutput {
  std::string scenario;
  std::string protocol;
  std::uint64_t seed = 0;
  ProtocolConfig config;
  ResourceMode resource_mode = ResourceMode::unfenced;
  History history;
  CheckResult check;
  RunResult run;
  std::uint64_t trace_hash = 0;
  std::uint64_t events = 0;
  std::uint64_t messages = 0;
  std::vector<TraceEvent> trace;           ///< empty unless keep_trace
  bool trace_truncated = false;            ///< more events happened than WorldOptions::max_kept_events
  std::vector<std::string> process_names;  ///< indexed by ProcId::value
  std::vector<std::string> servers;        ///< the protocol's service processes
  std::vector<std::string> clients;
  std::string resource;
  std::vector<Fault> faults;  ///< the fault plan as resolved
  /// Unsafe when any anomaly was recorded, wherever the run stopped; safe needs a run that finished.
  Verdict verdict() const { return check.safe ? Verdict::safe : Verdict::unsafe; }
  /// No anomaly, but the run stopped at a limit (events, simulated time, mailbox) with its history cut short:
  /// no verdict.
  bool inconclusive() const { return check.safe && run.limit_hit(); }
  const std::string& name_of(ProcId p) const;
};

/// Run `scenario` with `protocol`. Throws InputError for names that do not resolve (unknown process,
/// protocol).
RunOutput run_scenario(const Scenario& scenario, const std::string& protocol, const RunOptions& opts = {});

}  // namespace locksim
