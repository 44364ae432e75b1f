#include "locksim/scenarios/runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>
#include <stdexcept>
#include <utility>

#include "locksim/protocols/cas_row.hpp"
#include "locksim/protocols/checkpoint_table.hpp"
#include "locksim/protocols/external_api.hpp"
#include "locksim/protocols/job_queue.hpp"
#include "locksim/protocols/object_store.hpp"
#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/services.hpp"
#include "locksim/scenarios/workload.hpp"

namespace locksim {

namespace {

constexpr std::array<std::pair<std::string_view, FaultRole>, 6> kRoles = {{
    {"leader", FaultRole::leader},
    {"primary", FaultRole::primary},
    {"holder", FaultRole::holder},
    {"holder-servers", FaultRole::holder_servers},
    {"any-server", FaultRole::any_server},
    {"any-client", FaultRole::any_client},
}};

constexpr std::array<std::pair<std::string_view, FaultSplit>, 3> kSplits = {{
    {"leader-alone", FaultSplit::leader_alone},
    {"minority", FaultSplit::minority},
    {"majority", FaultSplit::majority},
}};

}  // namespace

std::string_view to_string(FaultRole r) {
  for (const auto& [n, v] : kRoles)
    if (v == r) return n;
  return "?";
}

std::optional<FaultRole> parse_fault_role(std::string_view name) {
  for (const auto& [n, v] : kRoles)
    if (n == name) return v;
  return std::nullopt;
}

std::vector<std::string> fault_role_names() {
  std::vector<std::string> out;
  for (const auto& [n, v] : kRoles) out.emplace_back(n);
  return out;
}

bool single_process_role(FaultRole r) {
  return r != FaultRole::holder_servers;
}

std::string_view to_string(FaultSplit s) {
  for (const auto& [n, v] : kSplits)
    if (v == s) return n;
  return "?";
}

std::optional<FaultSplit> parse_fault_split(std::string_view name) {
  for (const auto& [n, v] : kSplits)
    if (n == name) return v;
  return std::nullopt;
}

std::vector<std::string> fault_split_names() {
  std::vector<std::string> out;
  for (const auto& [n, v] : kSplits) out.emplace_back(n);
  return out;
}

std::optional<std::string> fault_role_problem(const FaultSpec& f) {
  using K = Fault::Kind;
  if (parse_fault_role(f.peer))
    return fmt::format(
        "peer = \"{}\": a peer is a process name (or \"*\"); roles are for target and the "
        "partition sides",
        f.peer);
  if (parse_fault_role(f.trigger_proc))
    return fmt::format("after.process = \"{}\": a trigger watches a process by name (or \"*\"), not a role",
                       f.trigger_proc);
  if (!f.split.empty()) {
    if (f.fault.kind != K::partition) return fmt::format("split applies to a partition only");
    if (!parse_fault_split(f.split)) return fmt::format("unknown split '{}'", f.split);
    if (!f.side_a.empty() || !f.side_b.empty())
      return std::string("a partition has either split or side_a and side_b, not both");
  }
  if (f.fault.kind == K::restart) {
    std::vector<std::string> names = f.more_targets;
    names.insert(names.begin(), f.target);
    for (const std::string& n : names) {
      auto r = parse_fault_role(n);
      if (!r || *r == FaultRole::holder || *r == FaultRole::holder_servers) continue;
      return fmt::format("a restart needs a crashed process, and '{}' is never one: {}", n,
                         *r == FaultRole::any_server || *r == FaultRole::any_client
                             ? "it picks among processes that have not crashed"
                             : "the leader is a member that has not crashed");
    }
  }
  return std::nullopt;
}

const std::string& RunOutput::name_of(ProcId p) const {
  static const std::string none = "-";
  return p.valid() && p.value < process_names.size() ? process_names[p.value] : none;
}

namespace {

/// Thrown for a service process another protocol would have (redis4 in a lease run): what names it is
/// skipped.
struct AbsentServiceProcess {};

/// The scenario's declared service names, computed the first time a name is not in the world.
class LazyServices {
 public:
  explicit LazyServices(const Scenario& sc) : sc_(&sc) {}
  bool has(const std::string& name) {
    if (!services_) services_ = declared_services(*sc_);
    return services_->has(name);
  }

