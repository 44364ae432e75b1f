#pragma once
/// Build a world from a scenario, run it against one protocol, and judge the history.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "locksim/protocols/history.hpp"
#include "locksim/scenarios/checker/checker.hpp"
#include "locksim/scenarios/scenario.hpp"
#include "locksim/sim/world.hpp"

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
  ResourceKind resource_kind = ResourceKind::store;
  History history;
  CheckResult check;
  RunResult run;
  std::uint64_t trace_hash = 0;
  bool real = false;  ///< run against real servers (`locksim reality`): real times, no trace hash
  std::uint64_t events = 0;
  std::uint64_t messages = 0;
  std::vector<TraceEvent> trace;           ///< empty unless keep_trace
  bool trace_truncated = false;            ///< more events happened than WorldOptions::max_kept_events
  std::vector<std::string> process_names;  ///< indexed by ProcId::value
  std::vector<std::string> servers;        ///< the protocol's service processes
  std::vector<std::string> clients;
  std::string resource;
  /// The resources after the first (Scenario::more_resources), as this run spawned them.
  struct MoreResource {
    std::string name;
    ResourceKind kind = ResourceKind::store;
    ResourceMode mode = ResourceMode::unfenced;
  };
  std::vector<MoreResource> more_resources;
  /// The kind of the resource named `name` (the first's when no other has that name).
  ResourceKind kind_of(const std::string& name) const {
    for (const MoreResource& m : more_resources)
      if (m.name == name) return m.kind;
    return resource_kind;
  }
  /// Whether any of the run's resources is of kind `k`.
  bool has_kind(ResourceKind k) const {
    if (resource_kind == k) return true;
    for (const MoreResource& m : more_resources)
      if (m.kind == k) return true;
    return false;
  }
  std::vector<Fault> faults;  ///< the fault plan as resolved
  /// Per entry of `faults`: its index in Scenario::faults (faults that do not apply to this world are left
  /// out of `faults`), the firings that took effect, and the durations drawn from its distribution.
  std::vector<std::size_t> fault_specs;
  std::vector<std::uint32_t> fault_firings;
  std::vector<std::vector<Duration>> fault_draws;
  /// Unsafe when any anomaly was recorded, wherever the run stopped; safe needs a run that finished.
  Verdict verdict() const { return check.safe ? Verdict::safe : Verdict::unsafe; }
  /// No anomaly, but the run stopped at a limit (events, simulated time, mailbox) with its history cut short:
  /// no verdict.
  bool inconclusive() const { return check.safe && run.limit_hit(); }
  const std::string& name_of(ProcId p) const;
};

/// Roles a fault may aim at instead of a process name, computed each time the fault fires from the ground
/// truth the servers and the workload record in the history (never from a client's opinion):
///  - `leader`: the service member that is leader in the highest term and has not crashed (Raft: the leader
///    of the highest term; a replicated Redis: the master the sentinel promoted last, or the configured one);
///  - `primary`: the same (the word Redis and databases use);
///  - `holder`: the client of the newest grant;
///  - `holder-servers`: the service members whose records (SET, committed lock key) back the newest grant;
///  - `any-server`: one service process that has not crashed, drawn from the fault's own seeded stream;
///  - `any-client`: one client that has neither crashed nor ended, drawn the same way.
/// A role that resolves to nobody (no leader yet, no grant yet, Redlock's independent masters) skips that
/// firing, with a trace record saying why.
enum class FaultRole : std::uint8_t { leader, primary, holder, holder_servers, any_server, any_client };
std::string_view to_string(FaultRole r);
/// The role a name stands for, if it is one ("leader", "holder-servers", ...).
std::optional<FaultRole> parse_fault_role(std::string_view name);
/// Every role name, in the order above.
std::vector<std::string> fault_role_names();
/// Whether a role names at most one process (a peer, a trigger's process).
bool single_process_role(FaultRole r);

/// Partition sides computed from the leader when the fault fires (`split = "..."`). The service members are
/// the protocol's declared service processes (a Redis sentinel too); n of them.
///  - `leader-alone`: the leader on one side, every other process (members, resource, clients) on the other;
///  - `minority`: the leader and the (n-1)/2 - 1 members after it in spawn order (wrapping round), at least
///    the leader, against everything else: the clients and the resource stay with the majority;
///  - `majority`: the (n-1)/2 members before the leader in spawn order (wrapping round) against everything
///    else: the leader keeps a majority and the clients.
enum class FaultSplit : std::uint8_t { leader_alone, minority, majority };
std::string_view to_string(FaultSplit s);
std::optional<FaultSplit> parse_fault_split(std::string_view name);
std::vector<std::string> fault_split_names();
/// The members on side_a of a split, as indices into the n members in spawn order, the leader at `leader_at`
/// (the rule above). Empty: the split leaves nothing to cut off (majority of fewer than 3).
std::vector<std::size_t> split_side_a(FaultSplit s, std::size_t n, std::size_t leader_at);

/// Why a fault's roles do not fit its kind (a restart of the leader: the leader is alive by definition;
/// holder-servers as a peer), or nothing. The loader and run_scenario both ask.
std::optional<std::string> fault_role_problem(const FaultSpec& f);

/// Run `scenario` with `protocol`. Throws InputError for names that do not resolve (unknown process,
/// protocol).
RunOutput run_scenario(const Scenario& scenario, const std::string& protocol, const RunOptions& opts = {});

}  // namespace locksim
