#include "locksim/protocols/consul/consul.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <tuple>
#include <utility>

namespace locksim {
namespace consul {

namespace {
constexpr Duration kRetryPause = 20ms;
/// How long the client waits on one blocking query before it asks again (Consul's default wait is 5 min;
/// the servers here never end a wait early, so the client's patience is what finds a dead leader).
constexpr Duration kBlockingWait = 5s;

std::int64_t extra_int(const ProtocolConfig& cfg, const char* key, std::int64_t fallback) {
  auto it = cfg.extra.find(key);
  if (it == cfg.extra.end()) return fallback;
  std::int64_t v = 0;
  auto r = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  return r.ec == std::errc{} && v >= 0 ? v : fallback;
}

Duration rpc_timeout_for(const ProtocolConfig& cfg) {
  if (cfg.rpc_timeout > 0ns) return cfg.rpc_timeout;
  return std::max<Duration>(2 * cfg.election_timeout_max, 100ms);
}

KCommand command(KOp op, std::uint64_t session, std::string key = {}) {
  KCommand c;
  c.op = op;
  c.session = session;
  c.key = std::move(key);
  return c;
}

std::optional<raft::ClientReply> submit(raft::Client& rc, Context& ctx, const KCommand& c, Time deadline) {
  return rc.submit(ctx, encode(c), describe(c), deadline);
}

/// api/session.go RenewPeriodic: renew every TTL/2; after an error try again in 1 s, and give up once a
/// whole TTL passed without a renewal; a renewal that finds no session ends it (ErrSessionExpired).
void renewer(Context& ctx, const std::shared_ptr<SessionState>& st, const std::vector<ProcId>& servers,
             Duration rpc_timeout) {
  raft::Client rc(servers, rpc_timeout, kRetryPause);
  for (;;) {
    if (st->id == 0 || st->expired) {
      ctx.wait_notified(kForever);
      continue;
    }
    if (ctx.now() < st->renew_due) {
      ctx.wait_notified(st->renew_due - ctx.now());
      continue;
    }
    const std::uint64_t id = st->id;
    const Time sent = ctx.now();
    auto r = submit(rc, ctx, command(KOp::session_renew, id), sent + rpc_timeout);
    if (st->id != id) continue;  // released, or a new session, meanwhile
    if (r && r->ok) {
      st->last_renewed = std::max(st->last_renewed, sent);
      st->renew_due = sent + st->ttl / 2;
      continue;
    }
    if (r || ctx.now() - st->last_renewed > st->ttl) {
      st->expired = true;
      ctx.note("consul-session-lost", fmt::format("session={}", id));
      continue;
    }
    st->renew_due = ctx.now() + 1s;
  }
}

/// api/lock.go monitorLock: a blocking query on the held key; the lock is lost once the key no longer names
/// the session (the servers released it: the session was invalidated).
void monitor(Context& ctx, const std::shared_ptr<SessionState>& st, const std::vector<ProcId>& servers,
             Duration rpc_timeout) {
  raft::Client rc(servers, rpc_timeout, kRetryPause);
  for (;;) {
    if (st->key.empty() || st->lost) {
      ctx.wait_notified(kForever);
      continue;
    }
    const std::uint64_t gen = st->generation;
    const std::string key = st->key;
    auto r = blocking_get(rc, ctx, key, st->index, ctx.now() + kBlockingWait);
    if (st->generation != gen || !r) continue;
    if (holder_of(*r) == st->id) {
      st->index = std::max(st->index, r->value);
      continue;
    }
    st->lost = true;
    ctx.note("consul-lock-lost", fmt::format("{} session={}", key, st->id));
  }
}
}  // namespace

std::uint64_t holder_of(const raft::ClientReply& r) {
  std::uint64_t s = 0;
  std::from_chars(r.data.data(), r.data.data() + r.data.size(), s);
  return s;
}

std::optional<raft::ClientReply> blocking_get(raft::Client& rc, Context& ctx, const std::string& key,
                                              std::uint64_t wait_index, Time until) {
  KCommand c = command(KOp::get, 0, key);
  c.wait_index = wait_index;
  const std::string cmd = encode(c);
  while (ctx.now() < until) {
    const std::uint64_t req = rc.send(ctx, cmd, describe(c));
    const Duration patience = wait_index != 0 ? kBlockingWait : rc.rpc_timeout();
    for (;;) {
      auto r = rc.wait(ctx, {req}, std::min(until, ctx.now() + patience));
      if (!r) {
        rc.redirect(nullptr);
        break;
      }
      if (raft::Client::nothing_done(*r) || r->error == "leader-changed") {
        const bool hinted = r->leader && *r->leader != rc.target();
        rc.redirect(&*r);
        if (!hinted) ctx.sleep(kRetryPause);
        break;
      }
      return r;
    }
  }
  return std::nullopt;
}

ServerOptions server_options(const ProtocolConfig& cfg) {
  ServerOptions o;
  o.group.nodes = cfg.nodes == 0 ? 3 : cfg.nodes;
  o.group.prefix = "consul";
  o.group.election_timeout_min = cfg.election_timeout_min;
  o.group.election_timeout_max = std::max(cfg.election_timeout_max, cfg.election_timeout_min);
  o.group.heartbeat = cfg.heartbeat;
  o.group.fsync = FsyncPolicy::always;  // raft-boltdb syncs each append
  o.group.fsync_period = cfg.fsync_period;
  for (const auto& [name, ns] : cfg.node_settings)
    if (ns.fsync || ns.fsync_period)
      o.group.member_fsync[name] = {ns.fsync.value_or(o.group.fsync),
                                    ns.fsync_period.value_or(o.group.fsync_period)};
  o.ttl_multiplier_ppm = extra_int(cfg, kTtlMultiplierKey, o.ttl_multiplier_ppm);
  return o;
}

Duration lock_delay(const ProtocolConfig& cfg) {
  return Duration{extra_int(cfg, kLockDelayKey, kDefaultLockDelay.count())};
}

ConsulClient::ConsulClient(std::vector<ProcId> servers, Duration rpc_timeout, Duration acquire_timeout,
                           Duration lock_delay)
    : servers_(servers),
      rc_(std::move(servers), rpc_timeout, kRetryPause),
      acquire_timeout_(acquire_timeout),
      lock_delay_(lock_delay),
      st_(std::make_shared<SessionState>()) {}

void ConsulClient::start_threads(Context& ctx) {
  if (renewer_.valid()) {
    ctx.notify(renewer_);
    ctx.notify(monitor_);
    return;
  }
  auto st = st_;
  auto servers = servers_;
  const Duration rpc = rc_.rpc_timeout();
  renewer_ =
      ctx.spawn_thread("consul-renew", [st, servers, rpc](Context& c) { renewer(c, st, servers, rpc); });
  monitor_ =
      ctx.spawn_thread("consul-monitor", [st, servers, rpc](Context& c) { monitor(c, st, servers, rpc); });
}

std::optional<Grant> ConsulClient::acquire(Context& ctx, const std::string& key, Duration ttl) {
  const Time give_up = ctx.now() + acquire_timeout_;
  // Lock(): a session of its own (createSession: TTL, LockDelay, behavior release). The create carries a
  // key of this attempt, so a create retried after an unknown outcome names the session the first made.
  KCommand create = command(KOp::session_create, ctx.rng().next() | 1);
  create.ttl = ttl;
  create.lock_delay = lock_delay_;
  const Time sent = ctx.now();
  auto s = submit(rc_, ctx, create, give_up);
  if (!s || !s->ok) return std::nullopt;
  const std::uint64_t sid = s->value;
  st_->id = sid;
  st_->ttl = ttl;
  st_->last_renewed = sent;
  st_->renew_due = sent + ttl / 2;
  st_->expired = false;
  st_->key.clear();
  st_->lost = false;
  ++st_->generation;
  start_threads(ctx);
  ctx.note("acquire-sent", fmt::format("{} session={}", key, sid));

  std::optional<std::uint64_t> token;
  std::uint64_t wait_index = 0;
  while (!token && ctx.now() < give_up && !st_->expired) {
    auto g = blocking_get(rc_, ctx, key, wait_index, give_up);
    if (!g) break;
    const std::uint64_t holder = holder_of(*g);
    if (holder == sid) {  // an acquire whose answer was lost went through
      token = g->value;
      break;
    }
    if (holder != 0) {  // held: wait for the key to change
      wait_index = g->value;
      continue;
    }
    auto a = submit(rc_, ctx, command(KOp::acquire, sid, key), give_up);
    if (!a) break;
    if (a->ok) {
      token = a->value;
      break;
    }
    if (a->error == "invalid-session") break;
    // Why it failed: held by another session (wait on it), or free and in lock-delay (wait 5 s).
    auto again = blocking_get(rc_, ctx, key, 0, give_up);
    if (again && holder_of(*again) != 0 && holder_of(*again) != sid) {
      wait_index = again->value;
      continue;
    }
    wait_index = 0;
    if (ctx.now() < give_up) ctx.sleep(std::min<Duration>(kLockRetryTime, give_up - ctx.now()));
  }
  if (!token) {
    // Lock() gave up: its session is destroyed (best effort; the TTL ends it otherwise).
    st_->id = 0;
    ++st_->generation;
    submit(rc_, ctx, command(KOp::session_destroy, sid), ctx.now() + rc_.rpc_timeout());
    return std::nullopt;
  }
  st_->key = key;
  st_->index = *token;
  st_->lost = false;
  ++st_->generation;
  ctx.notify(monitor_);
  Grant grant;
  grant.key = key;
  grant.value = std::to_string(sid);
  grant.token = *token;
  grant.valid_until = kTimeMax;  // believed until the monitor sees the key lost
  grant.lease_id = sid;
  return grant;
}

bool ConsulClient::extend(Context& ctx, Grant& grant, Duration) {
  auto r = submit(rc_, ctx, command(KOp::session_renew, grant.lease_id), ctx.now() + rc_.rpc_timeout());
  if (r && !r->ok) {
    if (st_->id == grant.lease_id) st_->expired = true;
    return false;
  }
  if (r && st_->id == grant.lease_id) {
    st_->last_renewed = std::max(st_->last_renewed, ctx.now());
  }
  return true;
}

void ConsulClient::release(Context& ctx, const Grant& grant) {
  if (st_->id == grant.lease_id) {  // Unlock(): the renewals stop, the monitor with them
    st_->id = 0;
    st_->key.clear();
    ++st_->generation;
  }
  submit(rc_, ctx, command(KOp::release, grant.lease_id, grant.key), ctx.now() + rc_.rpc_timeout());
}

bool ConsulClient::believes_valid(Context&, const Grant& grant) {
  return st_->id == grant.lease_id && st_->key == grant.key && !st_->lost;
}

namespace {

class ConsulProtocol final : public Protocol {
 public:
  explicit ConsulProtocol(bool fenced) : fenced_(fenced) {}
  std::string name() const override { return fenced_ ? "consul+fence" : "consul"; }
  std::string summary() const override {
    return fenced_ ? "consul lock on Consul sessions and KV; writes carry the key's ModifyIndex as token"
                   : "consul lock on Consul sessions and KV (TTL, lock-delay, acquire check-and-set)";
  }
  bool fenced() const override { return fenced_; }

