#pragma once
/// A Redis node model (the server side of the `redis` and `redlock` protocols) and a sentinel-like failover
/// daemon.
///
/// The node speaks a tiny command set as messages: `SET key value NX PX ttl`, the compare-and-delete release
/// script, a PEXPIRE-if-value-matches extension script, GET, INCR, plus the replication and sentinel
/// commands. Keys expire by the node's WALL clock, checked lazily on access, exactly as Redis does
/// (Kleppmann's clock-jump scenario needs this). Only a master expires a key: it deletes it and propagates
/// the DEL; a replica hides a logically expired key from reads but changes its dataset only by the stream
/// (Redis 3.2 and later). Replication is Redis's PSYNC stream: see replication.hpp. Persistence is an
/// append-only file modelled on the process's Storage, with the fsync policy of the process; entries carry
/// absolute wall-clock expiry times, as Redis's AOF/RDB do.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "locksim/protocols/history.hpp"
#include "locksim/protocols/redis/replication.hpp"
#include "locksim/sim/world.hpp"

namespace locksim::redis {

/// Commands a node understands.
enum class Op : std::uint8_t {
  set_nx,            ///< SET key value NX PX ttl (OK / nil)
  del_if_value,      ///< release script: DEL key if GET key == value (atomic)
  pexpire_if_value,  ///< extension script: PEXPIRE key ttl if GET key == value (atomic)
  get,               ///< GET key
  incr,              ///< INCR key
  ping,              ///< PING (the reply names the node's role: sentinel health checks)
  get_master,        ///< sentinel: SENTINEL get-master-addr-by-name (the reply's value is the master's name)
  promote,           ///< sentinel → node: REPLICAOF NO ONE
  replicaof,         ///< sentinel → node: REPLICAOF `peer` (keep the dataset, PSYNC from the new master)
};

/// The name of a command as it appears in the trace ("SET", "DEL-IF", ...).
std::string_view op_name(Op op);

/// A request to a node (message body).
struct Command {
  Op op = Op::get;
  std::string key;
  std::string value;
  Duration ttl{0};
  /// set_nx only: when the SET succeeds, INCR this key in the same atomic step and return the counter
  /// (Redisson's RFencedLock does lock + INCR in one Lua script). Empty: no counter.
  std::string fence_counter;
  std::string peer;  ///< replicaof: the new master's process name
  /// del_if_value only: delete without comparing the value (teaching variant "blind-release": a plain DEL).
  bool blind = false;
};

/// A node's answer (message body).
struct Reply {
  bool ok = false;                   ///< OK / 1 (true) or nil / 0 (false)
  std::optional<std::string> value;  ///< GET's value; get_master: the master's name
  std::int64_t integer = 0;          ///< INCR result; set_nx with a fence counter: the counter
  std::string error;                 ///< "READONLY" when a replica receives a write
  std::string role;                  ///< ping: "master" or "replica"
};

/// A request message for a command (type = op_name, detail = canonical text for the trace).
Message command_message(const Command& c);

struct NodeOptions {
  std::string name;                        ///< process name (redis1, replica1, ...)
  bool aof = false;                        ///< persistence on; off = memory only (a crash loses everything)
  FsyncPolicy fsync = FsyncPolicy::never;  ///< the process's fsync policy (appendfsync)
  Duration fsync_period{1s};
  bool replica = false;  ///< starts as a replica of `peer`
  /// A replica: its master. A master streams to whichever replica PSYNCs it (one at a time), so a master's
  /// peer only documents the intended topology.
  std::string peer;
  Duration replication_delay{50ms};  ///< async replication lag: how long a write waits before it is streamed
  /// What INCR finds in a key that does not exist: 0 in Redis; a scenario's first_token - 1 for the fencing
  /// counter, so that the first token is first_token.
  std::int64_t counter_start = 0;
  ReplicationOptions replication;  ///< backlog size, ack and ping periods, repl-timeout
  ReplicationObserver observer;    ///< sees every replication change (tests); empty: none
  /// Record this node's role in the history (ServiceRecorder::leader / follower) when it starts, is promoted
  /// or is demoted: a master/replica pair, and a single master, whose master faults may aim at. Redlock's
  /// independent masters record none: none of them is *the* master.
  bool record_role = false;
};

/// Spawn a node as a daemon process. Successful lock SETs are recorded through History::recorder (write
/// only).
ProcId spawn_node(World& world, const NodeOptions& opts, History& history);

struct SentinelOptions {
  std::string name = "sentinel1";
  std::vector<std::string> nodes;  ///< nodes[0] is the initial master
  Duration failover_after{5s};     ///< down-after-milliseconds
  Duration ping_interval{100ms};
};

/// Spawn a sentinel-like daemon: pings every node, promotes a reachable replica when the master has not
/// answered for `failover_after` (driven only by the pings it sees), demotes a stale master that comes back,
/// and answers clients' get_master queries.
ProcId spawn_sentinel(World& world, const SentinelOptions& opts);

}  // namespace locksim::redis
