#include "locksim/protocols/redis/redis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <vector>

namespace locksim {
namespace redis {
namespace {

/// A value unique per acquisition attempt (the Redlock spec's "random value"), from the process's own stream.
std::string random_value(Rng& rng) {
  // Two draws in sequence: as two arguments of one call their order would be unspecified (GCC and Clang
  // differ, and so did every Redis trace hash). The order kept is GCC's (the golden hashes').
  const std::uint64_t second = rng.next();
  const std::uint64_t first = rng.next();
  return fmt::format("{:016x}{:016x}", first, second);
}

/// Redisson keeps the fencing counter beside the lock: "{lock}:token".
std::string fence_key(const std::string& key) {
  return key + ":token";
}

/// Replies to requests this client gave up on (timeouts, failed rounds), and hosts' refusals of them, would
/// otherwise pile up in the mailbox.
void purge_stale_replies(Context& ctx) {
  while (ctx.receive(0ns, [](const Message& m) { return m.as<Reply>() != nullptr || is_refusal(m); })) {
  }
}

/// Client of a single Redis node (plus its replica behind a sentinel when cfg.replica is on).
///
/// Like the Redis documentation's single-instance lock and the simple clients built on it, it does not
/// compute the time an acquisition took: it believes it holds the lock for `ttl` from the moment it SENT the
/// SET, on its monotonic clock, and returns the grant whenever an OK comes back, however late it reads it.
/// This is the client that Kleppmann's "pause while replies are in flight" story breaks.
class RedisClient final : public LockClient {
 public:
  RedisClient(Context& ctx, const ProtocolConfig& cfg, bool incr)
      : cfg_(cfg), incr_(incr), node_(ctx.lookup("redis1")) {
    if (cfg.replica) sentinel_ = ctx.lookup("sentinel1");
  }

  std::optional<Grant> acquire(Context& ctx, const std::string& key, Duration ttl) override {
    purge_stale_replies(ctx);
    for (std::uint32_t attempt = 0; attempt <= cfg_.retry_count; ++attempt) {
      if (attempt > 0) ctx.sleep(retry_pause(ctx.rng(), cfg_));
      const ProcId master = discover(ctx);
      Command c{.op = Op::set_nx, .key = key, .value = random_value(ctx.rng()), .ttl = ttl};
      if (incr_) c.fence_counter = fence_key(key);
      const Time start = ctx.now();
      const Reply* r = request(ctx, master, c, "acquire-sent");
      if (r == nullptr || !r->ok) continue;  // timeout, nil (held by someone else) or READONLY
      Grant g;
      g.key = key;
      g.value = c.value;
      g.valid_until = start + ttl;
      if (incr_) g.token = static_cast<std::uint64_t>(r->integer);
      return g;
    }
    return std::nullopt;
  }

  bool extend(Context& ctx, Grant& grant, Duration ttl) override {
    purge_stale_replies(ctx);
    const ProcId master = discover(ctx);
    const Time start = ctx.now();
    const Reply* r =
        request(ctx, master, {.op = Op::pexpire_if_value, .key = grant.key, .value = grant.value, .ttl = ttl},
                "extend-sent");
    if (r == nullptr || !r->ok) return false;
    grant.valid_until = start + ttl;
    return true;
  }

  void release(Context& ctx, const Grant& grant) override {
    purge_stale_replies(ctx);
    const ProcId master = discover(ctx);
    request(ctx, master,
            {.op = Op::del_if_value,
             .key = grant.key,
             .value = grant.value,
             .blind = cfg_.variant == "blind-release"},
            "release-sent");
  }

 private:
  /// The current master: asked of the sentinel before every command (standing in for the +switch-master
  /// notification real sentinel clients subscribe to); the last known master if the sentinel does not answer.
  ProcId discover(Context& ctx) {
    if (!sentinel_.valid()) return node_;
    auto m = ctx.call(sentinel_, command_message({.op = Op::get_master}), cfg_.node_timeout);
    if (const Reply* r = m ? m->as<Reply>() : nullptr; r != nullptr && r->value) {
      const ProcId p = ctx.lookup(*r->value);
      if (p.valid()) node_ = p;
    }
    return node_;
  }

  /// Send `c`, log `label` (a point where fault plans can pause this client), wait for the reply.
  const Reply* request(Context& ctx, ProcId to, const Command& c, std::string_view label) {
    const std::uint64_t id = ctx.send(to, command_message(c));
    ctx.note(label, fmt::format("key={} value={} nodes=1", c.key, c.value));
    last_ = ctx.receive(cfg_.node_timeout, [id](const Message& r) { return r.reply_to == id; });
    return last_ ? last_->as<Reply>() : nullptr;
  }