  /// structs.SessionTTLMin (10 s) and the agent's session_ttl_max (24 h): Session.Apply refuses a TTL
  /// outside them ("Invalid Session TTL").
  std::optional<std::string> config_problem(const ProtocolConfig& cfg) const override {
    if (cfg.ttl >= kMinTtl && cfg.ttl <= kMaxTtl) return std::nullopt;
    return fmt::format("Consul refuses a session TTL of {} ms: it must be between 10s and 24h",
                       std::chrono::duration_cast<std::chrono::milliseconds>(cfg.ttl).count());
  }

  /// consul1..consulN, every server able to lead; a holder is recorded by the leader that applies it.
  ServiceDecl declare(const ProtocolConfig& cfg) const override {
    const ServerOptions o = server_options(cfg);
    ServiceDecl d;
    for (std::uint32_t i = 1; i <= o.group.nodes; ++i)
      d.processes.push_back(
          {fmt::format("{}{}", o.group.prefix, i), {ProcessRole::server, ProcessRole::leader_capable}});
    d.quorum = 1;  // only committed decisions are recorded, once each
    d.names_hint = "[protocol] nodes sets the count";
    return d;
  }

  ServiceInfo build(World& world, const ProtocolConfig& cfg, History& history) override {
    auto recorded = std::make_shared<std::set<std::tuple<std::string, std::string, std::uint64_t>>>();
    auto obs = std::make_shared<ServerObserver>();
    World* w = &world;
    History* h = &history;
    obs->on_holder = [w, h, recorded](const std::string& member, const KvStore::Change& c) {
      if (!recorded->insert({member, c.key, c.modify_index}).second) return;
      h->recorder(*w, member).grant(c.key, std::to_string(c.session));
    };
    obs->group.on_start = [w, h](const std::string& node, std::uint64_t term) {
      h->recorder(*w, node).follower(term);
    };
    obs->group.on_leader = [w, h](const std::string& node, std::uint64_t term) {
      h->recorder(*w, node).leader(term);
    };
    obs->group.on_step_down = [w, h](const std::string& node, std::uint64_t term) {
      h->recorder(*w, node).follower(term);
    };
    ServiceInfo info;
    info.servers = spawn_servers(world, server_options(cfg), obs);
    return info;
  }

