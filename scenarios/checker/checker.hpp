#pragma once
/// The checker: the oracle's judge. It reads only a History (ground truth recorded by the simulator, see
/// protocols/history.hpp) and never a protocol's opinion of itself, so its verdict can be trusted whatever
/// the protocol under test claims. About the resource it reads only the resource's own log
/// (History::resource_log: every delivered copy, in processing order), never the WriteRecord summaries.
/// Deterministic (ordered containers, ties broken by sequence numbers and ids) and O(n log n) in the size of
/// the history (plus the number of reported overlap pairs).
///
/// The anomalies (docs/safety.md defines each with an example); the verdict is unsafe iff any occurs:
///  - stale-write-accepted: on one resource key, a write of a lower epoch changed the value after a write of
///    a higher epoch had, in the resource's processing order (every applied copy counts, duplicates too);
///  - lost-update: an acknowledged read–modify–write w whose effect was overwritten by another read–modify–
///    write computed from a read the resource served before w changed the value (two holders at once);
///  - token-regression: when the protocol's writes carry its tokens, a grant of a later epoch carried a token
///    no greater than an earlier epoch's on the same lock (the fencing contract is broken);
///  - fresh-write-rejected: the resource refused a write (no copy of it ever took effect) whose grant was the
///    newest epoch on its lock when the copy was processed.
///
/// Conventions:
///  - grant ids are indices into History::grants, write ids WriteRecord::id, read ids ReadRecord::id;
///  - a grant's *belief end* is min(belief_end, believed_valid_until): the client stops acting as holder at
///    whichever comes first, its own "I release / I noticed expiry" or its validity estimate running out;
///  - a grant's *belief interval* is [granted, belief end) in true time (empty if belief end <= granted).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "locksim/protocols/history.hpp"
#include "locksim/sim/time.hpp"

