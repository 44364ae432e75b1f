#pragma once
/// The ZooKeeper lock protocols: Apache Curator's InterProcessMutex on a ZooKeeper ensemble
/// (protocols/zookeeper/ensemble.hpp).
///  - `zookeeper`: the client opens a session (timeout = the lock's TTL, negotiated into [2, 20] × tickTime),
///    creates an ephemeral sequential node under /locks/<key>, and holds the lock when its node is the lowest
///    child; otherwise it watches its predecessor and re-reads the children when the watch fires (or when it
///    reconnected, since a watch may have been lost). The token is the node's czxid, but writes carry none.
///  - `zookeeper+fence`: the same, and every write carries the czxid as its fencing token.
/// The client's session thread (ZooKeeper's ClientCnxn SendThread) pings every third of the session timeout
/// while it hears from the server; after two thirds without an answer it is Disconnected and tries the next
/// server; it learns Expired only from the ensemble, when it reaches it again. A holder believes it holds
/// the lock until it learns Expired (Curator's InterProcessMutex tells the holder nothing). A pause stops
/// the session thread too, as a GC pause stops every thread of a JVM.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "locksim/protocols/lock.hpp"
#include "locksim/protocols/zookeeper/ensemble.hpp"
#include "locksim/protocols/zookeeper/lock_recipe.hpp"

namespace locksim {

/// Registers `zookeeper` and `zookeeper+fence`.
void register_zookeeper_protocols(ProtocolRegistry& registry);

namespace zk {

/// Where the scenario loader puts `[protocol] tick_time` and `container_check_interval` (nanoseconds, in
/// ProtocolConfig::extra): ZooKeeper's own settings, read by no other protocol.
inline constexpr const char* kTickTimeKey = "zookeeper.tick_time_ns";
inline constexpr const char* kContainerCheckKey = "zookeeper.container_check_interval_ns";
/// The ensemble a ProtocolConfig asks for (size, Raft timeouts, tickTime, container check interval).
EnsembleOptions ensemble_options(const ProtocolConfig& cfg);

/// A client's session, shared by its fibers (the lock's and the session thread's).
struct SessionState {
  enum class State : std::uint8_t { none, connected, disconnected, expired };
  std::uint64_t id = 0;
  Duration timeout{0};  ///< negotiated
  State state = State::none;
  Time last_heard{};  ///< this client's clock: when it sent the last request the ensemble answered
  /// The server the session is connected to (an index into the servers): one connection for the session's
  /// requests and pings, as ZooKeeper's client has.
  std::size_t server = 0;
  /// Connections made since the session began (a reconnect after Disconnected, or another server): a watch
  /// left at the old one may be lost.
  std::uint64_t connections = 0;
};

/// The Curator InterProcessMutex client in the simulator: LockRecipe (lock_recipe.hpp) over this client's
/// session machinery.
class ZkClient final : public LockClient {
 public:
  ZkClient(std::vector<ProcId> servers, Duration rpc_timeout, Duration acquire_timeout, bool sequence_token);
  std::optional<Grant> acquire(Context& ctx, const std::string& key, Duration ttl) override;
  /// A ping of the grant's session; true while the session is open.
  bool extend(Context& ctx, Grant& grant, Duration ttl) override;
  /// Deletes the lock node (the session stays open for the next acquire).
  void release(Context& ctx, const Grant& grant) override;
  /// Until the client learns its session expired.
  bool believes_valid(Context& ctx, const Grant& grant) override;

 private:
  class SimLink;
  bool ensure_session(Context& ctx, Duration ttl, Time give_up);
  void start_session_thread(Context& ctx);
  /// Waits for the watch on `pred` to fire, for a new connection or expiry, or until `until`.
  void wait_watch(Context& ctx, const std::string& pred, Time until);

  std::vector<ProcId> servers_;
  raft::Client rc_;
  std::shared_ptr<SessionState> session_;
  ProcId thread_{};
  LockRecipe recipe_;
};

}  // namespace zk
}  // namespace locksim
