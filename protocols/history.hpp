#pragma once
/// The history: ground truth recorded while a world runs, read afterwards by the checker (scenarios/checker).
///
/// Who writes what:
///  - lock *servers* record service-side facts ("node redis3 set key=lock to value v at true time t"): the
///  oracle
///    derives from them when the service as a whole granted a holder (the quorum-th node), which orders
///    epochs;
///  - the *workload* (not the protocol's client code) records grants as the client saw them, belief ends, and
///    the writes it sends;
///  - the *resource* records every write's arrival and whether it was accepted.
/// Protocol code only ever writes here; nothing in protocols/ reads it back (the epoch is the oracle's, never
/// the grant's). All times are true simulated time.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/time.hpp"
#include "sim/trace.hpp"

namespace locksim {

/// A lock server made `value` the holder of `key` (SET NX succeeded, replicated SET applied, a lock key was
/// committed...). `node` names the server.
struct ServiceSet {
  Time time{};
  std::string node;
  std::string key;
  std::string value;
};

/// A client's successful acquisition as the workload saw it.
struct GrantRecord {
  std::uint64_t id = 0;  ///< index in History::grants
  std::string client;
  std::string key;
  std::string value;                   ///< the holder identity the client used (random value, lease id...)
  std::optional<std::uint64_t> token;  ///< fencing token, if the protocol has one
  Time requested{};                    ///< true time the acquire began
  Time granted{};                      ///< true time the client learned it holds the lock
  Time belief_end = kTimeMax;  ///< true time the client stopped believing it holds it (kTimeMax: never)
  Time believed_valid_until = kTimeMax;  ///< true time at which the client's own validity estimate ran out
  std::string end_reason;                ///< released / expired / crashed / ...
};

/// One write as sent by a client and judged by the resource.
struct WriteRecord {
  std::uint64_t id = 0;
  std::string client;
  std::uint64_t grant = 0;  ///< GrantRecord::id of the grant the client wrote under
  std::string key;
  std::string value;
  std::optional<std::uint64_t> token;  ///< token carried by the write (none for unfenced protocols)
  Time sent{};
  Time checked{};           ///< when the client last checked its lease before this write
  Time arrived = kTimeMax;  ///< when the resource judged it (kTimeMax: never arrived)
  bool accepted = false;
  std::string reject_reason;
  bool acknowledged = false;               ///< the client got the accepted answer back
  bool read_modify_write = false;          ///< value was computed from a read (counter workload)
  std::optional<std::int64_t> read_value;  ///< the value read before this write (counter workload)
};

struct History {
  /// How many distinct service nodes must have set a value before the service as a whole granted it
  /// (1 for a single Redis or a consensus service that records only committed grants; majority for Redlock).
  std::uint32_t service_quorum = 1;
  std::vector<ServiceSet> service_sets;
  std::vector<GrantRecord> grants;
  std::vector<WriteRecord> writes;
  /// Counter workload: the resource's final value per key.
  std::map<std::string, std::int64_t> final_counters;

  void service_set(Time t, std::string node, std::string key, std::string value) {
    service_sets.push_back({t, std::move(node), std::move(key), std::move(value)});
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
  std::uint64_t add_write(WriteRecord w) {
    w.id = writes.size();
    writes.push_back(std::move(w));
    return writes.back().id;
  }
};

}  // namespace locksim
