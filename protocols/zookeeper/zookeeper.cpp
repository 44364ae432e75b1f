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
      session_(std::make_shared<SessionState>()),
      recipe_(acquire_timeout, sequence_token) {}

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

/// The recipe's world in the simulator: this client's session machinery (ClientCnxn) over the ensemble
/// model's messages.
class ZkClient::SimLink final : public Link {
 public:
  SimLink(Context& ctx, ZkClient& c) : ctx_(ctx), c_(c) {}
  Time now() override { return ctx_.now(); }
  Rng& rng() override { return ctx_.rng(); }
  void note(std::string_view label, std::string detail) override { ctx_.note(label, std::move(detail)); }
  bool ensure_session(Duration ttl, Time give_up) override { return c_.ensure_session(ctx_, ttl, give_up); }
  std::uint64_t session_id() const override { return c_.session_->id; }
  Duration session_timeout() const override { return c_.session_->timeout; }
  Duration rpc_timeout() const override { return c_.rc_.rpc_timeout(); }
  bool expired() const override { return c_.session_->state == SessionState::State::expired; }
  void mark_expired() override { c_.session_->state = SessionState::State::expired; }

  Created create(std::uint64_t session, const std::string& parent, std::uint64_t key,
                 Time deadline) override {
    auto r =
        submit(*c_.session_, c_.rc_, ctx_, ZCommand{ZOp::create, session, key, 0ns, false, parent}, deadline);
    if (!r) return {};
    if (!r->ok) return {Status::refused, {}, 0};
    return {Status::ok, r->data, r->value};
  }

  Position position(std::uint64_t session, const std::string& node, Time deadline) override {
    auto c = submit(*c_.session_, c_.rc_, ctx_, ZCommand{ZOp::check, session, 0, 0ns, false, node}, deadline);
    if (!c) return {};
    if (!c->ok) return {Status::refused, false, {}};
    if (c->value == 1) return {Status::ok, true, {}};
    return {Status::ok, false, c->data};
  }

  void remove(std::uint64_t session, const std::string& path, std::uint64_t key, Time deadline) override {
    submit(*c_.session_, c_.rc_, ctx_, ZCommand{ZOp::remove, session, key, 0ns, false, path}, deadline);
  }

  void wait_watch(const std::string& predecessor, Time until) override {
    c_.wait_watch(ctx_, predecessor, until);
  }

  Status ping(std::uint64_t session, Time deadline) override {
    auto r = submit(*c_.session_, c_.rc_, ctx_, ZCommand{ZOp::ping, session, 0, 0ns, false, {}}, deadline);
    if (!r) return Status::no_answer;
    return r->ok ? Status::ok : Status::refused;
  }

 private:
  Context& ctx_;
  ZkClient& c_;
};

std::optional<Grant> ZkClient::acquire(Context& ctx, const std::string& key, Duration ttl) {
  SimLink link(ctx, *this);
  return recipe_.acquire(link, key, ttl);
}

bool ZkClient::extend(Context& ctx, Grant& grant, Duration ttl) {
  SimLink link(ctx, *this);
  return recipe_.extend(link, grant, ttl);
}

void ZkClient::release(Context& ctx, const Grant& grant) {
  SimLink link(ctx, *this);
  recipe_.release(link, grant);
}

bool ZkClient::believes_valid(Context& ctx, const Grant& grant) {
  SimLink link(ctx, *this);
  return recipe_.believes_valid(link, grant);
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
    return std::make_unique<ZkClient>(std::move(servers), rpc_timeout(cfg), acquire_timeout(cfg),
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