namespace locksim {

/// The anomaly kinds, by the names reports and docs/safety.md use.
inline constexpr const char* kStaleWriteAccepted = "stale-write-accepted";
inline constexpr const char* kLostUpdate = "lost-update";
inline constexpr const char* kTokenRegression = "token-regression";
inline constexpr const char* kFreshWriteRejected = "fresh-write-rejected";
/// The checkpoint table's own (docs/safety.md): a shard's applied offset moved backwards; one offset
/// checkpointed by two workers.
inline constexpr const char* kCheckpointRewind = "checkpoint-rewind";
inline constexpr const char* kDuplicateProcessing = "duplicate-processing";
/// The object store's own: an applied manifest write left out a batch the manifest it replaced had committed.
inline constexpr const char* kStaleManifest = "stale-manifest";
/// The external API's own (docs/safety.md): one logical job's effect performed twice.
inline constexpr const char* kDuplicateEffect = "duplicate-effect";
/// The job queue's own (docs/safety.md): one job id enqueued (accepted) twice. (A cas-row's anomaly is
/// lost-update: an applied write not computed from the version it replaced.)
inline constexpr const char* kDuplicateEnqueue = "duplicate-enqueue";

/// Every anomaly kind, in the order reports list them.
inline constexpr const char* kAnomalyKinds[] = {kStaleWriteAccepted, kLostUpdate,       kTokenRegression,
                                                kFreshWriteRejected, kCheckpointRewind, kDuplicateProcessing,
                                                kDuplicateEffect,    kDuplicateEnqueue, kStaleManifest};

/// One write as named in a verdict: enough for a person to find it in the story without the history at hand.
/// `seq` and `arrived` name the copy involved (a duplicate may be another copy than the first).
struct WriteRef {
  std::uint64_t write = kNoId;  ///< WriteRecord::id (kNoId: none involved)
  std::uint64_t grant = 0;      ///< the grant the client wrote under
  std::string client;
  std::uint64_t epoch = 0;             ///< the oracle's epoch of that grant (1-based)
  std::optional<std::uint64_t> token;  ///< the token the write carried, if any
  Time sent{};
  Time arrived{};             ///< when the resource processed this copy
  std::uint64_t seq = kNoId;  ///< the copy's entry in the resource log
  bool accepted = false;      ///< this copy changed the value
  bool valid() const { return write != kNoId; }
};

/// One grant as named in a verdict.
struct GrantRef {
  std::uint64_t grant = kNoId;
  std::string client;
  std::uint64_t epoch = 0;
  std::optional<std::uint64_t> token;
  Time ordered_at{};  ///< its service grant time (or `granted` when unbacked)
  bool valid() const { return grant != kNoId; }
};

/// An anomaly: a breach of safety. What `earlier` and `later` hold depends on the kind:
///  - stale-write-accepted: `earlier` is the first applied copy that carried the highest epoch before
///  `later`,
///    the stale copy that was applied after it;
///  - lost-update: `earlier` is the acknowledged write whose effect was lost, `later` the write computed from
///    an older read that overwrote it;
///  - fresh-write-rejected: `later` is the refused copy; `earlier` the accepted write that set the fence
///  above
///    it (none when there is no such write, e.g. "no token");
///  - token-regression: `grant_earlier` is the earlier-epoch grant with the highest token so far,
///  `grant_later`
///    the later-epoch grant whose token is not greater; no writes;
///  - checkpoint-rewind: `earlier` the applied checkpoint that set the shard's offset, `later` the applied
///  one
///    with a lower offset right after it (`key` is the shard, the offsets are the writes' values);
///  - duplicate-processing: `earlier` the first applied checkpoint of an offset, `later` another worker's
///    applied checkpoint of the same offset;
///  - stale-manifest: `earlier` the applied manifest write the object held, `later` the applied one that
///    replaced it and left out some of its batches (`key` is the manifest).
///  - duplicate-effect: `earlier` the external API's first performed request of a job, `later` another
///    performed request of the same job (another client's, or the same client's again); `key` the account.
///  - lost-update on a cas-row: `earlier` the applied write that set the version the row held, `later` the
///    applied write computed from another (older) version, which overwrote it (`key` is the row);
///  - duplicate-enqueue: `earlier` the first accepted enqueue of a job, `later` another accepted enqueue of
///    the same job id (`key` is the job id; the writes' values are the job id too).
struct Violation {
  std::string kind = kStaleWriteAccepted;
  std::string key;  ///< resource key (token-regression: the lock key)
  WriteRef earlier;
  WriteRef later;
  GrantRef grant_earlier;
  GrantRef grant_later;
  Time time{};           ///< when it happened: the later copy's processing, or the later grant's ordering
  std::string reason;    ///< fresh-write-rejected: the resource's reason; duplicate-effect: "job <n>"
  std::string resource;  ///< the resource whose log shows it (empty: token-regression, a lock anomaly)
};

/// Lock-level overlap (reported beside the verdict, not part of it): two different clients' belief intervals
/// for the same lock key intersect on [start, end). `grant_a` is the grant whose belief began first (ties:
/// lower id). An end of kTimeMax means both were still believing when the run ended (belief never closed).
struct Overlap {
  std::string key;  ///< lock key (GrantRecord::key)
  std::uint64_t grant_a = 0;
  std::uint64_t grant_b = 0;
  std::string client_a;
  std::string client_b;
  std::uint64_t epoch_a = 0;
  std::uint64_t epoch_b = 0;
  Time start{};
  Time end{};
  Duration duration{};  ///< end - start
};

/// Lost updates of read–modify–write workloads, beside the verdict (each lost write is also a lost-update
/// anomaly): `acknowledged` accepted and acknowledged read–modify–write writes; `lost` how many of them were
/// overwritten (see lost-update); `percent` 100 * lost / acknowledged; `lost_writes` their ids by log order.
struct LostUpdates {
  std::uint64_t acknowledged = 0;
  std::uint64_t lost = 0;
  double percent = 0.0;
  std::vector<std::uint64_t> lost_writes;
};

/// One near miss: how close two events came to happening in the wrong order. Positive margin = still in
/// order, negative = already crossed.
struct NearMiss {
  Duration margin{};
  std::string key;
  std::uint64_t older = 0;  ///< grant id (lease) or write id (write) of the lower epoch
  std::uint64_t newer = 0;  ///< grant id (lease) or write id (write) of the higher epoch
};

/// A grant no quorum of declared service records backs, and why, read from the history alone. Safety cannot
/// be judged from service records for it: its epoch follows when its client heard.
struct UnbackedGrant {
  enum class Why : std::uint8_t {
    no_record,           ///< no declared process recorded anything on the lock key in the grant's window
    value_mismatch,      ///< declared processes recorded the lock key in the window, with another value
    quorum_not_met,      ///< declared processes recorded the value, fewer of them than the quorum
    undeclared_process,  ///< only processes outside the declared service recorded the value
  };
  std::uint64_t grant = 0;  ///< GrantRecord::id
  Why why = Why::no_record;
  std::uint32_t records = 0;  ///< distinct declared processes that recorded the value in the window
  std::string detail;         ///< for people: the other value and who recorded it, or the undeclared process
};
/// "no-record", "value-mismatch", "quorum-not-met", "undeclared-process".
std::string_view to_string(UnbackedGrant::Why w);

/// True for a slack that no finite belief produced: the older grant's client never stopped believing (its
/// belief end is kTimeMax, as with a lock that has no time-based validity and was never released or lost), so
/// the margin is the newer grant's time minus the end of time.
constexpr bool slack_is_unbounded(Duration slack) {
  return slack.count() < -(kTimeMax.count() / 2);
}
/// What an unbounded slack means, in the words every report uses.
inline constexpr std::string_view kUnboundedSlackMeaning =
    "a holder still believed when the next grant came, and never stopped";

/// Everything the checker concludes from one history.
struct CheckResult {
  /// The verdict: true iff `violations` is empty.
  bool safe = true;
  /// Every anomaly, ordered by time, then kind, then the later write's log entry and grant ids.
  std::vector<Violation> violations;
  /// How many anomalies of each kind (kinds with none are absent).
  std::map<std::string, std::uint32_t> anomaly_counts;
  /// Overlapping belief intervals of different clients, ordered by start, then key, then grant ids.
  std::vector<Overlap> overlaps;
  LostUpdates lost;
  /// Checkpoint table: statements the table refused (beside the verdict), in log order; `newest` marks
  /// those whose grant was the newest epoch on its lock when the table refused it (the holder itself).
  struct Refusal {
    WriteRef write;
    std::string key;  ///< the shard (checkpoint table), the manifest (object store)
    std::string reason;
    bool newest = false;
  };
  std::vector<Refusal> refused;
  /// External API: logical jobs whose effect the API never performed (beside the verdict: a liveness
  /// problem, not a safety one), by resource, account and job. The jobs of an account are 1 up to the
  /// highest job any delivered request named (the workload numbers them so); `acknowledged` is a delivered
  /// request of the job whose client heard a result (invalid: none, the job was never performed at all).
  struct MissingEffect {
    std::string resource;
    std::string key;  ///< the account
    std::int64_t job = 0;
    WriteRef acknowledged;
  };
  std::vector<MissingEffect> missing;
  /// cas-row, beside the verdict: the UPDATE statements the row processed (every copy), how many it applied
  /// and how many were conflicts (zero rows: the version had moved); from the clients' records, how many
  /// statements were retries after a conflict and how many conflicts ended an update (the client gave up, or
  /// the run ended first). All zero for other kinds.
  struct CasFigures {
    std::uint64_t statements = 0;
    std::uint64_t applied = 0;
    std::uint64_t conflicts = 0;
    std::uint64_t retries = 0;
    std::uint64_t gave_up = 0;
  } cas;
  /// Job queue, beside the verdict: the enqueues it processed (every copy), accepted and refused (its
  /// refusals are listed in `refused` too). All zero for other kinds.
  struct QueueFigures {
    std::uint64_t enqueues = 0;
    std::uint64_t accepted = 0;
    std::uint64_t refused = 0;
  } queue;
  /// The smallest of lease_near_miss and write_near_miss margins (none when neither exists): one number CI
  /// can track. Negative means a line was crossed (an overlap of belief, or a stale write accepted).
  std::optional<Duration> slack;
  /// The epoch of each grant, indexed by grant id; epochs are 1..grants.size(), a permutation.
  std::vector<std::uint64_t> epoch_of_grant;
  /// Grants whose service quorum could not be found in the declared service nodes' records; their epoch was
  /// ordered by the client's `granted` (every report lists them).
  std::uint32_t unbacked_grants = 0;
  /// Service records from processes the protocol did not declare as its service: they back nothing.
  std::uint32_t undeclared_records = 0;
  /// Every unbacked grant with the reason, by grant id (as many as unbacked_grants).
  std::vector<UnbackedGrant> unbacked;

