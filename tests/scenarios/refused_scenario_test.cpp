// Connection refused end to end ([network] connection_refused): what each protocol's client does when a
// server's host answers for a crashed server, against the silence it waits out otherwise; the resource
// refusing a write; the setting round-trips through a replay file.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/replay.hpp"
#include "locksim/scenarios/runner.hpp"

using namespace locksim;

namespace {

RunOutput run_text(const std::string& text, const std::string& protocol) {
  const Scenario sc = load_scenario_text(text, "refused_test.toml");
  RunOptions ro;
  ro.keep_trace = true;
  return run_scenario(sc, protocol, ro);
}

std::vector<TraceEvent> notes(const RunOutput& r, const std::string& label) {
  std::vector<TraceEvent> out;
  for (const TraceEvent& e : r.trace)
    if (e.kind == TraceKind::note && e.label == label) out.push_back(e);
  return out;
}

std::size_t refusals(const RunOutput& r) {
  std::size_t n = 0;
  for (const TraceEvent& e : r.trace)
    if (e.kind == TraceKind::send && e.label == "conn-refused") ++n;
  return n;
}

/// One client acquiring once at `start`, writing once; `server` crashed at 0.5 s for good.
std::string crashed_server(const std::string& server, const std::string& start, bool refused,
                           const std::string& extra = {}) {
  return "[lock]\nttl = \"10s\"\n" + extra +
         "[network]\nconnection_refused = " + (refused ? "true" : "false") +
         "\n[[client]]\nname = \"client1\"\nstart = \"" + start +
         "\"\n[[fault]]\nkind = \"crash\"\ntarget = \"" + server + "\"\nat = \"500ms\"\n";
}

}  // namespace

TEST(RefusedScenario, RedlockCountsARefusingNodeAtOnceInsteadOfWaitingOutItsTimeout) {
  // Five masters, one of them down: the round needs 3 of 5 and ends when every node has answered. Silence
  // keeps it open for the node timeout (50 ms); a refusal closes it after one round trip.
  const std::string extra = "[protocol]\nnode_timeout = \"50ms\"\n";
  const RunOutput silent = run_text(crashed_server("redis1", "1s", false, extra), "redlock");
  const RunOutput refused = run_text(crashed_server("redis1", "1s", true, extra), "redlock");
  const auto a = notes(silent, "acquired"), b = notes(refused, "acquired");
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_GE(a[0].time, Time{1s} + 50ms);
  EXPECT_LT(b[0].time, Time{1s} + 10ms);
  EXPECT_EQ(refusals(silent), 0u);
  EXPECT_GE(refusals(refused), 1u);
  EXPECT_EQ(silent.verdict(), Verdict::safe);
  EXPECT_EQ(refused.verdict(), Verdict::safe);
}

TEST(RefusedScenario, ASingleRedisClientFailsFastAndRetries) {
  // The only node is down for good: each attempt fails at the refusal instead of at the node timeout, so the
  // client makes many more attempts before it gives up.
  const std::string extra = "[protocol]\nnode_timeout = \"200ms\"\n";
  const std::string client = "give_up_at = \"3s\"\nretry_delay = \"100ms\"\n";
  auto text = [&](bool on) {
    return crashed_server("redis1", "1s", on, extra) + "[[client]]\nname = \"client2\"\nstart = \"1s\"\n" +
           client;
  };
  const RunOutput silent = run_text(text(false), "redis");
  const RunOutput refused = run_text(text(true), "redis");
  EXPECT_TRUE(notes(silent, "acquired").empty());
  EXPECT_TRUE(notes(refused, "acquired").empty());
  EXPECT_GT(notes(refused, "acquire").size(), notes(silent, "acquire").size() + 4);
}

TEST(RefusedScenario, TheLeaseClientAsksTheNextMemberAtOnce) {
  // The lease client asks raft1 first; with raft1 down it waits out its RPC timeout (600 ms) in silence, or
  // moves on after one round trip when raft1's host refuses.
  const std::string extra = "[protocol]\nrpc_timeout = \"600ms\"\n";
  const RunOutput silent = run_text(crashed_server("raft1", "3s", false, extra), "lease");
  const RunOutput refused = run_text(crashed_server("raft1", "3s", true, extra), "lease");
  const auto a = notes(silent, "acquired"), b = notes(refused, "acquired");
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_GE(a[0].time, Time{3s} + 600ms);
  EXPECT_LT(b[0].time, Time{3s} + 100ms);
  EXPECT_GE(refusals(refused), 1u);
}

TEST(RefusedScenario, AWriteToAResourceThatIsDownIsRefused) {
  const std::string text = crashed_server("store", "1s", true);
  const RunOutput r = run_text(text, "redis");
  EXPECT_EQ(notes(r, "write-refused").size(), 1u);
  EXPECT_TRUE(notes(r, "write-timeout").empty());
  const RunOutput silent = run_text(crashed_server("store", "1s", false), "redis");
  EXPECT_TRUE(notes(silent, "write-refused").empty());
  EXPECT_EQ(notes(silent, "write-timeout").size(), 1u);
}

TEST(RefusedScenario, ReplaysFromItsFile) {
  const Scenario sc = load_scenario_text(crashed_server("redis1", "1s", true), "refused_test.toml");
  ASSERT_TRUE(sc.network.refuse_when_down);
  const RunOutput r = run_scenario(sc, "redlock");
  ReplayInfo info{"redlock", r.trace_hash, r.verdict(), "refused_scenario_test", ""};
  const std::string text = scenario_to_toml(sc, &info);
  EXPECT_NE(text.find("connection_refused = true"), std::string::npos);
  const ReplayFile f = load_replay_text(text, "refused-replay.toml");
  EXPECT_TRUE(f.scenario.network.refuse_when_down);
  const ReplayCheck c = replay(f);
  EXPECT_TRUE(c.hash_matches);
}
