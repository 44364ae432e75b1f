// End-to-end tests of the runner with a small user-defined protocol (tests/support/toy_protocol.hpp): a user
// plugs a protocol in through the registry without touching sim/, and the workload, history, checker and
// reports work together.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "locksim/reports/report.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/replay.hpp"
#include "locksim/scenarios/runner.hpp"
#include "tests/support/toy_protocol.hpp"

using namespace locksim;

using locksim::toy::gc_pause;
using locksim::toy::register_toy;

TEST(Runner, NoFaultsIsSafe) {
  register_toy();
  RunOutput r = run_scenario(gc_pause(0ns), "toylock");
  EXPECT_TRUE(r.check.safe);
  ASSERT_EQ(r.history.grants.size(), 2u);
  EXPECT_EQ(r.history.writes.size(), 3u);
  for (const auto& w : r.history.writes) EXPECT_TRUE(w.accepted);
  EXPECT_EQ(r.run.reason, StopReason::done);
}

TEST(Runner, GcPauseUnfencedIsUnsafeAndTheStoryNamesIt) {
  register_toy();
  RunOutput r = run_scenario(gc_pause(15s), "toylock");
  ASSERT_FALSE(r.check.safe);
  ASSERT_EQ(r.check.violations.size(), 1u);
  const Violation& v = r.check.violations[0];
  EXPECT_EQ(v.later.client, "client1");
  EXPECT_EQ(v.earlier.client, "client2");
  EXPECT_LT(v.later.epoch, v.earlier.epoch);
  const std::string s = story(r);
  EXPECT_NE(s.find("client1 acquired the lock at"), std::string::npos) << s;
  EXPECT_NE(s.find("paused from"), std::string::npos) << s;
  EXPECT_NE(s.find("ACCEPTED"), std::string::npos) << s;
  // The stale write arrived after the pause (15 s) and after client2's writes.
  EXPECT_GT(r.history.writes.at(v.later.write).arrived, 15s);
}

TEST(Runner, GcPauseFencedIsSafe) {
  register_toy();
  RunOutput r = run_scenario(gc_pause(15s), "toylock+fence");
  EXPECT_TRUE(r.check.safe);
  bool rejected = false;
  for (const auto& w : r.history.writes)
    if (w.client == "client1" && !w.accepted) rejected = true;
  EXPECT_TRUE(rejected);
}

TEST(Runner, SameSeedSameTraceHashAndBytes) {
  register_toy();
  for (std::uint64_t seed : {1ull, 2ull, 99ull}) {
    RunOptions ro;
    ro.seed = seed;
    RunOutput a = run_scenario(gc_pause(15s), "toylock", ro);
    RunOutput b = run_scenario(gc_pause(15s), "toylock", ro);
    EXPECT_EQ(a.trace_hash, b.trace_hash);
    ASSERT_EQ(a.trace.size(), b.trace.size());
    Scenario sc = gc_pause(15s);
    EXPECT_EQ(json_report(a, sc), json_report(b, sc));
    EXPECT_EQ(text_report(a, sc), text_report(b, sc));
  }
  RunOptions s1, s2;
  s1.seed = 1;
  s2.seed = 2;
  EXPECT_NE(run_scenario(gc_pause(15s), "toylock", s1).trace_hash,
            run_scenario(gc_pause(15s), "toylock", s2).trace_hash);
}

TEST(Runner, UnknownProcessInFaultIsAnInputError) {
  register_toy();
  Scenario sc = gc_pause(15s);
  sc.faults[0].target = "client9";
  sc.faults[0].line = 12;
  try {
    run_scenario(sc, "toylock");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.line, 12u);
    EXPECT_NE(std::string(e.what()).find("client9"), std::string::npos);
  }
}

// Issue 3's persistence matrix for Redlock, on the catalog's restart scenario: a node of client1's majority
// crashes and restarts at once, and client2 gets a majority that includes it. What survives the crash decides
// the verdict.
namespace {
Verdict restart_verdict(bool aof, FsyncPolicy fsync, bool power_loss) {
  Scenario sc = load_scenario("redis-restart-no-fsync");
  sc.config.aof = aof;
  sc.config.fsync = fsync;
  sc.per_protocol.clear();
  for (auto& f : sc.faults) {
    if (f.fault.kind != Fault::Kind::crash) continue;
    f.fault.power_loss = power_loss;
    f.fault.when.at = 500ms;  // inside the first fsync period: the key was written at ~0.1 s, not yet synced
  }
  return run_scenario(sc, "redlock").verdict();
}
}  // namespace

