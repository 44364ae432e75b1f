// The oracle end to end: scenario -> world -> resource log -> checker, for the classes of defect a verdict
// must survive: network duplicates, same-instant arrivals at a stalled store, lost updates with writes in
// epoch order, token regressions, fences that refuse the rightful holder, healthy runs, and runs cut short by
// a limit.
#include <gtest/gtest.h>

#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/runner.hpp"

using namespace locksim;

namespace {

RunOutput run(const std::string& scenario, const std::string& protocol) {
  return run_scenario(load_scenario(scenario), protocol);
}

}  // namespace

TEST(Oracle, NoFaultsHasNoOverlapAndNoNegativeSlackForEveryProtocol) {
  for (const char* p : {"redis", "redlock", "lease", "lease+fence", "redis+incr"}) {
    const RunOutput r = run("no-faults", p);
    EXPECT_TRUE(r.check.safe) << p;
    EXPECT_TRUE(r.check.overlaps.empty()) << p << ": " << r.check.overlaps.size() << " overlaps";
    ASSERT_TRUE(r.check.slack) << p;
    EXPECT_GE(*r.check.slack, 0ns) << p;
    EXPECT_EQ(r.check.unbacked_grants, 0u) << p;
    EXPECT_EQ(r.check.undeclared_records, 0u) << p;
  }
}

TEST(Oracle, AStalledStoreTakesWritesInItsOwnOrder) {
  // Both writes are processed at 21 s; the newer one was queued first.
  const RunOutput unfenced = run("store-pause-same-instant", "lease");
  ASSERT_EQ(unfenced.check.count(kStaleWriteAccepted), 1u);
  const Violation& v = unfenced.check.violations[0];
  EXPECT_EQ(v.later.arrived, v.earlier.arrived);
  EXPECT_LT(v.earlier.seq, v.later.seq);
  const RunOutput fenced = run("store-pause-same-instant", "lease+fence");
  EXPECT_TRUE(fenced.check.safe);
}

TEST(Oracle, AFenceDrainingItsQueueInGrantOrderIsSafe) {
  // The mirror: the older token is queued first, the newer second; both accepted at the same instant.
  Scenario sc = load_scenario("store-pause-same-instant");
  sc.links.front().from = "client2";
  sc.links.front().options.delay = DelayDist::constant_of(10s);
  const RunOutput r = run_scenario(sc, "lease+fence");
  EXPECT_TRUE(r.check.safe);
  ASSERT_EQ(r.history.writes.size(), 2u);
  EXPECT_TRUE(r.history.writes[0].accepted);
  EXPECT_TRUE(r.history.writes[1].accepted);
}

TEST(Oracle, ALostUpdateWithWritesInEpochOrderIsUnsafe) {
  const RunOutput r = run("lost-update-in-epoch-order", "redis");
  EXPECT_EQ(r.check.count(kStaleWriteAccepted), 0u);
  EXPECT_EQ(r.check.count(kLostUpdate), 1u);
  EXPECT_EQ(r.check.lost.lost, 1u);
  EXPECT_FALSE(r.check.safe);
  EXPECT_TRUE(run("lost-update-in-epoch-order", "lease+fence").check.safe);
}

TEST(Oracle, DuplicatedPacketsAreJudgedCopyByCopy) {
  Scenario sc = load_scenario("kleppmann-gc-pause");
  sc.network.defaults.duplicate_ppm = 1'000'000;  // every message twice
  const RunOutput unfenced = run_scenario(sc, "redis");
  EXPECT_FALSE(unfenced.check.safe);
  std::uint32_t copies = 0;
  for (const auto& w : unfenced.history.writes) copies += w.copies;
  EXPECT_EQ(copies, 2 * unfenced.history.writes.size());
  const RunOutput fenced = run_scenario(sc, "lease+fence");
  EXPECT_TRUE(fenced.check.safe) << fenced.check.anomaly_counts.size();
}

TEST(Oracle, ATokenThatGoesBackAfterAFailoverIsATokenRegression) {
  const RunOutput r = run("redis-incr-token-failover", "redis+incr");
  EXPECT_EQ(r.check.count(kTokenRegression), 1u);
  EXPECT_FALSE(r.check.safe);
}

TEST(Oracle, ABackwardsFenceRefusingTheNewestHolderIsUnsafe) {
  Scenario sc = load_scenario("no-faults");
  sc.resource_variant = "lt-fence";
  const RunOutput r = run_scenario(sc, "lease+fence");
  EXPECT_GT(r.check.count(kFreshWriteRejected), 0u);
  EXPECT_FALSE(r.check.safe);
  sc.resource_variant.clear();
  EXPECT_TRUE(run_scenario(sc, "lease+fence").check.safe);
}

TEST(Oracle, AnAnomalyBeforeALimitIsAVerdictAndASafeRunCutShortIsNot) {
  Scenario sc = load_scenario("kleppmann-gc-pause");
  sc.max_time = 15'004ms;  // the stale write lands at 15.003 s; client1 releases after that
  const RunOutput cut = run_scenario(sc, "redis");
  EXPECT_TRUE(cut.run.limit_hit());
  EXPECT_FALSE(cut.check.safe);
  EXPECT_FALSE(cut.inconclusive());
  sc.max_time = 5s;
  const RunOutput early = run_scenario(sc, "redis");
  EXPECT_TRUE(early.check.safe);
  EXPECT_TRUE(early.inconclusive());
}

TEST(Oracle, AWritesSendTimeFollowsThePauseItsOwnNoteTriggered) {
  Scenario sc = load_scenario("kleppmann-gc-pause");
  sc.faults.front().fault.when.label = "write";
  const RunOutput r = run_scenario(sc, "redis");
  for (const auto& w : r.history.writes) {
    if (w.client != "client1") continue;
    EXPECT_GT(w.sent, 15s);
    EXPECT_LT(w.arrived - w.sent, 1s);
  }
}
