#pragma once
/// A scenario client as its own OS process (forked by the parent): it runs the client's program against the
/// real Redis servers and the real store, and tells the parent what it does over a pipe, one line per fact.
/// A note waits for the parent's ack before the client goes on, so a fault triggered by the note (SIGSTOP)
/// falls exactly there, as `after = { process, note }` does in the simulator.
///
/// The Redis clients (redis, redis+incr, redlock) run the simulated clients' own algorithms
/// (protocols/redis/lock_algorithms.hpp) over hiredis (redis_link.hpp): the single-node client believes it
/// holds the lock for ttl from sending its SET NX PX, whenever the OK comes; Redlock sends to every node at
/// once, needs a majority, validity = ttl - elapsed (wall clock) - drift, unlock-all on failure, retries with
/// jitter; release is the compare-and-delete script. The database lease (db-lease, db-lease+fence) runs
/// the simulated client's own LeaseAlgorithm (protocols/dblease/lease_algorithm.hpp) over libpq
/// (pg_client.hpp): AcquireLease in one serializable transaction, the returned Expires (the database's
/// clock) the deadline on the client's own wall clock (variant monotonic-deadline: ttl from before BEGIN on
/// its monotonic clock), release = owner '' for the owner with its token. The ZooKeeper client (zookeeper,
/// zookeeper+fence) runs the simulated client's own LockRecipe (protocols/zookeeper/lock_recipe.hpp,
/// Curator's InterProcessMutex) over the C client (zk_client.hpp): the lowest ephemeral sequential node
/// holds, believed until the session is known Expired, its czxid the token; `ports` are the ensemble's client
/// ports. The etcd client (lease, lease+fence) runs the simulated client's own LeaseAlgorithm
/// (protocols/raft/lease_algorithm.hpp) over etcd's v3 JSON gateway (etcd_client.hpp): a lease of the TTL
/// valid from sending the grant, kept alive while etcd's v3lock Lock call waits for the key to hold, its
/// create revision the token, a keep-alive when one is due at a lease check, release = unlock then revoke.
///
/// Lines to the parent (times are ns since the run's start on CLOCK_MONOTONIC):
///   note T LABEL DETAIL            (then reads one ack byte)
///   grant G REQUESTED GRANTED VALID_UNTIL TOKEN|- VALUE
///   end G T REASON
///   write W G SENT CHECKED LEASE_CHECKED TOKEN|- VALUE
///   ack W 0|1
#include <cstdint>
#include <string>
#include <vector>

#include "locksim/protocols/lock.hpp"
#include "locksim/scenarios/scenario.hpp"

namespace locksim::reality {

struct ClientPlan {
  std::string
      protocol;  ///< redis, redis+incr, redlock, lease, lease+fence, db-lease(+fence), zookeeper(+fence)
  ProtocolConfig config;
  ClientSpec spec;
  std::string lock_key, resource_key;
  bool send_tokens = false;          ///< the protocol's writes carry its token
  std::vector<std::uint16_t> ports;  ///< redis1..N, or the etcd / ZooKeeper members' client ports
  std::string pg_conninfo;           ///< db-lease: libpq's connection string of db1
  bool same_db = false;              ///< db-lease: writes go to db1's write_with_fence, not to the store
  std::vector<std::uint8_t> cut;     ///< per node: a partition cuts this client off from it all run
  /// redis, redis+incr with a replica: sentinel1's port (0: none; the master is redis1), and the servers'
  /// real ports beside `ports` (redis1, replica1) to map the master the sentinel names to one of them.
  std::uint16_t sentinel_port = 0;
  std::vector<std::uint16_t> real_ports;
  std::uint16_t store_port = 0;
  std::int64_t t0 = 0;  ///< CLOCK_MONOTONIC at the run's start
  int report_fd = -1, ack_fd = -1;
};

/// The client process's body; never returns (_exit).
[[noreturn]] void client_main(const ClientPlan& plan);

}  // namespace locksim::reality
