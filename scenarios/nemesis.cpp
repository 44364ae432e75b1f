#include "locksim/scenarios/nemesis.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "locksim/protocols/history.hpp"
#include "locksim/protocols/lock.hpp"
#include "locksim/protocols/resource.hpp"
#include "locksim/scenarios/loader.hpp"
#include "locksim/sim/world.hpp"

namespace locksim {

std::string_view to_string(NemesisMode m) {
  return m == NemesisMode::within ? "within" : "anything";
}

std::optional<NemesisMode> parse_nemesis_mode(std::string_view s) {
  if (s == "within") return NemesisMode::within;
  if (s == "anything") return NemesisMode::anything;
  return std::nullopt;
}

std::vector<std::string> world_process_names(const Scenario& sc, const std::string& protocol_name) {
  register_builtin_protocols();
  auto& reg = ProtocolRegistry::instance();
  if (!reg.has(protocol_name)) {
    throw InputError(sc.file, 0, "protocol", fmt::format("unknown protocol '{}'", protocol_name));
  }
  std::unique_ptr<Protocol> protocol = reg.make(protocol_name);
  const ProtocolConfig& cfg = sc.config_for(protocol_name);
  if (const ServiceDecl decl = protocol->declare(cfg); !decl.empty()) {
    std::vector<std::string> out = decl.names();
    out.push_back(sc.resource_name);
    for (const ClientSpec& c : sc.clients) out.push_back(c.name);
    return out;
  }
  // A protocol that declares nothing (deprecated): build its world and ask it.
  WorldOptions wo;
  wo.seed = sc.seed;
  wo.keep_trace = false;
  World world(wo);
  History history;
  build_service(*protocol, world, cfg, history);
  spawn_resource(world, sc.resource_name, ResourceOptions{}, history);
  for (const ClientSpec& c : sc.clients) world.spawn(c.name, [](Context&) {});
  std::vector<std::string> out;
  for (std::uint32_t i = 0; i < world.process_count(); ++i) out.push_back(world.name(ProcId{i}));
  return out;
}

NemesisTargets nemesis_targets(const Scenario& sc, const std::string& protocol) {
  NemesisTargets t;
  t.resource = sc.resource_name;
  for (const ClientSpec& c : sc.clients) t.clients.push_back(c.name);
  for (const std::string& n : world_process_names(sc, protocol)) {
    if (n == t.resource) continue;
    if (std::find(t.clients.begin(), t.clients.end(), n) != t.clients.end()) continue;
    t.servers.push_back(n);
  }
  return t;
}

std::string SwarmMix::describe() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ",";
    s += name;
  };
  add(pause, "pause");
  add(delay_spike, "delay");
  add(network_noise, "noise");
  add(partition, "partition");
  add(drift, "drift");
  add(clock_jump, "jump");
  add(crash, "crash");
  return fmt::format("{} x{} i{}", s.empty() ? "none" : s, faults, intensity);
}

namespace {

constexpr Duration kGrain = 1ms;  // plans use whole milliseconds: replay files stay readable

Duration round_ms(Duration d) {
  return std::max(kGrain, (d / kGrain) * kGrain);
}

/// A duration in [lo, hi] skewed towards short ones: half the draws are uniform, the rest uniform below hi /
/// 2^k. Short and long faults both show up in every sweep.
Duration skewed(Rng& rng, Duration lo, Duration hi) {
  if (hi <= lo) return round_ms(lo);
  Duration top = hi;
  if (rng.chance(1, 2)) {
    const auto shift = rng.below(10);
    top = std::max(lo, Duration{hi.count() >> shift});
  }
  return std::min(round_ms(rng.uniform(lo, top)), std::max(round_ms(lo), (hi / kGrain) * kGrain));
}

template <class T>
const T& pick(Rng& rng, const std::vector<T>& v) {
  return v[rng.below(v.size())];
}

struct Drawer {
  const Scenario& sc;
  const NemesisTargets& tg;
  Rng& rng;
  NemesisMode mode;
  std::uint32_t intensity;