  /// The time each grant was ordered by (its service grant time, or `granted` when unbacked), by grant id.
  std::vector<Time> service_grant_time;
  /// Whether each grant was backed by service_quorum distinct declared service nodes, by grant id.
  std::vector<std::uint8_t> backed;
  /// How many distinct declared service nodes recorded each grant within its window (capped at the quorum).
  std::vector<std::uint32_t> backing_records;
  /// The index in History::service_sets of the record that completed each grant's quorum (kNoId: unbacked).
  std::vector<std::uint64_t> backing_record;
  /// The inverse of epoch_of_grant: grant_of_epoch[e - 1] is the grant with epoch e.
  std::vector<std::uint64_t> grant_of_epoch;
  /// Lease slack: over each lock key and each pair of consecutive epochs on it (g, then the next epoch g'),
  /// the smallest g'.granted - belief end of g. Negative = g' was granted while g's client still believed it
  /// held the lock (a belief overlap); kTimeMax belief ends give a hugely negative margin. None if no key had
  /// two grants.
  std::optional<NearMiss> lease_near_miss;
  /// Write slack: over each applied write copy w on a resource key for which a higher-epoch applied copy
  /// exists, the smallest (time of the first higher-epoch applied copy) - (time of w), in the resource's
  /// processing order. Positive = w took effect that long before being overtaken; zero or negative = w took
  /// effect after a newer-epoch write (0: in the same instant, processed after it), i.e. w is the `later`
  /// write of a stale-write-accepted. Refused copies are not considered. None if no applied write was ever
  /// followed by a newer epoch.
  std::optional<NearMiss> write_near_miss;

