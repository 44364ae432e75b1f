#pragma once
/// A ZooKeeper ensemble on the Raft core (protocols/raft/raft.hpp): members `zk1`..`zkN` replicate the
/// znode tree (protocols/zookeeper/znode_tree.hpp); the leader keeps what ZooKeeper's leader keeps in memory:
///  - the SessionTracker: each session's expiry, rounded up to the next multiple of tickTime
///    (SessionTrackerImpl.roundToExpirationInterval), pushed on by every ping the leader applies; at expiry
///    the leader commits close_session (expired), which deletes the session's ephemeral nodes. A new leader
///    starts every session's clock afresh (its tracker is rebuilt from the tree with full timeouts);
///  - watches: a check that finds a predecessor leaves a one-shot watch on it at the leader; the leader
///    notifies the client ("zk.watch") when it applies the predecessor's deletion. Watches live in the
///    leader's memory only: a leader change loses them (the client re-reads the children when it
///    reconnects, as Curator's watcher does on the Disconnected event);
///  - the ContainerManager: every container_check_interval the leader deletes empty lock parents.
/// Every request, reads included, goes through the leader's log: the client is always "connected" to the
/// leader, and its reads are linearizable (stronger than ZooKeeper's, whose followers may serve stale
/// reads: this model does not give them that freedom).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "locksim/protocols/raft/raft.hpp"
#include "locksim/protocols/zookeeper/znode_tree.hpp"

namespace locksim::zk {

inline constexpr const char* kWatchType = "zk.watch";
/// Body of a watch notification: the watched node was deleted.
struct WatchEvent {
  std::string path;
};

struct EnsembleOptions {
  raft::GroupOptions group;  ///< prefix "zk"
  Duration tick_time{2s};
  Duration container_check_interval{60s};  ///< ZooKeeper's znode.container.checkIntervalMs
};

/// What tests and the history recorder see, besides the core's events (raft::GroupObserver).
struct EnsembleObserver {
  raft::GroupObserver group;
  /// Applied on the leader: `node` (under `parent`, created by `session`) became the lowest child.
  std::function<void(const std::string& member, const ZnodeTree::Change& c)> on_holder;
  /// Applied on the leader: `session` was closed because the leader found it expired.
  std::function<void(const std::string& member, std::uint64_t session)> on_expire;
};

/// Spawn the ensemble; returns the members' ids in order.
std::vector<ProcId> spawn_ensemble(World& world, const EnsembleOptions& opts,
                                   std::shared_ptr<const EnsembleObserver> observer = nullptr);

/// The trace summary of a command.
std::string describe(const ZCommand& c);

}  // namespace locksim::zk
