#pragma once
/// The history: ground truth recorded while a world runs, read afterwards by the checker (scenarios/checker).
///
/// Who writes what:
///  - lock *servers* record service-side facts ("node redis3 set key=lock to value v at true time t"): the
///    oracle derives from them when the service as a whole granted a holder (the quorum-th node), which
///    orders epochs. Only records from the processes the protocol declared as its service (`service_nodes`,
///    filled by the runner from the protocol's ServiceInfo) count;
///  - the *workload* (not the protocol's client code) records grants as the client saw them, belief ends, the
///    reads and writes it sends and whether each write was acknowledged;
///  - the *resource* appends one entry to its own log (`resource_log`) for every delivered copy of a request,
///    in the order it processed them: what it decided and whether the key's value changed. That log is the
///    only ground truth the checker takes about the resource.
/// Protocol code only ever writes here; nothing in protocols/ reads it back (the epoch is the oracle's, never
/// the grant's). All times are true simulated time.
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "locksim/protocols/service.hpp"
#include "locksim/sim/time.hpp"
#include "locksim/sim/trace.hpp"

namespace locksim {

/// A lock server made `value` the holder of `key` (SET NX succeeded, replicated SET applied, a lock key was
/// committed...). `node` names the server. Its index in History::service_sets is the service's record
/// sequence.
struct ServiceSet {
  Time time{};
  std::string node;
  std::string key;
  std::string value;
};

/// A service member's role, as the member itself recorded it when the role began: a Raft member starts
/// (follower), becomes leader of a term, or stops leading; a replicated Redis node starts as master or
/// replica, is promoted or demoted. A member's role is its latest record, until it crashes. Ground truth for
/// faults aimed at a role ("crash the leader"), resolved when they fire; the checker does not read it.
struct ServiceRole {
  enum class Role : std::uint8_t {
    follower,  ///< a Raft follower or candidate; a Redis replica
    leader,    ///< a Raft leader; a Redis master
  };
  Time time{};
  std::string node;
  Role role = Role::follower;
  /// Raft: the member's current term. Redis has no term: 0 for the role a node starts in, 1 for a promotion
  /// or a demotion, so a promoted master outranks one that came back up as the master it was configured to
  /// be (the sentinel demotes that one as soon as it hears it).
  std::uint64_t term = 0;
};

/// A client's successful acquisition as the workload saw it.
struct GrantRecord {
  std::uint64_t id = 0;  ///< index in History::grants
  std::string client;
  std::string key;
  std::string value;                     ///< the holder identity the client used (random value, lease id...)
  std::optional<std::uint64_t> token;    ///< fencing token, if the protocol has one
  Time requested{};                      ///< true time the acquire began
  Time granted{};                        ///< true time the client learned it holds the lock
  Time belief_end = kTimeMax;            ///< true time the client stopped acting as holder (kTimeMax: never)
  Time believed_valid_until = kTimeMax;  ///< true time at which the client's own validity estimate ran out
  std::string end_reason;                ///< released / expired / crashed / ...
};

inline constexpr std::uint64_t kNoId = std::numeric_limits<std::uint64_t>::max();

/// One read sent by a client (read–modify–write workloads).
struct ReadRecord {
  std::uint64_t id = 0;  ///< index in History::reads
  std::string client;
  std::uint64_t grant = 0;  ///< GrantRecord::id of the grant the client read under (kNoId: no lock)
  std::string key;
  std::optional<std::uint64_t> token;
  Time sent{};
  bool answered = false;  ///< the client got the value back
  std::string observed;   ///< the value it got ("" for none)
};

/// One write as sent by a client. The resource's judgement is in History::resource_log, not here; the
/// fields under "summary" are derived from that log by History::summarize() for reports, and the checker
/// never reads them.
struct WriteRecord {
  std::uint64_t id = 0;
  std::string client;
  /// GrantRecord::id of the grant the client wrote under; kNoId: written without a lock (a client whose
  /// program never acquires, which only a cas-row's clients may be).
  std::uint64_t grant = 0;
  std::string key;
  std::string value;
  std::optional<std::uint64_t> token;  ///< token carried by the write (none for unfenced protocols)
  Time sent{};                         ///< when the client sent it (after any pause its own note triggered)
  Time checked{};                      ///< when the client last checked its lease before this write
  bool lease_checked = false;          ///< it did check in this hold (else `checked` is the write's time)
  bool acknowledged = false;           ///< the client got the accepted answer back
  bool read_modify_write = false;      ///< value was computed from a read
  std::uint64_t read = kNoId;          ///< ReadRecord::id of that read (kNoId: none)
  std::optional<std::int64_t> read_value;  ///< the value that read returned, when it was an integer

