#pragma once
/// What a real run can reproduce of a scenario, and the scenario with every duration multiplied.
#include <optional>
#include <string>
#include <vector>

#include "locksim/scenarios/scenario.hpp"

namespace locksim::reality {

/// The protocols that have real servers here: redis, redis+incr, redlock (redis-server), lease and
/// lease+fence (a 3- or 5-member etcd cluster), db-lease and db-lease+fence (PostgreSQL), zookeeper and
/// zookeeper+fence (a 3- or 5-member ZooKeeper ensemble).
std::vector<std::string> real_protocols();
/// lease and lease+fence: run against etcd.
bool is_etcd(const std::string& protocol);
/// db-lease and db-lease+fence: run against PostgreSQL (db1).
bool is_pg(const std::string& protocol);
/// zookeeper and zookeeper+fence: run against a 3-member ZooKeeper ensemble.
bool is_zk(const std::string& protocol);

/// Why `protocol` cannot run `sc` for real (empty: it can). Clock jumps and drift give "not reproducible in
/// reality: ..."; network loss, duplication and reordering "not reproducible over TCP"; what is not built
/// (a server-to-server cut, the database lease's standby, faults on a Redis replica or sentinel, renewal,
/// read-modify-write programs) says so in its own words. A Redis replica with its sentinel runs (redis,
/// redis+incr); Redlock has none.
std::optional<std::string> not_reproducible(const Scenario& sc, const std::string& protocol);

/// Whether partition `f` is one a real client runs without the proxy, by never contacting the nodes cut off:
/// from time 0, never healing, both ways, between clients and Redis nodes.
bool static_partition(const Scenario& sc, const std::string& protocol, const FaultSpec& f);

/// Whether the run needs the TCP proxy on its client links (reality/proxy.hpp): a partition other than a
/// static one, a heal, a delay spike, a network delay over 5 ms or drawn from a distribution, or per-link
/// settings. Without them the clients connect to the servers directly (loopback stands for the 1 ms links).
bool needs_proxy(const Scenario& sc, const std::string& protocol);

/// `sc` with every duration multiplied by `factor` (> 0): the protocols' (ttl, timeouts, retry delays,
/// drift allowance, ZooKeeper's tickTime...), the clients' (start, work, think, retry delay, give-up), the
/// faults' (time, duration, trigger delay), the time limit. The simulated run beside a real one runs this
/// same scenario.
Scenario scaled(const Scenario& sc, double factor);

/// The simulated world's processes a fault may name that this protocol's real run has (clients, store,
/// redis1..N, and replica1 and sentinel1 for redis and redis+incr with replica = true).
std::vector<std::string> real_process_names(const Scenario& sc, const std::string& protocol);

/// Whether fault `f` applies to this protocol's run (the runner's rule: a fault whose first target is a
/// service process of another protocol does not).
bool fault_applies(const Scenario& sc, const std::string& protocol, const FaultSpec& f);

/// Server processes the protocol runs: 1 for redis and redis+incr, cfg.nodes (default 5) for redlock,
/// cfg.nodes (default 3) etcd members for lease and lease+fence, 1 (db1) for db-lease and db-lease+fence, or
/// ZooKeeper members for zookeeper(+fence).
std::uint32_t node_count(const Scenario& sc, const std::string& protocol);

}  // namespace locksim::reality
