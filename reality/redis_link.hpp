#pragma once
/// The Redis lock clients' world in `locksim reality`: protocols/redis/lock_algorithms.hpp's Link over
/// hiredis connections to real redis-servers on loopback, so a real client runs the simulated client's own
/// algorithm (SingleNodeAlgorithm, RedlockAlgorithm), not a copy of it.
///
/// The commands as real Redis runs them: SET NX PX (with the INCR token when the algorithm asks for one, and
/// the service record published) in one Lua script (redis_server.hpp reads the records); the Redis
/// documentation's compare-and-delete, or a plain DEL for a blind release; compare-and-PEXPIRE to extend.
#include <hiredis/hiredis.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "locksim/protocols/redis/lock_algorithms.hpp"

namespace locksim::reality {

class RedisLink final : public redis::Link {
 public:
  /// `ports`: redis1..N's (the proxy's when links are proxied); `cut[i]`: a partition cuts this client off
  /// from node i all run (nothing is sent to it; a round waits its deadline out). `t0`: the run's start on
  /// CLOCK_MONOTONIC. `note` reports a note to the parent and returns once it may go on.
  RedisLink(std::vector<std::uint16_t> ports, std::vector<std::uint8_t> cut, Duration node_timeout,
            std::int64_t t0, std::uint64_t seed,
            std::function<void(const std::string&, const std::string&)> note);
  ~RedisLink() override;
  RedisLink(const RedisLink&) = delete;
  RedisLink& operator=(const RedisLink&) = delete;

  Time now() override;
  Time wall() override;
  void sleep(Duration d) override;
  Rng& rng() override { return rng_; }
  void note(std::string_view label, std::string detail) override;
  std::size_t nodes() const override { return ports_.size(); }
  /// hiredis reads answers in order: a command given up on left its connection in error, and the next
  /// command connects again, so no stale answer is ever read as a new one.
  void forget_stale() override {}
  /// With a sentinel (use_sentinel): asks it SENTINEL get-master-addr-by-name mymaster, waiting at most
  /// node_timeout, and sends the next command to the master it names; without an answer (or a port it does
  /// not know) the last known master. Asked before every command, as the simulated client asks sentinel1.
  /// Without a sentinel the master is redis1.
  void discover() override;
  /// Single node with a replica: sentinel1 on 127.0.0.1:`sentinel_port`; `real_ports[i]` the real port of
  /// the server this link reaches on ports[i] (the sentinel names real ports; the link may go through the
  /// proxy).
  void use_sentinel(std::uint16_t sentinel_port, std::vector<std::uint16_t> real_ports);
  /// The node the single-node commands go to now (0: redis1).
  std::size_t master() const { return master_; }
  std::optional<redis::Answer> request(const redis::Command& c, std::string_view label) override;
  std::uint32_t round(const redis::Command& c, std::string_view label, Time deadline) override;

 private:
  /// A connection to node i, made on demand (and again after a failure); null when it cannot be made.
  redisContext* node(std::size_t i);
  /// Sends `c` to the nodes in `to`; the connections it reached (null: not sent).
  std::vector<redisContext*> send(const redis::Command& c, const std::vector<std::size_t>& to);
  /// The answers of `sent`, each read until `deadline` (answers already waiting are always read).
  std::vector<std::optional<redis::Answer>> collect(const redis::Command& c,
                                                    const std::vector<redisContext*>& sent, Time deadline);

  std::vector<std::uint16_t> ports_;
  std::vector<std::uint8_t> cut_;
  Duration timeout_;
  std::int64_t t0_;
  Rng rng_;
  std::function<void(const std::string&, const std::string&)> note_;
  std::vector<redisContext*> conns_;
  std::uint16_t sentinel_ = 0;
  std::vector<std::uint16_t> real_ports_;
  std::size_t master_ = 0;
};

}  // namespace locksim::reality