 private:
  const Scenario* sc_;
  std::optional<DeclaredServices> services_;
};

ProcId resolve(const World& w, const Scenario& sc, LazyServices& declared, const std::string& name,
               std::uint32_t line, const std::string& field) {
  if (name.empty() || name == "*") return {};
  ProcId p = w.find(name);
  if (p.valid()) return p;
  // One file serves every protocol: Kleppmann's nodes A–E are redis1..redis5 for redlock and do not exist for
  // a lease run. A fault, clock or link naming a service process another protocol declares does not apply
  // to this protocol's world.
  if (declared.has(name)) throw AbsentServiceProcess{};
  throw InputError(sc.file, line, field, fmt::format("no process named '{}' in this world", name));
}

bool alive(const World& w, ProcId p) {
  const ProcState st = w.state(p);
  return st != ProcState::crashed && st != ProcState::exited;
}

std::string name_list(const World& w, const std::vector<ProcId>& ps) {
  std::string s;
  for (std::size_t i = 0; i < ps.size(); ++i) s += (i ? "," : "") + w.name(ps[i]);
  return s;
}

/// What a fault's roles are resolved against: the world's processes and the history's ground truth.
struct RoleWorld {
  const World* world = nullptr;
  const History* history = nullptr;
  std::vector<ProcId> servers;  ///< the protocol's service processes, in spawn order
  /// By index in `servers`: declared leader-capable (every one, for a protocol that declares nothing). Only
  /// their role records make a leader.
  std::vector<std::uint8_t> leader_capable;
  std::vector<ProcId> clients;

  /// The leader now (ServiceRole records; see FaultRole::leader), or nothing with `why`.
  std::optional<ProcId> leader(std::string& why) const {
    const auto& roles = history->service_roles;
    std::vector<std::size_t> latest(servers.size(), roles.size());  // roles.size(): no record
    for (std::size_t i = 0; i < roles.size(); ++i) {
      const ProcId p = world->find(roles[i].node);
      auto it = std::find(servers.begin(), servers.end(), p);
      if (it == servers.end()) continue;
      const auto m = static_cast<std::size_t>(it - servers.begin());
      if (leader_capable[m]) latest[m] = i;
    }
    std::optional<std::size_t> best;
    bool any = false;
    for (std::size_t m = 0; m < servers.size(); ++m) {
      if (latest[m] == roles.size()) continue;
      any = true;
      const ServiceRole& r = roles[latest[m]];
      if (r.role != ServiceRole::Role::leader || !alive(*world, servers[m])) continue;
      if (!best || r.term > roles[latest[*best]].term ||
          (r.term == roles[latest[*best]].term && latest[m] > latest[*best]))
        best = m;
    }
    if (best) return servers[*best];
    why = any ? "no member leads now"
              : "no member has a role on record (none has started yet, or the service has no leader: "
                "Redlock's masters are independent)";
    return std::nullopt;
  }

