#pragma once
/// The checker: the oracle's judge. It reads only a History (ground truth recorded by the simulator, see
/// protocols/history.hpp) and never a protocol's opinion of itself, so its verdict can be trusted whatever
/// the protocol under test claims. Deterministic (ordered containers, ties broken by ids) and O(n log n) in
/// the size of the history (plus the number of reported overlap pairs).
///
/// Conventions used throughout:
///  - grant ids are indices into History::grants and write ids are WriteRecord::id (History::add_grant and
///    History::add_write assign both);
///  - an *accepted write* is a WriteRecord with accepted == true and a finite arrival time;
///  - a grant's *belief end* is min(belief_end, believed_valid_until): the client stops acting as holder at
///    whichever comes first, its own "I released / I noticed expiry" or its validity estimate running out;
///  - a grant's *belief interval* is [granted, belief end) in true time (empty if belief end <= granted).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocols/history.hpp"
#include "sim/time.hpp"

namespace locksim {

/// One write as named in a verdict: enough for a person to find it in the story without the history at hand.
struct WriteRef {
  std::uint64_t write = 0;  ///< WriteRecord::id
  std::uint64_t grant = 0;  ///< the grant the client wrote under
  std::string client;
  std::uint64_t epoch = 0;             ///< the oracle's epoch of that grant (1-based)
  std::optional<std::uint64_t> token;  ///< the token the write carried, if any
  Time sent{};
  Time arrived{};
  bool accepted = false;
};

/// A safety violation: on one resource key, the resource accepted `later` (lower epoch) after it had already
/// accepted `earlier` (higher epoch), so accepted writes did not follow the epoch order. `earlier` is the
/// first accepted write (by arrival) that carried the highest epoch seen before `later` arrived.
struct Violation {
  std::string kind = "stale-write-accepted";
  std::string key;  ///< resource key
  WriteRef earlier;
  WriteRef later;
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

/// Lost updates of the counter workload (writes with read_modify_write set).
///
/// An acknowledged accepted increment w is *lost* when another accepted write that arrived after it was
/// computed from the same or an older read (read_value <= w's read_value), so it overwrote w's effect.
///  - `acknowledged`: accepted, acknowledged read-modify-write writes, summed over keys;
///  - `lost`: per key, if History::final_counters has the key, max(0, acknowledged - final counter) (the
///  counter
///    starts at 0 and every increment that survives adds exactly 1); otherwise the number of that key's
///    `lost_writes`. With no concurrency every write reads the previous value, so both give exactly 0;
///  - `lost_writes`: the acknowledged writes identified as overwritten by the rule above (write ids, ordered
///  by
///    key then arrival). Writes without a read_value are never judged lost and never count as overwriting;
///  - `percent`: 100 * lost / acknowledged (0 when nothing was acknowledged).
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

/// Everything the checker concludes from one history.
struct CheckResult {
  /// The verdict: true iff `violations` is empty.
  bool safe = true;
  /// Every stale accepted write, ordered by the stale write's arrival (ties by write id).
  std::vector<Violation> violations;
  /// Overlapping belief intervals of different clients, ordered by start, then key, then grant ids.
  std::vector<Overlap> overlaps;
  LostUpdates lost;
  /// The smallest of lease_near_miss and write_near_miss margins (none when neither exists): one number CI
  /// can track. Negative means a line was crossed (an overlap of belief, or a stale write accepted).
  std::optional<Duration> slack;
  /// The epoch of each grant, indexed by grant id; epochs are 1..grants.size(), a permutation.
  std::vector<std::uint64_t> epoch_of_grant;
  /// Grants whose service quorum could not be found in the service sets; their epoch was ordered by
  /// `granted`.
  std::uint32_t unbacked_grants = 0;

  /// The time each grant was ordered by (its service grant time, or `granted` when unbacked), by grant id.
  std::vector<Time> service_grant_time;
  /// Whether each grant was backed by service_quorum distinct service nodes, by grant id.
  std::vector<std::uint8_t> backed;
  /// The inverse of epoch_of_grant: grant_of_epoch[e - 1] is the grant with epoch e.
  std::vector<std::uint64_t> grant_of_epoch;
  /// Lease slack: over each lock key and each pair of consecutive epochs on it (g, then the next epoch g'),
  /// the smallest g'.granted - belief end of g. Negative = g' was granted while g's client still believed it
  /// held the lock (a belief overlap); kTimeMax belief ends give a hugely negative margin. None if no key had
  /// two grants.
  std::optional<NearMiss> lease_near_miss;
  /// Write slack: over each accepted write w on a resource key for which a higher-epoch accepted write
  /// exists, the smallest (arrival of the first higher-epoch accepted write) - (arrival of w). Positive = w
  /// arrived that long before being overtaken; negative = w arrived after a newer-epoch write was accepted,
  /// i.e. w is the `later` write of a violation (0 is a tie in arrival time, ordered by write id). Rejected
  /// writes are not considered: the fence already stopped them. None if no accepted write was ever followed
  /// by a newer epoch.
  std::optional<NearMiss> write_near_miss;
};

/// Judges a history. The service grant time of a grant with value v on lock key k is the earliest time t at
/// which history.service_quorum distinct nodes have recorded ServiceSet(k, v), counting only service sets in
/// the grant's causal window: at or after its `requested`, after the `granted` of the previous grant with the
/// same (k, v) (values reused across acquisitions), and at or before its own `granted` (the client learns
/// after the service acts). A quorum of 0 counts as 1. Grants with no such t are unbacked and ordered by
/// `granted`. Epochs follow (service grant time, grant id). Known limit: the history has no record of a value
/// being deleted, so a value set on some nodes, unlocked and set again on others within one acquisition
/// counts all those nodes.
///
/// Throws std::invalid_argument if a write names a grant that does not exist.
CheckResult check(const History& history);

}  // namespace locksim