  ProtocolConfig cfg_;
  std::optional<Message> last_;
  bool incr_;
  ProcId node_;
  ProcId sentinel_{};
};

/// Client of N independent Redis masters: the Redlock algorithm of the Redis documentation, with
/// node-redlock's defaults (retry 10 times, 200 ms ± 100 ms, drift factor 0.01 + 2 ms).
///
/// Which clock measures the elapsed time, and when (the "pause while replies are in flight" question):
///  - The specification (step 1: "get the current time"; step 3: "subtract from the current time the
///  timestamp
///    obtained in step 1") and its reference clients read the WALL clock before sending and again after the
///    replies: redlock-rb uses Time.now, node-redlock uses Date.now() around the whole acquisition (its
///    lock's expiration is start + ttl - drift, compared with Date.now() later). Because the second reading
///    happens after the client has read the replies, a pause while replies are in flight IS counted: the
///    client resumes, reads the buffered OKs, computes validity = ttl - elapsed - drift <= 0 and unlocks. So
///    with elapsed_recheck = false we do exactly that: start = ctx.wall() before the first send, elapsed =
///    ctx.wall() - start after collecting. What remains unsafe is the wall clock itself: a client whose wall
///    clock steps back (NTP) during the pause under-counts the elapsed time and keeps a grant that has
///    expired on every node. The unsafe case for a plain pause is the single-node `redis` client, which
///    computes no elapsed time at all.
///  - elapsed_recheck = true is antirez's answer ("Is Redlock safe?"): after collecting the replies, re-read
///  a
///    MONOTONIC clock and fail (unlock all) if the time since sending exceeds the validity budget; the
///    grant's validity is then bounded by the monotonic measure too, so a wall-clock step cannot extend it.
///  - cfg.variant == "no-elapsed-check" is a broken-on-purpose teaching variant: the client skips step 3 and
///    believes it holds the lock for ttl - drift from sending (like the single-node client); with it,
///    Kleppmann's pause-in-flight story breaks Redlock exactly as his article tells it.
class RedlockClient final : public LockClient {
 public:
  RedlockClient(Context& ctx, const ProtocolConfig& cfg) : cfg_(cfg) {
    const std::uint32_t n = cfg.nodes ? cfg.nodes : 5;
    for (std::uint32_t i = 1; i <= n; ++i) nodes_.push_back(ctx.lookup(fmt::format("redis{}", i)));
    quorum_ = majority(n);
  }

  std::optional<Grant> acquire(Context& ctx, const std::string& key, Duration ttl) override {
    purge_stale_replies(ctx);
    for (std::uint32_t attempt = 0; attempt <= cfg_.retry_count; ++attempt) {
      if (attempt > 0) ctx.sleep(retry_pause(ctx.rng(), cfg_));
      const std::string value = random_value(ctx.rng());
      const Round r = round(ctx, {.op = Op::set_nx, .key = key, .value = value, .ttl = ttl}, "acquire-sent");
      if (r.votes >= quorum_) {
        if (auto until = valid_until(ctx, r, ttl)) {
          Grant g;
          g.key = key;
          g.value = value;
          g.valid_until = *until;
          return g;
        }
      }
      ctx.note("attempt-failed", fmt::format("key={} votes={}/{}", key, r.votes, nodes_.size()));
      unlock_all(ctx, key, value);
    }
    return std::nullopt;
  }

  bool extend(Context& ctx, Grant& grant, Duration ttl) override {
    purge_stale_replies(ctx);
    const Round r = round(
        ctx, {.op = Op::pexpire_if_value, .key = grant.key, .value = grant.value, .ttl = ttl}, "extend-sent");
    if (r.votes < quorum_) return false;
    auto until = valid_until(ctx, r, ttl);
    if (!until) return false;
    grant.valid_until = *until;
    return true;
  }

  void release(Context& ctx, const Grant& grant) override {
    purge_stale_replies(ctx);
    unlock_all(ctx, grant.key, grant.value);
  }

 private:
  struct Round {
    std::uint32_t votes = 0;
    Time start_wall{};
    Time start_mono{};
  };

  /// Send `c` to every node at once, then collect the answers until all came or the per-node timeout passed.
  /// Replies already buffered (read after a pause) are always taken, as a real event loop would.
  Round round(Context& ctx, Command c, std::string_view label) {
    Round r{0, ctx.wall(), ctx.now()};
    std::map<std::uint64_t, std::size_t> pending;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      pending.emplace(ctx.send(nodes_[i], command_message(c)), i);
    ctx.note(label, fmt::format("key={} value={} nodes={}", c.key, c.value, nodes_.size()));
    const Time deadline = r.start_mono + cfg_.node_timeout;
    while (!pending.empty()) {
      auto m = ctx.receive(std::max(Duration{0}, deadline - ctx.now()),
                           [&pending](const Message& x) { return pending.count(x.reply_to) != 0; });
      if (!m) break;
      pending.erase(m->reply_to);
      if (const Reply* rep = m->as<Reply>(); rep != nullptr && rep->ok) ++r.votes;
    }
    return r;
  }

  /// validity = ttl - elapsed - drift, must be > 0 (see the class comment for the clocks). The answer is the
  /// end of validity on this client's monotonic clock.
  std::optional<Time> valid_until(Context& ctx, const Round& r, Duration ttl) const {
    const Duration drift = redlock_drift(cfg_, ttl);
    if (cfg_.variant == "no-elapsed-check") return r.start_mono + ttl - drift;
    const Duration validity_wall = ttl - (ctx.wall() - r.start_wall) - drift;
    if (validity_wall <= 0ns) return std::nullopt;
    Time until = ctx.now() + validity_wall;
    if (cfg_.elapsed_recheck) {
      const Time mono_now = ctx.now();
      if (ttl - (mono_now - r.start_mono) - drift <= 0ns) return std::nullopt;
      until = std::min(until, r.start_mono + ttl - drift);
    }
    return until;
  }

  void unlock_all(Context& ctx, const std::string& key, const std::string& value) {
    round(ctx, {.op = Op::del_if_value, .key = key, .value = value, .blind = cfg_.variant == "blind-release"},
          "release-sent");
  }

  ProtocolConfig cfg_;
  std::vector<ProcId> nodes_;
  std::uint32_t quorum_ = 1;
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
