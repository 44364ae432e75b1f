#pragma once
/// The etcd-like lock service on the Raft core (protocols/raft/raft.hpp): a group whose replicated state
/// machine is LockService (protocols/raft/lock_service.hpp), and the typed view of it that the `lease`
/// protocols and the Raft tests use (entries, observer, client with lease commands).
///
/// Lock service (etcd v3 leases + concurrency.Mutex, reduced to what a lock needs):
///  - grant(ttl) creates a lease whose id is the log index of the grant entry (a retry with the client's
///    grant key names the same lease: protocols/raft/lock_service.hpp);
///  - keepalive(lease) goes through the log, so only a leader that can still commit answers it (etcd checks
///    leadership before renewing for the same reason); the leader then pushes the lease's deadline to now +
///    ttl;
///  - the LEADER decides expiry on its monotonic clock and commits a revoke entry, which deletes the lease's
///    keys; a new leader first refreshes every lease's deadline to now + ttl (etcd's lessor Promote);
///  - lock(name, lease) creates key name/lease with create revision = the log index of the lock entry (or
///    returns the existing one: retries are idempotent); the holder is the key with the lowest revision, and
///    the leader answers a waiter only once its key is the holder;
///  - unlock(name, lease) deletes the key.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "locksim/protocols/raft/lock_service.hpp"
#include "locksim/protocols/raft/raft.hpp"

namespace locksim::raft {

/// One log entry of the lock service, decoded.
struct Entry {
  std::uint64_t term = 0;
  Command cmd;
  friend bool operator==(const Entry&, const Entry&) = default;
};

/// Text form used in Storage (one key per entry): the core's `<term> <cmd>` with the command's text.
std::string encode(const Entry& e);
std::optional<Entry> decode(std::string_view s);
/// The decoded form of a core entry (nothing if its command is not the lock service's).
std::optional<Entry> to_entry(const LogEntry& e);

/// Instrumentation: what tests and the history recorder see. Called synchronously inside members' fibers; the
/// protocol never reads anything back. Any callback may be empty.
struct Observer {
  /// `node` started (first boot or restart: a follower) in `term`, after loading what it persisted.
  std::function<void(const std::string& node, std::uint64_t term)> on_start;
  /// `node` became leader of `term`.
  std::function<void(const std::string& node, std::uint64_t term)> on_leader;
  /// `node` stopped leading `term` (it heard a higher term, or check-quorum found no majority).
  std::function<void(const std::string& node, std::uint64_t term)> on_step_down;
  /// `node`'s commit index moved from `from` to `to` (from 0 again after a restart).
  std::function<void(const std::string& node, std::uint64_t from, std::uint64_t to)> on_commit;
  /// `node` removed entry `index` from its log (a conflict with the leader's log).
  std::function<void(const std::string& node, std::uint64_t index, const Entry& e)> on_truncate;
  /// `node` applied committed entry `index` (every member, every incarnation, from index 1 up).
  std::function<void(const std::string& node, std::uint64_t index, const Entry& e)> on_apply;
  /// Applied on the leader: key lock/lease with revision `rev` became the holder.
  std::function<void(const std::string& node, const std::string& lock, std::uint64_t lease,
                     std::uint64_t rev)>
      on_holder;
  /// The leader answered a grant/keepalive ok. The promise it makes holds until `since_append` before now +
  /// ttl (measured from when it appended the entry, which precedes any later leader's election).
  std::function<void(const std::string& node, std::uint64_t lease, Duration ttl, Duration since_append)>
      on_promise;
};

struct RaftOptions : GroupOptions {
  /// How often the leader looks for expired leases, on its monotonic clock (ticks at multiples of it):
  /// etcd's lessor does every 500 ms, so a lease is revoked up to that much after its TTL ran out. 0: at the
  /// exact instant.
  Duration expiry_check_interval{0};
  /// Added to every lock revision a reply carries as token: a service with earlier history (etcd's revision
  /// counter is global), so tokens start at first_token = 1 + token_base or later.
  std::uint64_t token_base = 0;
  /// Teaching variant "wall-expiry": the leader times leases on its wall clock (which jumps), not its
  /// monotonic one.
  bool wall_expiry = false;
  /// Teaching variant "node-counter": a lock reply carries this leader's own counter, not the replicated
  /// revision.
  bool node_counter = false;
};

/// Spawn the lock-service group as daemon processes `<prefix>1`..`<prefix>N`; returns their ids in order.
std::vector<ProcId> spawn_raft_group(World& world, const RaftOptions& opts,
                                     std::shared_ptr<const Observer> observer = nullptr);

/// The lock service's client: the core's client with lock-service commands.
class RaftClient : public Client {
 public:
  using Client::Client;
  using Client::send;
  using Client::submit;
  std::optional<ClientReply> submit(Context& ctx, const Command& cmd, Time deadline);
  std::uint64_t send(Context& ctx, const Command& cmd);
};

}  // namespace locksim::raft