  Duration ttl() const { return sc.config.ttl; }
  Duration max_time() const { return sc.max_time; }
  bool within() const { return mode == NemesisMode::within; }

  /// The longest pause / delay / outage this seed may draw.
  Duration cap() const {
    if (within()) return std::max(kGrain, ttl() / 20);
    const Duration t = ttl();
    const Duration caps[5] = {t / 10, t / 2, t, 2 * t, max_time()};
    return std::clamp(caps[std::min<std::uint32_t>(intensity, 4)], kGrain, max_time());
  }
  Duration magnitude() { return skewed(rng, kGrain, cap()); }

  /// When the workload is plausibly still running: the last client start plus a few TTLs.
  Duration horizon() const {
    Time last{0};
    for (const ClientSpec& c : sc.clients) last = std::max(last, c.start);
    return std::min(max_time(), last + 3 * ttl());
  }

  std::vector<std::string> all() const {
    std::vector<std::string> v = tg.servers;
    v.push_back(tg.resource);
    v.insert(v.end(), tg.clients.begin(), tg.clients.end());
    return v;
  }
  std::vector<std::string> crashable() const {
    // The resource keeps its fence in memory: crashing it tests the store, not the lock.
    std::vector<std::string> v = tg.servers;
    v.insert(v.end(), tg.clients.begin(), tg.clients.end());
    return v;
  }
  std::string any_process() {
    // Half the time a client: the classic stories (a paused holder, a client with a fast clock) start there.
    if (!tg.clients.empty() && rng.chance(1, 2)) return pick(rng, tg.clients);
    return pick(rng, all());
  }

  /// A trigger: a random time within the horizon, or right after a client logs a workload note.
  Trigger trigger(std::string& proc) {
    if (tg.clients.empty() || rng.chance(2, 5)) {
      proc.clear();
      return Trigger::at_time((rng.uniform(0ns, horizon()) / kGrain) * kGrain);
    }
    const std::string& client = pick(rng, tg.clients);
    const ClientSpec* spec = nullptr;
    for (const ClientSpec& c : sc.clients)
      if (c.name == client) spec = &c;
    std::vector<std::pair<std::string_view, std::uint64_t>> labels;  // note, how often it is surely logged
    labels.push_back({note::acquired, spec->acquisitions});
    labels.push_back({note::acquire, spec->acquisitions});
    const std::uint64_t writes = std::uint64_t{spec->acquisitions} * spec->writes_per_hold;
    if (writes > 0) labels.push_back({note::write, writes});
    if (writes > 0 && spec->check_before_write) labels.push_back({note::lease_check, writes});
    if (spec->release) labels.push_back({note::released, spec->acquisitions});
    const auto& [label, most] = labels[rng.below(labels.size())];
    proc = client;
    Trigger t;
    t.kind = Trigger::Kind::note;
    t.label = std::string(label);
    t.nth = static_cast<std::uint32_t>(1 + rng.below(std::min<std::uint64_t>(most, 3)));
    t.delay = rng.chance(1, 2) ? 0ns : std::min(max_time(), skewed(rng, kGrain, ttl()));
    return t;
  }

  FaultSpec base(Fault::Kind kind) {
    FaultSpec f;
    f.fault.kind = kind;
    f.fault.when = trigger(f.trigger_proc);
    return f;
  }

  FaultSpec pause() {
    FaultSpec f = base(Fault::Kind::pause);
    // Pausing the process that just logged the note is the GC-pause story; otherwise anyone.
    f.target = !f.trigger_proc.empty() && rng.chance(2, 3) ? f.trigger_proc : any_process();
    f.fault.duration = magnitude();
    return f;
  }

