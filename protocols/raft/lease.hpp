#pragma once
/// The consensus-backed lease protocols on our Raft lock service (protocols/raft/lease_group.hpp):
///  - `lease`: grant a lease with the requested TTL, lock a key under it, keep it alive; the client believes
///  it holds
///    the lock while its own monotonic clock says the lease is valid, measured from when it SENT the last
///    successful grant/keep-alive request. The grant's token is the key's create revision, but writes carry
///    no token.
///  - `lease+fence`: the same, and fenced(): every write carries the create revision as its fencing token.
///
/// Keep-alive in the client's own fiber (lease_algorithm.hpp, the algorithm real runs share). With a client's
/// `renew` on, the workload also runs etcd's background keep-alive (concurrency.Session) in a thread of the
/// client process with a LeaseClient of its own (renewal_defaults says how often); its renewals reach this
/// client through the grant they share.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "locksim/protocols/lock.hpp"
#include "locksim/protocols/raft/lease_algorithm.hpp"
#include "locksim/protocols/raft/lease_group.hpp"

namespace locksim {

/// Registers `lease` and `lease+fence`.
void register_lease_protocols(ProtocolRegistry& registry);

namespace raft {

/// The Raft options a ProtocolConfig asks for (group size, timeouts; fsync always unless
/// extra["raft_fsync"] is "never" or "periodic").
RaftOptions raft_options(const ProtocolConfig& cfg);

/// The `lease` client in a simulated process: LeaseAlgorithm (lease_algorithm.hpp) over the process's Context
/// and the Raft group's client.
class LeaseClient final : public LockClient {
 public:
  LeaseClient(std::vector<ProcId> servers, Duration keepalive_interval, Duration rpc_timeout,
              Duration acquire_timeout, bool trust_reply = false);
  std::optional<Grant> acquire(Context& ctx, const std::string& key, Duration ttl) override;
  bool extend(Context& ctx, Grant& grant, Duration ttl) override;
  void release(Context& ctx, const Grant& grant) override;
  bool believes_valid(Context& ctx, const Grant& grant) override;

 private:
  RaftClient rc_;
  LeaseAlgorithm algo_;
};

}  // namespace raft
}  // namespace locksim
