// The rapidcheck generators and property helper (include/locksim/rapidcheck.hpp): choices uniform at every
// size, counterexamples printed as plans, a failure shrunk by explore's shrinker and replayable, and the
// example protocol's bug found at rapidcheck's defaults.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include <locksim/rapidcheck_gtest.hpp>

#include "examples/token_lease.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/command_name.hpp"
#include "locksim/scenarios/replay.hpp"

namespace locksim {
namespace {

const Scenario& gc_pause() {
  static const Scenario sc = load_scenario("kleppmann-gc-pause");
  return sc;
}

void register_all() {
  register_builtin_protocols();
  example::register_token_lease();
}

/// A scratch directory for replay files, removed at the end.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    path = std::filesystem::temp_directory_path() /
           ("locksim-rcgen-" + std::to_string(std::hash<std::string>{}(
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name())));
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
};

/// Draws `n` faults at `size` (each from its own rapidcheck Random) and counts what `key` says of each.
template <class Key>
std::map<std::string, int> tally(NemesisMode mode, int size, int n, Key key) {
  register_all();
  const NemesisTargets targets = nemesis_targets(gc_pause(), "lease");
  const rc::Gen<FaultSpec> gen = rcgen::fault(targets, gc_pause(), mode);
  std::map<std::string, int> count;
  for (int i = 0; i < n; ++i) ++count[key(gen(rc::Random(1000 + i), size).value(), targets)];
  return count;
}

std::string kind_name(const FaultSpec& f, const NemesisTargets&) {
  return std::to_string(static_cast<int>(f.fault.kind));
}

std::string role_of(const FaultSpec& f, const NemesisTargets& t) {
  const std::string n = f.target.empty() ? f.side_a.front() : f.target;
  if (n == t.resource) return "resource";
  for (const auto& c : t.clients)
    if (c == n) return "client";
  return "server";
}

std::string trigger_of(const FaultSpec& f, const NemesisTargets&) {
  return f.fault.when.kind == Trigger::Kind::at ? "time" : "note " + f.fault.when.label;
}

/// Every key of `count` within 20 % of an equal share of `n` among `expected` keys.
void expect_even(const std::map<std::string, int>& count, std::size_t expected, int n,
                 const std::string& what) {
  ASSERT_EQ(count.size(), expected) << what << ": some choice never came up";
  const double share = static_cast<double>(n) / static_cast<double>(expected);
  for (const auto& [k, c] : count) {
    EXPECT_GT(c, share * 0.8) << what << " " << k;
    EXPECT_LT(c, share * 1.2) << what << " " << k;
  }
}

TEST(RcGen, EveryFaultKindEquallyLikelyAtEverySize) {
  constexpr int n = 6000;
  for (int size : {0, 100}) {
    const std::string at = "size " + std::to_string(size);
    expect_even(tally(NemesisMode::anything, size, n, kind_name), 6, n, at + ", anything: kind");
    expect_even(tally(NemesisMode::within, size, n, kind_name), 4, n, at + ", within: kind");
  }
}

TEST(RcGen, TargetRolesAndTriggersEquallyLikelyAtEverySize) {
  constexpr int n = 6000;
  for (int size : {0, 100}) {
    const std::string at = "size " + std::to_string(size);
    // Delay spikes, partitions and drift hit any of the three roles (a pause after a note may take the
    // note's own process instead; crashes never hit the store).
    auto role = [](const FaultSpec& f, const NemesisTargets& t) {
      return f.fault.kind == Fault::Kind::pause ? "pause" : role_of(f, t);
    };
    auto count = tally(NemesisMode::within, size, n, role);
    const int pauses = count["pause"];
    count.erase("pause");
    expect_even(count, 3, n - pauses, at + ": role");
    // At a time, or after either note: half and a quarter each.
    count = tally(NemesisMode::anything, size, n, trigger_of);
    count["time"] /= 2;
    const int half = count["time"] + count["note acquired"] + count["note lease-check"];
    expect_even(count, 3, half, at + ": trigger");
  }
}

TEST(RcGen, SizeScalesMagnitudesAndCounts) {
  register_all();
  const NemesisTargets targets = nemesis_targets(gc_pause(), "lease");
  const auto plans = rcgen::fault_plan(targets, gc_pause(), NemesisMode::anything);
  std::size_t faults0 = 0, faults100 = 0;
  Duration pause0{0}, pause100{0};
  for (int i = 0; i < 500; ++i) {
    const FaultPlan a = plans(rc::Random(i), 0).value(), b = plans(rc::Random(i), 100).value();
    faults0 += a.faults.size();
    faults100 += b.faults.size();
    for (const auto& f : a.faults)
      if (f.fault.kind == Fault::Kind::pause) pause0 = std::max(pause0, f.fault.duration);
    for (const auto& f : b.faults)
      if (f.fault.kind == Fault::Kind::pause) pause100 = std::max(pause100, f.fault.duration);
  }
  EXPECT_EQ(faults0, 500u) << "one fault per plan at size 0";
  EXPECT_GT(faults100, 1000u);
  EXPECT_EQ(pause0, 1ms);
  EXPECT_GT(pause100, 10s);
}

TEST(RcGen, CounterexamplesPrintAsThePlan) {
  FaultSpec crash;
  crash.fault.kind = Fault::Kind::crash;
  crash.fault.duration = 2s;
  crash.target = "redis1";
  crash.trigger_proc = "client1";
  crash.fault.when = Trigger::on_note({}, "acquired");
  FaultPlan plan;
  plan.faults = {crash};
  plan.network = LinkOptions{.loss_ppm = 10};
  plan.clocks = {ClockSpec{"client2", ClockOptions{.drift_ppm = 30}}};
  const std::string text = rc::toString(plan);
  EXPECT_EQ(text + "\n", describe(plan));
  EXPECT_NE(text.find("crash redis1, restart after 2s after client1 logs 'acquired'"), std::string::npos)
      << text;
  EXPECT_EQ(rc::toString(crash), describe(crash));
  EXPECT_EQ(rc::toString(*plan.network), "network: loss 10 ppm, duplicate 0 ppm, reorder 0 ppm (+0s)");
  EXPECT_NE(rc::toString(plan.clocks[0]).find("clock client2: offset"), std::string::npos);
  EXPECT_EQ(rc::toString(FaultPlan{}), "no faults");
  const std::string sc = rc::toString(gc_pause());
  EXPECT_NE(sc.find("name = \"kleppmann-gc-pause\""), std::string::npos) << sc;
  for (const std::string& s : {text, rc::toString(crash), sc})
    EXPECT_EQ(s.find("<\?\?\?>"), std::string::npos);
}

TEST(RcGen, LocksimsShrinkerDropsWhatTheFailureDoesNotNeed) {
  register_all();
  ScratchDir dir;
  // The bug's fault, and noise around it that rapidcheck's shrinking tends to keep.
  FaultSpec crash;
  crash.fault.kind = Fault::Kind::crash;
  crash.fault.duration = 20s;
  crash.target = example::kLeaseServer;
  crash.trigger_proc = "client1";
  crash.fault.when = Trigger::on_note({}, "acquired");
  FaultSpec pause;
  pause.fault.kind = Fault::Kind::pause;
  pause.fault.duration = 1ms;
  pause.target = "client2";
  pause.fault.when = Trigger::at_time(3s);
  FaultSpec drift;
  drift.fault.kind = Fault::Kind::clock_drift;
  drift.fault.ppm = -500'000;
  drift.target = "client1";
  FaultPlan noisy;
  noisy.faults = {pause, crash, drift};
  noisy.network = LinkOptions{.loss_ppm = 1};
  noisy.clocks = {ClockSpec{"client2", ClockOptions{.drift_ppm = 7}}};
  rcgen::PropertyOptions o;
  o.replay_dir = dir.path;
  const rcgen::PropertyResult r = rcgen::report_failure(gc_pause(), "token-lease", noisy, 7, o);
  ASSERT_EQ(r.outcome, rcgen::PropertyResult::Outcome::failed) << r.message;
  ASSERT_EQ(r.plan.size(), 1u) << r.message;
  EXPECT_EQ(r.plan.faults[0].fault.kind, Fault::Kind::crash);
  EXPECT_EQ(r.plan.faults[0].target, example::kLeaseServer);
  EXPECT_LT(r.plan.faults[0].fault.duration, 20s) << "the outage shrinks too";
  EXPECT_GT(r.shrink_runs, 0u);
  // The message: the plan, the story, the file and the command for this binary.
  EXPECT_NE(r.message.find(describe(r.plan)), std::string::npos) << r.message;
  EXPECT_FALSE(r.story.empty());
  EXPECT_NE(r.message.find(r.story), std::string::npos) << r.message;
  EXPECT_EQ(r.replay_command, command_name() + " replay " + r.replay_file);
  EXPECT_NE(r.message.find(r.replay_command), std::string::npos) << r.message;
  EXPECT_EQ(std::filesystem::path(r.replay_file).parent_path(), dir.path);
  // Without locksim's shrinker the noise stays.
  o.shrink_again = false;
  EXPECT_EQ(rcgen::report_failure(gc_pause(), "token-lease", noisy, 7, o).plan.size(), noisy.size());
}

TEST(RcGen, PropertyFindsTheTokenReusedAfterARestartAtRapidchecksDefaults) {
  register_all();
  ScratchDir dir;
  rcgen::PropertyOptions o;
  o.replay_dir = dir.path;
  o.rc_seed = 1;  // 100 cases, the default: a fixed seed keeps the test the same on every run
  const rcgen::PropertyResult r = rcgen::check_property(gc_pause(), "token-lease", o);
  ASSERT_EQ(r.outcome, rcgen::PropertyResult::Outcome::failed) << r.message;
  EXPECT_LE(r.cases, 100);
  EXPECT_LE(r.plan.faults.size(), 2u) << r.message;
  EXPECT_NE(r.message.find("token-regression"), std::string::npos) << r.message;
  // The replay file, read back and run in this process (which knows the protocol), gives the same run.
  ASSERT_TRUE(std::filesystem::exists(r.replay_file));
  const ReplayFile file = load_replay_file(r.replay_file);
  EXPECT_EQ(file.info.protocol, "token-lease");
  EXPECT_EQ(file.info.expected_trace_hash, r.trace_hash);
  const ReplayCheck again = replay(file);
  EXPECT_TRUE(again.hash_matches) << hash_text(again.run.trace_hash) << " vs " << hash_text(r.trace_hash);
  EXPECT_TRUE(again.verdict_matches);
}

TEST(RcGen, TheDurableTwinPasses) {
  register_all();
  rcgen::PropertyOptions o;
  o.rc_seed = 2;
  o.cases = 300;
  const rcgen::PropertyResult r = rcgen::check_property(gc_pause(), "token-lease-durable", o);
  EXPECT_TRUE(r.passed()) << r.message;
  EXPECT_EQ(r.cases, 300);
}

TEST(RcGen, AnUnknownProtocolIsAnErrorNotAPass) {
  const rcgen::PropertyResult r = rcgen::check_property(gc_pause(), "no-such-lock");
  EXPECT_EQ(r.outcome, rcgen::PropertyResult::Outcome::error);
  EXPECT_FALSE(r.message.empty());
}

// The GoogleTest helper: a property in one line.
LOCKSIM_PROPERTY(RcGenHelper, DurableLeaseIsSafe, "kleppmann-gc-pause", "token-lease-durable", [] {
  register_all();
  rcgen::PropertyOptions o;
  o.cases = 50;
  return o;
}());

// db-lease+fence: whatever plan rapidcheck draws (every fault kind, any size: pauses, crashes and restarts
// of db1 and the clients, clock jumps and drift, partitions, loss, duplication, delay spikes), Kleppmann's
// scenario shows no anomaly. RC_PARAMS="max_success=1000" runs 1,000 plans.
LOCKSIM_PROPERTY(RcGenDbLease, FencedIsSafeUnderAnyPlan, "kleppmann-gc-pause", "db-lease+fence", [] {
  register_all();
  return rcgen::PropertyOptions{};
}());

}  // namespace
}  // namespace locksim