  FaultSpec delay_spike() {
    FaultSpec f = base(Fault::Kind::delay_spike);
    const std::uint64_t from = rng.below(3);  // 0 any, 1 a client, 2 any process
    if (from == 1 && !tg.clients.empty()) f.target = pick(rng, tg.clients);
    if (from == 2) f.target = pick(rng, all());
    if (rng.chance(1, 2)) {
      f.peer = rng.chance(1, 2) ? tg.resource : pick(rng, all());
      if (f.peer == f.target) f.peer.clear();
    }
    f.fault.extra = magnitude();
    if (rng.chance(1, 2)) {
      f.fault.count = static_cast<std::uint32_t>(1 + rng.below(3));
      f.fault.duration = max_time();
    } else {
      f.fault.duration = skewed(rng, kGrain, std::max(kGrain, std::min(max_time(), 2 * ttl())));
    }
    return f;
  }

  FaultSpec partition() {
    FaultSpec f = base(Fault::Kind::partition);
    std::vector<std::string> procs = all();
    for (std::size_t i = procs.size(); i > 1; --i)
      std::swap(procs[i - 1], procs[rng.below(i)]);  // Fisher–Yates
    const std::size_t a = 1 + rng.below(procs.size() - 1);
    const std::size_t b = 1 + rng.below(procs.size() - a);
    f.side_a.assign(procs.begin(), procs.begin() + static_cast<std::ptrdiff_t>(a));
    f.side_b.assign(procs.begin() + static_cast<std::ptrdiff_t>(a),
                    procs.begin() + static_cast<std::ptrdiff_t>(a + b));
    std::sort(f.side_a.begin(), f.side_a.end());
    std::sort(f.side_b.begin(), f.side_b.end());
    f.fault.one_way = !within() && rng.chance(1, 3);
    f.fault.duration = !within() && rng.chance(1, 5) ? 0ns : magnitude();
    return f;
  }

  std::int64_t ppm() {
    const std::int64_t limit =
        within() ? 10'000 : std::int64_t{10'000} << std::min<std::uint32_t>(intensity, 5);
    const std::int64_t v =
        rng.between(-std::min<std::int64_t>(limit, 500'000), std::min<std::int64_t>(limit, 500'000));
    return v == 0 ? 1 : v;
  }

  FaultSpec drift() {
    FaultSpec f = base(Fault::Kind::clock_drift);
    f.target = any_process();
    f.fault.ppm = ppm();
    return f;
  }

  FaultSpec clock_jump() {
    FaultSpec f = base(Fault::Kind::clock_jump);
    f.target = any_process();
    const Duration by = skewed(rng, kGrain, std::min(max_time(), 2 * ttl()));
    f.fault.duration = rng.chance(1, 2) ? by : -by;
    return f;
  }

  FaultSpec crash() {
    FaultSpec f = base(Fault::Kind::crash);
    f.target = pick(rng, crashable());
    f.fault.power_loss = rng.chance(1, 2);
    f.fault.duration = rng.chance(1, 5) ? 0ns : magnitude();
    return f;
  }

  LinkOptions noise() {
    LinkOptions o = sc.network.defaults;
    const std::uint64_t limit =
        within() ? 10'000 : std::uint64_t{10'000} << std::min<std::uint32_t>(intensity, 4);
    o.loss_ppm = static_cast<std::uint32_t>(rng.below(limit + 1));
    o.duplicate_ppm = rng.chance(1, 2) ? static_cast<std::uint32_t>(rng.below(limit + 1)) : 0;
    if (rng.chance(1, 2)) {
      o.reorder_ppm = static_cast<std::uint32_t>(1 + rng.below(limit));
      o.reorder_extra = skewed(rng, kGrain, std::max(kGrain, cap() / 4));
    } else {
      o.reorder_ppm = 0;
      o.reorder_extra = 0ns;
    }
    return o;
  }

  ClockSpec initial_clock() {
    ClockSpec c;
    c.node = any_process();
    c.clock.drift_ppm = ppm();
    if (!within() && rng.chance(1, 2)) {
      const Duration off = skewed(rng, kGrain, std::min(max_time(), 2 * ttl()));
      c.clock.offset = rng.chance(1, 2) ? off : -off;
    }
    return c;
  }
};

}  // namespace

