#include "locksim/protocols/raft/lease.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <tuple>
#include <utility>

namespace locksim {
namespace raft {

namespace {
constexpr Duration kRetryPause = 20ms;

std::uint32_t group_size(const ProtocolConfig& cfg) {
  return cfg.nodes == 0 ? 3 : cfg.nodes;
}

Duration rpc_timeout_for(const ProtocolConfig& cfg) {
  if (cfg.rpc_timeout > 0ns) return cfg.rpc_timeout;
  return std::max<Duration>(2 * cfg.election_timeout_max, 100ms);
}
}  // namespace

RaftOptions raft_options(const ProtocolConfig& cfg) {
  RaftOptions o;
  o.nodes = group_size(cfg);
  o.election_timeout_min = cfg.election_timeout_min;
  o.election_timeout_max = std::max(cfg.election_timeout_max, cfg.election_timeout_min);
  o.heartbeat = cfg.heartbeat;
  o.fsync = FsyncPolicy::always;
  if (auto it = cfg.extra.find("raft_fsync"); it != cfg.extra.end()) {
    if (it->second == "never") o.fsync = FsyncPolicy::never;
    if (it->second == "periodic") o.fsync = FsyncPolicy::periodic;
  }
  o.fsync_period = cfg.fsync_period;
  o.expiry_check_interval = cfg.expiry_check_interval;
  for (const auto& [name, ns] : cfg.node_settings)
    if (ns.fsync || ns.fsync_period)
      o.member_fsync[name] = {ns.fsync.value_or(o.fsync), ns.fsync_period.value_or(o.fsync_period)};
  o.token_base = cfg.first_token > 1 ? cfg.first_token - 1 : 0;
  o.wall_expiry = cfg.variant == "wall-expiry";
  o.node_counter = cfg.variant == "node-counter";
  return o;
}

LeaseClient::LeaseClient(std::vector<ProcId> servers, Duration keepalive_interval, Duration rpc_timeout,
                         Duration acquire_timeout, bool trust_reply)
    : rc_(std::move(servers), rpc_timeout, kRetryPause),
      keepalive_interval_(keepalive_interval),
      acquire_timeout_(acquire_timeout),
      trust_reply_(trust_reply) {}

void LeaseClient::keepalive(Context& ctx, LeaseState& st, std::uint64_t lease, Time deadline) {
  if (ctx.now() >= deadline) return;
  const Time sent = ctx.now();  // validity counts from the first send: conservative when redirected
  auto r = rc_.submit(ctx, Command{Op::keepalive, lease, 0ns, {}, false}, deadline);
  const Duration interval = keepalive_interval_ > 0ns ? keepalive_interval_ : st.ttl / 3;
  if (!r) {
    st.keepalive_due = ctx.now();  // unreachable: try again at the next chance
    return;
  }
  if (r->ok) {
    st.valid_until = std::max(st.valid_until, sent + st.ttl);
    st.keepalive_due = sent + interval;
  } else {
    st.lost = true;
  }
}

void LeaseClient::revoke(Context& ctx, std::uint64_t lease) {
  rc_.submit(ctx, Command{Op::revoke, lease, 0ns, {}, false}, ctx.now() + rc_.rpc_timeout());
}

std::optional<Grant> LeaseClient::acquire(Context& ctx, const std::string& key, Duration ttl) {
  const Time give_up = ctx.now() + acquire_timeout_;
  const Duration interval = keepalive_interval_ > 0ns ? keepalive_interval_ : ttl / 3;
  while (ctx.now() < give_up) {
    // 1. A lease. Its validity is measured from when the grant request was sent.
    // The grant carries a key of this attempt's own: submit() asks again after an ambiguous answer (a
    // timeout, "leader-changed") and the first grant may have committed; the key makes the retry name
    // that lease instead of creating a second one, which nobody would revoke or keep alive.
    const Time sent = ctx.now();
    const std::uint64_t grant_key = ctx.rng().next() | 1;  // never 0 (no key)
    auto g = rc_.submit(ctx, Command{Op::grant, grant_key, ttl, {}, false}, give_up);
    if (!g) return std::nullopt;
    if (!g->ok) continue;
    const std::uint64_t lease = g->value;
    LeaseState st{ttl, sent + ttl, sent + interval, false};

    // 2. The lock key under it; wait until it is the holder, keeping the lease alive meanwhile.
    std::set<std::uint64_t> reqs;
    std::uint64_t last_req = 0;
    std::optional<ClientReply> got;
    bool noted = false;
    while (!got && !st.lost && ctx.now() < st.valid_until && ctx.now() < give_up) {
      last_req = rc_.send(ctx, Command{Op::lock, lease, 0ns, key, false});
      reqs.insert(last_req);
      if (!noted) {
        ctx.note("acquire-sent", fmt::format("{} lease={}", key, lease));
        noted = true;
      }
      for (;;) {
        auto r = rc_.wait(ctx, reqs, std::min({st.keepalive_due, give_up, st.valid_until}));
        if (!r) {
          // Time for a keep-alive (which also finds the leader again), then ask again: lock is idempotent.
          if (ctx.now() >= st.keepalive_due) keepalive(ctx, st, lease, std::min(st.valid_until, give_up));
          break;
        }
        if (r->ok) {
          got = r;
          break;
        }
        // Not done, or perhaps done by a leader that lost its office: ask again (lock is idempotent).
        if (RaftClient::nothing_done(*r) || r->error == "leader-changed") {
          if (r->req != last_req) continue;  // an older request's answer: the newer one is still out
          const bool hinted = r->leader && *r->leader != rc_.target();
          rc_.redirect(&*r);
          if (!hinted) ctx.sleep(kRetryPause);
          break;
        }
        st.lost = true;  // lease-not-found / deleted: the lease expired while we waited
        break;
      }
    }
    if (got && (trust_reply_ || ctx.now() < st.valid_until)) {
      leases_[lease] = st;
      Grant grant;
      grant.key = key;
      grant.value = std::to_string(lease);
      grant.token = got->value;  // the create revision
      grant.valid_until = st.valid_until;
      grant.lease_id = lease;
      return grant;
    }
    if (!st.lost) revoke(ctx, lease);  // best effort; the TTL cleans up otherwise
  }
  return std::nullopt;
}

void LeaseClient::adopt_renewal(LeaseState& st, const Grant& grant) const {
  // Another client of this process (a renewal thread's) kept the lease alive: the grant says until when, as
  // etcd's one lessor per client keeps one deadline per lease for every goroutine. Without a second client
  // the grant never runs ahead of this state (acquire and extend copy it there), so nothing changes.
  if (grant.valid_until <= st.valid_until) return;
  st.valid_until = grant.valid_until;
  const Duration interval = keepalive_interval_ > 0ns ? keepalive_interval_ : st.ttl / 3;
  st.keepalive_due = std::max(st.keepalive_due, grant.valid_until - st.ttl + interval);
}

bool LeaseClient::extend(Context& ctx, Grant& grant, Duration ttl) {
  auto it = leases_.find(grant.lease_id);
  // A lease this client did not acquire (a renewal thread's client, keeping alive the lease its process's
  // main fiber holds): all it needs is in the grant. Its keep-alives reach the grant, not this client.
  LeaseState adopted{ttl, grant.valid_until, ctx.now(), false};
  LeaseState& st = it != leases_.end() ? it->second : adopted;
  adopt_renewal(st, grant);
  if (!st.lost && ctx.now() < st.valid_until) keepalive(ctx, st, grant.lease_id, st.valid_until);
  grant.valid_until = st.valid_until;
  return !st.lost && ctx.now() < st.valid_until;
}

bool LeaseClient::believes_valid(Context& ctx, const Grant& grant) {
  auto it = leases_.find(grant.lease_id);
  if (it == leases_.end()) return false;
  LeaseState& st = it->second;
  adopt_renewal(st, grant);
  if (!st.lost && ctx.now() < st.valid_until && ctx.now() >= st.keepalive_due)
    keepalive(ctx, st, grant.lease_id, st.valid_until);
  return !st.lost && ctx.now() < st.valid_until;
}

void LeaseClient::release(Context& ctx, const Grant& grant) {
  rc_.submit(ctx, Command{Op::unlock, grant.lease_id, 0ns, grant.key, false}, ctx.now() + rc_.rpc_timeout());
  revoke(ctx, grant.lease_id);
  leases_.erase(grant.lease_id);
}

namespace {

class LeaseProtocol final : public Protocol {
 public:
  explicit LeaseProtocol(bool fenced) : fenced_(fenced) {}
  std::string name() const override { return fenced_ ? "lease+fence" : "lease"; }
  std::string summary() const override {
    return fenced_ ? "etcd-like lease lock on Raft; writes carry the create revision as fencing token"
                   : "etcd-like lease lock on Raft (TTL + keep-alive); writes carry no token";
  }
  bool fenced() const override { return fenced_; }
  std::vector<Variant> variants() const override {
    return {
        {"trust-reply", "the client accepts a grant reply that arrives after the lease it names expired"},
        {"no-recheck-after-wait",
         "the client does not re-check the lease after waiting for the lock (as trust-reply)"},
        {"wall-expiry", "the leader times leases on its wall clock, which jumps, not its monotonic clock"},
        {"node-counter",
         "a grant's token is the leader's own volatile counter, not the replicated revision"}};
  }