  /// The processes a role stands for now; empty with `why` when nobody has it. any-server and any-client
  /// pick among those not in `taken` (the firing's targets so far: two any-client entries hit two clients).
  std::vector<ProcId> members(FaultRole role, Rng& rng, std::string& why,
                              const std::vector<ProcId>& taken = {}) const {
    const History& h = *history;
    auto pick = [&](const std::vector<ProcId>& from, const char* none) -> std::vector<ProcId> {
      std::vector<ProcId> live;
      for (ProcId p : from)
        if (alive(*world, p) && std::find(taken.begin(), taken.end(), p) == taken.end()) live.push_back(p);
      if (live.empty()) {
        why = none;
        return {};
      }
      return {live[rng.below(live.size())]};
    };
    switch (role) {
      case FaultRole::leader:
      case FaultRole::primary:
        if (auto l = leader(why)) return {*l};
        return {};
      case FaultRole::holder:
        if (h.grants.empty()) {
          why = "no client has been granted the lock yet";
          return {};
        }
        return {world->find(h.grants.back().client)};
      case FaultRole::holder_servers: {
        if (h.grants.empty()) {
          why = "no client has been granted the lock yet";
          return {};
        }
        const GrantRecord& g = h.grants.back();
        std::vector<ProcId> out;
        for (const ServiceSet& r : h.service_sets) {
          if (r.key != g.key || r.value != g.value) continue;
          if (std::find(h.service_nodes.begin(), h.service_nodes.end(), r.node) == h.service_nodes.end())
            continue;
          const ProcId p = world->find(r.node);
          if (p.valid() && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
        }
        if (out.empty()) why = fmt::format("no service record backs the newest grant ({}'s)", g.client);
        return out;
      }
      case FaultRole::any_server:
        return pick(servers,
                    taken.empty() ? "every service process has crashed" : "no other service process is up");
      case FaultRole::any_client:
        return pick(clients,
                    taken.empty() ? "every client has crashed or ended" : "no other client is running");
    }
    return {};
  }
};

/// One entry of a fault's target list or of a partition side: a process fixed when the world is built, or
/// a role.
struct TargetEntry {
  ProcId id;
  std::optional<FaultRole> role;
};

/// The targets of a fault with roles in it, computed at each firing (Fault::targets_at_fire).
struct RoleTargets {
  std::shared_ptr<const RoleWorld> rw;
  std::vector<TargetEntry> targets, side_a, side_b;
  std::optional<FaultSplit> split;

  Resolution operator()(Fault& f, Rng& rng) const {
    const World& w = *rw->world;
    std::string detail, why;
    // Expands entries into processes (each once, in order); false with `why` when a role has nobody.
    auto expand = [&](const std::vector<TargetEntry>& es, std::vector<ProcId>& out) {
      for (const TargetEntry& e : es) {
        std::vector<ProcId> ps{e.id};
        if (e.role) {
          std::string none;
          ps = rw->members(*e.role, rng, none, out);
          if (ps.empty()) {
            why = fmt::format("{}: {}", to_string(*e.role), none);
            return false;
          }
          detail += fmt::format("{}{}={}", detail.empty() ? "" : " ", to_string(*e.role), name_list(w, ps));
        }
        for (ProcId p : ps)
          if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
      }
      return true;
    };
    if (!targets.empty()) {
      std::vector<ProcId> ts;
      if (!expand(targets, ts)) return {false, why};
      f.target = ts.front();
      f.more_targets.assign(ts.begin() + 1, ts.end());
    }
    if (split) return split_sides(f, detail);
    if (!side_a.empty() || !side_b.empty()) {
      std::vector<ProcId> a, b;
      if (!expand(side_a, a) || !expand(side_b, b)) return {false, why};
      // A process a role put on both sides stays on side_a (partition() never cuts a process from itself).
      std::erase_if(b, [&](ProcId p) { return std::find(a.begin(), a.end(), p) != a.end(); });
      f.side_a = std::move(a);
      f.side_b = std::move(b);
      if (f.side_a.empty() || f.side_b.empty()) return {false, detail + " (a side is empty)"};
    }
    return {true, detail};
  }