FaultPlan make_fault_plan(const Scenario& sc, const NemesisTargets& targets, std::uint64_t seed,
                          const NemesisOptions& opts, SwarmMix* mix_out) {
  Rng rng = Rng(seed).stream("nemesis");
  SwarmMix mix;
  const bool anything = opts.mode == NemesisMode::anything;
  // The swarm: each kind is on with probability 1/2, at least one timed kind always on.
  for (;;) {
    mix.pause = rng.chance(1, 2);
    mix.delay_spike = rng.chance(1, 2);
    mix.network_noise = rng.chance(1, 3);
    mix.partition = rng.chance(1, 2);
    mix.drift = rng.chance(1, 2);
    mix.clock_jump = anything && rng.chance(1, 2);
    mix.crash = anything && rng.chance(1, 2);
    if (mix.pause || mix.delay_spike || mix.partition || mix.drift || mix.clock_jump || mix.crash) break;
  }
  mix.faults = static_cast<std::uint32_t>(1 + rng.below(std::max<std::uint32_t>(opts.max_faults, 1)));
  mix.intensity = static_cast<std::uint32_t>(rng.below(5));

  Drawer d{sc, targets, rng, opts.mode, mix.intensity};
  using Make = FaultSpec (Drawer::*)();
  std::vector<Make> kinds;
  if (mix.pause) kinds.push_back(&Drawer::pause);
  if (mix.delay_spike) kinds.push_back(&Drawer::delay_spike);
  if (mix.partition && d.all().size() >= 2) kinds.push_back(&Drawer::partition);
  if (mix.drift) kinds.push_back(&Drawer::drift);
  if (mix.clock_jump) kinds.push_back(&Drawer::clock_jump);
  if (mix.crash) kinds.push_back(&Drawer::crash);
  if (kinds.empty()) kinds.push_back(&Drawer::pause);

  FaultPlan plan;
  for (std::uint32_t i = 0; i < mix.faults; ++i) plan.faults.push_back((d.*kinds[rng.below(kinds.size())])());
  if (mix.network_noise) plan.network = d.noise();
  if (mix.drift && rng.chance(1, 2)) plan.clocks.push_back(d.initial_clock());
  if (mix_out) *mix_out = mix;
  return plan;
}

Scenario apply_plan(const Scenario& base, const FaultPlan& plan, bool keep_scripted) {
  Scenario sc = base;
  if (!keep_scripted) sc.faults.clear();
  for (const FaultSpec& f : plan.faults) sc.faults.push_back(f);
  if (plan.network) {
    const DelayDist delay = sc.network.defaults.delay;
    sc.network.defaults = *plan.network;
    sc.network.defaults.delay = delay;
  }
  for (const ClockSpec& c : plan.clocks) {
    auto it = std::find_if(sc.clocks.begin(), sc.clocks.end(),
                           [&](const ClockSpec& x) { return x.node == c.node; });
    if (it != sc.clocks.end())
      *it = c;
    else
      sc.clocks.push_back(c);
  }
  return sc;
}

