#include "scenarios/runner.hpp"

#include <fmt/format.h>

#include "scenarios/loader.hpp"
#include "scenarios/workload.hpp"

namespace locksim {

const std::string& RunOutput::name_of(ProcId p) const {
  static const std::string none = "-";
  return p.valid() && p.value < process_names.size() ? process_names[p.value] : none;
}

namespace {

/// Thrown for a service process another protocol would have (redis4 in a lease run): what names it is
/// skipped.
struct AbsentServiceProcess {};

ProcId resolve(const World& w, const Scenario& sc, const std::string& name, std::uint32_t line,
               const std::string& field) {
  if (name.empty() || name == "*") return {};
  ProcId p = w.find(name);
  if (p.valid()) return p;
  // One file serves every protocol: Kleppmann's nodes A–E are redis1..redis5 for redlock and do not exist for
  // a lease run. A fault, clock or link naming such a service process does not apply to this protocol's
  // world.
  if (is_service_process_name(name)) throw AbsentServiceProcess{};
  throw InputError(sc.file, line, field, fmt::format("no process named '{}' in this world", name));
}

}  // namespace

RunOutput run_scenario(const Scenario& sc, const std::string& protocol_name, const RunOptions& opts) {
  register_builtin_protocols();
  auto& reg = ProtocolRegistry::instance();
  if (!reg.has(protocol_name))
    throw InputError(sc.file, 0, "protocol", fmt::format("unknown protocol '{}'", protocol_name));
  std::unique_ptr<Protocol> protocol = reg.make(protocol_name);
  const ProtocolConfig& cfg = sc.config_for(protocol_name);

  RunOutput out;
  out.scenario = sc.name;
  out.protocol = protocol_name;
  out.seed = opts.seed.value_or(sc.seed);
  out.config = cfg;
  out.resource_mode =
      sc.resource_mode.value_or(protocol->fenced() ? ResourceMode::fenced : ResourceMode::unfenced);

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
  ServiceInfo service = protocol->build(world, cfg, history);
  ProcId resource = spawn_resource(world, sc.resource_name,
                                   ResourceOptions{out.resource_mode, sc.resource_variant}, history);

  WorkloadEnv env;
  env.world = &world;
  env.history = &history;
  env.protocol = protocol.get();
  env.config = &cfg;
  env.resource = resource;
  env.lock_key = sc.lock_key;
  env.resource_key = sc.resource_key;
  for (const ClientSpec& c : sc.clients) {
    WorkloadEnv e = env;
    e.give_up_at = c.give_up_at > 0ns ? c.give_up_at : sc.max_time;
    ProcId id = world.spawn(c.name, [start = c.start, body = client_body(e, c)](Context& ctx) {
      if (start > 0ns) ctx.sleep(start);
      body(ctx);
    });
    (void)id;
    out.clients.push_back(c.name);
  }
  for (const ClockSpec& c : sc.clocks) {
    try {
      ProcId p = resolve(world, sc, c.node, 0, "clock.node");
      world.clock(p) = NodeClock(c.clock);
    } catch (const AbsentServiceProcess&) {
    }
  }
  for (const LinkSpec& l : sc.links) {
    ProcId from, to;
    try {
      from = resolve(world, sc, l.from, 0, "network.link.from");
      to = resolve(world, sc, l.to, 0, "network.link.to");
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
  for (const FaultSpec& fs : sc.faults) {
    Fault f = fs.fault;
    try {
      f.target = resolve(world, sc, fs.target, fs.line, "fault.target");
      f.peer = resolve(world, sc, fs.peer, fs.line, "fault.peer");
      if (f.when.kind != Trigger::Kind::at)
        f.when.proc = resolve(world, sc, fs.trigger_proc, fs.line, "fault.after.process");
    } catch (const AbsentServiceProcess&) {
      continue;
    }
    auto side = [&](const std::vector<std::string>& names, std::vector<ProcId>& ids, const char* field) {
      for (const auto& n : names) {
        try {
          ids.push_back(resolve(world, sc, n, fs.line, field));
        } catch (const AbsentServiceProcess&) {
        }
      }
    };
    side(fs.side_a, f.side_a, "fault.side_a");
    side(fs.side_b, f.side_b, "fault.side_b");
    if (f.kind == Fault::Kind::partition && (f.side_a.empty() || f.side_b.empty())) continue;
    world.add_fault(f);
    out.faults.push_back(f);
  }

  history.tokens_fence = protocol->fenced();
  for (ProcId p : service.servers) history.service_nodes.push_back(world.name(p));
  out.run = world.run();
  history.summarize();
  out.check = check(history);
  out.trace_hash = world.trace().hash();
  out.events = world.trace().count();
  out.messages = world.messages_delivered();
  if (opts.keep_trace) out.trace = world.trace().events();
  out.trace_truncated = world.trace().truncated();
  for (std::uint32_t i = 0; i < world.process_count(); ++i)
    out.process_names.push_back(world.name(ProcId{i}));
  for (ProcId p : service.servers) out.servers.push_back(world.name(p));
  out.resource = sc.resource_name;
  return out;
}

}  // namespace locksim
