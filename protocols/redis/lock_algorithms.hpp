#pragma once
/// The Redis lock clients' algorithms, written once against `Link`, the little a Redis lock client needs of
/// the world it runs in. The simulated world implements Link over a process's Context and the node model's
/// messages (redis.cpp); `locksim reality` over hiredis connections to real redis-servers
/// (reality/redis_link.cpp). So the code the simulator judges is the code that meets real servers.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "locksim/protocols/lock.hpp"
#include "locksim/protocols/redis/redis_node.hpp"

namespace locksim::redis {

/// A node's answer to a lock command, as a lock client reads it.
struct Answer {
  bool ok = false;           ///< OK / 1 (the SET took, the key was ours)
  std::int64_t integer = 0;  ///< set_nx with a fence counter: the counter
};

/// The world as a Redis lock client sees it: its clocks, its random stream, its notes (where a fault plan
/// may pause it) and the Redis nodes it talks to (redis1..N; for one node, the current master).
class Link {
 public:
  virtual ~Link() = default;
  /// The client's monotonic clock.
  virtual Time now() = 0;
  /// The client's wall clock (may jump).
  virtual Time wall() = 0;
  virtual void sleep(Duration d) = 0;
  /// The client's random stream (lock values, retry jitter).
  virtual Rng& rng() = 0;
  /// A note in the trace: a point where a fault plan may pause the client.
  virtual void note(std::string_view label, std::string detail) = 0;
  /// How many nodes a round goes to.
  virtual std::size_t nodes() const = 0;
  /// Forget answers to requests given up on (timeouts, failed rounds): they are not the next command's.
  virtual void forget_stale() = 0;
  /// Find the current master before a command to one node (a sentinel's client asks; one node: nothing).
  virtual void discover() = 0;
  /// Send `c` to the current master, note `label` once it left, wait up to the node timeout: its answer,
  /// or nothing (timeout, nil, refused).
  virtual std::optional<Answer> request(const Command& c, std::string_view label) = 0;
  /// Send `c` to every node at once, note `label`, then collect answers until all came or `deadline` (on
  /// the monotonic clock) passed; answers already waiting are always read. Returns how many said OK.
  virtual std::uint32_t round(const Command& c, std::string_view label, Time deadline) = 0;
};

/// A value unique per acquisition attempt (the Redlock spec's "random value"), from the client's stream.
std::string random_value(Rng& rng);

/// A single Redis node's client (plus its replica behind a sentinel when cfg.replica is on).
///
/// Like the Redis documentation's single-instance lock and the simple clients built on it, it does not
/// compute the time an acquisition took: it believes it holds the lock for `ttl` from the moment it SENT the
/// SET, on its monotonic clock, and returns the grant whenever an OK comes back, however late it reads it.
/// This is the client that Kleppmann's "pause while replies are in flight" story breaks. With `incr` the
/// SET also INCRs "{key}:token" in the same step and the counter is the grant's token (Redisson's
/// RFencedLock).
class SingleNodeAlgorithm {
 public:
  SingleNodeAlgorithm(const ProtocolConfig& cfg, bool incr);
  std::optional<Grant> acquire(Link& link, const std::string& key, Duration ttl);
  bool extend(Link& link, Grant& grant, Duration ttl);
  void release(Link& link, const Grant& grant);

 private:
  ProtocolConfig cfg_;
  bool incr_;
};

/// N independent Redis masters: the Redlock algorithm of the Redis documentation, with node-redlock's
/// defaults (retry 10 times, 200 ms ± 100 ms, drift factor 0.01 + 2 ms).
///
/// Which clock measures the elapsed time, and when (the "pause while replies are in flight" question):
///  - The specification (step 1: "get the current time"; step 3: "subtract from the current time the
///    timestamp obtained in step 1") and its reference clients read the WALL clock before sending and again
///    after the replies: redlock-rb uses Time.now, node-redlock uses Date.now() around the whole acquisition.
///    Because the second reading happens after the client has read the replies, a pause while replies are in
///    flight IS counted: the client resumes, reads the buffered OKs, computes validity = ttl - elapsed -
///    drift <= 0 and unlocks. What remains unsafe is the wall clock itself: a client whose wall clock steps
///    back (NTP) during the pause under-counts the elapsed time and keeps a grant that has expired on every
///    node. The unsafe case for a plain pause is the single-node client, which computes no elapsed time.
///  - elapsed_recheck = true is antirez's answer ("Is Redlock safe?"): after collecting the replies, re-read
///    a MONOTONIC clock and fail (unlock all) if the time since sending exceeds the validity budget; the
///    grant's validity is then bounded by the monotonic measure too, so a wall-clock step cannot extend it.
///  - cfg.variant == "no-elapsed-check" is a broken-on-purpose teaching variant: the client skips step 3 and
///    believes it holds the lock for ttl - drift from sending (like the single-node client); with it,
///    Kleppmann's pause-in-flight story breaks Redlock exactly as his article tells it.
class RedlockAlgorithm {
 public:
  explicit RedlockAlgorithm(const ProtocolConfig& cfg);
  std::optional<Grant> acquire(Link& link, const std::string& key, Duration ttl);
  bool extend(Link& link, Grant& grant, Duration ttl);
  void release(Link& link, const Grant& grant);

 private:
  struct Round {
    std::uint32_t votes = 0;
    Time start_wall{};
    Time start_mono{};
  };
  Round round(Link& link, const Command& c, std::string_view label);
  /// validity = ttl - elapsed - drift, must be > 0: the end of validity on the client's monotonic clock.
  std::optional<Time> valid_until(Link& link, const Round& r, Duration ttl) const;
  void unlock_all(Link& link, const std::string& key, const std::string& value);

  ProtocolConfig cfg_;
};

}  // namespace locksim::redis
