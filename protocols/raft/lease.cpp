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

namespace {

/// LeaseLink over a simulated process: its Context and the group's client.
class SimLeaseLink final : public LeaseLink {
 public:
  SimLeaseLink(Context& ctx, RaftClient& rc) : ctx_(ctx), rc_(rc) {}
  Time now() override { return ctx_.now(); }
  void sleep(Duration d) override { ctx_.sleep(d); }
  Rng& rng() override { return ctx_.rng(); }
  void note(std::string_view label, std::string detail) override { ctx_.note(label, std::move(detail)); }
  Duration rpc_timeout() const override { return rc_.rpc_timeout(); }
  std::optional<ClientReply> submit(const Command& c, Time deadline) override {
    return rc_.submit(ctx_, c, deadline);
  }
  std::uint64_t send(const Command& c) override { return rc_.send(ctx_, c); }
  std::optional<ClientReply> wait(const std::set<std::uint64_t>& reqs, Time until) override {
    return rc_.wait(ctx_, reqs, until);
  }
  bool follow(const ClientReply& r) override {
    const bool hinted = r.leader && *r.leader != rc_.target();
    rc_.redirect(&r);
    return hinted;
  }

 private:
  Context& ctx_;
  RaftClient& rc_;
};

}  // namespace

LeaseClient::LeaseClient(std::vector<ProcId> servers, Duration keepalive_interval, Duration rpc_timeout,
                         Duration acquire_timeout, bool trust_reply)
    : rc_(std::move(servers), rpc_timeout, LeaseAlgorithm::kRetryPause),
      algo_(keepalive_interval, acquire_timeout, trust_reply) {}

std::optional<Grant> LeaseClient::acquire(Context& ctx, const std::string& key, Duration ttl) {
  SimLeaseLink link(ctx, rc_);
  return algo_.acquire(link, key, ttl);
}

bool LeaseClient::extend(Context& ctx, Grant& grant, Duration ttl) {
  SimLeaseLink link(ctx, rc_);
  return algo_.extend(link, grant, ttl);
}

bool LeaseClient::believes_valid(Context& ctx, const Grant& grant) {
  SimLeaseLink link(ctx, rc_);
  return algo_.believes_valid(link, grant);
}

void LeaseClient::release(Context& ctx, const Grant& grant) {
  SimLeaseLink link(ctx, rc_);
  algo_.release(link, grant);
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
    return std::make_unique<LeaseClient>(std::move(servers), cfg.keepalive_interval, rpc_timeout_for(cfg),
                                         acquire_timeout(cfg), trusts_reply(cfg));
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
