#pragma once
/// Raft (Ongaro & Ousterhout 2014) running inside a world, carrying any replicated service as its state
/// machine. Each member is one daemon process (`<prefix>1`..`<prefix>N`) written as a single event loop: it
/// waits on its mailbox with a timeout equal to its next timer (election, heartbeat, check-quorum, and the
/// service's own timer), all measured on its own MONOTONIC clock. currentTerm, votedFor and the log live in
/// the process's Storage (fsynced per entry by default, like etcd's WAL), so a restarted member reloads them;
/// commit index and applied state are volatile and rebuilt, as in etcd.
///
/// The core knows nothing of what it replicates. A service (class Service) sees:
///  - every committed entry, in index order, on every member and every incarnation (apply);
///  - on the leader, right after applying an entry, the client request waiting for it (leader_applied): it
///    answers it at once or keeps it to answer later (a lock waiter);
///  - the leader's office: on_leader (etcd's lessor Promote, ZooKeeper's session re-touch), on_step_down
///    (answer every kept request "leader-changed"), and a timer of its own (next_timer / on_timer: what the
///    leader proposes when it fires, such as lease or session expiry).
/// A command is the service's own text (LogEntry::cmd): the core stores it as `<term> <cmd>` under
/// raft/log/<index>, ships it in AppendEntries, and hands it back unchanged.
///
/// Services: the etcd-like lease service (protocols/raft/lease_group.hpp), ZooKeeper
/// (protocols/zookeeper/).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "locksim/sim/world.hpp"

