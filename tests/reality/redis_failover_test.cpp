// A Redis master with an asynchronous replica and a sentinel, for real: redis1 replicates to replica1 through
// the proxy with the scenario's replication_delay, redis1 is SIGKILLed before the lock key reached replica1,
// the real sentinel promotes replica1 and client2 acquires there. Also: a replica's copy of its master's
// grant record is not a set on the replica, and nothing is left behind (a run, Ctrl-C, a sentinel that does
// not start). And the catalog's partition-the-leader: redis1 cut off from its replica, its sentinel and the
// clients through the proxy's links between them (split = "minority" resolved from the sentinel's master).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <regex>
#include <string>

#include "leftovers.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/runner.hpp"
#include "reality/children.hpp"
#include "reality/plan.hpp"
#include "reality/redis_link.hpp"
#include "reality/redis_server.hpp"
#include "reality/run.hpp"
#include "reality/sentinel.hpp"

namespace locksim::reality {
namespace {

using namespace locksim::reality::leftovers;
namespace fs = std::filesystem;

#define NEED_REDIS()                        \
  if (find_program("redis-server").empty()) \
  GTEST_SKIP() << "redis-server is not installed (apt-get install redis-server)"

const GrantRecord* grant_of(const History& h, const std::string& client) {
  for (const GrantRecord& g : h.grants)
    if (g.client == client) return &g;
  return nullptr;
}

TEST(RealFailover, ThePlanRunsAReplicaForRedisAndNotForRedlock) {
  const Scenario sc = load_scenario("redis-async-failover");
  EXPECT_FALSE(not_reproducible(sc, "redis").has_value());
  EXPECT_FALSE(not_reproducible(load_scenario("redis-incr-token-failover"), "redis+incr").has_value());
  Scenario r = sc;
  r.config.replica = true;
  const auto why = not_reproducible(r, "redlock");
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("no replica"), std::string::npos) << *why;
}

TEST(RealFailover, TheAsyncFailoverIsUnsafeAsSimulatedWithClient2GrantedByThePromotedReplica) {
  NEED_REDIS();
  const std::string tmp = fresh_tmpdir("failover");
  ASSERT_FALSE(tmp.empty());
  ::setenv("TMPDIR", tmp.c_str(), 1);
  const Scenario sc = load_scenario("redis-async-failover");
  const RunOutput real = run_real(sc, "redis");
  ::unsetenv("TMPDIR");
  const RunOutput sim = run_scenario(sc, "redis");
  EXPECT_EQ(real.verdict(), sim.verdict());
  EXPECT_FALSE(real.check.safe);
  const History& h = real.history;
  const GrantRecord* g1 = grant_of(h, "client1");
  const GrantRecord* g2 = grant_of(h, "client2");
  ASSERT_NE(g1, nullptr);
  ASSERT_NE(g2, nullptr);
  // client1's key on redis1 only (its copy never reached replica1); client2's on replica1, once, after the
  // crash at 500 ms and after the sentinel promoted it.
  int on_redis1 = 0, on_replica1 = 0;
  for (const auto& s : h.service_sets) {
    if (s.value == g1->value) {
      EXPECT_EQ(s.node, "redis1");
      ++on_redis1;
    }
    if (s.value == g2->value) {
      EXPECT_EQ(s.node, "replica1");
      EXPECT_GT(s.time, 500ms);
      ++on_replica1;
    }
  }
  EXPECT_EQ(on_redis1, 1);
  EXPECT_EQ(on_replica1, 1);
  const auto promoted = std::find_if(real.trace.begin(), real.trace.end(),
                                     [](const TraceEvent& e) { return e.label == "+promoted-slave"; });
  ASSERT_NE(promoted, real.trace.end());
  EXPECT_LE(promoted->time, g2->granted + 100ms);
  EXPECT_TRUE(no_children());
  EXPECT_EQ(processes_with_tmpdir(tmp), 0);
  EXPECT_TRUE(fs::is_empty(tmp));
  fs::remove_all(tmp);
}

std::string note_of(const RunOutput& r, const std::string& label) {
  for (const TraceEvent& e : r.trace)
    if (e.label == label) return e.detail;
  return {};
}

std::string partition_of(const RunOutput& r) {
  for (const TraceEvent& e : r.trace)
    if (e.kind == TraceKind::network && e.label == "partition") return e.detail;
  return {};
}

/// Connections the proxy-member-links note counts on link `link` ("sentinel1->redis1"); -1: no such link.
int connections_on(const RunOutput& r, const std::string& link) {
  const std::string d = note_of(r, "proxy-member-links");
  std::smatch m;
  if (!std::regex_search(d, m, std::regex(link + " [0-9]+/[0-9]+ bytes in ([0-9]+) connection"))) return -1;
  return std::stoi(m[1]);
}

TEST(RealFailover, PartitionTheLeaderCutsTheMasterOffItsSentinelAndReplicaAsSimulated) {
  NEED_REDIS();
  const Scenario sc = load_scenario("partition-the-leader");
  ASSERT_FALSE(not_reproducible(sc, "redis").has_value()) << *not_reproducible(sc, "redis");
  ASSERT_TRUE(needs_proxy(sc, "redis"));
  const RunOutput real = run_real(sc, "redis");
  const RunOutput sim = run_scenario(sc, "redis");
  EXPECT_TRUE(no_children());
  EXPECT_EQ(real.verdict(), sim.verdict());
  EXPECT_FALSE(real.check.safe);
  // The split resolved from the master the sentinel named when client1's grant landed, by the simulator's
  // rule over redis1, replica1, sentinel1: redis1 alone, named as the simulator names it.
  EXPECT_EQ(note_of(real, "partition-sides"), "split=minority leader=redis1");
  EXPECT_EQ(partition_of(real), partition_of(sim));
  EXPECT_EQ(partition_of(real), "#1 redis1 | replica1,sentinel1,store,client1,client2");
  const std::string cuts = note_of(real, "proxy-cut");
  for (const char* c : {"redis1<->replica1", "redis1<->sentinel1", "redis1<->client1", "redis1<->client2"})
    EXPECT_NE(cuts.find(c), std::string::npos) << c << " not in " << cuts;
  EXPECT_EQ(cuts.find("replica1<->sentinel1"), std::string::npos) << cuts;
  // The sentinel and the replica reached redis1 through their own links (none left on the entry links).
  EXPECT_GT(connections_on(real, "replica1->redis1"), 0) << note_of(real, "proxy-member-links");
  EXPECT_GT(connections_on(real, "sentinel1->redis1"), 0) << note_of(real, "proxy-member-links");
  EXPECT_GT(connections_on(real, "sentinel1->replica1"), 0) << note_of(real, "proxy-member-links");
  EXPECT_EQ(note_of(real, "proxy-unattributed"), "");
  // The sentinel promoted replica1 during the cut, and client2 was granted there; client1's key stayed on
  // redis1 (the cut held its copy).
  const History& h = real.history;
  const GrantRecord* g1 = grant_of(h, "client1");
  const GrantRecord* g2 = grant_of(h, "client2");
  ASSERT_NE(g1, nullptr);
  ASSERT_NE(g2, nullptr);
  const auto promoted = std::find_if(real.trace.begin(), real.trace.end(),
                                     [](const TraceEvent& e) { return e.label == "+promoted-slave"; });
  ASSERT_NE(promoted, real.trace.end());
  EXPECT_GT(promoted->time, g1->granted);
  EXPECT_LE(promoted->time, g2->granted + 100ms);
  int on_replica1 = 0;
  for (const auto& s : h.service_sets) {
    if (s.value == g1->value) {
      EXPECT_EQ(s.node, "redis1");
    }
    if (s.value == g2->value) {
      EXPECT_EQ(s.node, "replica1");
      ++on_replica1;
    }
  }
  EXPECT_EQ(on_replica1, 1);
  EXPECT_EQ(note_of(real, "leader-at-end"), "replica1");
}

TEST(RealFailover, TheIncrTokenRepeatsAfterTheFailover) {
  NEED_REDIS();
  const Scenario sc = load_scenario("redis-incr-token-failover");
  const RunOutput real = run_real(sc, "redis+incr");
  const RunOutput sim = run_scenario(sc, "redis+incr");
  EXPECT_EQ(real.verdict(), sim.verdict());
  const GrantRecord* g1 = grant_of(real.history, "client1");
  const GrantRecord* g2 = grant_of(real.history, "client2");
  ASSERT_NE(g1, nullptr);
  ASSERT_NE(g2, nullptr);
  ASSERT_TRUE(g1->token && g2->token);
  EXPECT_EQ(*g1->token, *g2->token);  // the promoted replica never saw client1's INCR
  EXPECT_TRUE(no_children());
}

TEST(RealFailover, AReplicasCopyOfItsMastersRecordIsNotASetOnTheReplica) {
  NEED_REDIS();
  TempDir dir("locksim-test-copy-");
  {
    RedisServer master({"redis1"}, dir.path() + "/redis1");
    master.start();
    RedisOptions ro{"replica1"};
    ro.replicaof = master.port();
    RedisServer replica(ro, dir.path() + "/replica1");
    replica.start();
    RecordListener lm("redis1", master.port()), lr("replica1", replica.port());
    lm.wait_subscribed();
    lr.wait_subscribed();
    for (int i = 0; i < 500 && replica.info("replication", "master_link_status") != "up"; ++i)
      ::usleep(10'000);
    ASSERT_EQ(replica.info("replication", "master_link_status"), "up");
    const auto note = [](const std::string&, const std::string&) {};
    const redis::Command set{.op = redis::Op::set_nx, .key = "lock", .value = "v1", .ttl = 10s};
    // The acquire script on the master: its PUBLISH is replicated, and replica1's subscribers get the copy.
    RedisLink to_master({master.port()}, {}, 1s, mono_ns(), 1, note);
    const auto a = to_master.request(set, "acquire-sent");
    ASSERT_TRUE(a && a->ok);
    for (int i = 0; i < 200 && (lr.copies() == 0 || lm.records().empty()); ++i) ::usleep(10'000);
    EXPECT_EQ(lr.copies(), 1u);
    EXPECT_TRUE(lr.records().empty());
    ASSERT_EQ(lm.records().size(), 1u);
    EXPECT_EQ(lm.records()[0].node, "redis1");
    EXPECT_EQ(lm.records()[0].value, "v1");
    // Promoted, replica1's own set is its own record.
    replica.command({"REPLICAOF", "NO", "ONE"});
    RedisLink to_replica({replica.port()}, {}, 1s, mono_ns(), 2, note);
    const auto b = to_replica.request({.op = redis::Op::set_nx, .key = "lock2", .value = "v2", .ttl = 10s},
                                      "acquire-sent");
    ASSERT_TRUE(b && b->ok);
    for (int i = 0; i < 200 && lr.records().empty(); ++i) ::usleep(10'000);
    ASSERT_EQ(lr.records().size(), 1u);
    EXPECT_EQ(lr.records()[0].node, "replica1");
    EXPECT_EQ(lr.records()[0].value, "v2");
  }
  EXPECT_TRUE(no_children());
}

TEST(RealFailover, ASentinelThatNeverSeesItsReplicaLeavesNothing) {
  NEED_REDIS();
  const std::string tmp = fresh_tmpdir("nosentinel");
  ASSERT_FALSE(tmp.empty());
  std::string what;
  {
    // A master with no replica: the sentinel never lists one.
    RedisServer master({"redis1"}, tmp + "/redis1");
    master.start();
    RedisSentinel s(tmp + "/sentinel1", master.port(), 1000, 2000);
    try {
      s.start(1, 1000);
    } catch (const StartError& e) {
      what = e.what();
    }
    EXPECT_EQ(s.pid(), -1);
  }
  EXPECT_NE(what.find("did not list 1 replica"), std::string::npos) << what;
  EXPECT_TRUE(no_children());
  EXPECT_EQ(processes_with_tmpdir(tmp), 0);
  fs::remove_all(tmp);
}

TEST(RealFailover, CtrlCWithAReplicaAndASentinelKillsEverything) {
  NEED_REDIS();
  // Processes: locksim, redis1, replica1, sentinel1 and the clients: the run has begun.
  interrupt_mid_run("sigint-failover", {"reality", "redis-async-failover", "-p", "redis"}, 6);
}

}  // namespace
}  // namespace locksim::reality
