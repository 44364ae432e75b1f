#include "locksim/protocols/redis/redis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <vector>

#include "locksim/protocols/redis/lock_algorithms.hpp"

namespace locksim {
namespace redis {
namespace {

/// A Redis lock client's world in the simulator: its process's Context, the node model's messages.
class SimLink final : public Link {
 public:
  SimLink(Context& ctx, const std::vector<ProcId>& nodes, Duration node_timeout, ProcId* master = nullptr,
          ProcId sentinel = {})
      : ctx_(ctx), nodes_(nodes), timeout_(node_timeout), master_(master), sentinel_(sentinel) {}

  Time now() override { return ctx_.now(); }
  Time wall() override { return ctx_.wall(); }
  void sleep(Duration d) override { ctx_.sleep(d); }
  Rng& rng() override { return ctx_.rng(); }
  void note(std::string_view label, std::string detail) override { ctx_.note(label, std::move(detail)); }
  std::size_t nodes() const override { return nodes_.size(); }

  /// Replies to requests given up on, and hosts' refusals of them, would otherwise pile up in the mailbox.
  void forget_stale() override {
    while (ctx_.receive(0ns, [](const Message& m) { return m.as<Reply>() != nullptr || is_refusal(m); })) {
    }
  }

  /// The current master: asked of the sentinel before every command (standing in for the +switch-master
  /// notification real sentinel clients subscribe to); the last known master if the sentinel does not
  /// answer.
  void discover() override {
    if (!sentinel_.valid()) return;
    auto m = ctx_.call(sentinel_, command_message({.op = Op::get_master}), timeout_);
    if (const Reply* r = m ? m->as<Reply>() : nullptr; r != nullptr && r->value) {
      const ProcId p = ctx_.lookup(*r->value);
      if (p.valid()) *master_ = p;
    }
  }

  std::optional<Answer> request(const Command& c, std::string_view label) override {
    const std::uint64_t id = ctx_.send(*master_, command_message(c));
    ctx_.note(label, fmt::format("key={} value={} nodes=1", c.key, c.value));
    const auto m = ctx_.receive(timeout_, [id](const Message& r) { return r.reply_to == id; });
    const Reply* r = m ? m->as<Reply>() : nullptr;
    if (r == nullptr) return std::nullopt;
    return Answer{r->ok, r->integer};
  }

  std::uint32_t round(const Command& c, std::string_view label, Time deadline) override {
    std::map<std::uint64_t, std::size_t> pending;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      pending.emplace(ctx_.send(nodes_[i], command_message(c)), i);
    ctx_.note(label, fmt::format("key={} value={} nodes={}", c.key, c.value, nodes_.size()));
    std::uint32_t votes = 0;
    while (!pending.empty()) {
      auto m = ctx_.receive(std::max(Duration{0}, deadline - ctx_.now()),
                            [&pending](const Message& x) { return pending.count(x.reply_to) != 0; });
      if (!m) break;
      pending.erase(m->reply_to);
      if (const Reply* rep = m->as<Reply>(); rep != nullptr && rep->ok) ++votes;
    }
    return votes;
  }

 private:
  Context& ctx_;
  const std::vector<ProcId>& nodes_;
  Duration timeout_;
  ProcId* master_;
  ProcId sentinel_;
};

/// Client of a single Redis node (plus its replica behind a sentinel when cfg.replica is on):
/// SingleNodeAlgorithm (lock_algorithms.hpp) over the simulated network.
class RedisClient final : public LockClient {
 public:
  RedisClient(Context& ctx, const ProtocolConfig& cfg, bool incr)
      : algo_(cfg, incr), timeout_(cfg.node_timeout), node_{ctx.lookup("redis1")} {
    if (cfg.replica) sentinel_ = ctx.lookup("sentinel1");
  }

  std::optional<Grant> acquire(Context& ctx, const std::string& key, Duration ttl) override {
    SimLink link = this->link(ctx);
    return algo_.acquire(link, key, ttl);
  }
  bool extend(Context& ctx, Grant& grant, Duration ttl) override {
    SimLink link = this->link(ctx);
    return algo_.extend(link, grant, ttl);
  }
  void release(Context& ctx, const Grant& grant) override {
    SimLink link = this->link(ctx);
    algo_.release(link, grant);
  }

 private:
  SimLink link(Context& ctx) { return SimLink(ctx, node_, timeout_, &node_[0], sentinel_); }

  SingleNodeAlgorithm algo_;
  Duration timeout_;
  std::vector<ProcId> node_;  ///< the master last known (one)
  ProcId sentinel_{};
};

/// Client of N independent Redis masters: RedlockAlgorithm (lock_algorithms.hpp) over the simulated
/// network.
class RedlockClient final : public LockClient {
 public:
  RedlockClient(Context& ctx, const ProtocolConfig& cfg) : algo_(cfg), timeout_(cfg.node_timeout) {
    const std::uint32_t n = cfg.nodes ? cfg.nodes : 5;
    for (std::uint32_t i = 1; i <= n; ++i) nodes_.push_back(ctx.lookup(fmt::format("redis{}", i)));
  }

