#pragma once
/// A real Redis Sentinel (`redis-server sentinel.conf --sentinel`) on a free 127.0.0.1 port in a folder of
/// its own, monitoring one master as `mymaster` with a quorum of 1, as sentinel1 of the simulated world does:
/// it talks to the master and its replica at the ports it is given (the master's; the replica's as the
/// master's INFO announces it: the proxy's entry links when the run has member links), marks the master down
/// after `down-after-milliseconds` without an answer, and promotes the replica (SLAVEOF NO ONE).
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace locksim::reality {

class RedisSentinel {
 public:
  /// Makes `dir` and picks a free port; starts nothing.
  RedisSentinel(std::string dir, std::uint16_t master_port, std::int64_t down_after_ms,
                std::int64_t failover_timeout_ms);
  ~RedisSentinel();
  RedisSentinel(const RedisSentinel&) = delete;
  RedisSentinel& operator=(const RedisSentinel&) = delete;

  /// Writes sentinel.conf, starts the sentinel, and waits (at most `wait_ms`) until it answers and lists
  /// `replicas` replicas of mymaster (SENTINEL replicas mymaster): it found them in the master's INFO.
  /// Throws StartError (the child is killed first).
  void start(std::size_t replicas, std::int64_t wait_ms = 10'000);
  void kill();
  /// Called with the sentinel's pid right after it is spawned, before start() waits for it (the proxy's
  /// classifier must know the process before it dials).
  void on_spawn(std::function<void(pid_t)> f) { on_spawn_ = std::move(f); }
  pid_t pid() const { return pid_; }
  std::uint16_t port() const { return port_; }
  /// The master's port as the sentinel answers SENTINEL get-master-addr-by-name mymaster; nullopt when it
  /// does not answer within `timeout_ms`.
  std::optional<std::uint16_t> master_port(int timeout_ms) const;
  /// Lines of the sentinel's log with the events of a failover (+sdown, +odown, +promoted-slave,
  /// +switch-master...), for the trace.
  std::string log() const;

 private:
  std::string dir_;
  std::uint16_t master_port_, port_ = 0;
  std::int64_t down_after_ms_, failover_timeout_ms_;
  pid_t pid_ = -1;
  std::function<void(pid_t)> on_spawn_;
};

/// SENTINEL get-master-addr-by-name mymaster on 127.0.0.1:`port`, waiting at most `timeout_ms`: the port
/// of the master it names, nullopt without an answer (the clients' discovery, redis_link.cpp).
std::optional<std::uint16_t> sentinel_master_port(std::uint16_t port, int timeout_ms);

}  // namespace locksim::reality