  // Summary of the resource log (History::summarize): the first copy that changed the value if any, else the
  // first delivered copy.
  Time arrived = kTimeMax;  ///< when the resource processed that copy (kTimeMax: no copy was delivered)
  bool accepted = false;    ///< some copy changed the key's value
  std::string reject_reason;
  std::uint32_t copies = 0;  ///< delivered copies (network duplicates make more than one)

  /// cas-row: the write whose conflict this statement retries, after a re-read (kNoId: a first attempt).
  std::uint64_t retry_of = kNoId;
};

/// The kinds of protected resource (docs/safety.md judges each in its own terms).
enum class ResourceKind : std::uint8_t {
  store,             ///< a key-value store, fenced or not (protocols/resource.hpp)
  checkpoint_table,  ///< the notes' shard_checkpoint table (protocols/checkpoint_table.hpp)
  object_store,      ///< objects with generations and If-Match writes (protocols/object_store.hpp)
  external_api,      ///< a payment or email API that cannot check tokens (protocols/external_api.hpp)
  cas_row,           ///< a row with a version column, written by compare-and-set (protocols/cas_row.hpp)
  job_queue,         ///< a queue a scheduler leader enqueues jobs into (protocols/job_queue.hpp)
};

/// One entry of the resource's own append-only log: a delivered copy of a request, or a checked write
/// landing later. Entries are in the order the resource processed them; `seq` is the index.
struct ResourceEntry {
  enum class Op : std::uint8_t {
    write,  ///< a write request was processed (checked, and applied unless the store lands it later)
    read,   ///< a read request was processed
    land,   ///< a write checked earlier changed the value now (a store whose check and write are two steps)
  };
  std::uint64_t seq = 0;
  Op op = Op::write;
  Time time{};
  std::string resource;  ///< the resource process's name
  std::string key;
  std::uint64_t request = kNoId;  ///< WriteRecord::id (write, land) or ReadRecord::id (read); kNoId: unknown
  std::optional<std::uint64_t> token;       ///< the token the request carried
  bool accepted = false;                    ///< write: passed the check; read: served
  bool applied = false;                     ///< the key's value became this write's value at this entry
  std::string value;                        ///< the value written (write, land) or returned (read)
  std::string reason;                       ///< why it was refused
  ResourceKind kind = ResourceKind::store;  ///< which kind of resource logged it
  /// checkpoint-table: the statement's :offset (write) or the row's last_processed_offset (read), and its
  /// :worker (the row's updated_by for a read). object-store: `offset` is the object's generation after the
  /// request (0: it does not exist).
  /// :worker (the row's updated_by for a read). external-api: `worker` is the client that sent the request.
  std::int64_t offset = 0;
  std::string worker;
  /// external-api: the logical job a request names (write: `applied` = its effect was performed, otherwise
  /// deduplicated), or the highest job performed that a read returned; the request's idempotency key ("":
  /// none).
  std::int64_t job = 0;
  std::string idempotency_key;
  /// cas-row: the statement's :read_version (write: the version it was computed from) or the version the row
  /// returned (read). job-queue: `value` is the job id, `offset` its period, `worker` the client that
  /// enqueued it.
  std::uint64_t version = 0;
};

struct History {
  /// How many distinct service nodes must have set a value before the service as a whole granted it
  /// (1 for a single Redis or a consensus service that records only committed grants; majority for Redlock).
  /// The runner sets it from the protocol's ServiceDecl::quorum (a protocol that declares nothing sets it
  /// in build(), deprecated); every report shows it beside each grant's backing.
  std::uint32_t service_quorum = 1;
  /// The protocol that runs, and its declaration (empty: it declared nothing), set by the runner before
  /// build(): what ServiceRecorder checks its records against.
  std::string protocol;
  ServiceDecl service;
  /// The processes the protocol declared as its service (names). Service records from any other process do
  /// not back a grant (CheckResult::undeclared_records counts them).
  std::vector<std::string> service_nodes;
  /// Whether the protocol's writes carry its tokens to the resource: then a token that does not grow with the
  /// epoch breaks the fencing contract (token-regression).
  bool tokens_fence = false;
  std::vector<ServiceSet> service_sets;
  std::vector<ServiceRole> service_roles;  ///< in the order recorded (true time order)
  std::vector<GrantRecord> grants;
  std::vector<ReadRecord> reads;
  std::vector<WriteRecord> writes;
  std::vector<ResourceEntry> resource_log;