  std::optional<Grant> acquire(Context& ctx, const std::string& key, Duration ttl) override {
    SimLink link(ctx, nodes_, timeout_);
    return algo_.acquire(link, key, ttl);
  }
  bool extend(Context& ctx, Grant& grant, Duration ttl) override {
    SimLink link(ctx, nodes_, timeout_);
    return algo_.extend(link, grant, ttl);
  }
  void release(Context& ctx, const Grant& grant) override {
    SimLink link(ctx, nodes_, timeout_);
    algo_.release(link, grant);
  }

 private:
  RedlockAlgorithm algo_;
  Duration timeout_;
  std::vector<ProcId> nodes_;
};

/// A node's options with its own [[node]] persistence applied.
NodeOptions with_node_settings(NodeOptions o, const ProtocolConfig& cfg) {
  auto it = cfg.node_settings.find(o.name);
  if (it == cfg.node_settings.end()) return o;
  if (it->second.aof) o.aof = *it->second.aof;
  if (it->second.fsync) o.fsync = *it->second.fsync;
  if (it->second.fsync_period) o.fsync_period = *it->second.fsync_period;
  return o;
}

std::int64_t counter_start(const ProtocolConfig& cfg) {
  return cfg.first_token > 1 ? static_cast<std::int64_t>(cfg.first_token) - 1 : 0;
}

class RedisProtocol final : public Protocol {
 public:
  explicit RedisProtocol(bool force_incr) : force_incr_(force_incr) {}
  std::string name() const override { return force_incr_ ? "redis+incr" : "redis"; }
  std::string summary() const override {
    return force_incr_
               ? "single Redis, fencing token from INCR on the master (Redisson RFencedLock; not monotonic "
                 "across failover)"
               : "single Redis node: SET NX PX, compare-and-delete, optional async replica + failover";
  }
  std::vector<Variant> variants() const override {
    return {{"blind-release",
             "the unlock deletes the key whatever its value (DEL instead of compare-and-delete)"}};
  }
  /// `redis+incr` always sends its INCR token; `redis` does when built with cfg.incr_token.
  bool fenced() const override { return force_incr_ || built_incr_; }

  /// redis1 (the configured master); with a replica, replica1 and the sentinel that fails over to it.
  ServiceDecl declare(const ProtocolConfig& cfg) const override {
    using R = ProcessRole;
    ServiceDecl d;
    d.processes.push_back({"redis1", {R::server, R::primary, R::leader_capable}});
    if (cfg.replica) {
      d.processes.push_back({"replica1", {R::server, R::replica, R::leader_capable}});
      d.processes.push_back({"sentinel1", {R::sentinel}});
    }
    d.quorum = 1;
    d.names_hint = "replica1 and sentinel1 need replica = true";
    return d;
  }

  ServiceInfo build(World& world, const ProtocolConfig& cfg, History& history) override {
    built_incr_ = cfg.incr_token;
    ServiceInfo info;
    NodeOptions master{.name = "redis1",
                       .aof = cfg.aof,
                       .fsync = cfg.fsync,
                       .fsync_period = cfg.fsync_period,
                       .replica = false,
                       .peer = cfg.replica ? "replica1" : "",
                       .replication_delay = cfg.replication_delay,
                       .counter_start = counter_start(cfg),
                       .record_role = true};
    info.servers.push_back(spawn_node(world, with_node_settings(master, cfg), history));
    if (cfg.replica) {
      NodeOptions rep = master;
      rep.name = "replica1";
      rep.replica = true;
      rep.peer = "redis1";
      info.servers.push_back(spawn_node(world, with_node_settings(rep, cfg), history));
      SentinelOptions s;
      s.nodes = {"redis1", "replica1"};
      s.failover_after = cfg.failover_after;
      s.ping_interval = std::clamp<Duration>(cfg.failover_after / 10, 1ms, 100ms);
      info.servers.push_back(spawn_sentinel(world, s));
    }
    return info;
  }

  std::unique_ptr<LockClient> make_client(Context& ctx, const ProtocolConfig& cfg) override {
    return std::make_unique<RedisClient>(ctx, cfg, force_incr_ || cfg.incr_token);
  }