  Resolution split_sides(Fault& f, std::string detail) const {
    const World& w = *rw->world;
    std::string why;
    const auto leader = rw->leader(why);
    const std::string name(to_string(*split));
    if (!leader) return {false, fmt::format("split={}: {}", name, why)};
    const std::vector<ProcId>& members = rw->servers;
    const std::size_t n = members.size();
    const std::size_t at =
        static_cast<std::size_t>(std::find(members.begin(), members.end(), *leader) - members.begin());
    std::vector<ProcId> a;
    for (std::size_t i : split_side_a(*split, n, at)) a.push_back(members[i]);
    if (a.empty()) return {false, fmt::format("split={}: {} members leave no minority to cut off", name, n)};
    std::vector<ProcId> b;
    for (std::uint32_t i = 0; i < w.process_count(); ++i)
      if (std::find(a.begin(), a.end(), ProcId{i}) == a.end()) b.push_back(ProcId{i});
    f.side_a = std::move(a);
    f.side_b = std::move(b);
    detail += fmt::format("{}split={} leader={}", detail.empty() ? "" : " ", name, w.name(*leader));
    return {true, detail};
  }
};

}  // namespace

std::vector<std::size_t> split_side_a(FaultSplit s, std::size_t n, std::size_t leader_at) {
  std::vector<std::size_t> a;
  switch (s) {
    case FaultSplit::leader_alone:
      a = {leader_at};
      break;
    case FaultSplit::minority:
      for (std::size_t j = 0; j < std::max<std::size_t>(1, (n - 1) / 2); ++j)
        a.push_back((leader_at + j) % n);
      break;
    case FaultSplit::majority:
      for (std::size_t j = 1; j <= (n - 1) / 2; ++j) a.push_back((leader_at + n - j) % n);
      break;
  }
  return a;
}

RunOutput run_scenario(const Scenario& sc, const std::string& protocol_name, const RunOptions& opts) {
  register_builtin_protocols();
  auto& reg = ProtocolRegistry::instance();
  if (!reg.has(protocol_name))
    throw InputError(sc.file, 0, "protocol", fmt::format("unknown protocol '{}'", protocol_name));
  std::unique_ptr<Protocol> protocol = reg.make(protocol_name);
  const ProtocolConfig& cfg = sc.config_for(protocol_name);
  if (auto problem = protocol->config_problem(cfg))
    throw InputError(sc.file, 0, "lock.ttl", fmt::format("{}: {}", protocol_name, *problem));

  RunOutput out;
  out.scenario = sc.name;
  out.protocol = protocol_name;
  out.seed = opts.seed.value_or(sc.seed);
  out.config = cfg;
  out.resource_mode =
      sc.resource_mode.value_or(protocol->fenced() ? ResourceMode::fenced : ResourceMode::unfenced);
  if (sc.resource_kind == ResourceKind::external_api)
    out.resource_mode = ResourceMode::unfenced;  // it cannot check a token, whatever the protocol sends

  WorldOptions wo;
  wo.seed = out.seed;
  wo.network = sc.network;
  wo.network.links.clear();
  wo.limits.max_time = sc.max_time;
  wo.limits.max_events = sc.max_events;
  wo.limits.max_mailbox = sc.max_mailbox;
  wo.keep_trace = opts.keep_trace;
  World world(wo);

  History& history = out.history;
  LazyServices declared(sc);
  ServiceInfo service = build_service(*protocol, world, cfg, history);
  auto mode_of = [&](const ResourceSpec& r) {
    if (r.kind == ResourceKind::external_api) return ResourceMode::unfenced;  // it cannot check a token
    return r.mode.value_or(protocol->fenced() ? ResourceMode::fenced : ResourceMode::unfenced);
  };
  auto spawn_kind = [&](const ResourceSpec& r) -> ProcId {
    const ResourceOptions opts{mode_of(r), r.variant};
    switch (r.kind) {
      case ResourceKind::checkpoint_table:
        return spawn_checkpoint_table(world, r.name, opts, history);
      case ResourceKind::object_store:
        return spawn_object_store(world, r.name, opts, history);
      case ResourceKind::external_api:
        return spawn_external_api(world, r.name, ExternalApiOptions{r.idempotency_retention}, history);
      case ResourceKind::cas_row:
        return spawn_cas_row(world, r.name, opts, history);
      case ResourceKind::job_queue:
        return spawn_job_queue(world, r.name, opts, history);
      case ResourceKind::store:
        break;
    }
    return spawn_resource(world, r.name, opts, history);
  };
  ProcId resource = spawn_kind(sc.first_resource());
  std::vector<ResourceTarget> more;
  for (const ResourceSpec& r : sc.more_resources)
    more.push_back(ResourceTarget{.name = r.name,
                                  .resource = spawn_kind(r),
                                  .kind = r.kind,
                                  .mode = mode_of(r),
                                  .idempotency_keys = r.idempotency_keys,
                                  .key = r.key,
                                  .cas_max_retries = r.cas_max_retries,
                                  .job_period = r.job_period,
                                  .job_name = r.job_name});
  if (const std::string own = protocol->resource_process(cfg);
      !own.empty() && sc.resource_kind == ResourceKind::store)
    resource = world.find(own);

  WorkloadEnv env;
  env.world = &world;
  env.history = &history;
  env.protocol = protocol.get();
  env.config = &cfg;
  env.resource = resource;
  env.resource_kind = sc.resource_kind;
  env.resource_mode = out.resource_mode;
  env.idempotency_keys = sc.idempotency_keys;
  env.lock_key = sc.lock_key;
  env.resource_key = sc.resource_key;
  env.cas_max_retries = sc.cas_max_retries;
  env.job_period = sc.job_period;
  env.job_name = sc.job_name;
  env.resource_name = sc.resource_name;
  env.more_resources = std::move(more);
  for (const ClientSpec& c : sc.clients) {
    WorkloadEnv e = env;
    if (!c.protocol.empty()) {  // the client's own settings; the servers keep the shared config
      auto own = std::make_shared<ProtocolConfig>(cfg);
      c.protocol.apply(*own);
      e.config = own.get();
      e.own_config = std::move(own);
    }
    e.give_up_at = c.give_up_at > 0ns ? c.give_up_at : sc.max_time;
    ProcId id = world.spawn(
        c.name, [start = c.start, start_dist = c.start_dist, body = client_body(e, c)](Context& ctx) {
          Duration at = start;
          if (start_dist) {  // drawn from a stream of its own: the client's other draws stay as they were
            Rng rng = ctx.rng().stream("start");
            at = start_dist->sample(rng);
          }
          if (at > 0ns) ctx.sleep(at);
          body(ctx);
        });
    (void)id;
    out.clients.push_back(c.name);
  }
  for (const ClockSpec& c : sc.clocks) {
    try {
      ProcId p = resolve(world, sc, declared, c.node, 0, "clock.node");
      world.clock(p) = NodeClock(c.clock);
    } catch (const AbsentServiceProcess&) {
    }
  }
  for (const LinkSpec& l : sc.links) {
    ProcId from, to;
    try {
      from = resolve(world, sc, declared, l.from, 0, "network.link.from");
      to = resolve(world, sc, declared, l.to, 0, "network.link.to");
    } catch (const AbsentServiceProcess&) {
      continue;
    }
    auto set_link = [&](ProcId a, ProcId b) { world.network().link(a, b) = l.options; };
    std::vector<ProcId> froms, tos;
    for (std::uint32_t i = 0; i < world.process_count(); ++i) {
      ProcId p{i};
      if (!from.valid() || from == p) froms.push_back(p);
      if (!to.valid() || to == p) tos.push_back(p);
    }
    for (ProcId a : froms)
      for (ProcId b : tos)
        if (a != b) set_link(a, b);
  }
  auto roles = std::make_shared<RoleWorld>();
  roles->world = &world;
  roles->history = &history;
  roles->servers = service.servers;
  for (ProcId p : service.servers) {
    const ServiceProcess* d = history.service.find(world.name(p));
    roles->leader_capable.push_back(history.service.empty() || (d && d->is(ProcessRole::leader_capable)));
  }
  for (const ClientSpec& c : sc.clients) roles->clients.push_back(world.find(c.name));
  for (const FaultSpec& fs : sc.faults) {
    if (auto problem = fault_role_problem(fs)) throw InputError(sc.file, fs.line, "fault", *problem);
    Fault f = fs.fault;
    // A name that is a role is resolved when the fault fires; one that is a process, now.
    auto entry = [&](const std::string& n, const char* field) -> TargetEntry {
      if (auto r = parse_fault_role(n)) {
        if (world.find(n).valid())
          throw InputError(
              sc.file, fs.line, field,
              fmt::format("'{}' is both a role and the name of a process: rename the process", n));
        return {ProcId{}, r};
      }
      return {resolve(world, sc, declared, n, fs.line, field), std::nullopt};
    };
    RoleTargets rt;
    rt.rw = roles;
    try {
      f.peer = resolve(world, sc, declared, fs.peer, fs.line, "fault.peer");
      if (f.when.kind != Trigger::Kind::at)
        f.when.proc = resolve(world, sc, declared, fs.trigger_proc, fs.line, "fault.after.process");
      // The first target decides whether the fault applies to this world (a fault on redis4 does not apply
      // to a lease run); further ones and the sides only drop what this world lacks.
      if (!fs.target.empty()) rt.targets.push_back(entry(fs.target, "fault.target"));
    } catch (const AbsentServiceProcess&) {
      continue;
    }
    auto more = [&](const std::vector<std::string>& names, std::vector<TargetEntry>& out, const char* field) {
      for (const auto& n : names) {
        try {
          out.push_back(entry(n, field));
        } catch (const AbsentServiceProcess&) {
        }
      }
    };
    more(fs.more_targets, rt.targets, "fault.target");
    more(fs.side_a, rt.side_a, "fault.side_a");
    more(fs.side_b, rt.side_b, "fault.side_b");
    if (!fs.split.empty()) rt.split = parse_fault_split(fs.split);
    auto has_role = [](const std::vector<TargetEntry>& es) {
      return std::any_of(es.begin(), es.end(), [](const TargetEntry& e) { return e.role.has_value(); });
    };
    const bool at_fire = rt.split || has_role(rt.targets) || has_role(rt.side_a) || has_role(rt.side_b);
    f.target = ProcId{};
    f.more_targets.clear();
    if (!at_fire) {
      for (const TargetEntry& e : rt.targets) {
        if (f.target.valid())
          f.more_targets.push_back(e.id);
        else
          f.target = e.id;
      }
      for (const TargetEntry& e : rt.side_a) f.side_a.push_back(e.id);
      for (const TargetEntry& e : rt.side_b) f.side_b.push_back(e.id);
      if (f.kind == Fault::Kind::partition && (f.side_a.empty() || f.side_b.empty())) continue;
    } else if (f.kind == Fault::Kind::partition && !rt.split && (rt.side_a.empty() || rt.side_b.empty())) {
      continue;
    }
    // A repetition with no end runs until the scenario's end.
    if (f.repeat.repeats() && f.repeat.times == 0 && f.repeat.until == kTimeMax) f.repeat.until = sc.max_time;
    if (at_fire) f.targets_at_fire = std::move(rt);
    try {
      world.add_fault(f);
    } catch (const std::invalid_argument& e) {
      throw InputError(sc.file, fs.line, "fault.every", e.what());
    }
    f.targets_at_fire = nullptr;  // the world is gone when the report reads it
    out.faults.push_back(f);
    out.fault_specs.push_back(static_cast<std::size_t>(&fs - sc.faults.data()));
  }

  history.tokens_fence = protocol->fenced();
  out.run = world.run();
  history.summarize();
  out.check = check(history);
  out.trace_hash = world.trace().hash();
  out.events = world.trace().count();
  out.messages = world.messages_delivered();
  if (opts.keep_trace) out.trace = world.trace().events();
  out.trace_truncated = world.trace().truncated();
  for (std::size_t i = 0; i < out.faults.size(); ++i) {
    out.fault_firings.push_back(world.applied_firings(i));
    out.fault_draws.push_back(world.drawn_durations(i));
  }
  for (std::uint32_t i = 0; i < world.process_count(); ++i)
    out.process_names.push_back(world.name(ProcId{i}));
  for (ProcId p : service.servers) out.servers.push_back(world.name(p));
  out.resource = sc.resource_name;
  out.resource_kind = sc.resource_kind;
  for (const ResourceTarget& t : env.more_resources)
    out.more_resources.push_back(RunOutput::MoreResource{t.name, t.kind, t.mode});
  return out;
}

}  // namespace locksim