TEST(RedlockPersistence, NoAofIsUnsafe) {
  EXPECT_EQ(restart_verdict(false, FsyncPolicy::never, true), Verdict::unsafe);
}
TEST(RedlockPersistence, AofEverySecondPowerLossIsUnsafe) {
  EXPECT_EQ(restart_verdict(true, FsyncPolicy::periodic, true), Verdict::unsafe);
}
TEST(RedlockPersistence, AofAlwaysPowerLossIsSafe) {
  EXPECT_EQ(restart_verdict(true, FsyncPolicy::always, true), Verdict::safe);
}
TEST(RedlockPersistence, AofProcessCrashIsSafeEvenWithoutFsync) {
  EXPECT_EQ(restart_verdict(true, FsyncPolicy::periodic, false), Verdict::safe);
  EXPECT_EQ(restart_verdict(true, FsyncPolicy::never, false), Verdict::safe);
}

// Determinism over the whole catalog: every scenario × protocol twice gives the same trace hash and
// byte-identical JSON report; a different seed gives a different trace.
TEST(CatalogDeterminism, SameSeedSameBytes) {
  for (const auto& name : catalog_names()) {
    Scenario sc = load_scenario(name);
    for (const auto& [p, v] : sc.expect) {
      RunOutput a = run_scenario(sc, p), b = run_scenario(sc, p);
      EXPECT_EQ(a.trace_hash, b.trace_hash) << name << " " << p;
      EXPECT_EQ(json_report(a, sc), json_report(b, sc)) << name << " " << p;
      // The database lease draws no random number (one server, fixed polls and retries): with the
      // scenario's constant network its run is the same on every seed.
      if (p.starts_with("db-lease")) continue;
      RunOptions other;
      other.seed = sc.seed + 1;
      EXPECT_NE(run_scenario(sc, p, other).trace_hash, a.trace_hash) << name << " " << p;
    }
  }
}

// Counterfactual replay: the same plan against redlock and lease+fence; the histories agree until client1's
// stale write, which one store accepts and the other rejects.
TEST(Compare, ShowsWhereTheHistoriesPart) {
  Scenario sc = load_scenario("kleppmann-gc-pause");
  std::vector<RunOutput> runs{run_scenario(sc, "redlock"), run_scenario(sc, "lease+fence")};
  const std::string out = compare_report(runs, sc, TextStyle{false, 120});
  const auto part = out.find("-- the histories part here --");
  ASSERT_NE(part, std::string::npos) << out;
  const std::string after = out.substr(part);
  const auto next_line = after.substr(after.find('\n') + 1);
  const auto row = next_line.substr(0, next_line.find('\n'));
  EXPECT_NE(row.find("client1 write-accepted"), std::string::npos) << out;
  EXPECT_NE(row.find("client1 write-rejected"), std::string::npos) << out;
  EXPECT_NE(out.find("verdicts:  redlock unsafe  lease+fence safe"), std::string::npos) << out;
}

// Four protocols: written to a file or a pipe (no terminal width) no cell is cut; on a narrow terminal the
// cells are cut, and the report says so.
TEST(Compare, CutsCellsOnlyToFitATerminalAndSaysSo) {
  Scenario sc = load_scenario("kleppmann-gc-pause");
  std::vector<RunOutput> runs;
  for (const char* p : {"redis", "redlock", "lease", "lease+fence"}) runs.push_back(run_scenario(sc, p));
  const std::string full = compare_report(runs, sc, TextStyle{false, 0});
  EXPECT_EQ(full.find("~"), std::string::npos) << full;
  EXPECT_EQ(full.find("cells cut"), std::string::npos) << full;
  EXPECT_NE(full.find("client1 write-rejected (token 3 < highest 5)"), std::string::npos) << full;
  const std::string narrow = compare_report(runs, sc, TextStyle{false, 100});
  EXPECT_NE(narrow.find("~"), std::string::npos) << narrow;
  EXPECT_NE(narrow.find("(cells cut to fit 100 columns"), std::string::npos) << narrow;
}

// A replay file says the whole scenario: every catalog scenario, written out and read back, runs to the
// same trace hash for each protocol it expects (client programs, renewal, per-client settings, roles,
// distributions: whatever it uses).
TEST(Replay, EveryCatalogScenarioReplaysFromItsFile) {
  for (const auto& name : catalog_names()) {
    const Scenario sc = load_scenario(name);
    for (const auto& [p, e] : sc.expect) {
      const RunOutput r = run_scenario(sc, p);
      ReplayInfo info{p, r.trace_hash, r.verdict(), "runner_test", ""};
      const std::string text = scenario_to_toml(sc, &info);
      const ReplayFile f = load_replay_text(text, name + ".replay.toml");
      EXPECT_EQ(scenario_to_toml(f.scenario, &info), text) << name << " " << p;
      EXPECT_TRUE(replay(f).hash_matches) << name << " " << p << "\n" << text;
    }
  }
}
