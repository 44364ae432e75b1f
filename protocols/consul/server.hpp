#pragma once
/// Consul's servers on the Raft core (protocols/raft/raft.hpp): members `consul1`..`consulN` replicate the
/// KV store and its sessions (protocols/consul/kv_store.hpp); each server keeps in memory what Consul's keep:
///  - lock-delay (agent/consul/state/delay.go): when a server applies a session's destroy, each key the
///    session held cannot be acquired until that server's clock passes now + the session's LockDelay. The
///    leader checks it before an acquire reaches the log (kvs_endpoint.go Apply: `if expires.After(
///    time.Now())` the answer is false); it also refuses while a destroy of the key's holder is in its log
///    and not yet applied (the delay it will set is not in its table yet);
///  - the session TTL timers, leader only (session_ttl.go): a session is invalidated TTL × multiplier after
///    its creation or last renewal (Consul's code: SessionTTLMultiplier = 2; its documentation promises
///    only "not before the TTL"), by committing a destroy. A new leader starts every session's timer afresh
///    (initializeSessionTimers in leader.go's establishLeadership);
///  - blocking queries: a get whose wait index the key has not yet passed waits at the leader until the
///    key changes (a leader change answers it "leader-changed").
/// Every request, reads and renewals included, goes through the leader's log (Consul's renew is a leader
/// RPC that checks the session in its state store: the log gives the same answer).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "locksim/protocols/consul/kv_store.hpp"
#include "locksim/protocols/raft/raft.hpp"

namespace locksim::consul {

struct ServerOptions {
  raft::GroupOptions group;  ///< prefix "consul"
  /// Invalidation after TTL × this (in millionths): 2,000,000 as Consul's SessionTTLMultiplier.
  std::int64_t ttl_multiplier_ppm = 2'000'000;
};

/// How long after its last renewal the leader invalidates a session of `ttl`.
Duration invalidation_after(Duration ttl, std::int64_t multiplier_ppm);

/// What tests and the history recorder see, besides the core's events (raft::GroupObserver).
struct ServerObserver {
  raft::GroupObserver group;
  /// Applied on the leader: a key's holder changed (a new holder, or released).
  std::function<void(const std::string& member, const KvStore::Change& c)> on_holder;
  /// The leader's timer invalidated `session`.
  std::function<void(const std::string& member, std::uint64_t session)> on_invalidate;
};

/// Spawn the servers; returns their ids in order.
std::vector<ProcId> spawn_servers(World& world, const ServerOptions& opts,
                                  std::shared_ptr<const ServerObserver> observer = nullptr);

/// The trace summary of a command.
std::string describe(const KCommand& c);
/// A get's answer data: `<holder session> <lock index>`.
std::string key_data(const KvStore::Entry* e);

}  // namespace locksim::consul