  /// raft1..raftN, every member able to lead; a grant is recorded once it is committed, so one record backs
  /// it.
  ServiceDecl declare(const ProtocolConfig& cfg) const override {
    const RaftOptions o = raft_options(cfg);
    ServiceDecl d;
    for (std::uint32_t i = 1; i <= o.nodes; ++i)
      d.processes.push_back(
          {fmt::format("{}{}", o.prefix, i), {ProcessRole::server, ProcessRole::leader_capable}});
    d.quorum = 1;  // only committed decisions are recorded, once each
    d.names_hint = "[protocol] nodes sets the count";
    return d;
  }

  ServiceInfo build(World& world, const ProtocolConfig& cfg, History& history) override {
    auto recorded =
        std::make_shared<std::set<std::tuple<std::string, std::string, std::uint64_t, std::uint64_t>>>();
    auto obs = std::make_shared<Observer>();
    World* w = &world;
    History* h = &history;
    // A holder decision is recorded by the leader that applies it. The same member re-applying the same
    // entry after a restart makes the same claim again and is recorded once; another member's claim is its
    // own record, even for the same (lock, revision): if two leaders' logs diverged at one index, merging
    // their claims would hide a second holder.
    obs->on_holder = [w, h, recorded](const std::string& node, const std::string& lock, std::uint64_t lease,
                                      std::uint64_t rev) {
      if (!recorded->insert({node, lock, lease, rev}).second) return;
      h->recorder(*w, node).grant(lock, std::to_string(lease));
    };
    // Roles, for faults aimed at the leader: each member records its own.
    obs->on_start = [w, h](const std::string& node, std::uint64_t term) {
      h->recorder(*w, node).follower(term);
    };
    obs->on_leader = [w, h](const std::string& node, std::uint64_t term) {
      h->recorder(*w, node).leader(term);
    };
    obs->on_step_down = [w, h](const std::string& node, std::uint64_t term) {
      h->recorder(*w, node).follower(term);
    };
    ServiceInfo info;
    info.servers = spawn_raft_group(world, raft_options(cfg), obs);
    return info;
  }