namespace {

std::string trigger_text(const FaultSpec& f) {
  const Trigger& t = f.fault.when;
  if (t.kind == Trigger::Kind::at) return fmt::format("at {}", format_time(t.at));
  const char* what = t.kind == Trigger::Kind::note   ? "logs"
                     : t.kind == Trigger::Kind::send ? "sends"
                                                     : "receives";
  std::string s =
      fmt::format("after {} {} '{}'", f.trigger_proc.empty() ? "any process" : f.trigger_proc, what, t.label);
  if (t.nth != 1) s += fmt::format(" #{}", t.nth);
  if (t.delay > 0ns) s += fmt::format(" + {}", format_time(t.delay));
  return s;
}

std::string names(const std::vector<std::string>& v) {
  return fmt::format("{}", fmt::join(v, ","));
}

/// "every 5s, 60 times, until 300s, jitter 1s" (empty for a fault that fires once without jitter).
std::string repeat_text(const Repeat& r) {
  std::vector<std::string> parts;
  if (r.repeats()) {
    parts.push_back(r.every_dist ? fmt::format("every {}", r.every_dist->describe())
                                 : fmt::format("every {}", format_time(r.every)));
    if (r.times > 0) parts.push_back(fmt::format("{} times", r.times));
    if (r.until != kTimeMax) parts.push_back(fmt::format("until {}", format_time(r.until)));
  }
  if (r.jitter > 0ns)
    parts.push_back(r.jitter_dist ? fmt::format("jitter {}", r.jitter_dist->describe())
                                  : fmt::format("jitter {}", format_time(r.jitter)));
  return parts.empty() ? std::string{} : fmt::format(", {}", fmt::join(parts, ", "));
}

}  // namespace

std::string describe(const FaultSpec& f_in) {
  // Several targets read as one list: "pause client1,leader for 1s".
  FaultSpec f = f_in;
  for (const std::string& t : f_in.more_targets) f.target += "," + t;
  const Fault& x = f.fault;
  std::string what;
  switch (x.kind) {
    case Fault::Kind::pause:
      what = fmt::format("pause {} for {}", f.target, format_time(x.duration));
      break;
    case Fault::Kind::crash:
      what = fmt::format(
          "{} {}{}", x.power_loss ? "power-loss crash" : "crash", f.target,
          x.duration > 0ns ? fmt::format(", restart after {}", format_time(x.duration)) : ", stays down");
      break;
    case Fault::Kind::restart:
      what = fmt::format("restart {}", f.target);
      break;
    case Fault::Kind::clock_jump:
      what = fmt::format("{}'s wall clock jumps {} by {}", f.target, x.duration < 0ns ? "back" : "forward",
                         format_time(x.duration < 0ns ? -x.duration : x.duration));
      break;
    case Fault::Kind::clock_drift:
      what = fmt::format("{}'s clock drifts {:+} ppm", f.target, x.ppm);
      break;
    case Fault::Kind::partition:
      what = fmt::format(
          "partition {}{}",
          f.split.empty()
              ? fmt::format("[{}] {} [{}]", names(f.side_a), x.one_way ? "->" : "<->", names(f.side_b))
              : fmt::format("split {}{}", f.split, x.one_way ? " (one way)" : ""),
          x.duration > 0ns ? fmt::format(" for {}", format_time(x.duration)) : ", never heals");
      break;
    case Fault::Kind::heal:
      what = "heal all partitions";
      break;
    case Fault::Kind::delay_spike:
      what = fmt::format(
          "delay messages {} -> {} by {}{}", f.target.empty() ? "*" : f.target, f.peer.empty() ? "*" : f.peer,
          format_time(x.extra),
          x.count > 0 ? fmt::format(" (next {})", x.count) : fmt::format(" for {}", format_time(x.duration)));
      break;
  }
  return fmt::format("{} {}{}", what, trigger_text(f), repeat_text(x.repeat));
}

std::string describe(const FaultPlan& plan) {
  std::string s;
  for (const FaultSpec& f : plan.faults) s += describe(f) + "\n";
  if (plan.network) {
    s += fmt::format("network: loss {} ppm, duplicate {} ppm, reorder {} ppm (+{})\n", plan.network->loss_ppm,
                     plan.network->duplicate_ppm, plan.network->reorder_ppm,
                     format_time(plan.network->reorder_extra));
  }
  for (const ClockSpec& c : plan.clocks) {
    s += fmt::format("clock {}: offset {}, drift {:+} ppm\n", c.node, format_time(c.clock.offset),
                     c.clock.drift_ppm);
  }
  return s;
}

}  // namespace locksim
