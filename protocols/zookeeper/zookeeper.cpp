#include "locksim/protocols/zookeeper/zookeeper.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <tuple>
#include <utility>

namespace locksim {
namespace zk {

namespace {
constexpr Duration kRetryPause = 20ms;

Duration extra_duration(const ProtocolConfig& cfg, const char* key, Duration fallback) {
  auto it = cfg.extra.find(key);
  if (it == cfg.extra.end()) return fallback;
  std::int64_t ns = 0;
  auto r = std::from_chars(it->second.data(), it->second.data() + it->second.size(), ns);
  return r.ec == std::errc{} && ns > 0 ? Duration{ns} : fallback;
}

Duration rpc_timeout_for(const ProtocolConfig& cfg) {
  if (cfg.rpc_timeout > 0ns) return cfg.rpc_timeout;
  return std::max<Duration>(2 * cfg.election_timeout_max, 100ms);
}

std::optional<raft::ClientReply> submit(raft::Client& rc, Context& ctx, const ZCommand& c, Time deadline) {
  return rc.submit(ctx, encode(c), describe(c), deadline);
}

/// A request on the session's one connection: sent to the server the session is connected to; a move to
/// another server (a redirect, a failover) is a new connection.
std::optional<raft::ClientReply> submit(SessionState& st, raft::Client& rc, Context& ctx, const ZCommand& c,
                                        Time deadline) {
  rc.set_target_index(st.server);
  auto r = submit(rc, ctx, c, deadline);
  if (rc.target_index() != st.server) {
    st.server = rc.target_index();
    ++st.connections;
  }
  return r;
}

/// ZooKeeper's ClientCnxn SendThread for one session: pings when the connection has been idle for a third
/// of the session timeout; with no answer for two thirds of it the client is Disconnected and tries the
/// next server; an answer "session-expired" (the ensemble closed the session) makes it Expired.
void session_thread(Context& ctx, const std::shared_ptr<SessionState>& st, const std::vector<ProcId>& servers,
                    Duration rpc_timeout) {
  using State = SessionState::State;
  raft::Client rc(servers, rpc_timeout, kRetryPause);
  for (;;) {
    if (st->id == 0 || st->state == State::expired) {
      ctx.wait_notified(kForever);
      continue;
    }
    const Duration t = st->timeout;
    const bool disconnected = st->state == State::disconnected;
    const Time due = disconnected ? ctx.now() : st->last_heard + t / 3;
    if (ctx.now() < due) {
      ctx.wait_notified(due - ctx.now());
      continue;
    }
    const std::uint64_t id = st->id;
    const Time sent = ctx.now();
    const Time deadline =
        disconnected ? sent + t / 3 : std::max(st->last_heard + 2 * t / 3, sent + rpc_timeout);
    auto r = submit(*st, rc, ctx, ZCommand{ZOp::ping, id, 0, 0ns, false, {}}, deadline);
    if (st->id != id || st->state == State::expired) continue;  // a new session began meanwhile
    if (!r) {
      if (!disconnected) {
        st->state = State::disconnected;
        ctx.note("zk-disconnected", fmt::format("session={}", id));
      }
      continue;
    }
    if (!r->ok) {
      st->state = State::expired;
      ctx.note("zk-expired", fmt::format("session={}", id));
      continue;
    }
    if (disconnected) {
      ++st->connections;
      ctx.note("zk-reconnected", fmt::format("session={}", id));
    }
    st->state = State::connected;
    st->last_heard = std::max(st->last_heard, sent);
  }
}
}  // namespace

std::string lock_path(const std::string& key) {
  return "/locks/" + key;
}

EnsembleOptions ensemble_options(const ProtocolConfig& cfg) {
  EnsembleOptions o;
  o.group.nodes = cfg.nodes == 0 ? 3 : cfg.nodes;
  o.group.prefix = "zk";
  o.group.election_timeout_min = cfg.election_timeout_min;
  o.group.election_timeout_max = std::max(cfg.election_timeout_max, cfg.election_timeout_min);
  o.group.heartbeat = cfg.heartbeat;
  o.group.fsync = FsyncPolicy::always;  // ZooKeeper forceSync=yes: the txn log is fsynced before an ack
  o.group.fsync_period = cfg.fsync_period;
  for (const auto& [name, ns] : cfg.node_settings)
    if (ns.fsync || ns.fsync_period)
      o.group.member_fsync[name] = {ns.fsync.value_or(o.group.fsync),
                                    ns.fsync_period.value_or(o.group.fsync_period)};
  o.tick_time = extra_duration(cfg, kTickTimeKey, o.tick_time);
  o.container_check_interval = extra_duration(cfg, kContainerCheckKey, o.container_check_interval);
  return o;
}

ZkClient::ZkClient(std::vector<ProcId> servers, Duration rpc_timeout, Duration acquire_timeout,
                   bool sequence_token)
    : servers_(servers),
      rc_(std::move(servers), rpc_timeout, kRetryPause),
      acquire_timeout_(acquire_timeout),
      sequence_token_(sequence_token),
      session_(std::make_shared<SessionState>()) {}

void ZkClient::start_session_thread(Context& ctx) {
  if (thread_.valid()) {
    ctx.notify(thread_);
    return;
  }
  auto st = session_;
  auto servers = servers_;
  const Duration rpc = rc_.rpc_timeout();
  thread_ =
      ctx.spawn_thread("zk-session", [st, servers, rpc](Context& c) { session_thread(c, st, servers, rpc); });
}

bool ZkClient::ensure_session(Context& ctx, Duration ttl, Time give_up) {
  if (session_->id != 0 && session_->state != SessionState::State::expired) return true;
  const Time sent = ctx.now();
  const std::uint64_t key = ctx.rng().next() | 1;  // a retried create_session names the same session
  auto r = submit(*session_, rc_, ctx, ZCommand{ZOp::create_session, key, 0, ttl, false, {}}, give_up);
  if (!r || !r->ok) return false;
  std::int64_t ns = 0;
  std::from_chars(r->data.data(), r->data.data() + r->data.size(), ns);
  session_->id = r->value;
  session_->timeout = Duration{ns};
  session_->state = SessionState::State::connected;
  session_->last_heard = sent;
  session_->connections = 0;
  ctx.note("zk-session", fmt::format("session={} timeout={}ms", r->value, ns / 1'000'000));
  start_session_thread(ctx);
  return true;
}

void ZkClient::wait_watch(Context& ctx, const std::string& pred, Time until) {
  const std::uint64_t seen = session_->connections;
  const Duration slice = std::max<Duration>(session_->timeout / 3, 1ms);
  for (;;) {
    const Time now = ctx.now();
    if (now >= until) return;
    auto m =
        ctx.receive(std::min(until - now, slice), [](const Message& msg) { return msg.type == kWatchType; });
    if (m) {
      const auto* ev = m->as<WatchEvent>();
      if (ev && ev->path == pred) return;  // NodeDeleted on the predecessor: read the children again
      continue;                            // an older watch's event
    }
    // Curator's watcher is woken by the connection's state change too: a watch at the old connection may
    // never fire.
    if (session_->connections != seen || session_->state == SessionState::State::expired) return;
  }
}

std::optional<Grant> ZkClient::acquire(Context& ctx, const std::string& key, Duration ttl) {
  const Time give_up = ctx.now() + acquire_timeout_;
  const std::string parent = lock_path(key);
  bool noted = false;
  while (ctx.now() < give_up) {
    if (!ensure_session(ctx, ttl, give_up)) return std::nullopt;
    const std::uint64_t sid = session_->id;
    // Curator's protection mode: the node's name carries this attempt's key, so a create retried after a
    // connection loss finds the node the first one made.
    const std::uint64_t pkey = ctx.rng().next() | 1;
    if (!noted) {
      ctx.note("acquire-sent", fmt::format("{} session={}", key, sid));
      noted = true;
    }
    auto r = submit(*session_, rc_, ctx, ZCommand{ZOp::create, sid, pkey, 0ns, false, parent}, give_up);
    if (!r) {  // the node may exist: delete it by its key (Curator deletes a protected node it lost track of)
      submit(*session_, rc_, ctx, ZCommand{ZOp::remove, sid, pkey, 0ns, false, parent},
             ctx.now() + rc_.rpc_timeout());
      return std::nullopt;
    }
    if (!r->ok) {  // session-expired
      session_->state = SessionState::State::expired;
      continue;
    }
    const std::string node = r->data;
    const std::uint64_t czxid = r->value;
    for (;;) {
      auto c = submit(*session_, rc_, ctx, ZCommand{ZOp::check, sid, 0, 0ns, false, node}, give_up);
      if (!c) {
        submit(*session_, rc_, ctx, ZCommand{ZOp::remove, sid, 0, 0ns, false, node},
               ctx.now() + rc_.rpc_timeout());
        return std::nullopt;
      }
      if (!c->ok) break;  // no-node: the session's node is gone (it expired): again from the create
      if (c->value == 1) {
        Grant g;
        g.key = key;
        g.value = std::to_string(czxid);
        g.token = sequence_token_ ? std::uint64_t{child_seq(node).value_or(0)} : czxid;
        g.valid_until = kTimeMax;  // believed until the client learns its session expired
        g.lease_id = sid;
        nodes_[g.value] = node;
        return g;
      }
      wait_watch(ctx, c->data, give_up);
      if (session_->state == SessionState::State::expired) break;
      if (ctx.now() >= give_up) {  // Curator's doDelete: a timed-out attempt deletes its node
        submit(*session_, rc_, ctx, ZCommand{ZOp::remove, sid, 0, 0ns, false, node},
               ctx.now() + rc_.rpc_timeout());
        return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

bool ZkClient::extend(Context& ctx, Grant& grant, Duration) {
  const bool own = session_->id == grant.lease_id;
  if (own && session_->state == SessionState::State::expired) return false;
  auto r = submit(*session_, rc_, ctx, ZCommand{ZOp::ping, grant.lease_id, 0, 0ns, false, {}},
                  ctx.now() + rc_.rpc_timeout());
  if (r && !r->ok) {
    if (own) session_->state = SessionState::State::expired;
    return false;
  }
  return true;  // answered, or Disconnected: the holder goes on believing
}

void ZkClient::release(Context& ctx, const Grant& grant) {
  auto it = nodes_.find(grant.value);
  if (it == nodes_.end()) return;
  // Curator's guaranteed() delete: retried until it goes through, or the session is gone anyway.
  const Duration patience = std::max(rc_.rpc_timeout(), session_->timeout);
  submit(*session_, rc_, ctx, ZCommand{ZOp::remove, grant.lease_id, 0, 0ns, false, it->second},
         ctx.now() + patience);
  nodes_.erase(it);
}

bool ZkClient::believes_valid(Context&, const Grant& grant) {
  return session_->id == grant.lease_id && session_->state != SessionState::State::expired &&
         nodes_.count(grant.value) != 0;
}

namespace {

class ZooKeeperProtocol final : public Protocol {
 public:
  explicit ZooKeeperProtocol(bool fenced) : fenced_(fenced) {}
  std::string name() const override { return fenced_ ? "zookeeper+fence" : "zookeeper"; }
  std::string summary() const override {
    return fenced_
               ? "Curator InterProcessMutex on a ZooKeeper ensemble; writes carry the node's czxid as token"
               : "Curator InterProcessMutex on a ZooKeeper ensemble (sessions, ephemeral sequential nodes)";
  }
  bool fenced() const override { return fenced_; }
  std::vector<Variant> variants() const override {
    return {{"sequence-token",
             "the token is the lock node's sequence number, a per-parent counter that starts over when the "
             "parent is deleted and re-created"}};
  }

  /// zk1..zkN, every member able to lead; a holder is recorded by the leader that applies it (committed).
  ServiceDecl declare(const ProtocolConfig& cfg) const override {
    const EnsembleOptions o = ensemble_options(cfg);
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
    auto obs = std::make_shared<EnsembleObserver>();
    World* w = &world;
    History* h = &history;
    const std::string prefix = lock_path("");
    // As the lease protocol: the member that applies a holder change records it, once per (member, node).
    obs->on_holder = [w, h, recorded, prefix](const std::string& member, const ZnodeTree::Change& c) {
      if (!recorded->insert({member, c.node, c.czxid}).second) return;
      const std::string key = c.parent.rfind(prefix, 0) == 0 ? c.parent.substr(prefix.size()) : c.parent;
      h->recorder(*w, member).grant(key, std::to_string(c.czxid));
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
    info.servers = spawn_ensemble(world, ensemble_options(cfg), obs);
    return info;
  }

  /// The session's ping (ClientCnxn.SendThread: `timeToNextPing = readTimeout / 2 - idle`, readTimeout =
  /// 2/3 of the negotiated timeout) runs in the client's own session thread whether or not a scenario asks
  /// for renewal; a renewal thread adds pings of the same session.
  RenewalDefaults renewal_defaults(const ProtocolConfig& cfg) const override {
    const Duration t = ZnodeTree::negotiate(cfg.ttl, ensemble_options(cfg).tick_time);
    return {.every = t / 3,
            .before_expiry = Duration{0},
            .retry = t / 3,
            .stop_on_failure = false,
            .source =
                "ZooKeeper ClientCnxn SendThread: ping after readTimeout/2 = timeout/3 idle; Curator's "
                "InterProcessMutex does not tell its holder when the session is lost"};
  }

  std::unique_ptr<LockClient> make_client(Context& ctx, const ProtocolConfig& cfg) override {
    const EnsembleOptions o = ensemble_options(cfg);
    std::vector<ProcId> servers;
    for (std::uint32_t i = 1; i <= o.group.nodes; ++i)
      servers.push_back(ctx.lookup(fmt::format("{}{}", o.group.prefix, i)));
    Duration acquire_timeout = std::max<Duration>(3 * cfg.ttl, 5s);
    if (auto it = cfg.extra.find("acquire_timeout_ms"); it != cfg.extra.end()) {
      std::int64_t ms = 0;
      std::from_chars(it->second.data(), it->second.data() + it->second.size(), ms);
      if (ms > 0) acquire_timeout = std::chrono::milliseconds(ms);
    }
    return std::make_unique<ZkClient>(std::move(servers), rpc_timeout_for(cfg), acquire_timeout,
                                      cfg.variant == "sequence-token");
  }

 private:
  bool fenced_;
};

}  // namespace
}  // namespace zk

void register_zookeeper_protocols(ProtocolRegistry& registry) {
  registry.add("zookeeper",
               "Curator InterProcessMutex on a ZooKeeper ensemble (sessions, ephemeral sequential nodes)",
               [] { return std::make_unique<zk::ZooKeeperProtocol>(false); });
  registry.add("zookeeper+fence",
               "Curator InterProcessMutex on a ZooKeeper ensemble; writes carry the node's czxid as token",
               [] { return std::make_unique<zk::ZooKeeperProtocol>(true); });
}

}  // namespace locksim