  /// api/session.go RenewPeriodic runs in the client whether or not a scenario asks for renewal; a
  /// renewal thread adds renewals of the same session.
  RenewalDefaults renewal_defaults(const ProtocolConfig& cfg) const override {
    return {.every = cfg.ttl / 2,
            .before_expiry = Duration{0},
            .retry = 1s,
            .stop_on_failure = false,
            .source =
                "Consul api/session.go RenewPeriodic: renew every TTL/2, retry after 1 s; `consul lock` "
                "stops its child when monitorLock sees the key lost, not when a renewal fails"};
  }

  std::unique_ptr<LockClient> make_client(Context& ctx, const ProtocolConfig& cfg) override {
    const ServerOptions o = server_options(cfg);
    std::vector<ProcId> servers;
    for (std::uint32_t i = 1; i <= o.group.nodes; ++i)
      servers.push_back(ctx.lookup(fmt::format("{}{}", o.group.prefix, i)));
    Duration acquire_timeout = std::max<Duration>(3 * cfg.ttl, 5s);
    if (auto it = cfg.extra.find("acquire_timeout_ms"); it != cfg.extra.end()) {
      std::int64_t ms = 0;
      std::from_chars(it->second.data(), it->second.data() + it->second.size(), ms);
      if (ms > 0) acquire_timeout = std::chrono::milliseconds(ms);
    }
    return std::make_unique<ConsulClient>(std::move(servers), rpc_timeout_for(cfg), acquire_timeout,
                                          lock_delay(cfg));
  }

 private:
  bool fenced_;
};

}  // namespace
}  // namespace consul

void register_consul_protocols(ProtocolRegistry& registry) {
  registry.add("consul", "consul lock on Consul sessions and KV (TTL, lock-delay, acquire check-and-set)",
               [] { return std::make_unique<consul::ConsulProtocol>(false); });
  registry.add("consul+fence",
               "consul lock on Consul sessions and KV; writes carry the key's ModifyIndex as token",
               [] { return std::make_unique<consul::ConsulProtocol>(true); });
}

}  // namespace locksim
