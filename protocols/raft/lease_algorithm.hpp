#pragma once
/// The `lease` client's algorithm (etcd's concurrency.Mutex over a lease it keeps alive), written once
/// against `LeaseLink`, the little it needs of the world it runs in. The simulated world implements the link
/// over a process's Context and the Raft group's client (lease.cpp); `locksim reality` over etcd's v3
/// gateway with libcurl (reality/etcd_link.cpp), whose v3lock Lock call blocks as the simulated lock
/// service's lock does. So the code the simulator judges is the code that meets a real etcd.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "locksim/protocols/lock.hpp"
#include "locksim/protocols/raft/lock_service.hpp"
#include "locksim/protocols/raft/raft.hpp"

namespace locksim::raft {

/// The world as a lease lock client sees it: its clock, its random stream, its notes (where a fault plan may
/// pause it) and the lock service, reached through the member it believes leads.
///
/// Answers are ClientReply's, in the lock service's words: `ok` with `value` (a grant's lease, a lock's
/// create revision); or an error: "not-leader" / "conn-refused" (nothing was done: ask another member),
/// "leader-changed" (perhaps done: ask again), or the service's own ("lease-not-found", "no-key", ...).
class LeaseLink {
 public:
  virtual ~LeaseLink() = default;
  /// The client's monotonic clock.
  virtual Time now() = 0;
  virtual void sleep(Duration d) = 0;
  /// The client's random stream (grant keys).
  virtual Rng& rng() = 0;
  /// A note in the trace: a point where a fault plan may pause the client.
  virtual void note(std::string_view label, std::string detail) = 0;
  /// How long one request is waited for before another member is asked.
  virtual Duration rpc_timeout() const = 0;
  /// Runs `c` on the service; nothing if no definite answer came before `deadline`. An answer that did
  /// nothing or perhaps something is asked again (of the next member), so `c` must be idempotent.
  virtual std::optional<ClientReply> submit(const Command& c, Time deadline) = 0;
  /// Sends `c` (a lock: answered once its key holds) without waiting; returns the request's id.
  virtual std::uint64_t send(const Command& c) = 0;
  /// The next answer to any request in `reqs`, waiting until `until`.
  virtual std::optional<ClientReply> wait(const std::set<std::uint64_t>& reqs, Time until) = 0;
  /// Follows an answer that did nothing (or perhaps something): the next requests go to the member it
  /// names, or to the next one. True when it named another member (ask there at once, without a pause).
  virtual bool follow(const ClientReply& r) = 0;
};

/// The `lease` client (also `lease+fence`: fencing is the workload's business, through Protocol::fenced()).
///
/// It believes it holds the lock while its own monotonic clock says the lease is valid, measured from when
/// it SENT the last successful grant/keep-alive. The grant's token is the lock key's create revision.
/// Keep-alives are sent by the algorithm itself (every TTL/3, or the configured interval): while it waits
/// for its lock key to become the holder, in extend() (which always renews), and in believes_valid() (which
/// renews when one is due before answering). A pause of the client therefore also stops its keep-alives, as
/// a GC pause stops every thread of a real client.
class LeaseAlgorithm {
 public:
  /// `acquire_timeout`: how long acquire() keeps trying (etcd's Lock blocks until its context ends).
  /// `trust_reply` (teaching variant "trust-reply"): accept a lock reply that arrives after the lease already
  /// ran out on the client's clock, as etcd's Mutex did before it re-checked its key after waiting (etcd
  /// #11456).
  LeaseAlgorithm(Duration keepalive_interval, Duration acquire_timeout, bool trust_reply);
  std::optional<Grant> acquire(LeaseLink& link, const std::string& key, Duration ttl);
  /// Renews the lease (its TTL was fixed at grant, as in etcd). Works on a lease another client of the same
  /// process acquired (a renewal thread's client): its TTL is then `ttl`, its validity the grant's.
  bool extend(LeaseLink& link, Grant& grant, Duration ttl);
  /// Unlock the key, then revoke the lease (best effort).
  void release(LeaseLink& link, const Grant& grant);
  /// Sends a due keep-alive first, then answers from the client's own monotonic clock.
  bool believes_valid(LeaseLink& link, const Grant& grant);

  /// How long a retry waits when no member was named.
  static constexpr Duration kRetryPause = std::chrono::milliseconds(20);

 private:
  struct LeaseState {
    Duration ttl{0};
    Time valid_until{};    ///< this client's clock: send time of the last successful grant/keep-alive + ttl
    Time keepalive_due{};  ///< this client's clock
    bool lost = false;     ///< the service said the lease is gone
  };
  Duration interval(Duration ttl) const;
  /// One keep-alive attempt (following redirects) until `deadline`; updates `st`.
  void keepalive(LeaseLink& link, LeaseState& st, std::uint64_t lease, Time deadline);
  void revoke(LeaseLink& link, std::uint64_t lease);
  /// The grant's validity when it runs ahead of `st`: another client of this process renewed the lease.
  void adopt_renewal(LeaseState& st, const Grant& grant) const;

  Duration keepalive_interval_;
  Duration acquire_timeout_;
  bool trust_reply_ = false;
  std::map<std::uint64_t, LeaseState> leases_;
};

/// The acquire timeout a ProtocolConfig asks for: max(3 x TTL, 5 s), or extra["acquire_timeout_ms"].
Duration acquire_timeout(const ProtocolConfig& cfg);
/// Whether the config's variant is a client's (trust-reply, no-recheck-after-wait), run by this algorithm.
bool trusts_reply(const ProtocolConfig& cfg);

}  // namespace locksim::raft
