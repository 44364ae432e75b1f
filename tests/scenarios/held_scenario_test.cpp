// [network] cut_messages end to end: the catalog's partition-heals-stale-write-lands, where a write held by a
// one-way partition lands after the heal, is unsafe without fencing only because the write is held (lost, it
// never arrives); the setting round-trips through a replay file.
#include <gtest/gtest.h>

#include <string>

#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/replay.hpp"
#include "locksim/scenarios/runner.hpp"

using namespace locksim;

namespace {

std::size_t count(const RunOutput& r, TraceKind k, const std::string& detail_prefix) {
  std::size_t n = 0;
  for (const TraceEvent& e : r.trace)
    if (e.kind == k && e.detail.starts_with(detail_prefix)) ++n;
  return n;
}

}  // namespace

TEST(HeldScenario, TheLoaderReadsCutMessagesAndLostIsTheDefault) {
  const std::string base = "[[client]]\nname = \"client1\"\n";
  EXPECT_EQ(load_scenario_text(base, "a.toml").network.cut_messages, CutMessages::lost);
  EXPECT_EQ(load_scenario_text("[network]\ncut_messages = \"lost\"\n" + base, "b.toml").network.cut_messages,
            CutMessages::lost);
  EXPECT_EQ(load_scenario_text("[network]\ncut_messages = \"held\"\n" + base, "c.toml").network.cut_messages,
            CutMessages::held);
}

TEST(HeldScenario, TheHeldWriteLandsAfterTheNextHoldersWriteWithoutFencingOnly) {
  Scenario sc = load_scenario("partition-heals-stale-write-lands");
  ASSERT_EQ(sc.network.cut_messages, CutMessages::held);
  RunOptions ro;
  ro.keep_trace = true;
  const RunOutput redis = run_scenario(sc, "redis", ro);
  EXPECT_EQ(redis.verdict(), Verdict::unsafe);
  EXPECT_EQ(count(redis, TraceKind::hold, "in flight when the link was cut"), 1u);
  EXPECT_EQ(count(redis, TraceKind::hold, "released by the heal"), 1u);
  EXPECT_EQ(run_scenario(sc, "lease+fence", ro).verdict(), Verdict::safe);
  // Lost in the cut, the write never arrives: nothing to see, whatever the protocol.
  sc.network.cut_messages = CutMessages::lost;
  const RunOutput lost = run_scenario(sc, "redis", ro);
  EXPECT_EQ(lost.verdict(), Verdict::safe);
  EXPECT_EQ(count(lost, TraceKind::hold, ""), 0u);
  EXPECT_EQ(count(lost, TraceKind::drop, "partition in flight"), 1u);
}

TEST(HeldScenario, ReplaysFromItsFile) {
  const Scenario sc = load_scenario("partition-heals-stale-write-lands");
  const RunOutput r = run_scenario(sc, "redis");
  ReplayInfo info{"redis", r.trace_hash, r.verdict(), "held_scenario_test", ""};
  const std::string text = scenario_to_toml(sc, &info);
  EXPECT_NE(text.find("cut_messages = \"held\""), std::string::npos);
  const ReplayFile f = load_replay_text(text, "held-replay.toml");
  EXPECT_EQ(f.scenario.network.cut_messages, CutMessages::held);
  EXPECT_TRUE(replay(f).hash_matches);
}
