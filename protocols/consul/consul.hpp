#pragma once
/// The Consul lock protocols: the `consul lock` client (api/lock.go) on Consul's servers
/// (protocols/consul/server.hpp).
///  - `consul`: each acquire creates a session (TTL = the lock's TTL, 10 s … 24 h; behavior `release`; the
///    LockDelay of [protocol] lock_delay), renews it every TTL/2 in a thread of the client (api/session.go
///    RenewPeriodic), and loops as Lock() does: read the key (a blocking query while another session holds
///    it), PUT ?acquire=<session>; a false answer with the key free means lock-delay: wait 5 s
///    (DefaultLockRetryTime) and try again. The token is the key's ModifyIndex after the acquire (the Raft
///    index of the acquire entry), but writes carry none.
///  - `consul+fence`: the same, and every write carries the ModifyIndex as its fencing token.
/// Once it holds the lock, a monitor thread (monitorLock) watches the key with blocking queries and marks
/// the lock lost as soon as the key no longer names the session: `consul lock` then stops its child. The
/// holder stops acting at its next check (believes_valid). A pause stops the monitor too, so a holder that
/// pauses after its check acts on waking before its monitor can tell it anything.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "locksim/protocols/consul/server.hpp"
#include "locksim/protocols/lock.hpp"

namespace locksim {

/// Registers `consul` and `consul+fence`.
void register_consul_protocols(ProtocolRegistry& registry);

namespace consul {

/// Where the scenario loader puts `[protocol] lock_delay` (nanoseconds) and `session_ttl_multiplier`
/// (millionths), in ProtocolConfig::extra: Consul's own settings, read by no other protocol.
inline constexpr const char* kLockDelayKey = "consul.lock_delay_ns";
inline constexpr const char* kTtlMultiplierKey = "consul.session_ttl_multiplier_ppm";
/// Consul's bounds on a session TTL (structs.SessionTTLMin / agent's session_ttl_max default).
inline constexpr Duration kMinTtl = std::chrono::seconds(10);
inline constexpr Duration kMaxTtl = std::chrono::hours(24);
inline constexpr Duration kDefaultLockDelay = std::chrono::seconds(15);
inline constexpr Duration kMaxLockDelay = std::chrono::seconds(60);
/// api/lock.go DefaultLockRetryTime: the wait after an acquire refused while the key is free (lock-delay).
inline constexpr Duration kLockRetryTime = std::chrono::seconds(5);

/// The servers a ProtocolConfig asks for (size, Raft timeouts, TTL multiplier).
ServerOptions server_options(const ProtocolConfig& cfg);
/// The sessions' LockDelay.
Duration lock_delay(const ProtocolConfig& cfg);

/// A client's session and the lock it holds, shared by its fibers (the lock's, the renewer's, the
/// monitor's).
struct SessionState {
  std::uint64_t id = 0;  ///< 0: none (released, or never created)
  Duration ttl{0};
  Time last_renewed{};  ///< this client's clock: when it sent the last renewal (or the create) that went
                        ///< through
  Time renew_due{};
  bool expired = false;     ///< the renewer learned the session is gone
  std::string key;          ///< the key it holds ("" none): the monitor watches it
  std::uint64_t index = 0;  ///< the key's ModifyIndex the monitor saw last
  bool lost = false;        ///< the monitor saw the key leave this session
  std::uint64_t generation = 0;
};

/// The `consul lock` client.
class ConsulClient final : public LockClient {
 public:
  ConsulClient(std::vector<ProcId> servers, Duration rpc_timeout, Duration acquire_timeout,
               Duration lock_delay);
  std::optional<Grant> acquire(Context& ctx, const std::string& key, Duration ttl) override;
  /// A renewal of the grant's session; false once the servers say it is gone.
  bool extend(Context& ctx, Grant& grant, Duration ttl) override;
  /// PUT ?release=<session>, and the renewals stop (the session, holding nothing, expires on its own).
  void release(Context& ctx, const Grant& grant) override;
  /// Until the monitor saw the key leave the session.
  bool believes_valid(Context& ctx, const Grant& grant) override;

 private:
  void start_threads(Context& ctx);

  std::vector<ProcId> servers_;
  raft::Client rc_;
  Duration acquire_timeout_;
  Duration lock_delay_;
  std::shared_ptr<SessionState> st_;
  ProcId renewer_{}, monitor_{};
};

/// A read of `key` on the leader; with `wait_index` a blocking query, answered once the key's ModifyIndex
/// passes it. Follows redirects and asks again after a leader change; nothing by `until`.
std::optional<raft::ClientReply> blocking_get(raft::Client& rc, Context& ctx, const std::string& key,
                                              std::uint64_t wait_index, Time until);
/// The holder session a get's answer names.
std::uint64_t holder_of(const raft::ClientReply& r);

}  // namespace consul
}  // namespace locksim