  std::uint32_t count(const std::string& kind) const {
    auto it = anomaly_counts.find(kind);
    return it == anomaly_counts.end() ? 0 : it->second;
  }
};

/// Judges a history. The service grant time of a grant with value v on lock key k is the earliest time t at
/// which history.service_quorum distinct *declared* service nodes have recorded ServiceSet(k, v), counting
/// only service sets in the grant's causal window: at or after its `requested`, after the `granted` of the
/// previous grant with the same (k, v) (values reused across acquisitions), and at or before its own
/// `granted` (the client learns after the service acts). A quorum of 0 counts as 1. Grants with no such t are
/// unbacked and ordered by `granted`. Epochs follow (service grant time, the service's record sequence of the
/// record that completed the quorum, grant id); unbacked grants come after backed ones at the same instant.
/// Known limit: the history has no record of a value being deleted, so a value set on some nodes, unlocked
/// and set again on others within one acquisition counts all those nodes.
///
/// Throws std::invalid_argument if a write or read names a grant that does not exist.
CheckResult check(const History& history);

namespace checker_detail {
/// Fills CheckResult::unbacked from the backing assign_epochs computed.
void explain_unbacked(const History& h, CheckResult& r);
/// The resource-log anomalies (stale-write-accepted, lost-update, fresh-write-rejected), lost updates and
/// write slack; `r` already holds epochs.
void check_resource(const History& h, CheckResult& r);
/// The checkpoint table's anomalies (checkpoint-rewind, duplicate-processing) and its refusals, from its log.
void check_checkpoints(const History& h, CheckResult& r);
/// The object store's anomaly (stale-manifest) and its refused manifest writes, from its log.
void check_object_store(const History& h, CheckResult& r);
/// The batches of manifest content `replaced` that manifest content `written` leaves out, in order.
std::vector<std::string> dropped_batches(const std::string& replaced, const std::string& written);
/// The external API's anomaly (duplicate-effect) and its missing effects, from its log.
void check_external_api(const History& h, CheckResult& r);
/// A cas-row's anomaly (lost-update: an applied UPDATE whose :read_version is not the version the row held,
/// counted from the row's own log) and its figures (CheckResult::cas, CheckResult::lost).
void check_cas_rows(const History& h, CheckResult& r);
/// The job queue's anomaly (duplicate-enqueue), its refusals and figures, from its log.
void check_job_queues(const History& h, CheckResult& r);
/// The newest epoch on lock `lock` at true time t, per grant ordering (0: none yet).
std::uint64_t newest_epoch_at(const History& h, const CheckResult& r, const std::string& lock, Time t);
}  // namespace checker_detail

}  // namespace locksim