  /// Redisson's lock watchdog (RedissonBaseLock.renewExpiration before 3.44, renewal/RenewalTask.java since):
  /// a lock taken without a leaseTime gets lockWatchdogTimeout (Config: 30 s) as its lease, renewed every
  /// lockWatchdogTimeout / 3 (10 s) by a compare-and-PEXPIRE script. Here the scenario's `ttl` plays
  /// lockWatchdogTimeout (set ttl = "30s" for Redisson's out-of-the-box numbers): it is the lease every
  /// renewal asks for, and the renewal that keeps a 10 s TTL alive must come sooner than 10 s. (Redisson runs
  /// no watchdog at all for a lock taken with an explicit leaseTime.) Since 3.44 a renewal that fails with
  /// an error is scheduled again at the same period (RenewalTask.run; before, the watchdog stopped); one that
  /// finds the lock gone stops. The thread holding the lock is never told.
  RenewalDefaults renewal_defaults(const ProtocolConfig& cfg) const override {
    return {.every = cfg.ttl / 3,
            .before_expiry = Duration{0},
            .retry = cfg.ttl / 3,
            .stop_on_failure = false,
            .source =
                "Redisson lock watchdog: lease lockWatchdogTimeout (here the scenario's ttl; Redisson's "
                "default 30 s), renewed every lockWatchdogTimeout/3 (RenewalTask.schedule); the holder "
                "is not told of a failure"};
  }

 private:
  bool force_incr_;
  bool built_incr_ = false;
};

class RedlockProtocol final : public Protocol {
  static std::uint32_t node_count(const ProtocolConfig& cfg) { return cfg.nodes ? cfg.nodes : 5; }

 public:
  std::string name() const override { return "redlock"; }
  std::vector<Variant> variants() const override {
    return {{"no-elapsed-check", "the client does not subtract the time acquiring took from the validity"},
            {"blind-release",
             "the unlock deletes the key whatever its value (DEL instead of compare-and-delete)"}};
  }
  std::string summary() const override {
    return "Redlock: N independent Redis masters (default 5), majority, validity = ttl - elapsed - drift";
  }

  /// redis1..redisN, independent masters; a grant needs a majority of them.
  ServiceDecl declare(const ProtocolConfig& cfg) const override {
    const std::uint32_t n = node_count(cfg);
    ServiceDecl d;
    for (std::uint32_t i = 1; i <= n; ++i)
      d.processes.push_back({fmt::format("redis{}", i), {ProcessRole::server}});
    d.quorum = majority(n);
    d.names_hint = "[protocol] nodes sets the count";
    return d;
  }

  ServiceInfo build(World& world, const ProtocolConfig& cfg, History& history) override {
    const std::uint32_t n = node_count(cfg);
    ServiceInfo info;
    for (std::uint32_t i = 1; i <= n; ++i) {
      NodeOptions o{.name = fmt::format("redis{}", i),
                    .aof = cfg.aof,
                    .fsync = cfg.fsync,
                    .fsync_period = cfg.fsync_period};
      info.servers.push_back(spawn_node(world, with_node_settings(o, cfg), history));
    }
    return info;
  }

  std::unique_ptr<LockClient> make_client(Context& ctx, const ProtocolConfig& cfg) override {
    return std::make_unique<RedlockClient>(ctx, cfg);
  }

  /// node-redlock's `using()` (src/index.ts): extend when `automaticExtensionThreshold` (500 ms) of the
  /// lock's validity remains (`setTimeout(extend, lock.expiration - Date.now() - threshold)`); a failed
  /// extension is tried again while the lock has not expired (each extension itself retries with
  /// `retryDelay`, 200 ms); once it has, the routine's AbortSignal is aborted (`controller.abort()`), and a
  /// routine that checks `signal.aborted` stops: here the holder stops at its next step.
  RenewalDefaults renewal_defaults(const ProtocolConfig& cfg) const override {
    return {.every = Duration{0},
            .before_expiry = 500ms,
            .retry = cfg.retry_delay,
            .stop_on_failure = true,
            .source =
                "node-redlock using(): extend when automaticExtensionThreshold (500 ms) remains, retry "
                "every retryDelay while not expired, then abort the routine's signal"};
  }
};

}  // namespace

Duration redlock_drift(const ProtocolConfig& cfg, Duration ttl) {
  const __int128 scaled = static_cast<__int128>(ttl.count()) * cfg.drift_factor_ppm / 1'000'000;
  return Duration{static_cast<std::int64_t>(scaled)} + cfg.clock_drift_allowance;
}

Duration retry_pause(Rng& rng, const ProtocolConfig& cfg) {
  const std::int64_t j = cfg.retry_jitter.count();
  const Duration d = cfg.retry_delay + Duration{rng.between(-j, j)};
  return std::max(d, Duration{0});
}

std::unique_ptr<Protocol> make_redis_protocol(bool force_incr) {
  return std::make_unique<RedisProtocol>(force_incr);
}
std::unique_ptr<Protocol> make_redlock_protocol() {
  return std::make_unique<RedlockProtocol>();
}

}  // namespace redis

void register_redis_protocols(ProtocolRegistry& registry) {
  registry.add("redis", redis::make_redis_protocol(false)->summary(),
               [] { return redis::make_redis_protocol(false); });
  registry.add("redis+incr", redis::make_redis_protocol(true)->summary(),
               [] { return redis::make_redis_protocol(true); });
  registry.add("redlock", redis::make_redlock_protocol()->summary(),
               [] { return redis::make_redlock_protocol(); });
}

}  // namespace locksim