  /// etcd's concurrency.Session (client/v3/concurrency/session.go) keeps its lease alive for as long as the
  /// session lives, through the client's lessor (client/v3/lease.go): the next keep-alive is due TTL/3 after
  /// each response (recvKeepAlive: `nextKeepAlive := time.Now().Add(TTL / 3)`), the send loop looks every
  /// 500 ms (`retryConnWait`), and once no response came within the TTL the keep-alive channel closes and
  /// the session's Done() with it. A Mutex holder that does not watch Done() is not told: it goes on.
  RenewalDefaults renewal_defaults(const ProtocolConfig& cfg) const override {
    return {.every = cfg.keepalive_interval > 0ns ? cfg.keepalive_interval : cfg.ttl / 3,
            .before_expiry = Duration{0},
            .retry = 500ms,
            .stop_on_failure = false,
            .source =
                "etcd client/v3 concurrency.Session: keep-alive every TTL/3 (lease.go recvKeepAlive), "
                "retry every 500 ms (retryConnWait); the holder is not told when Done() closes"};
  }

  std::unique_ptr<LockClient> make_client(Context& ctx, const ProtocolConfig& cfg) override {
    const RaftOptions o = raft_options(cfg);
    std::vector<ProcId> servers;
    for (std::uint32_t i = 1; i <= o.nodes; ++i)
      servers.push_back(ctx.lookup(fmt::format("{}{}", o.prefix, i)));
    Duration acquire_timeout = std::max<Duration>(3 * cfg.ttl, 5s);
    if (auto it = cfg.extra.find("acquire_timeout_ms"); it != cfg.extra.end()) {
      std::int64_t ms = 0;
      std::from_chars(it->second.data(), it->second.data() + it->second.size(), ms);
      if (ms > 0) acquire_timeout = std::chrono::milliseconds(ms);
    }
    return std::make_unique<LeaseClient>(
        std::move(servers), cfg.keepalive_interval, rpc_timeout_for(cfg), acquire_timeout,
        cfg.variant == "trust-reply" || cfg.variant == "no-recheck-after-wait");
  }

 private:
  bool fenced_;
};

}  // namespace
}  // namespace raft

void register_lease_protocols(ProtocolRegistry& registry) {
  registry.add("lease", "etcd-like lease lock on Raft (TTL + keep-alive); writes carry no token",
               [] { return std::make_unique<raft::LeaseProtocol>(false); });
  registry.add("lease+fence",
               "etcd-like lease lock on Raft; writes carry the create revision as fencing token",
               [] { return std::make_unique<raft::LeaseProtocol>(true); });
}

}  // namespace locksim
