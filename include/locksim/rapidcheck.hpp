#pragma once
/// rapidcheck generators for locksim: fault plans, network profiles and clock profiles, so a user's property
/// test can say "for any fault plan, my protocol is safe" and let rapidcheck find and shrink a
/// counterexample.
///
/// The quickest property is one line with the GoogleTest helper (locksim/rapidcheck_gtest.hpp):
///
///   LOCKSIM_PROPERTY(MyLock, SafeUnderAnyPlan, "kleppmann-gc-pause", "my-lock");
///
/// Without GoogleTest, `check_property` runs the same property and returns what it found (see below). For a
/// property of your own, draw plans and check each run inside RC_GTEST_PROP:
///
///   RC_GTEST_PROP(MyLock, SafeUnderAnyPlan, ()) {
///     const auto sc = locksim::load_scenario("kleppmann-gc-pause");
///     const auto targets = locksim::nemesis_targets(sc, "my-lock");
///     const auto plan = *locksim::rcgen::fault_plan(targets, sc, locksim::NemesisMode::anything);
///     locksim::rcgen::check_safe(sc, "my-lock", plan, *locksim::rcgen::seed());
///   }
///
/// How size works here. rapidcheck grows a `size` from 0 to 100 over a run's cases, and its own `inRange`
/// narrows its range with the size (at size 0 it always gives its lower bound). These generators use it only
/// for magnitudes and counts: how many faults, how long a pause or an outage, how far a clock jumps, how much
/// loss, how late a timed fault fires. Every *choice among kinds* — which fault kind, which role and process
/// it hits, whether it fires at a time or after a client's note, which note, crash with or without power
/// loss — is uniform at every size (`choice`, `coin`, `pick`), so a crash is as likely in the first case as
/// in the last. Choices still shrink, towards the first option.
///
/// Unlike the swarm nemesis (scenarios/nemesis.hpp, one integer seed per plan), these generators are built
/// from rapidcheck's own, so rapidcheck's shrinking works on them; `check_property` then runs explore's
/// shrinker (scenarios/shrink.hpp) on rapidcheck's smallest plan, which drops what rapidcheck's local
/// shrinking keeps (a 1 ms pause, 1 ppm of loss, a drift that does not matter).
///
/// Link with locksim::scenarios and locksim::reports (the failure message is the text report's story).
#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "locksim/reports/report.hpp"
#include "locksim/scenarios/command_name.hpp"
#include "locksim/scenarios/nemesis.hpp"
#include "locksim/scenarios/replay.hpp"
#include "locksim/scenarios/runner.hpp"
#include "locksim/scenarios/shrink.hpp"

namespace locksim {

// How rapidcheck prints locksim's values in a counterexample (found by argument-dependent lookup): the plan
// in the words explore's replay story uses, never "<???>".

/// "crash redis1, restart after 2s after client1 logs 'acquired' #1": describe(f).
inline void showValue(const FaultSpec& f, std::ostream& os) {
  os << describe(f);
}
/// The plan one ingredient a line, as describe(plan) writes it into replay files ("no faults" when empty).
inline void showValue(const FaultPlan& p, std::ostream& os) {
  std::string s = describe(p);
  if (!s.empty() && s.back() == '\n') s.pop_back();
  os << (s.empty() ? "no faults" : s);
}
/// "network: loss 10 ppm, duplicate 0 ppm, reorder 0 ppm (+0s)": the plan's network line.
inline void showValue(const LinkOptions& o, std::ostream& os) {
  showValue(FaultPlan{{}, o, {}}, os);
}
/// "clock client1: offset 0s, drift +30 ppm": the plan's clock line.
inline void showValue(const ClockSpec& c, std::ostream& os) {
  showValue(FaultPlan{{}, {}, {c}}, os);
}
/// The scenario as the TOML text a replay file holds (scenario_to_toml): every field, exact.
inline void showValue(const Scenario& sc, std::ostream& os) {
  os << "\n" << scenario_to_toml(sc);
}

}  // namespace locksim

