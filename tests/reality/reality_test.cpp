// Real runs against redis-server judged by the simulator's checker: the verdicts the catalog expects, the
// ground truth they rest on (the store's log, the servers' own records), and the plan's refusals.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <utility>

#include "leftovers.hpp"
#include "locksim/reports/report.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "reality/children.hpp"
#include "reality/plan.hpp"
#include "reality/run.hpp"

namespace locksim::reality {
namespace {

using namespace locksim::reality::leftovers;

#define REQUIRE_REDIS()                                                                       \
  do {                                                                                        \
    if (find_program("redis-server").empty())                                                 \
      GTEST_SKIP() << "redis-server is not installed (Debian: apt-get install redis-server)"; \
  } while (0)

RunOutput real(const std::string& scenario, const std::string& protocol, double scale = 0.3) {
  return run_real(scaled(load_scenario(scenario), scale), protocol);
}

TEST(RealRedis, GcPauseLetsTheStaleWriteThroughAsSimulated) {
  REQUIRE_REDIS();
  const Scenario sc = scaled(load_scenario("kleppmann-gc-pause"), 0.3);
  const RunOutput r = run_real(sc, "redis");
  EXPECT_TRUE(no_children());
  ASSERT_EQ(r.history.grants.size(), 2u);
  EXPECT_FALSE(r.check.safe);
  EXPECT_EQ(r.check.count(kStaleWriteAccepted), 1u);
  // The store's own log: client2's write, then client1's stale one, both accepted.
  ASSERT_EQ(r.history.resource_log.size(), 2u);
  EXPECT_EQ(r.history.writes[r.history.resource_log[1].request].client, "client1");
  // Every grant is backed by redis-server's own record, made before the client heard.
  EXPECT_EQ(r.check.unbacked_grants, 0u);
  EXPECT_EQ(r.history.service_sets.size(), 2u);
  // The pause was SIGSTOP for the scenario's 15 s × 0.3, give or take the scheduler.
  EXPECT_GE(r.run.end.count(), 4'400'000'000);
  EXPECT_EQ(run_scenario(sc, "redis").verdict(), r.verdict());
  // The picture `run --report html` draws, drawn from the real history: the violation ringed, the pause
  // shown, and said to be a real run (no trace hash: it has none).
  const std::string html = html_report(r, sc);
  EXPECT_NE(html.find("stale write accepted: epoch 1 (client1) after epoch 2 (client2)"), std::string::npos);
  EXPECT_NE(html.find("real run on this machine"), std::string::npos);
  EXPECT_EQ(html.find("trace 0000000000000000"), std::string::npos);
}

TEST(RealRedis, RedlockGcPauseIsUnsafeAsSimulated) {
  REQUIRE_REDIS();
  const RunOutput r = real("kleppmann-gc-pause", "redlock");
  EXPECT_TRUE(no_children());
  EXPECT_FALSE(r.check.safe);
  EXPECT_EQ(r.check.unbacked_grants, 0u);
  EXPECT_EQ(r.history.service_quorum, 3u);
}

// The real clients run the simulated clients' own algorithms (protocols/redis/lock_algorithms.hpp), their
// variants included: Redlock's teaching variant without the elapsed-time check takes the late grant for real
// as in the simulation, and the algorithm as shipped gives it up in both.
TEST(RealRedis, RedlockWithoutItsElapsedCheckKeepsALateGrantAsSimulated) {
  REQUIRE_REDIS();
  Scenario sc = scaled(
      load_scenario(std::string(LOCKSIM_REALITY_SCENARIOS) + "/pause-in-flight-no-elapsed-check.toml"), 0.3);
  ASSERT_EQ(sc.config_for("redlock").variant, "no-elapsed-check");
  ASSERT_FALSE(not_reproducible(sc, "redlock").has_value());
  const RunOutput late = run_real(sc, "redlock");
  EXPECT_TRUE(no_children());
  EXPECT_FALSE(late.check.safe);
  EXPECT_EQ(late.check.count(kStaleWriteAccepted), 1u);
  EXPECT_EQ(run_scenario(sc, "redlock").verdict(), late.verdict());
  // client1's grant: believed valid until ttl - drift from sending, which had passed before it heard.
  ASSERT_EQ(late.history.grants.size(), 2u);
  const GrantRecord& g1 =
      late.history.grants[0].client == "client1" ? late.history.grants[0] : late.history.grants[1];
  EXPECT_LT(g1.believed_valid_until, g1.granted);

  sc.per_protocol.at("redlock").variant.clear();
  const RunOutput checked = run_real(sc, "redlock");
  EXPECT_TRUE(no_children());
  EXPECT_TRUE(checked.check.safe);
  EXPECT_EQ(run_scenario(sc, "redlock").verdict(), checked.verdict());
}

TEST(RealRedis, IncrTokenWithAFencedStoreRejectsTheStaleWrite) {
  REQUIRE_REDIS();
  const RunOutput r = real("kleppmann-fencing-tokens", "redis+incr");
  EXPECT_TRUE(no_children());
  EXPECT_TRUE(r.check.safe) << r.check.violations.size();
  ASSERT_EQ(r.history.grants.size(), 2u);
  EXPECT_EQ(r.history.grants[0].token, 33u);  // first_token = 33: INCR on the counter the run set to 32
  EXPECT_EQ(r.history.grants[1].token, 34u);
  ASSERT_EQ(r.history.resource_log.size(), 2u);
  EXPECT_TRUE(r.history.resource_log[0].accepted);
  EXPECT_FALSE(r.history.resource_log[1].accepted);
  EXPECT_EQ(r.history.resource_log[1].reason, "token 33 < highest 34");
}

TEST(RealRedis, RedlockCrashRestartWithoutPersistenceGrantsTwice) {
  REQUIRE_REDIS();
  const RunOutput r = real("redis-restart-no-fsync", "redlock");
  EXPECT_TRUE(no_children());
  EXPECT_FALSE(r.check.safe);
  // redis1 voted for both: once before its crash, once after it came back empty.
  std::size_t redis1 = 0;
  for (const ServiceSet& s : r.history.service_sets) redis1 += s.node == "redis1" ? 1 : 0;
  EXPECT_EQ(redis1, 2u);
}

TEST(RealRedis, RedlockCrashRestartWithFsyncAlwaysKeepsTheKey) {
  REQUIRE_REDIS();
  const RunOutput r = real("redis-restart-fsync-always", "redlock");
  EXPECT_TRUE(no_children());
  EXPECT_TRUE(r.check.safe);
  ASSERT_EQ(r.history.grants.size(), 2u);
  // The key survived the crash, so client2 waited for client1's release (after its 4 s × 0.3 of work), and
  // that release reached the restarted redis1: client2 did not have to wait for the TTL (10 s × 0.3).
  EXPECT_GE(r.history.grants[1].granted, r.history.grants[0].belief_end);
  EXPECT_GE(r.history.grants[1].granted.count(), 1'200'000'000);
  EXPECT_LT(r.history.grants[1].granted.count(), 3'000'000'000);
}

/// Runs the locksim binary with `args` (no shell quoting needed here); its exit code and what it printed.
std::pair<int, std::string> cli(const std::string& args) {
  const std::string cmd = std::string(LOCKSIM_BINARY) + " " + args + " 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  for (std::size_t n; f && (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  const int st = f ? ::pclose(f) : -1;
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

TEST(RealityCommand, AnHtmlReportDrawsOneRunAndSaysSoOtherwise) {
  // Nothing is started for these: the arguments are refused first (exit 2, with the reason).
  const auto [all_rc, all_out] = cli("reality --all --report html");
  EXPECT_EQ(all_rc, 2);
  EXPECT_NE(all_out.find("--report html draws one run, not the --all matrix"), std::string::npos) << all_out;
  const auto [two_rc, two_out] = cli("reality kleppmann-gc-pause -p redis -p redlock --report html");
  EXPECT_EQ(two_rc, 2);
  EXPECT_NE(two_out.find("name one protocol with -p"), std::string::npos) << two_out;
  const auto [bad_rc, bad_out] = cli("reality kleppmann-gc-pause -p redis --report pdf");
  EXPECT_EQ(bad_rc, 2) << bad_out;
  EXPECT_TRUE(no_children());
}

TEST(RealityPlan, ClockFaultsAreNotReproducible) {
  const auto why = not_reproducible(load_scenario("kleppmann-clock-jump"), "redlock");
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("not reproducible in reality"), std::string::npos);
  EXPECT_FALSE(not_reproducible(load_scenario("kleppmann-gc-pause"), "redis").has_value());
  EXPECT_TRUE(
      not_reproducible(load_scenario("kleppmann-gc-pause"), "consul").has_value());  // no real servers yet
}

TEST(RealityPlan, TimeScaleMultipliesEveryDuration) {
  const Scenario sc = load_scenario("kleppmann-gc-pause");
  const Scenario half = scaled(sc, 0.5);
  EXPECT_EQ(half.config.ttl, sc.config.ttl / 2);
  EXPECT_EQ(half.config.node_timeout, sc.config.node_timeout / 2);
  EXPECT_EQ(half.clients[1].start, sc.clients[1].start / 2);
  EXPECT_EQ(half.faults[0].fault.duration, sc.faults[0].fault.duration / 2);
  EXPECT_EQ(half.max_time, sc.max_time / 2);
}

}  // namespace
}  // namespace locksim::reality
