#include "reality/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "locksim/protocols/raft/lease_algorithm.hpp"
#include "locksim/protocols/zookeeper/zookeeper.hpp"
#include "locksim/scenarios/runner.hpp"
#include "locksim/scenarios/services.hpp"
#include "locksim/scenarios/workload.hpp"
#include "reality/etcd_server.hpp"
#include "reality/pg_server.hpp"
#include "reality/zk_server.hpp"

namespace locksim::reality {

namespace {

Duration times(Duration d, double f) {
  return Duration{static_cast<std::int64_t>(std::llround(static_cast<double>(d.count()) * f))};
}
Time times_t(Time t, double f) {
  return t == kTimeMax ? t : times(t, f);
}

void scale_config(ProtocolConfig& c, double f) {
  for (Duration* d :
       {&c.ttl, &c.fsync_period, &c.replication_delay, &c.failover_after, &c.clock_drift_allowance,
        &c.node_timeout, &c.retry_delay, &c.retry_jitter, &c.keepalive_interval, &c.rpc_timeout,
        &c.expiry_check_interval, &c.election_timeout_min, &c.election_timeout_max, &c.heartbeat,
        &c.idle_in_transaction_timeout})
    *d = times(*d, f);
  // ZooKeeper's tickTime (the session timeout's bounds and expiry granularity) and container check, present
  // or default: a scaled session timeout keeps its place in [2, 20] x tickTime.
  const zk::EnsembleOptions o = zk::ensemble_options(c);
  c.extra[zk::kTickTimeKey] = std::to_string(times(o.tick_time, f).count());
  c.extra[zk::kContainerCheckKey] = std::to_string(times(o.container_check_interval, f).count());
}

void scale_steps(std::vector<ClientStep>& steps, double f) {
  for (ClientStep& s : steps) {
    s.duration.min = times(s.duration.min, f);
    s.duration.max = times(s.duration.max, f);
    s.duration.mean = times(s.duration.mean, f);
    s.until = times_t(s.until, f);
    scale_steps(s.steps, f);
  }
}

bool is_client(const Scenario& sc, const std::string& n) {
  return std::any_of(sc.clients.begin(), sc.clients.end(), [&](const ClientSpec& c) { return c.name == n; });
}

bool step_supported(const ClientStep& s) {
  using K = ClientStep::Kind;
  switch (s.kind) {
    case K::acquire:
    case K::write:
    case K::check:
    case K::release:
      return true;
    case K::work:
    case K::sleep:
      return s.duration.is_constant() || s.duration.kind == Dist::Kind::uniform;
    case K::repeat:
      return std::all_of(s.steps.begin(), s.steps.end(), step_supported);
    default:
      return false;
  }
}

}  // namespace

std::vector<std::string> real_protocols() {
  return {"redis",    "redis+incr",     "redlock",   "lease",          "lease+fence",
          "db-lease", "db-lease+fence", "zookeeper", "zookeeper+fence"};
}

bool is_pg(const std::string& protocol) {
  return protocol == "db-lease" || protocol == "db-lease+fence";
}

bool is_zk(const std::string& protocol) {
  return protocol == "zookeeper" || protocol == "zookeeper+fence";
}

bool is_etcd(const std::string& protocol) {
  return protocol == "lease" || protocol == "lease+fence";
}

std::uint32_t node_count(const Scenario& sc, const std::string& protocol) {
  if (is_etcd(protocol) || is_zk(protocol)) {
    const std::uint32_t n = sc.config_for(protocol).nodes;
    return n ? n : 3;
  }
  if (protocol != "redlock") return 1;  // redis, redis+incr; db1 for the database lease
  const std::uint32_t n = sc.config_for(protocol).nodes;
  return n ? n : 5;
}

namespace {

/// The protocol's servers talk to each other through the proxy when the scenario needs it (network.cpp,
/// make_member_links): etcd's and ZooKeeper's members; redis1, replica1 and sentinel1 of a Redis with a
/// replica.
bool member_links(const Scenario& sc, const std::string& protocol) {
  if (is_etcd(protocol) || is_zk(protocol)) return true;
  return protocol != "redlock" && !is_pg(protocol) && sc.config_for(protocol).replica;
}

bool redis_member(const std::string& n) {
  return n == "redis1" || n == "replica1" || n == "sentinel1";
}

}  // namespace

std::vector<std::string> real_process_names(const Scenario& sc, const std::string& protocol) {
  std::vector<std::string> out;
  for (std::uint32_t i = 1; i <= node_count(sc, protocol); ++i)
    out.push_back(fmt::format("{}{}",
                              is_etcd(protocol) ? "raft"
                              : is_pg(protocol) ? "db"
                              : is_zk(protocol) ? "zk"
                                                : "redis",
                              i));
  if (protocol != "redlock" && !is_etcd(protocol) && !is_pg(protocol) && !is_zk(protocol) &&
      sc.config_for(protocol).replica) {
    out.push_back("replica1");
    out.push_back("sentinel1");
  }
  out.push_back(sc.resource_name);
  for (const ClientSpec& c : sc.clients) out.push_back(c.name);
  return out;
}

bool fault_applies(const Scenario& sc, const std::string& protocol, const FaultSpec& f) {
  const auto names = real_process_names(sc, protocol);
  const auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  if (f.fault.kind == Fault::Kind::partition) {
    // A split, or a side naming a role, is resolved when it fires; it applies when the protocol has members.
    const bool members = member_links(sc, protocol);
    if (!f.split.empty()) return members;
    auto present = [&](const std::vector<std::string>& side) {
      return std::any_of(side.begin(), side.end(), [&](const std::string& n) {
        return has(n) || (members && parse_fault_role(n).has_value());
      });
    };
    return present(f.side_a) && present(f.side_b);
  }
  return f.target.empty() || parse_fault_role(f.target).has_value() || has(f.target);
}

std::optional<std::string> not_reproducible(const Scenario& sc, const std::string& protocol) {
  const auto protos = real_protocols();
  if (std::find(protos.begin(), protos.end(), protocol) == protos.end())
    return fmt::format("no real servers for protocol '{}' yet (reality runs {})", protocol,
                       fmt::join(protos, ", "));
  const ProtocolConfig& cfg = sc.config_for(protocol);
  if (!sc.clocks.empty())
    return std::string(
        "not reproducible in reality: it sets node clocks (offset or drift), which a real "
        "machine's processes share");
  for (const FaultSpec& f : sc.faults)
    if (f.fault.kind == Fault::Kind::clock_jump || f.fault.kind == Fault::Kind::clock_drift)
      return std::string("not reproducible in reality: it jumps or drifts a node's clock");
  if (is_etcd(protocol)) {
    if (const std::string why = etcd_missing(); !why.empty()) return why;
    if (cfg.ttl.count() % 1'000'000'000 != 0)
      return fmt::format("etcd leases have whole-second TTLs; the TTL is {} ms (try another --time-scale)",
                         cfg.ttl.count() / 1'000'000);
    if (const auto n = node_count(sc, protocol); n != 3 && n != 5)
      return std::string("etcd is run for real with 3 or 5 members only");
  } else if (is_pg(protocol)) {
    if (const std::string why = pg_missing(); !why.empty()) return why;
    if (cfg.replica)
      return std::string(
          "not reproducible in reality: a replica promoted by a failover manager (asynchronous streaming "
          "replication, Patroni's rule) is not run for real");
  } else if (is_zk(protocol)) {
    if (const std::string why = zk_missing(); !why.empty()) return why;
    if (const auto n = node_count(sc, protocol); n != 3 && n != 5)
      return std::string("ZooKeeper is run for real with 3 or 5 members only");
    if (zk::ensemble_options(cfg).tick_time < 1ms)
      return std::string("ZooKeeper's tickTime is whole milliseconds; the scaled tick_time is under 1 ms");
  } else if (cfg.replica && protocol == "redlock") {
    return std::string("Redlock's nodes are independent masters: it has no replica");
  } else if (cfg.replica) {
    // replica1 replicates from redis1 through the proxy with the replication_delay; a real sentinel fails
    // over (reality/sentinel.hpp). Partitions, heals and delay spikes run on the proxy's links between
    // redis1, replica1 and sentinel1 (network.cpp); a crash, pause or restart of the replica or the
    // sentinel, and a restarted master coming back as the sentinel's replica, are not run yet.
    for (const FaultSpec& f : sc.faults) {
      if (!fault_applies(sc, protocol, f)) continue;
      const bool network = f.fault.kind == Fault::Kind::partition || f.fault.kind == Fault::Kind::heal ||
                           f.fault.kind == Fault::Kind::delay_spike;
      for (const std::string* n : {&f.target, &f.peer})
        if (!network && (*n == "replica1" || *n == "sentinel1"))
          return fmt::format("line {}: a fault on {} is not run for real yet", f.line, *n);
      if (f.fault.kind == Fault::Kind::restart ||
          (f.fault.kind == Fault::Kind::crash && f.fault.duration > 0ns))
        return fmt::format(
            "line {}: a Redis master restarted beside a replica and a sentinel is not run for real yet",
            f.line);
    }
  }
  const bool pg_variant =
      is_pg(protocol) && (cfg.variant == "monotonic-deadline" || cfg.variant == "app-counter");
  // The Redis clients' variants (blind-release, no-elapsed-check) are their algorithms' own, and the real
  // clients run those algorithms (protocols/redis/lock_algorithms.hpp).
  const bool redis_variant = !is_etcd(protocol) && !is_pg(protocol) && !is_zk(protocol);
  // The lease client's variants likewise (protocols/raft/lease_algorithm.hpp); wall-expiry and node-counter
  // change the lock service, which is etcd itself here.
  const bool etcd_variant = is_etcd(protocol) && raft::trusts_reply(cfg);
  if (!cfg.variant.empty() && !pg_variant && !redis_variant && !etcd_variant)
    return fmt::format("the variant '{}' is not run for real", cfg.variant);
  if (!cfg.node_settings.empty())
    return std::string("per-node persistence ([[node]]) is not run for real yet");
  if (sc.resource_kind != ResourceKind::store)
    return fmt::format(
        "a resource of kind {} is not run for real: the real resource is locksim's store server",
        to_string(sc.resource_kind));
  if (!sc.more_resources.empty())
    return std::string(
        "several resources are not run for real: the real resource is one locksim store server");
  if (!sc.resource_variant.empty())
    return fmt::format("the store variant '{}' is not run for real", sc.resource_variant);
  // Delay runs through the proxy (reality/proxy.hpp); loss, duplication and reordering are TCP's business.
  std::vector<const LinkOptions*> links{&sc.network.defaults};
  for (const LinkSpec& l : sc.links) links.push_back(&l.options);
  for (const LinkOptions* l : links) {
    if (l->loss_ppm)
      return std::string(
          "not reproducible over TCP: a lost packet is retransmitted, so a real stream loses no message "
          "(network loss)");
    if (l->duplicate_ppm)
      return std::string("not reproducible over TCP: a duplicated segment is discarded by the receiver");
    if (l->reorder_ppm)
      return std::string("not reproducible over TCP: a stream's bytes are delivered in order");
  }
  for (const ClientSpec& c : sc.clients) {
    if (c.renewal.on) return fmt::format("client {}: background renewal is not run for real yet", c.name);
    if (c.start_dist || c.work_dist || c.think_dist || c.retry_delay_dist)
      return fmt::format("client {}: durations drawn from a distribution are not run for real", c.name);
    if (c.read_modify_write || c.extend_before_write || !c.protocol.empty())
      return fmt::format(
          "client {}: read-modify-write, extension and per-client protocol settings are not "
          "run for real yet",
          c.name);
    for (const ClientStep& s : program_of(c))
      if (!step_supported(s))
        return fmt::format("client {}: its program has a step the real client does not run yet", c.name);
  }
  for (const FaultSpec& f : sc.faults) {
    // The simulator resolves a split from whichever process leads, for every protocol; a real run only where
    // the servers are linked through the proxy. Elsewhere it would silently not be applied: say so instead.
    if (!f.split.empty() && !member_links(sc, protocol))
      return fmt::format(
          "line {}: a split (sides from the leader) is not run for real with {}: its servers are not linked "
          "through the proxy (etcd, ZooKeeper, a Redis with a replica are)",
          f.line, protocol);
    if (!fault_applies(sc, protocol, f)) continue;
    const Fault& x = f.fault;
    if (x.repeat.repeats() || x.duration_dist)
      return fmt::format("line {}: a repeated fault or one with a drawn duration is not run for real",
                         f.line);
    // etcd's and ZooKeeper's members, and Redis's master, replica and sentinel, are linked through the
    // proxy: a split is resolved from the real leader (the sentinel's master) when the partition fires
    // (network.cpp).
    const bool members = member_links(sc, protocol);
    if ((!f.split.empty() && !(members && x.kind == Fault::Kind::partition)) || !f.more_targets.empty())
      return fmt::format("line {}: a fault with roles or several targets is not run for real", f.line);
    if (x.when.kind != Trigger::Kind::at && x.when.kind != Trigger::Kind::note)
      return fmt::format("line {}: a send/receive trigger is not run for real", f.line);
    if (x.when.kind == Trigger::Kind::note && !is_client(sc, f.trigger_proc))
      return fmt::format("line {}: only a client's note can trigger a fault for real", f.line);
    switch (x.kind) {
      case Fault::Kind::pause:
      case Fault::Kind::crash:
      case Fault::Kind::restart:
        // etcd's leader is found for real (/v3/maintenance/status of each member) when the fault fires.
        if (const auto role = parse_fault_role(f.target);
            role && !((is_etcd(protocol) || is_zk(protocol)) && *role == FaultRole::leader &&
                      x.kind != Fault::Kind::restart))
          return fmt::format("line {}: a role as target is not run for real", f.line);
        if (x.kind != Fault::Kind::pause && is_client(sc, f.target) &&
            (x.kind == Fault::Kind::restart || x.duration > 0ns))
          return fmt::format("line {}: a client restarted after a crash is not run for real", f.line);
        if (x.kind == Fault::Kind::crash && x.power_loss && is_zk(protocol)) {
          // ZooKeeper fsyncs its transaction log before it acknowledges (forceSync=yes): SIGKILL is faithful.
        } else if (x.kind == Fault::Kind::crash && x.power_loss && is_etcd(protocol)) {
          // etcd fsyncs its log before it acknowledges (as the simulated members do by default): SIGKILL
          // loses what a power loss loses. A member without fsync is not.
          if (auto it = cfg.extra.find("raft_fsync"); it != cfg.extra.end() && it->second != "always")
            return fmt::format("line {}: not reproducible in reality: etcd always fsyncs its log", f.line);
        } else if (x.kind == Fault::Kind::crash && x.power_loss && cfg.aof &&
                   cfg.fsync != FsyncPolicy::always)
          return fmt::format(
              "line {}: not reproducible in reality: a power loss with appendfsync {} drops what the OS had "
              "buffered, and SIGKILL keeps it",
              f.line, cfg.fsync == FsyncPolicy::periodic ? "everysec" : "no");
        if (is_pg(protocol) && !is_client(sc, f.target) &&
            !(x.kind == Fault::Kind::pause && f.target == sc.resource_name))
          return fmt::format("line {}: a {} of {} is not run for real yet with the database lease", f.line,
                             to_string(x.kind), f.target);
        // A server's pause is its SIGSTOP; the store's (a thread of the parent) a stall of its queue.
        if (x.kind != Fault::Kind::pause && f.target == sc.resource_name)
          return fmt::format("line {}: a {} of the store is not run for real (only its pause)", f.line,
                             to_string(x.kind));
        break;
      case Fault::Kind::partition: {
        // Through the proxy: the links between a client and a server (or the store), and with etcd or
        // ZooKeeper the links between two members (each ordered pair: network.cpp). Redis nodes talk to each
        // other only through the replication link and the sentinel's links: with a replica, those are member
        // links too; a Redis server and the store never talk.
        const auto names = real_process_names(sc, protocol);
        const auto real = [&](const std::string& n) {
          return std::find(names.begin(), names.end(), n) != names.end();
        };
        for (const auto* side : {&f.side_a, &f.side_b})
          for (const std::string& n : *side)
            if (const auto role = parse_fault_role(n); role && !(members && *role == FaultRole::leader))
              return fmt::format("line {}: a partition side naming the role {} is not run for real", f.line,
                                 n);
        for (const std::string& a : f.side_a)
          for (const std::string& b : f.side_b)
            if (real(a) && real(b) && !is_client(sc, a) && !is_client(sc, b) &&
                !(members && (is_etcd(protocol) || is_zk(protocol) ||
                              ((redis_member(a) || a == sc.resource_name) &&
                               (redis_member(b) || b == sc.resource_name)))))
              return fmt::format(
                  "line {}: a partition between {} and {} cuts a server-to-server link, which the proxy "
                  "does not carry (only client-to-server links)",
                  f.line, a, b);
        break;
      }
      case Fault::Kind::heal:
        break;
      case Fault::Kind::delay_spike:
        if (x.extra_dist)
          return fmt::format("line {}: a delay spike with a drawn extra delay is not run for real", f.line);
        for (const std::string* n : {&f.target, &f.peer})
          if (!n->empty() && *n != "*" && parse_fault_role(*n))
            return fmt::format("line {}: a role as target is not run for real", f.line);
        if (!f.target.empty() && f.target != "*" && !f.peer.empty() && f.peer != "*" &&
            is_client(sc, f.target) == is_client(sc, f.peer) &&
            !(members && !is_client(sc, f.target) && f.target != sc.resource_name &&
              f.peer != sc.resource_name &&
              (is_etcd(protocol) || is_zk(protocol) || (redis_member(f.target) && redis_member(f.peer)))))
          return fmt::format(
              "line {}: a delay spike between {} and {} is not on a client-to-server link, the only links "
              "the proxy carries",
              f.line, f.target, f.peer);
        break;
      default:
        return fmt::format("line {}: a {} fault is not run for real", f.line, to_string(x.kind));
    }
  }
  return std::nullopt;
}

bool static_partition(const Scenario& sc, const std::string& protocol, const FaultSpec& f) {
  const Fault& x = f.fault;
  if (x.kind != Fault::Kind::partition || x.when.kind != Trigger::Kind::at || x.when.at != Time{0} ||
      x.duration > 0ns || x.one_way || !f.split.empty() || is_etcd(protocol) || is_pg(protocol) ||
      is_zk(protocol))
    return false;
  for (const auto* side : {&f.side_a, &f.side_b})
    for (const std::string& n : *side)
      if (!is_client(sc, n) && n.rfind("redis", 0) != 0) return false;
  return true;
}

bool needs_proxy(const Scenario& sc, const std::string& protocol) {
  const LinkOptions& d = sc.network.defaults;
  if (!sc.links.empty() || !d.delay.is_constant() || d.delay.min > 5ms) return true;
  for (const FaultSpec& f : sc.faults) {
    if (!fault_applies(sc, protocol, f)) continue;
    if (f.fault.kind == Fault::Kind::delay_spike || f.fault.kind == Fault::Kind::heal) return true;
    if (f.fault.kind == Fault::Kind::partition && !static_partition(sc, protocol, f)) return true;
  }
  return false;
}

Scenario scaled(const Scenario& in, double f) {
  Scenario sc = in;
  if (f == 1.0) return sc;
  scale_config(sc.config, f);
  for (auto& [name, cfg] : sc.per_protocol) scale_config(cfg, f);
  for (ClientSpec& c : sc.clients) {
    c.start = times(c.start, f);
    c.work_min = times(c.work_min, f);
    c.work_max = times(c.work_max, f);
    c.think_min = times(c.think_min, f);
    c.think_max = times(c.think_max, f);
    c.retry_delay = times(c.retry_delay, f);
    c.give_up_at = times(c.give_up_at, f);
    scale_steps(c.steps, f);
  }
  for (FaultSpec& fs : sc.faults) {
    fs.fault.when.at = times(fs.fault.when.at, f);
    fs.fault.when.delay = times(fs.fault.when.delay, f);
    fs.fault.duration = times(fs.fault.duration, f);
    fs.fault.extra = times(fs.fault.extra, f);
  }
  sc.max_time = times(sc.max_time, f);
  return sc;
}

}  // namespace locksim::reality