  /// A recorder for the declared service process `node`, timed by `world`'s true time. Throws
  /// std::logic_error when the protocol declared a service and `node` is not in it.
  ServiceRecorder recorder(const World& world, std::string node);
  /// Deprecated (kept for one release for protocols that declare no service): record through recorder().
  void service_set(Time t, std::string node, std::string key, std::string value) {
    service_sets.push_back({t, std::move(node), std::move(key), std::move(value)});
  }
  /// Deprecated (kept for one release for protocols that declare no service): record through recorder().
  void service_role(Time t, std::string node, ServiceRole::Role role, std::uint64_t term) {
    service_roles.push_back({t, std::move(node), role, term});
  }
  std::uint64_t add_grant(GrantRecord g) {
    g.id = grants.size();
    grants.push_back(std::move(g));
    return grants.back().id;
  }
  void end_belief(std::uint64_t grant, Time t, std::string reason) {
    auto& g = grants.at(grant);
    if (g.belief_end == kTimeMax) {
      g.belief_end = t;
      g.end_reason = std::move(reason);
    }
  }
  std::uint64_t add_read(ReadRecord r) {
    r.id = reads.size();
    reads.push_back(std::move(r));
    return reads.back().id;
  }
  std::uint64_t add_write(WriteRecord w) {
    w.id = writes.size();
    writes.push_back(std::move(w));
    return writes.back().id;
  }
  /// Appends a resource log entry (its seq is its index) and returns that seq.
  std::uint64_t log(ResourceEntry e) {
    e.seq = resource_log.size();
    resource_log.push_back(std::move(e));
    return resource_log.back().seq;
  }
  /// Shorthand for a store whose check and write are one step: write copy `write` processed at `t`,
  /// accepted (and applied) or refused for `reason`. Takes key, value and token from the WriteRecord.
  std::uint64_t deliver(std::uint64_t write, Time t, bool accepted, std::string reason = {},
                        std::string resource = "store") {
    const WriteRecord& w = writes.at(write);
    return log(ResourceEntry{.op = ResourceEntry::Op::write,
                             .time = t,
                             .resource = std::move(resource),
                             .key = w.key,
                             .request = write,
                             .token = w.token,
                             .accepted = accepted,
                             .applied = accepted,
                             .value = w.value,
                             .reason = std::move(reason)});
  }
  /// Fills the summary fields of every WriteRecord from the resource log.
  void summarize();
};

inline void History::summarize() {
  for (auto& w : writes) {
    w.arrived = kTimeMax;
    w.accepted = false;
    w.reject_reason.clear();
    w.copies = 0;
  }
  for (const ResourceEntry& e : resource_log) {
    if (e.op == ResourceEntry::Op::read || e.request >= writes.size()) continue;
    WriteRecord& w = writes[e.request];
    if (e.op == ResourceEntry::Op::write) ++w.copies;
    if (w.accepted) continue;
    if (e.applied) {
      w.arrived = e.time;
      w.accepted = true;
      w.reject_reason.clear();
    } else if (w.arrived == kTimeMax) {
      w.arrived = e.time;
      w.reject_reason = e.reason;
    }
  }
}

}  // namespace locksim
