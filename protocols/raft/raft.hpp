#pragma once
/// Raft (Ongaro & Ousterhout 2014) running inside a world, with an etcd-like lock service as its replicated
/// state machine. Each member is one daemon process (`raft1`..`raftN`) written as a single event loop: it
/// waits on its mailbox with a timeout equal to its next timer (election, heartbeat, check-quorum, lease
/// expiry), all measured on its own MONOTONIC clock. currentTerm, votedFor and the log live in the process's
/// Storage (fsynced per entry by default, like etcd's WAL), so a restarted member reloads them; commit index,
/// applied state and lease deadlines are volatile and rebuilt, as in etcd.
///
/// Lock service (etcd v3 leases + concurrency.Mutex, reduced to what a lock needs):
///  - grant(ttl) creates a lease whose id is the log index of the grant entry (a retry with the client's
///    grant key names the same lease: protocols/raft/lock_service.hpp);
///  - keepalive(lease) goes through the log, so only a leader that can still commit answers it (etcd checks
///    leadership before renewing for the same reason); the leader then pushes the lease's deadline to now +
///    ttl;
///  - the LEADER decides expiry on its monotonic clock and commits a revoke entry, which deletes the lease's
///  keys;
///    a new leader first refreshes every lease's deadline to now + ttl (etcd's lessor Promote);
///  - lock(name, lease) creates key name/lease with create revision = the log index of the lock entry (or
///  returns
///    the existing one: retries are idempotent); the holder is the key with the lowest revision, and the
///    leader answers a waiter only once its key is the holder;
///  - unlock(name, lease) deletes the key.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "locksim/protocols/raft/lock_service.hpp"
#include "locksim/sim/world.hpp"

namespace locksim::raft {

/// One log entry.
struct Entry {
  std::uint64_t term = 0;
  Command cmd;
  friend bool operator==(const Entry&, const Entry&) = default;
};

/// Text form used in Storage (one key per entry).
std::string encode(const Entry& e);
std::optional<Entry> decode(std::string_view s);

/// Client request / reply bodies (message types "raft.client" / "raft.client.reply").
struct ClientRequest {
  std::uint64_t req = 0;
  Command cmd;
};
struct ClientReply {
  std::uint64_t req = 0;
  bool ok = false;
  std::uint64_t value = 0;
  /// "not-leader" (with `leader` as a hint: nothing was done), "leader-changed" (the entry was appended but
  /// the leader lost its office before it was applied: it may still commit, so the outcome is unknown, as
  /// etcd's "leader changed"), "lease-not-found", "deleted", "no-key"
  std::string error;
  std::optional<ProcId> leader;
};
inline constexpr const char* kClientRequestType = "raft.client";
inline constexpr const char* kClientReplyType = "raft.client.reply";

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

struct RaftOptions {
  std::uint32_t nodes = 3;  ///< group size (3 or 5 recommended)
  std::string prefix = "raft";
  Duration election_timeout_min{150ms};
  Duration election_timeout_max{300ms};
  Duration heartbeat{50ms};
  FsyncPolicy fsync = FsyncPolicy::always;  ///< etcd fsyncs its WAL before acknowledging
  Duration fsync_period{1s};
  /// Members whose WAL fsync differs from `fsync`: name → (policy, period).
  std::map<std::string, std::pair<FsyncPolicy, Duration>> member_fsync;
  std::size_t max_batch = 64;  ///< entries per AppendEntries
  bool check_quorum =
      true;  ///< a leader that has not heard from a majority for an election timeout steps down
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

/// Spawn the group as daemon processes `<prefix>1`..`<prefix>N`; returns their ids in order.
std::vector<ProcId> spawn_raft_group(World& world, const RaftOptions& opts,
                                     std::shared_ptr<const Observer> observer = nullptr);

/// Client side of the service, for code running in a client's fiber: finds the leader (following redirects),
/// retries on timeouts, and matches replies by request id (stale replies are consumed and dropped).
class RaftClient {
 public:
  RaftClient(std::vector<ProcId> servers, Duration rpc_timeout, Duration retry_pause = 10ms);
  /// Run `cmd` on the leader; nothing if no definite answer came before `deadline` (this node's clock).
  /// A "not-leader" answer is never returned: it is followed; nor is "leader-changed" (the outcome is
  /// unknown): the command is sent again, so it must be idempotent (a grant carries a grant key).
  std::optional<ClientReply> submit(Context& ctx, const Command& cmd, Time deadline);
  /// Send `cmd` to the member believed to be leader; returns the request id.
  std::uint64_t send(Context& ctx, const Command& cmd);
  /// The next reply to any request in `reqs`, waiting until `until` (this node's clock).
  std::optional<ClientReply> wait(Context& ctx, const std::set<std::uint64_t>& reqs, Time until);
  /// Follow a not-leader answer (or a timeout when `reply` is null): pick the hinted or next member.
  void redirect(const ClientReply* reply);
  ProcId target() const { return servers_[target_]; }
  /// An answer that says the command was not run: "not-leader", or the refusal of a member's host
  /// ("conn-refused", NetworkOptions::refuse_when_down).
  static bool nothing_done(const ClientReply& r);
  Duration rpc_timeout() const { return rpc_timeout_; }

 private:
  std::vector<ProcId> servers_;
  std::size_t target_ = 0;
  std::uint64_t next_req_ = 1;
  std::uint64_t last_msg_ = 0;  ///< the message id of the newest request sent
  std::uint64_t last_req_ = 0;  ///< its request id
  Duration rpc_timeout_;
  Duration retry_pause_;
};

}  // namespace locksim::raft
