// Pauses of what the clients talk to, run for real: a lock server's SIGSTOP (redis1; an etcd and a ZooKeeper
// member) and a stall of the store, whose waiting requests are taken in arrival order. Each judged against
// the simulated run of the same scenario.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "leftovers.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "reality/children.hpp"
#include "reality/etcd_server.hpp"
#include "reality/plan.hpp"
#include "reality/run.hpp"
#include "reality/zk_server.hpp"

namespace locksim::reality {
namespace {

using namespace locksim::reality::leftovers;

const std::string kDir = LOCKSIM_REALITY_SCENARIOS;

bool traced(const RunOutput& r, TraceKind kind, const std::string& proc, const std::string& detail) {
  return std::any_of(r.trace.begin(), r.trace.end(), [&](const TraceEvent& e) {
    return e.kind == kind && r.name_of(e.proc) == proc && e.detail.find(detail) != std::string::npos;
  });
}

TEST(RealServerPause, AStoppedRedisAnswersNothingUntilItsSigcontAsSimulated) {
  if (find_program("redis-server").empty()) GTEST_SKIP() << "redis-server is not installed";
  const Scenario sc = scaled(load_scenario(kDir + "/server-pause-past-ttl.toml"), 0.3);
  ASSERT_FALSE(not_reproducible(sc, "redis").has_value()) << *not_reproducible(sc, "redis");
  const RunOutput r = run_real(sc, "redis");
  const RunOutput sim = run_scenario(sc, "redis");
  EXPECT_TRUE(no_children());
  EXPECT_EQ(r.verdict(), sim.verdict());
  EXPECT_TRUE(r.check.safe);
  EXPECT_TRUE(traced(r, TraceKind::pause, "redis1", "SIGSTOP for 3.600 s"));
  EXPECT_TRUE(traced(r, TraceKind::resume, "redis1", "SIGCONT"));
  // redis1 stops at 0.3 s and resumes at 3.9 s: client2's SETs wait in its socket meanwhile and none is
  // answered in time; client2 is granted only after the resume, in both worlds.
  ASSERT_EQ(r.history.grants.size(), 2u);
  ASSERT_EQ(sim.history.grants.size(), 2u);
  EXPECT_EQ(r.history.grants[1].client, "client2");
  EXPECT_GE(r.history.grants[1].granted.count(), 3'890'000'000);
  EXPECT_GE(sim.history.grants[1].granted.count(), 3'890'000'000);
}

TEST(RealServerPause, AStoppedMemberLeavesTheOthersServingAsSimulated) {
  for (const std::string protocol : {"lease", "zookeeper"}) {
    const std::string why = protocol == "lease" ? etcd_missing() : zk_missing();
    if (!why.empty()) {
      std::cout << "skipped " << protocol << ": " << why << "\n";
      continue;
    }
    const Scenario sc = scaled(load_scenario(kDir + "/server-pause-past-ttl.toml"), 0.3);
    ASSERT_FALSE(not_reproducible(sc, protocol).has_value()) << *not_reproducible(sc, protocol);
    const RunOutput r = run_real(sc, protocol);
    const RunOutput sim = run_scenario(sc, protocol);
    EXPECT_TRUE(no_children()) << protocol;
    EXPECT_EQ(r.verdict(), sim.verdict()) << protocol;
    EXPECT_TRUE(r.check.safe) << protocol;
    const std::string member = protocol == "lease" ? "raft1" : "zk1";
    EXPECT_TRUE(traced(r, TraceKind::pause, member, "SIGSTOP for 3.600 s")) << protocol;
    // Every grant is backed by the service's own record, and client2 is granted in both worlds.
    EXPECT_EQ(r.check.unbacked_grants, 0u) << protocol;
    ASSERT_EQ(r.history.grants.size(), 2u) << protocol;
    EXPECT_EQ(r.history.grants[1].client, "client2") << protocol;
    EXPECT_EQ(sim.history.grants.size(), 2u) << protocol;
  }
}

TEST(RealServerPause, AStalledStoreTakesItsQueueInArrivalOrderAsSimulated) {
  if (find_program("redis-server").empty()) GTEST_SKIP() << "redis-server is not installed";
  const Scenario sc = scaled(load_scenario(kDir + "/store-pause-queue-order.toml"), 0.3);
  for (const std::string protocol : {"redis", "redis+incr"}) {
    ASSERT_FALSE(not_reproducible(sc, protocol).has_value()) << *not_reproducible(sc, protocol);
    const RunOutput r = run_real(sc, protocol);
    const RunOutput sim = run_scenario(sc, protocol);
    EXPECT_TRUE(no_children()) << protocol;
    EXPECT_EQ(r.verdict(), sim.verdict()) << protocol;
    EXPECT_TRUE(traced(r, TraceKind::pause, "store", "stalled for 6.000 s")) << protocol;
    // Both writes waited in the stalled store and were taken at its resume (6.3 s), client2's (it arrived
    // first) before client1's, whose link held it 4 s: the older holder's write last.
    ASSERT_EQ(r.history.resource_log.size(), 2u) << protocol;
    const auto& first = r.history.resource_log[0];
    const auto& second = r.history.resource_log[1];
    EXPECT_EQ(r.history.writes[first.request].client, "client2") << protocol;
    EXPECT_EQ(r.history.writes[second.request].client, "client1") << protocol;
    EXPECT_GE(first.time.count(), 6'290'000'000) << protocol;
    EXPECT_LT(second.time.count() - first.time.count(), 50'000'000) << protocol;  // the same instant
    if (protocol == "redis") {
      EXPECT_FALSE(r.check.safe);
      EXPECT_EQ(r.check.count(kStaleWriteAccepted), 1u);
    } else {
      EXPECT_TRUE(r.check.safe);
      EXPECT_FALSE(second.accepted);  // fenced: token 1 < highest 2
    }
  }
}

TEST(RealityPlan, AStoreIsPausedForRealButNotCrashed) {
  const Scenario sc = load_scenario(kDir + "/store-pause-queue-order.toml");
  EXPECT_FALSE(not_reproducible(sc, "redis").has_value());
  Scenario crash = sc;
  crash.faults[0].fault.kind = Fault::Kind::crash;
  const auto why = not_reproducible(crash, "redis");
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("of the store is not run for real"), std::string::npos) << *why;
}

}  // namespace
}  // namespace locksim::reality
