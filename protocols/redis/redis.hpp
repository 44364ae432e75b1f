#pragma once
/// The Redis lock protocols: `redis` (one node, optional async replica with sentinel failover), `redis+incr`
/// (the same with a fencing token from INCR on the master, Redisson's RFencedLock: fenced, and not monotonic
/// across a failover), and `redlock` (N independent nodes, the Redis documentation's algorithm).
#include <cstdint>
#include <memory>

#include "locksim/protocols/lock.hpp"
#include "locksim/protocols/redis/redis_node.hpp"

namespace locksim {

/// Registers `redis`, `redis+incr` and `redlock` in `registry`.
void register_redis_protocols(ProtocolRegistry& registry);

namespace redis {

/// Redlock's clock-drift allowance: ttl * drift_factor_ppm / 1e6 + clock_drift_allowance.
Duration redlock_drift(const ProtocolConfig& cfg, Duration ttl);

/// Majority of n nodes: n/2 + 1.
constexpr std::uint32_t majority(std::uint32_t n) {
  return n / 2 + 1;
}

/// The pause before retry `attempt` (>= 1): retry_delay + uniform jitter in [-retry_jitter, +retry_jitter],
/// never negative (node-redlock: retryDelay + floor((random*2-1) * retryJitter)).
Duration retry_pause(Rng& rng, const ProtocolConfig& cfg);

/// The `redis` protocol; with `force_incr` the `redis+incr` teaching variant.
std::unique_ptr<Protocol> make_redis_protocol(bool force_incr = false);
/// The `redlock` protocol.
std::unique_ptr<Protocol> make_redlock_protocol();

}  // namespace redis
}  // namespace locksim
