// `locksim reality`: a scenario against real servers on this machine, beside the simulated run of the same
// (scaled) scenario; `--all` the matrix real vs simulated. Built only with hiredis (reality/CMakeLists.txt).
#include "reality/command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/cli/cli.hpp"
#include "reality/children.hpp"
#include "reality/pg_server.hpp"
#include "reality/plan.hpp"
#include "reality/redis_server.hpp"
#include "reality/run.hpp"

namespace locksim::reality {

namespace {

using namespace locksim::cli;

struct RealityArgs {
  std::vector<std::string> scenarios, protocols;
  bool all = false;
  double time_scale = 1.0;
  std::uint32_t runs = 1;
  std::string report = "text", out_file;
};

std::string seconds(Time t) {
  return t == kTimeMax ? "never" : fmt::format("{:.3f} s", static_cast<double>(t.count()) / 1e9);
}

/// The figures a real run is compared by: when the second epoch was granted, and when the first stale write
/// landed (none: no such write).
struct Timings {
  std::optional<Time> second_grant, stale_write;
};

Timings timings_of(const RunOutput& r) {
  Timings t;
  if (r.check.grant_of_epoch.size() >= 2)
    t.second_grant = r.history.grants[r.check.grant_of_epoch[1]].granted;
  for (const Violation& v : r.check.violations)
    if (v.kind == kStaleWriteAccepted && v.later.valid()) {
      t.stale_write = v.later.arrived;
      break;
    }
  return t;
}

std::string summary(const RunOutput& r) {
  std::string s = std::string(to_string(r.verdict()));
  if (const std::string a = anomaly_summary(r.check); !a.empty()) s += " (" + a + ")";
  return s;
}

std::string side_by_side(const RunOutput& real, const RunOutput& sim, double scale) {
  std::string out = fmt::format("{} × {} (time scale {})\n", real.scenario, real.protocol, scale);
  out += fmt::format("  simulated: {}\n  real:      {}{}\n", summary(sim), summary(real),
                     real.verdict() == sim.verdict() ? "" : "   <- DISAGREES");
  out += "\nreal history (times since the run's start):\n";
  for (const GrantRecord& g : real.history.grants)
    out += fmt::format("  {} granted at {} (asked at {}), token {}, believed until {}, stopped {} ({})\n",
                       g.client, seconds(g.granted), seconds(g.requested),
                       g.token ? std::to_string(*g.token) : "none", seconds(g.believed_valid_until),
                       seconds(g.belief_end), g.end_reason.empty() ? "-" : g.end_reason);
  for (const ResourceEntry& e : real.history.resource_log)
    out += fmt::format("  {} {} write {}={} token {} at {}{}\n", e.resource,
                       e.accepted ? "accepted" : "rejected", e.key, e.value,
                       e.token ? std::to_string(*e.token) : "none", seconds(e.time),
                       e.reason.empty() ? "" : " (" + e.reason + ")");
  for (const ServiceSet& s : real.history.service_sets)
    out += fmt::format("  {} recorded {} = {} at {}\n", s.node, s.key, s.value, seconds(s.time));
  for (const TraceEvent& ev : real.trace)
    if (ev.kind == TraceKind::pause || ev.kind == TraceKind::resume || ev.kind == TraceKind::crash ||
        ev.kind == TraceKind::restart)
      out +=
          fmt::format("  {} {} at {} ({})\n", real.name_of(ev.proc), ev.label, seconds(ev.time), ev.detail);
  const std::string rs = story(real), ss = story(sim);
  out += fmt::format("\nreal story:\n{}\n", rs.empty() ? "  (no anomaly)\n" : rs);
  out += fmt::format("simulated story:\n{}", ss.empty() ? "  (no anomaly)\n" : ss);
  if (const auto w = run_warnings(real); !w.empty())
    out += fmt::format("real run warnings: {}\n", fmt::join(w, " "));
  return out;
}

struct Pair {
  RunOutput real, sim;
};

/// The real run's length is about the simulated run's: one that would pass the 60 s bound is not started.
std::optional<std::string> too_long(const RunOutput& sim) {
  constexpr Time kRealBound = 55s;
  if (sim.run.end <= kRealBound) return std::nullopt;
  return fmt::format(
      "the simulated run lasts {:.1f} s: a real run must finish within 60 s (try --time-scale)",
      static_cast<double>(sim.run.end.count()) / 1e9);
}

/// Disagreements the model documents as its limits (scenario, protocol) -> why (docs/reality.md).
std::optional<std::string> known_limit(const Scenario& sc, const std::string& protocol, double time_scale) {
  const std::string& scenario = sc.name;
  // A partition that heals, in a scenario whose simulated network loses what a cut link meets (cut_messages =
  // "lost", the default: a datagram's, or a connection that gave up): over TCP the proxy holds those bytes
  // and delivers them at the heal, perhaps after the next holder's write (tests/reality/scenarios/
  // one-way-cut-to-store.toml measures it, with "held" agreeing for all nine protocols).
  bool heals = false;
  for (const FaultSpec& f : sc.faults)
    heals |= f.fault.kind == Fault::Kind::heal ||
             (f.fault.kind == Fault::Kind::partition && f.fault.duration > Duration{0});
  if (heals && sc.network.cut_messages == CutMessages::lost)
    return std::string(
        "a message sent across a partition: the simulated network loses it (cut_messages = \"lost\"), TCP "
        "delivers it at the heal; cut_messages = \"held\" models TCP; docs/reality.md, The network proxy");
  // redis-async-failover, redis-incr-token-failover: the real sentinel promotes replica1 about 0.9 s or more
  // after the crash whatever down-after-milliseconds is (its ping and INFO periods, 1 s, and its timer are
  // not scaled); the simulated sentinel after failover_after plus its ping interval. Below --time-scale 0.5
  // client1 (4 s of work, scaled) has written and released before client2 gets the promoted replica: safe
  // for real where the simulated client2 wrote first (redis; redis+incr stays unsafe by its repeated token).
  if ((scenario == "redis-async-failover" || scenario == "redis-incr-token-failover") &&
      protocol == "redis" && time_scale < 0.5)
    return std::string(
        "the real sentinel's failover takes about 0.9 s or more at any scale (its 1 s ping and INFO periods "
        "are "
        "not scaled): below --time-scale 0.5 client1 has written and released first; docs/reality.md, A "
        "replica and a sentinel");
  return std::nullopt;
}

std::string spread(const std::vector<std::optional<Time>>& ts) {
  std::vector<double> v;
  for (const auto& t : ts)
    if (t) v.push_back(static_cast<double>(t->count()) / 1e9);
  if (v.empty()) return "-";
  std::sort(v.begin(), v.end());
  if (v.size() == 1 || v.front() == v.back()) return fmt::format("{:.3f}", v.front());
  return fmt::format("{:.3f}..{:.3f}", v.front(), v.back());
}

int run_all(const RealityArgs& a) {
  std::vector<std::string> names = a.scenarios.empty() ? catalog_names() : a.scenarios;
  std::vector<std::string> protos = a.protocols.empty() ? real_protocols() : a.protocols;
  fmt::print("{:<36} {:<14} {:<9} {:<16} {:<5} {:<26} {:<26}\n", "scenario", "protocol", "simulated",
             fmt::format("real (x{})", a.runs), "agree", "2nd grant s real (sim)",
             "stale write s real (sim)");
  bool bad = false;
  std::vector<std::string> skipped;
  for (const std::string& name : names) {
    const Scenario base = load_scenario(name);
    for (const std::string& p : protos) {
      if (a.scenarios.empty() && !base.expect.count(p)) continue;
      if (auto why = not_reproducible(base, p)) {
        skipped.push_back(fmt::format("{} × {}: {}", base.name, p, *why));
        continue;
      }
      const Scenario sc = scaled(base, a.time_scale);
      const RunOutput sim = run_scenario(sc, p);
      if (auto why = too_long(sim)) {
        skipped.push_back(fmt::format("{} × {}: {}", base.name, p, *why));
        continue;
      }
      std::uint32_t unsafe = 0, agree = 0;
      std::vector<std::optional<Time>> second, stale;
      std::string error;
      for (std::uint32_t i = 0; i < a.runs; ++i) {
        try {
          const RunOutput real = run_real(sc, p);
          unsafe += real.check.safe ? 0 : 1;
          agree += real.verdict() == sim.verdict() ? 1 : 0;
          const Timings t = timings_of(real);
          second.push_back(t.second_grant);
          stale.push_back(t.stale_write);
        } catch (const StartError& e) {
          error = e.what();
          break;
        } catch (const Interrupted&) {
          throw;
        } catch (const std::runtime_error& e) {
          error = e.what();
          break;
        }
      }
      if (!error.empty()) {
        fmt::print("{:<36} {:<14} error: {}\n", base.name, p, error);
        bad = true;
        continue;
      }
      const std::string real_text = unsafe == a.runs ? fmt::format("unsafe x{}", a.runs)
                                    : unsafe == 0    ? fmt::format("safe x{}", a.runs)
                                                     : fmt::format("unsafe {}/{}", unsafe, a.runs);
      const bool all_agree = agree == a.runs;
      const auto limit = all_agree ? std::nullopt : known_limit(base, p, a.time_scale);
      if (!all_agree && !limit) bad = true;
      const Timings st = timings_of(sim);
      auto with_sim = [](const std::string& real, const std::optional<Time>& t) {
        return t ? fmt::format("{} ({:.3f})", real, static_cast<double>(t->count()) / 1e9) : real;
      };
      fmt::print("{:<36} {:<14} {:<9} {:<16} {:<5} {:<26} {:<26}\n", base.name, p, to_string(sim.verdict()),
                 real_text, all_agree ? "yes" : (limit ? "limit" : "NO"),
                 with_sim(spread(second), st.second_grant), with_sim(spread(stale), st.stale_write));
      std::fflush(stdout);
      if (limit) fmt::print("    known limit: {}\n", *limit);
    }
  }
  if (!skipped.empty()) {
    fmt::print("\nskipped:\n");
    for (const std::string& s : skipped) fmt::print("  {}\n", s);
  }
  return bad ? kFail : kOk;
}

void add_reality_options(CLI::App& cmd, RealityArgs& a) {
  cmd.add_option("SCENARIO", a.scenarios, "catalog name or .toml file (with --all: the scenarios to run)");
  cmd.add_option(
      "-p,--protocol", a.protocols,
      "protocol(s): redis, redis+incr, redlock, lease, lease+fence, db-lease, db-lease+fence, zookeeper, "
      "zookeeper+fence");
  cmd.add_flag("--all", a.all, "every reproducible catalog scenario × protocol: a matrix real vs simulated");
  cmd.add_option("--time-scale", a.time_scale,
                 "multiply every duration of the scenario (0.2: a 10 s TTL is 2 s)")
      ->check(CLI::Range(0.01, 10.0));
  cmd.add_option("--runs", a.runs, "real runs per scenario × protocol (--all)")->check(CLI::Range(1, 100));
  cmd.add_option("--report", a.report,
                 "text, json ({real, simulated}) or html (the picture of the real run, as `run` draws one; "
                 "one protocol)")
      ->check(one_of({"text", "json", "html"}));
  cmd.add_option("-o,--output", a.out_file, "write the report to FILE");
}

int cmd_reality(const RealityArgs& a) {
  install_signal_handlers();
  try {
    if (a.all && a.report == "html")
      input_error("reality: --report html draws one run, not the --all matrix");
    if (a.all) return run_all(a);
    if (a.scenarios.size() != 1) input_error("reality: give one SCENARIO (or --all)");
    const Scenario base = load_scenario(a.scenarios[0]);
    std::vector<std::string> ps = a.protocols;
    if (ps.empty())
      for (const std::string& p : real_protocols())
        if (base.expect.count(p)) ps.push_back(p);
    validate_protocols(ps);
    if (a.report == "html" && ps.size() != 1)
      input_error("reality: --report html draws one run: name one protocol with -p");
    bool unsafe = false;
    std::string text;
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const std::string& p : ps) {
      // A server that is not installed is an error here (exit 2, the apt package named); --all skips the
      // cell.
      if (const std::string missing = is_pg(p) ? pg_missing() : std::string(); !missing.empty())
        throw StartError(missing);
      if (auto why = not_reproducible(base, p)) {
        // A server or client library that is not installed is an error for the command asked by name.
        if (why->find("apt-get install") != std::string::npos)
          throw StartError(fmt::format("{} × {}: {}", base.name, p, *why));
        fmt::print(stderr, "{} × {}: {} (skipped)\n", base.name, p, *why);
        continue;
      }
      const Scenario sc = scaled(base, a.time_scale);
      Pair r;
      r.sim = run_scenario(sc, p);
      if (auto why = too_long(r.sim)) {
        fmt::print(stderr, "{} × {}: {} (skipped)\n", base.name, p, *why);
        continue;
      }
      r.real = run_real(sc, p);
      unsafe |= !r.real.check.safe;
      if (a.report == "json") {
        nlohmann::ordered_json j;
        j["real"] = nlohmann::ordered_json::parse(json_report(r.real, sc));
        j["simulated"] = nlohmann::ordered_json::parse(json_report(r.sim, sc));
        arr.push_back(std::move(j));
      } else if (a.report == "html") {
        text = html_report(r.real, sc);
      } else {
        text += (text.empty() ? "" : "\n") + side_by_side(r.real, r.sim, a.time_scale);
      }
    }
    if (a.report == "json") text = (arr.size() == 1 ? arr[0] : arr).dump(2) + "\n";
    emit(text, a.out_file);
    return unsafe ? kFail : kOk;
  } catch (const StartError& e) {
    fmt::print(stderr, "{}: error: {}\n", "locksim reality", e.what());
    return kInput;
  } catch (const Interrupted&) {
    fmt::print(stderr, "locksim reality: interrupted; every server and client was stopped\n");
    return 130;
  }
}

}  // namespace

int reality_main(int argc, char** argv) {
  CLI::App app{"locksim reality: the scenario against real servers on this machine, beside the simulation",
               "locksim reality"};
  RealityArgs a;
  add_reality_options(app, a);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kOk : kInput;
  }
  try {
    return cmd_reality(a);
  } catch (const InputError& e) {
    fmt::print(stderr, "locksim: error: {}\n", e.what());
    return kInput;
  }
}

}  // namespace locksim::reality
