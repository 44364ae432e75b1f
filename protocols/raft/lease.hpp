#pragma once
/// The consensus-backed lease protocols on our Raft lock service (protocols/raft/lease_group.hpp):
///  - `lease`: grant a lease with the requested TTL, lock a key under it, keep it alive; the client believes
///  it holds
///    the lock while its own monotonic clock says the lease is valid, measured from when it SENT the last
///    successful grant/keep-alive request. The grant's token is the key's create revision, but writes carry
///    no token.
///  - `lease+fence`: the same, and fenced(): every write carries the create revision as its fencing token.
///
/// Keep-alive in the client's own fiber. The client keeps, per lease, its validity deadline and the time the
/// next keep-alive is due (every TTL/3, or ProtocolConfig::keepalive_interval), and sends due keep-alives
/// itself: while it waits for its lock key to become the holder, in extend() (which always renews), and in
/// believes_valid() (which renews when one is due before answering). A pause of the client therefore also
/// stops its keep-alives, exactly as a GC pause stops every thread of a real client. With a client's `renew`
/// on, the workload also runs etcd's background keep-alive (concurrency.Session) in a thread of the client
/// process with a LeaseClient of its own (renewal_defaults says how often); its renewals reach this client
/// through the grant they share.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "locksim/protocols/lock.hpp"
#include "locksim/protocols/raft/lease_group.hpp"

namespace locksim {

/// Registers `lease` and `lease+fence`.
void register_lease_protocols(ProtocolRegistry& registry);

namespace raft {

/// The Raft options a ProtocolConfig asks for (group size, timeouts; fsync always unless
/// extra["raft_fsync"] is "never" or "periodic").
RaftOptions raft_options(const ProtocolConfig& cfg);

/// The `lease` client (also used by `lease+fence`: fencing is the workload's business, through
/// Protocol::fenced()).
class LeaseClient final : public LockClient {
 public:
  /// `acquire_timeout`: how long acquire() keeps trying (etcd's Lock blocks until its context ends).
  /// `trust_reply` (teaching variant "trust-reply"): accept a lock reply that arrives after the lease already
  /// ran out on the client's clock, as etcd's Mutex did before it re-checked its key after waiting (etcd
  /// #11456).
  LeaseClient(std::vector<ProcId> servers, Duration keepalive_interval, Duration rpc_timeout,
              Duration acquire_timeout, bool trust_reply = false);
  std::optional<Grant> acquire(Context& ctx, const std::string& key, Duration ttl) override;
  /// Renews the lease (its TTL was fixed at grant, as in etcd). Works on a lease another client of the same
  /// process acquired (a renewal thread's client): its TTL is then `ttl`, its validity the grant's.
  bool extend(Context& ctx, Grant& grant, Duration ttl) override;
  /// Unlock the key, then revoke the lease (best effort).
  void release(Context& ctx, const Grant& grant) override;
  /// Sends a due keep-alive first, then answers from the client's own monotonic clock.
  bool believes_valid(Context& ctx, const Grant& grant) override;

 private:
  struct LeaseState {
    Duration ttl{0};
    Time valid_until{};    ///< this client's clock: send time of the last successful grant/keep-alive + ttl
    Time keepalive_due{};  ///< this client's clock
    bool lost = false;     ///< the service said the lease is gone
  };
  /// One keep-alive attempt (following redirects) until `deadline`; updates `st`.
  void keepalive(Context& ctx, LeaseState& st, std::uint64_t lease, Time deadline);
  void revoke(Context& ctx, std::uint64_t lease);
  /// The grant's validity when it runs ahead of `st`: another client of this process renewed the lease.
  void adopt_renewal(LeaseState& st, const Grant& grant) const;

  RaftClient rc_;
  Duration keepalive_interval_;
  Duration acquire_timeout_;
  bool trust_reply_ = false;
  std::map<std::uint64_t, LeaseState> leases_;
};

}  // namespace raft
}  // namespace locksim