namespace locksim::raft {

/// One log entry: its term and the service's command, as the service encoded it.
struct LogEntry {
  std::uint64_t term = 0;
  std::string cmd;
  friend bool operator==(const LogEntry&, const LogEntry&) = default;
};

/// Text form used in Storage (one key per entry): `<term> <cmd>`.
std::string encode_entry(const LogEntry& e);
std::optional<LogEntry> decode_entry(std::string_view s);

/// Client request / reply bodies (message types "raft.client" / "raft.client.reply").
struct ClientRequest {
  std::uint64_t req = 0;
  std::string cmd;  ///< the service's command
};
struct ClientReply {
  std::uint64_t req = 0;
  bool ok = false;
  std::uint64_t value = 0;
  /// "not-leader" (with `leader` as a hint: nothing was done), "leader-changed" (the entry was appended but
  /// the leader lost its office before it was applied: it may still commit, so the outcome is unknown, as
  /// etcd's "leader changed"), or the service's own ("lease-not-found", "deleted", "no-key", ...)
  std::string error;
  std::optional<ProcId> leader;
  std::string data;  ///< a service's answer beyond `value` (its own text)
};
inline constexpr const char* kClientRequestType = "raft.client";
inline constexpr const char* kClientReplyType = "raft.client.reply";

/// A client request waiting for its entry to be applied (or, for a lock, for its key to become the holder).
struct Pending {
  ProcId client;
  std::uint64_t msg = 0;  ///< request message id (reply_to)
  std::uint64_t req = 0;
  Time appended{};  ///< the leader's clock when it appended the request's entry
};

/// What a service sees of the member it runs in. Leader-only calls are made only while leading().
class Member {
 public:
  virtual ~Member() = default;
  virtual Context& ctx() = 0;
  virtual bool leading() const = 0;
  virtual std::uint64_t term() const = 0;
  virtual std::uint64_t last_index() const = 0;
  virtual std::uint64_t commit_index() const = 0;
  /// Entry `index` of this member's log (1..last_index()).
  virtual const LogEntry& entry(std::uint64_t index) const = 0;
  /// Leader only: append `cmd` as an entry of this term (replicated and applied like a client's); its index.
  virtual std::uint64_t propose(std::string cmd) = 0;
  /// Leader only: the client request waiting for entry `index`, handed over to the service (which now owes
  /// it an answer: send_reply now, or later, or "leader-changed" in on_step_down).
  virtual std::optional<Pending> take_pending(std::uint64_t index) = 0;
  /// Answer a request (r.req is set from `p`).
  virtual void send_reply(const Pending& p, ClientReply r) = 0;
};

/// A replicated service: deterministic, the same on every member for the same log prefix.
class Service {
 public:
  virtual ~Service() = default;
  /// Apply committed entry `index` (every member, every incarnation, from index 1 up).
  virtual void apply(std::uint64_t index, const LogEntry& e) = 0;
  /// Leader only, right after apply(index, e): the request waiting for it is take_pending(index) (one left
  /// there is answered "leader-changed" when this member steps down).
  virtual void leader_applied(std::uint64_t index, const LogEntry& e) = 0;
  /// The command of the no-op entry a new leader proposes to commit everything before it.
  virtual std::string noop() const { return {}; }
  /// Leader only: a client's command before it is appended. An answer returned here is sent at once and
  /// nothing is appended (Consul's KVS.Apply refuses an acquire in lock-delay before its raftApply); nothing
  /// (the default): the command is appended as usual.
  virtual std::optional<ClientReply> screen(const std::string& cmd) {
    (void)cmd;
    return std::nullopt;
  }
  /// This member became leader (before it proposes the no-op of its term).
  virtual void on_leader() {}
  /// This member stopped leading (the core has answered its pending requests "leader-changed"): answer the
  /// requests the service kept, forget leader-only state.
  virtual void on_step_down() {}
  /// Leader only: when the service's timer falls next, on this member's monotonic clock (kTimeMax: never).
  virtual Time next_timer() const { return kTimeMax; }
  /// Leader only: called at every wake-up after check-quorum and before heartbeats: propose what is due.
  virtual void on_timer() {}
};

/// Makes the service of one member incarnation (called in its fiber, before it loads its log).
using ServiceFactory = std::function<std::unique_ptr<Service>(Member&)>;

/// Instrumentation of the core: what tests and history recorders see. Called synchronously inside members'
/// fibers; the protocol never reads anything back. Any callback may be empty.
struct GroupObserver {
  /// `node` started (first boot or restart: a follower) in `term`, after loading what it persisted.
  std::function<void(const std::string& node, std::uint64_t term)> on_start;
  /// `node` became leader of `term`.
  std::function<void(const std::string& node, std::uint64_t term)> on_leader;
  /// `node` stopped leading `term` (it heard a higher term, or check-quorum found no majority).
  std::function<void(const std::string& node, std::uint64_t term)> on_step_down;
  /// `node`'s commit index moved from `from` to `to` (from 0 again after a restart).
  std::function<void(const std::string& node, std::uint64_t from, std::uint64_t to)> on_commit;
  /// `node` removed entry `index` from its log (a conflict with the leader's log).
  std::function<void(const std::string& node, std::uint64_t index, const LogEntry& e)> on_truncate;
  /// `node` applied committed entry `index` (every member, every incarnation, from index 1 up), after the
  /// service's apply and before its leader_applied.
  std::function<void(const std::string& node, std::uint64_t index, const LogEntry& e)> on_apply;
};

struct GroupOptions {
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
};

/// Spawn the group as daemon processes `<prefix>1`..`<prefix>N`, each running the service `make` builds;
/// returns their ids in order.
std::vector<ProcId> spawn_group(World& world, const GroupOptions& opts, ServiceFactory make,
                                std::shared_ptr<const GroupObserver> observer = nullptr);

/// Client side of a service, for code running in a client's fiber: finds the leader (following redirects),
/// retries on timeouts, and matches replies by request id (stale replies are consumed and dropped).
/// `detail` is the trace's summary of a command.
class Client {
 public:
  Client(std::vector<ProcId> servers, Duration rpc_timeout, Duration retry_pause = 10ms);
  /// Run `cmd` on the leader; nothing if no definite answer came before `deadline` (this node's clock).
  /// A "not-leader" answer is never returned: it is followed; nor is "leader-changed" (the outcome is
  /// unknown): the command is sent again, so it must be idempotent (a grant carries a grant key).
  std::optional<ClientReply> submit(Context& ctx, const std::string& cmd, const std::string& detail,
                                    Time deadline);
  /// Send `cmd` to the member believed to be leader; returns the request id.
  std::uint64_t send(Context& ctx, const std::string& cmd, std::string detail);
  /// The next reply to any request in `reqs`, waiting until `until` (this node's clock).
  std::optional<ClientReply> wait(Context& ctx, const std::set<std::uint64_t>& reqs, Time until);
  /// Follow a not-leader answer (or a timeout when `reply` is null): pick the hinted or next member.
  void redirect(const ClientReply* reply);
  ProcId target() const { return servers_[target_]; }
  /// The member requests go to, as an index into the servers: clients that share one connection (a
  /// ZooKeeper session's fibers) hand it to each other.
  std::size_t target_index() const { return target_; }
  void set_target_index(std::size_t i) { target_ = i % servers_.size(); }
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