namespace locksim::rcgen {

/// An index in [0, n) (n ≥ 1), uniform at every size; shrinks towards 0.
inline rc::Gen<std::size_t> choice(std::size_t n) {
  return [n](const rc::Random& random, int /*size*/) {
    const auto v = static_cast<std::size_t>(rc::Random(random).next() % std::max<std::size_t>(n, 1));
    return rc::shrinkable::shrinkRecur(v,
                                       [](std::size_t x) { return rc::shrink::towards<std::size_t>(x, 0); });
  };
}

/// Heads or tails, even at every size; shrinks towards false.
inline rc::Gen<bool> coin() {
  return rc::gen::map(choice(2), [](std::size_t i) { return i == 1; });
}

/// One of `options` (not empty), uniform at every size; shrinks towards the first.
template <class T>
rc::Gen<T> pick(std::vector<T> options) {
  const std::size_t n = options.size();
  return rc::gen::map(choice(n), [options = std::move(options)](std::size_t i) { return options[i]; });
}

/// A world seed in [1, 2^30], uniform at every size, never shrunk (a neighbouring seed is a different world,
/// not a simpler one).
inline rc::Gen<std::uint64_t> seed() {
  return [](const rc::Random& random, int /*size*/) {
    return rc::shrinkable::just<std::uint64_t>(1 + rc::Random(random).next() % (std::uint64_t{1} << 30));
  };
}

/// A duration in [lo, hi] in whole milliseconds: a magnitude, so its range grows with the size (shrinks
/// towards lo).
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

/// Initial clock settings for some of `nodes` (each node a coin toss). Within the assumptions: drift at most
/// 1 %, no offsets.
inline rc::Gen<std::vector<ClockSpec>> clock_profile(std::vector<std::string> nodes, NemesisMode mode) {
  return rc::gen::exec([=] {
    std::vector<ClockSpec> out;
    const std::int64_t drift = mode == NemesisMode::within ? 10'000 : 500'000;
    for (const std::string& n : nodes) {
      if (!*coin()) continue;
      ClockSpec c;
      c.node = n;
      c.clock.drift_ppm = *rc::gen::inRange<std::int64_t>(0, drift + 1) * (*coin() ? -1 : 1);
      if (mode == NemesisMode::anything) c.clock.offset = *duration(0ms, 30s) * (*coin() ? -1 : 1);
      out.push_back(c);
    }
    return out;
  });
}

/// The fault kinds `fault` draws from, uniformly, in the order rapidcheck shrinks them (simplest story
/// first). Within the assumptions: pauses, delay spikes, partitions and drift only.
inline std::vector<Fault::Kind> fault_kinds(NemesisMode mode) {
  using K = Fault::Kind;
  if (mode == NemesisMode::within) return {K::pause, K::delay_spike, K::partition, K::clock_drift};
  return {K::pause, K::delay_spike, K::partition, K::clock_drift, K::clock_jump, K::crash};
}

/// One fault aimed at the world's processes, triggered at a time or right after a client's `acquired` /
/// `lease-check` note. Its target is drawn by role first (a client, a service process, the resource; each
/// role as likely as the others, whatever their sizes), then a process of that role. Within the assumptions:
/// pauses and delay spikes at most ttl/20, drift at most 1 %, no clock jumps, no crashes.
inline rc::Gen<FaultSpec> fault(const NemesisTargets& targets, const Scenario& sc, NemesisMode mode) {
  std::vector<std::vector<std::string>> roles;  // every process, by role (no empty role)
  if (!targets.clients.empty()) roles.push_back(targets.clients);
  if (!targets.servers.empty()) roles.push_back(targets.servers);
  if (!targets.resource.empty()) roles.push_back({targets.resource});
  std::vector<std::vector<std::string>> crashable;  // the resource does not crash
  if (!targets.clients.empty()) crashable.push_back(targets.clients);
  if (!targets.servers.empty()) crashable.push_back(targets.servers);
  const Duration ttl = sc.config.ttl, max_time = sc.max_time;
  const bool within = mode == NemesisMode::within;
  const Duration cap = within ? std::max(Duration{1ms}, ttl / 20) : max_time;
  const std::vector<Fault::Kind> kinds = fault_kinds(mode);
  const auto process_of = [](const std::vector<std::vector<std::string>>& by_role) {
    return *pick(*pick(by_role));
  };
  return rc::gen::exec([=] {
    FaultSpec f;
    f.fault.kind = *pick(kinds);
    if (!targets.clients.empty() && *coin()) {
      f.trigger_proc = *pick(targets.clients);
      const std::string note = *pick(std::vector<std::string>{"lease-check", "acquired"});
      // Half the time right at the note: the window between a lease check and a write is that narrow.
      const Duration delay = *coin() ? *duration(1ms, std::min(ttl, max_time)) : 0ns;
      f.fault.when = Trigger::on_note({}, note, 1, delay);
    } else {
      f.fault.when = Trigger::at_time(*duration(0ms, max_time));
    }
    using K = Fault::Kind;
    switch (f.fault.kind) {
      case K::pause:
        // A note's own process is the one a pause most often means ("pause client1 right after its check").
        f.target = f.trigger_proc.empty() || *coin() ? process_of(roles) : f.trigger_proc;
        f.fault.duration = *duration(1ms, cap);
        break;
      case K::delay_spike:
        f.target = process_of(roles);
        f.fault.extra = *duration(1ms, cap);
        f.fault.duration = max_time;
        f.fault.count = *rc::gen::inRange<std::uint32_t>(1, 4);
        break;
      case K::partition: {
        const std::string a = process_of(roles);
        std::vector<std::vector<std::string>> others;
        for (const auto& role : roles) {
          std::vector<std::string> rest;
          for (const auto& n : role)
            if (n != a) rest.push_back(n);
          if (!rest.empty()) others.push_back(std::move(rest));
        }
        f.side_a = {a};
        f.side_b = {process_of(others)};
        f.fault.duration = *duration(1ms, within ? cap : max_time);
        f.fault.one_way = !within && *coin();
        break;
      }
      case K::clock_drift:
        f.target = process_of(roles);
        f.fault.ppm = *rc::gen::inRange<std::int64_t>(0, 10'001) * (within ? 1 : 50) * (*coin() ? -1 : 1);
        break;
      case K::clock_jump:
        f.target = process_of(roles);
        f.fault.duration = *duration(1ms, 2 * ttl) * (*coin() ? -1 : 1);
        break;
      default:
        f.fault.kind = K::crash;
        f.target = process_of(crashable);
        f.fault.power_loss = *coin();
        f.fault.duration = *duration(1ms, max_time);
        break;
    }
    return f;
  });
}

/// A whole plan: 1 to `max_faults` faults (more at larger sizes), maybe network noise, maybe initial clock
/// settings.
inline rc::Gen<FaultPlan> fault_plan(const NemesisTargets& targets, const Scenario& sc, NemesisMode mode,
                                     std::size_t max_faults = 6) {
  std::vector<std::string> nodes = targets.clients;
  nodes.insert(nodes.end(), targets.servers.begin(), targets.servers.end());
  const LinkOptions base = sc.network.defaults;
  const rc::Gen<FaultSpec> one = fault(targets, sc, mode);
  return rc::gen::exec([=] {
    FaultPlan p;
    const auto n = *rc::gen::inRange<std::size_t>(1, std::max<std::size_t>(max_faults, 1) + 1);
    p.faults = *rc::gen::container<std::vector<FaultSpec>>(n, one);
    if (*coin()) p.network = *network_profile(base, mode);
    p.clocks = *clock_profile(nodes, mode);
    return p;
  });
}

/// The directory replay files go to: $LOCKSIM_REPLAY_DIR, else the temporary directory.
inline std::filesystem::path replay_dir() {
  const char* env = std::getenv("LOCKSIM_REPLAY_DIR");
  return env && *env ? std::filesystem::path(env) : std::filesystem::temp_directory_path();
}

/// Writes the replay file of `sc` (a plan applied, its seed set) run with `protocol`, which gave `run`:
/// into `dir` (empty: replay_dir(); made if missing), named after the scenario, protocol and trace hash.
/// Returns its path.
inline std::string write_replay(const Scenario& sc, const std::string& protocol, const RunOutput& run,
                                const std::string& story, const std::string& found_by,
                                const std::filesystem::path& dir = {}) {
  Scenario rs = sc;
  rs.expect.clear();
  rs.protocols.clear();
  ReplayInfo info{protocol, run.trace_hash, run.verdict(), found_by, story};
  std::string name = sc.name + "-" + protocol + "-" + hash_text(run.trace_hash).substr(2);
  for (char& c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.' || c == '+'))
      c = '_';
  const std::filesystem::path d = dir.empty() ? replay_dir() : dir;
  std::error_code
      ec;  // a $LOCKSIM_REPLAY_DIR that does not exist yet is made (write_text_file says if it fails)
  std::filesystem::create_directories(d, ec);
  const std::string path = (d / ("replay-" + name + ".toml")).string();
  write_text_file(path, scenario_to_toml(rs, &info));
  return path;
}

/// Runs `plan` on `base` with `protocol` and `seed` (at most Scenario::kMaxSeed, 2^63 - 1: the replay file
/// holds it as a TOML integer). Nothing when no anomaly was recorded (then `*inconclusive`, if given, says
/// whether the run stopped at a limit and so proved nothing); otherwise writes a replay file (replay_dir())
/// and returns the plan, the story of the violation and the command that replays it. A recorded anomaly is a
/// failure wherever the run stopped. No shrinking: check_property shrinks.
inline std::optional<std::string> find_violation(const Scenario& base, const std::string& protocol,
                                                 const FaultPlan& plan, std::uint64_t seed,
                                                 bool* inconclusive = nullptr) {
  Scenario sc = apply_plan(base, plan);
  sc.seed = seed;
  RunOptions ro;
  ro.seed = seed;
  ro.keep_trace = false;
  const RunOutput quick = run_scenario(sc, protocol, ro);
  if (inconclusive) *inconclusive = quick.inconclusive();
  if (quick.check.safe) return std::nullopt;
  ro.keep_trace = true;  // the story is told from the trace: run the failing case again, keeping it
  const RunOutput r = run_scenario(sc, protocol, ro);
  const std::string path = write_replay(sc, protocol, r, describe(plan), "a rapidcheck property");
  return protocol + " is unsafe under this plan (" + anomaly_summary(r.check) + "):\n" + describe(plan) +
         "\n" + story(r) + "\nreplay it with: " + command_name() + " replay " + path;
}

/// The property's assertion: RC_FAIL with the story and the replay command when the run is unsafe; a run
/// that stopped at a limit with no anomaly proves nothing and is discarded (RC_DISCARD), so it never counts
/// as a pass.
inline void check_safe(const Scenario& base, const std::string& protocol, const FaultPlan& plan,
                       std::uint64_t seed) {
  bool inconclusive = false;
  if (auto why = find_violation(base, protocol, plan, seed, &inconclusive)) RC_FAIL(*why);
  RC_PRE(!inconclusive);
}

/// How check_property runs.
struct PropertyOptions {
  NemesisMode mode = NemesisMode::anything;
  std::size_t max_faults = 6;  ///< faults per plan at most (the size scales the count up to it), as explore's
  /// Cases to pass; nothing: rapidcheck's own (100, or RC_PARAMS="max_success=N").
  std::optional<int> cases;
  /// rapidcheck's seed; nothing: rapidcheck's own (random, or RC_PARAMS="seed=N"). Given (or with `cases`),
  /// RC_PARAMS="reproduce=..." does not apply.
  std::optional<std::uint64_t> rc_seed;
  /// Explore's shrinker, run on rapidcheck's smallest failing plan (`max_runs` bounds its runs; `fails`
  /// defaults to "unsafe").
  ShrinkOptions shrink;
  bool shrink_again = true;          ///< false: report rapidcheck's smallest plan as it is
  std::filesystem::path replay_dir;  ///< empty: replay_dir() ($LOCKSIM_REPLAY_DIR, else the temporary one)
  /// rapidcheck's id of the property, which RC_PARAMS="reproduce=..." names (the GoogleTest helper passes
  /// "Suite/Name"). Empty: "<scenario>/<protocol>".
  std::string id;
};

/// The property's id: opts.id, else "<scenario>/<protocol>".
inline std::string property_id(const Scenario& base, const std::string& protocol,
                               const PropertyOptions& opts) {
  return opts.id.empty() ? base.name + "/" + protocol : opts.id;
}

/// What check_property found.
struct PropertyResult {
  enum class Outcome : std::uint8_t {
    passed,   ///< every case safe
    failed,   ///< an unsafe run: everything below is filled
    gave_up,  ///< too many cases stopped at a limit with no anomaly (inconclusive: rapidcheck discards them)
    error,    ///< the property could not run (an unknown protocol, a bad scenario): `message` says why
  };
  Outcome outcome = Outcome::passed;
  int cases = 0;                  ///< cases run: the safe ones, plus the failing one
  FaultPlan found;                ///< rapidcheck's smallest failing plan
  std::uint64_t seed = 0;         ///< its world seed
  FaultPlan plan;                 ///< the plan reported: explore's shrink of `found`
  std::uint32_t shrink_runs = 0;  ///< runs explore's shrinker spent
  Scenario scenario;  ///< the scenario the replay file holds (the plan applied, clients maybe fewer)
  std::uint64_t trace_hash = 0;  ///< of that run (the replay file's)
  std::string story;             ///< the text report's story of the violation
  std::string replay_file;       ///< where the replay file was written
  std::string replay_command;    ///< "<binary> replay <file>" (command_name(): the binary that runs locksim)
  std::string message;           ///< for a person: the plan, the story, the file and the command
  bool passed() const { return outcome == Outcome::passed; }
};

/// The report of a failing plan (`found`, with world seed `seed`; `found_how` goes into the message):
/// explore's shrinker shrinks it (unless opts.shrink_again is off), the run of the plan it keeps is told as
/// the text report tells it, and its replay file is written (opts.replay_dir). check_property calls it on
/// rapidcheck's smallest plan.
inline PropertyResult report_failure(const Scenario& base, const std::string& protocol,
                                     const FaultPlan& found, std::uint64_t seed,
                                     const PropertyOptions& opts = {}, const std::string& found_how = "") {
  PropertyResult res;
  res.outcome = PropertyResult::Outcome::failed;
  res.found = found;
  res.seed = seed;
  res.plan = res.found;
  Scenario shrunk_base = base;
  if (opts.shrink_again) {
    const ShrinkResult sr = shrink_failure(base, protocol, res.found, res.seed, opts.shrink);
    res.shrink_runs = sr.runs;
    if (sr.failed_at_start) {
      res.plan = sr.plan;
      shrunk_base = sr.base;
    }
  }
  res.scenario = apply_plan(shrunk_base, res.plan);
  res.scenario.seed = res.seed;
  RunOptions ro;
  ro.seed = res.seed;
  const RunOutput r = run_scenario(res.scenario, protocol, ro);
  res.trace_hash = r.trace_hash;
  res.story = story(r);
  const std::string plan_text = describe(res.plan);
  res.replay_file = write_replay(
      res.scenario, protocol, r, plan_text,
      "the rapidcheck property " + property_id(base, protocol, opts) + " (locksim/rapidcheck.hpp)",
      opts.replay_dir);
  res.replay_command = command_name() + " replay " + res.replay_file;
  std::string indented;
  for (std::size_t p = 0, nl; p < plan_text.size(); p = nl + 1) {
    nl = plan_text.find('\n', p);
    if (nl == std::string::npos) nl = plan_text.size();
    indented += "  " + plan_text.substr(p, nl - p) + "\n";
  }
  res.message = protocol + " is unsafe under " + base.name + " (" + anomaly_summary(r.check) + ")" +
                (found_how.empty() ? "" : ", " + found_how) + ", world seed " + std::to_string(res.seed) +
                ". The plan (" + std::to_string(res.found.size()) +
                " ingredient(s) after rapidcheck's shrinking, " + std::to_string(res.plan.size()) +
                " after locksim's shrinker, " + std::to_string(res.shrink_runs) + " runs):\n" + indented +
                "\n" + res.story + "\nreplay file: " + res.replay_file +
                "\nreplay it with: " + res.replay_command + "\n";
  return res;
}

/// The property "`protocol` keeps `base` safe under any fault plan": rapidcheck draws plans (fault_plan)
/// and world seeds (seed()), runs each, and on an unsafe run shrinks the plan its own way; then explore's
/// shrinker (scenarios/shrink.hpp) shrinks rapidcheck's smallest plan further, the run of the plan it keeps
/// is told as the text report tells it (its story), and a replay file is written. Never asserts: the
/// GoogleTest helper (locksim/rapidcheck_gtest.hpp) turns a failure into a test failure.
inline PropertyResult check_property(const Scenario& base, const std::string& protocol,
                                     const PropertyOptions& opts = {}) {
  PropertyResult res;
  NemesisTargets targets;
  try {
    targets = nemesis_targets(base, protocol);
  } catch (const std::exception& e) {
    res.outcome = PropertyResult::Outcome::error;
    res.message = e.what();
    return res;
  }
  const rc::Gen<FaultPlan> plans = fault_plan(targets, base, opts.mode, opts.max_faults);
  // The last unsafe case rapidcheck ran. rapidcheck goes on from the first shrink candidate that still
  // fails, so once it is done the last failing case it ran is its smallest.
  std::optional<std::pair<FaultPlan, std::uint64_t>> last;
  const auto property = [&] {
    const FaultPlan plan = *plans;
    const std::uint64_t s = *seed();
    Scenario sc = apply_plan(base, plan);
    sc.seed = s;
    RunOptions ro;
    ro.seed = s;
    ro.keep_trace = false;
    RunOutput r;
    try {
      r = run_scenario(sc, protocol, ro);
    } catch (...) {
      last.reset();  // a failure too, but no plan to shrink: rapidcheck's message tells it
      throw;
    }
    if (!r.check.safe) {
      last.emplace(plan, s);
      RC_FAIL(protocol + " is unsafe (" + anomaly_summary(r.check) + ")");
    }
    RC_PRE(!r.inconclusive());
  };
  rc::detail::TestMetadata meta;
  meta.id = property_id(base, protocol, opts);
  meta.description = meta.id;
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  if (opts.cases) params.maxSuccess = *opts.cases;
  if (opts.rc_seed) params.seed = *opts.rc_seed;
  const rc::detail::TestResult result = opts.cases || opts.rc_seed
                                            ? rc::detail::checkTestable(property, meta, params)
                                            : rc::detail::checkTestable(property, meta);
  std::ostringstream rc_text;
  rc::detail::printResultMessage(result, rc_text);
  if (result.template is<rc::detail::SuccessResult>()) {
    res.cases = result.template get<rc::detail::SuccessResult>().numSuccess;
    return res;
  }
  if (!result.template is<rc::detail::FailureResult>() || !last) {
    res.outcome = result.template is<rc::detail::GaveUpResult>() ? PropertyResult::Outcome::gave_up
                                                                 : PropertyResult::Outcome::error;
    if (result.template is<rc::detail::GaveUpResult>())
      res.cases = result.template get<rc::detail::GaveUpResult>().numSuccess;
    res.message = rc_text.str();
    return res;
  }
  const int cases = result.template get<rc::detail::FailureResult>().numSuccess + 1;
  PropertyResult failed = report_failure(base, protocol, last->first, last->second, opts,
                                         "found by rapidcheck at case " + std::to_string(cases));
  failed.cases = cases;
  failed.message += "\nrapidcheck: " + rc_text.str();
  return failed;
}

}  // namespace locksim::rcgen
