#pragma once
/// rapidcheck generators for locksim: fault plans, network profiles and clock profiles, so a user's property
/// test can say "for any fault plan, my protocol is safe" and let rapidcheck find and shrink a
/// counterexample. On a failure, `locksim::rcgen::check_safe` writes a replay file and puts the one command
/// that replays it into the failure message:
///
///   RC_GTEST_PROP(MyLock, SafeUnderAnyPlan, ()) {
///     const auto sc = locksim::load_scenario("kleppmann-gc-pause");
///     const auto targets = locksim::nemesis_targets(sc, "my-lock");
///     const auto plan = *locksim::rcgen::fault_plan(targets, sc, locksim::NemesisMode::anything);
///     locksim::rcgen::check_safe(sc, "my-lock", plan, *rc::gen::inRange<std::uint64_t>(1, 1u << 30));
///   }
///
/// Unlike the swarm nemesis (scenarios/nemesis.hpp, one integer seed per plan), these generators are built
/// from rapidcheck's own, so rapidcheck's shrinking works on them: fewer faults, shorter pauses, earlier
/// kinds.
#include <rapidcheck.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "scenarios/nemesis.hpp"
#include "scenarios/replay.hpp"
#include "scenarios/runner.hpp"

namespace locksim::rcgen {

/// A duration in [lo, hi] in whole milliseconds (shrinks towards lo).
inline rc::Gen<Duration> duration(Duration lo, Duration hi) {
  const std::int64_t a = lo / 1ms, b = std::max(a, static_cast<std::int64_t>(hi / 1ms));
  return rc::gen::map(rc::gen::inRange<std::int64_t>(a, b + 1),
                      [](std::int64_t ms) { return Duration{ms * 1'000'000}; });
}

/// Default-link noise: loss, duplication, reordering. Within the assumptions: at most 1 % each.
inline rc::Gen<LinkOptions> network_profile(LinkOptions base, NemesisMode mode) {
  const std::uint32_t cap = mode == NemesisMode::within ? 10'000 : 200'000;
  return rc::gen::exec([=] {
    LinkOptions o = base;
    o.loss_ppm = *rc::gen::inRange<std::uint32_t>(0, cap + 1);
    o.duplicate_ppm = *rc::gen::inRange<std::uint32_t>(0, cap + 1);
    o.reorder_ppm = *rc::gen::inRange<std::uint32_t>(0, cap + 1);
    o.reorder_extra = o.reorder_ppm ? *duration(1ms, 50ms) : 0ns;
    return o;
  });
}

/// Initial clock settings for some of `nodes`. Within the assumptions: drift at most 1 %, no offsets.
inline rc::Gen<std::vector<ClockSpec>> clock_profile(std::vector<std::string> nodes, NemesisMode mode) {
  return rc::gen::exec([=] {
    std::vector<ClockSpec> out;
    const std::int64_t drift = mode == NemesisMode::within ? 10'000 : 500'000;
    for (const std::string& n : nodes) {
      if (!*rc::gen::arbitrary<bool>()) continue;
      ClockSpec c;
      c.node = n;
      c.clock.drift_ppm = *rc::gen::inRange<std::int64_t>(-drift, drift + 1);
      if (mode == NemesisMode::anything)
        c.clock.offset = *duration(0ms, 30s) * (*rc::gen::arbitrary<bool>() ? 1 : -1);
      out.push_back(c);
    }
    return out;
  });
}

/// One fault aimed at the world's processes, triggered at a time or right after a client's `acquired` /
/// `lease-check` note. Within the assumptions: pauses and delay spikes at most ttl/20, drift at most 1 %, no
/// clock jumps, no crashes.
inline rc::Gen<FaultSpec> fault(const NemesisTargets& targets, const Scenario& sc, NemesisMode mode) {
  std::vector<std::string> all = targets.clients;
  all.insert(all.end(), targets.servers.begin(), targets.servers.end());
  all.push_back(targets.resource);
  std::vector<std::string> crashable = targets.clients;
  crashable.insert(crashable.end(), targets.servers.begin(), targets.servers.end());
  const Duration ttl = sc.config.ttl, max_time = sc.max_time;
  const bool within = mode == NemesisMode::within;
  const Duration cap = within ? std::max(Duration{1ms}, ttl / 20) : max_time;
  return rc::gen::exec([=] {
    FaultSpec f;
    // Kinds in order of how simple a story they make (rapidcheck shrinks towards the first).
    const int kind = *rc::gen::inRange(0, within ? 4 : 6);
    if (!targets.clients.empty() && *rc::gen::arbitrary<bool>()) {
      f.trigger_proc = *rc::gen::elementOf(targets.clients);
      const std::string note = *rc::gen::elementOf(std::vector<std::string>{"lease-check", "acquired"});
      // Half the time right at the note: the window between a lease check and a write is that narrow.
      const Duration delay = *rc::gen::arbitrary<bool>() ? 0ns : *duration(1ms, std::min(ttl, max_time));
      f.fault.when = Trigger::on_note({}, note, 1, delay);
    } else {
      f.fault.when = Trigger::at_time(*duration(0ms, max_time));
    }
    switch (kind) {
      case 0:
        f.fault.kind = Fault::Kind::pause;
        f.target = f.trigger_proc.empty() ? *rc::gen::elementOf(all) : f.trigger_proc;
        f.fault.duration = *duration(1ms, cap);
        break;
      case 1:
        f.fault.kind = Fault::Kind::delay_spike;
        f.target = *rc::gen::elementOf(all);
        f.fault.extra = *duration(1ms, cap);
        f.fault.duration = max_time;
        f.fault.count = *rc::gen::inRange<std::uint32_t>(1, 4);
        break;
      case 2: {
        f.fault.kind = Fault::Kind::partition;
        const std::string a = *rc::gen::elementOf(all);
        std::vector<std::string> rest;
        for (const auto& n : all)
          if (n != a) rest.push_back(n);
        f.side_a = {a};
        f.side_b = {*rc::gen::elementOf(rest)};
        f.fault.duration = *duration(1ms, within ? cap : max_time);
        f.fault.one_way = !within && *rc::gen::arbitrary<bool>();
        break;
      }
      case 3:
        f.fault.kind = Fault::Kind::clock_drift;
        f.target = *rc::gen::elementOf(all);
        f.fault.ppm = *rc::gen::inRange<std::int64_t>(-10'000, 10'001) * (within ? 1 : 50);
        break;
      case 4:
        f.fault.kind = Fault::Kind::clock_jump;
        f.target = *rc::gen::elementOf(all);
        f.fault.duration = *duration(1ms, 2 * ttl) * (*rc::gen::arbitrary<bool>() ? 1 : -1);
        break;
      default:
        f.fault.kind = Fault::Kind::crash;
        f.target = *rc::gen::elementOf(crashable);
        f.fault.power_loss = *rc::gen::arbitrary<bool>();
        f.fault.duration = *duration(1ms, max_time);
        break;
    }
    return f;
  });
}

/// A whole plan: up to `max_faults` faults, maybe network noise, maybe initial clock settings.
inline rc::Gen<FaultPlan> fault_plan(const NemesisTargets& targets, const Scenario& sc, NemesisMode mode,
                                     std::size_t max_faults = 4) {
  std::vector<std::string> nodes = targets.clients;
  nodes.insert(nodes.end(), targets.servers.begin(), targets.servers.end());
  const LinkOptions base = sc.network.defaults;
  const rc::Gen<FaultSpec> one = fault(targets, sc, mode);
  return rc::gen::exec([=] {
    FaultPlan p;
    const auto n = *rc::gen::inRange<std::size_t>(1, max_faults + 1);
    p.faults = *rc::gen::container<std::vector<FaultSpec>>(n, one);
    if (*rc::gen::arbitrary<bool>()) p.network = *network_profile(base, mode);
    p.clocks = *clock_profile(nodes, mode);
    return p;
  });
}

/// Runs `plan` on `base` with `protocol` and `seed` (at most Scenario::kMaxSeed, 2^63 - 1: the replay file
/// holds it as a TOML integer). Nothing when no anomaly was recorded (then `*inconclusive`, if given, says
/// whether the run stopped at a limit and so proved nothing); otherwise writes a replay file (to
/// $LOCKSIM_REPLAY_DIR, else the temporary directory) and returns a message ending in `locksim replay FILE`.
/// A recorded anomaly is a failure wherever the run stopped.
inline std::optional<std::string> find_violation(const Scenario& base, const std::string& protocol,
                                                 const FaultPlan& plan, std::uint64_t seed,
                                                 bool* inconclusive = nullptr) {
  Scenario sc = apply_plan(base, plan);
  sc.seed = seed;
  RunOptions ro;
  ro.seed = seed;
  ro.keep_trace = false;
  const RunOutput r = run_scenario(sc, protocol, ro);
  if (inconclusive) *inconclusive = r.inconclusive();
  if (r.check.safe) return std::nullopt;
  const char* env = std::getenv("LOCKSIM_REPLAY_DIR");
  const std::filesystem::path dir =
      env && *env ? std::filesystem::path(env) : std::filesystem::temp_directory_path();
  ReplayInfo info{protocol, r.trace_hash, Verdict::unsafe, "a rapidcheck property (locksim/rapidcheck.hpp)",
                  describe(plan)};
  std::string name = sc.name + "-" + protocol + "-" + hash_text(r.trace_hash).substr(2);
  for (char& c : name)
    if (c == '/' || c == ' ') c = '_';
  const std::string path = (dir / ("replay-" + name + ".toml")).string();
  write_text_file(path, scenario_to_toml(sc, &info));
  std::string kinds;
  for (const auto& [kind, n] : r.check.anomaly_counts)
    kinds += (kinds.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
  return protocol + " is unsafe under this plan (" + kinds + "):\n" + describe(plan) +
         "replay it with: locksim replay " + path;
}

/// The property's assertion: RC_FAIL with the replay command when the run is unsafe; a run that stopped at a
/// limit with no anomaly proves nothing and is discarded (RC_DISCARD), so it never counts as a pass.
inline void check_safe(const Scenario& base, const std::string& protocol, const FaultPlan& plan,
                       std::uint64_t seed) {
  bool inconclusive = false;
  if (auto why = find_violation(base, protocol, plan, seed, &inconclusive)) RC_FAIL(*why);
  RC_PRE(!inconclusive);
}

}  // namespace locksim::rcgen
