// The proxy's links between servers: etcd's members (each accepted peer connection attributed to the member
// process that dialed it) and ZooKeeper's (a zoo.cfg per member routing every other member through a link of
// the ordered pair). Real runs of tests/reality/scenarios/partition-the-leader-3.toml (split = "minority",
// resolved from the real leader when it fires) and one-way-cut-between-members.toml, checked against the
// simulated run of the same scaled scenario: the verdict, and real facts (the leader resolved and cut off on
// its member links, bytes carried on the member links, who leads at the heal, nothing left behind).
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "leftovers.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/runner.hpp"
#include "reality/etcd_server.hpp"
#include "reality/plan.hpp"
#include "reality/run.hpp"
#include "reality/zk_server.hpp"

namespace locksim::reality {
namespace {

using leftovers::no_children;

const std::string kDir = LOCKSIM_REALITY_SCENARIOS;

std::string note(const RunOutput& r, const std::string& label) {
  for (const TraceEvent& e : r.trace)
    if (e.label == label) return e.detail;
  return {};
}

std::string partition_name(const RunOutput& r) {
  for (const TraceEvent& e : r.trace)
    if (e.kind == TraceKind::network && e.label == "partition") return e.detail;
  return {};
}

/// Bytes each member link forwarded (both ways), from the proxy-member-links note; -1: no such link.
std::uint64_t member_bytes(const RunOutput& r) {
  const std::string d = note(r, "proxy-member-links");
  std::uint64_t n = 0;
  const std::regex re("([0-9]+)/([0-9]+) bytes");
  for (std::sregex_iterator it(d.begin(), d.end(), re), end; it != end; ++it)
    n += std::stoull((*it)[1]) + std::stoull((*it)[2]);
  return n;
}

bool skip(const std::string& protocol, std::string& why) {
  why = is_etcd(protocol) ? etcd_missing() : zk_missing();
  return !why.empty();
}

TEST(RealMemberLinks, PartitionTheLeaderCutsTheRealLeaderOffItsMembersAsSimulated) {
  for (const std::string protocol : {"lease", "zookeeper"}) {
    std::string why;
    if (skip(protocol, why)) {
      std::cout << "skipped " << protocol << ": " << why << "\n";
      continue;
    }
    const Scenario sc = scaled(load_scenario(kDir + "/partition-the-leader-3.toml"), 0.3);
    ASSERT_FALSE(not_reproducible(sc, protocol).has_value()) << *not_reproducible(sc, protocol);
    ASSERT_TRUE(needs_proxy(sc, protocol));
    const RunOutput r = run_real(sc, protocol);
    const RunOutput sim = run_scenario(sc, protocol);
    EXPECT_TRUE(no_children()) << protocol;
    EXPECT_EQ(r.verdict(), sim.verdict()) << protocol;
    EXPECT_TRUE(r.check.safe) << protocol;
    // The split resolved from the real leader when client1's grant landed: the leader alone against every
    // other process, named as the simulator names it ("#1 zk3 | zk1,zk2,store,client1,client2").
    const std::string sides = note(r, "partition-sides");
    const std::smatch m = [&] {
      std::smatch out;
      std::regex_match(sides, out, std::regex("split=minority leader=((raft|zk)[0-9])"));
      return out;
    }();
    ASSERT_EQ(m.size(), 3u) << protocol << ": " << sides;
    const std::string leader = m[1];
    const std::string name = partition_name(r);
    EXPECT_EQ(name.rfind("#1 " + leader + " | ", 0), 0u) << name;
    const std::string sim_name = partition_name(sim);
    EXPECT_EQ(sim_name.substr(0, 3), "#1 ");
    EXPECT_NE(sim_name.find(" | "), std::string::npos) << sim_name;
    for (const char* p : {"store", "client1", "client2"}) EXPECT_NE(name.find(p), std::string::npos) << name;
    // Cut on the leader's member links (both ways) and its client links.
    const std::string cuts = note(r, "proxy-cut");
    const std::string other = leader.back() == '1' ? leader.substr(0, leader.size() - 1) + "2"
                                                   : leader.substr(0, leader.size() - 1) + "1";
    EXPECT_NE(cuts.find(leader + "<->" + other), std::string::npos) << cuts;
    EXPECT_NE(cuts.find(leader + "<->client1"), std::string::npos) << cuts;
    // The members talked through the proxy: their links carried bytes.
    EXPECT_GT(member_bytes(r), 1000u) << note(r, "proxy-member-links");
    EXPECT_EQ(note(r, "proxy-unattributed"), "") << protocol;
    if (is_etcd(protocol)) {
      // etcd's own election (1 s timeout, not scaled) ran on the majority side during the cut: another
      // member leads (the newest term's) at the heal or when the run ends, as the simulated majority elects
      // one. Either moment may fall in an election still going on, not both.
      const std::string at_heal = note(r, "leader-at-heal"), at_end = note(r, "leader-at-end");
      EXPECT_TRUE(!at_heal.empty() || !at_end.empty()) << "no leader at the heal nor at the end";
      for (const std::string& now : {at_heal, at_end})
        EXPECT_NE(now, leader) << "the cut-off leader still leads";
    }
    // client2 got the lock after client1's release, in both worlds.
    ASSERT_EQ(r.history.grants.size(), 2u) << protocol;
    EXPECT_EQ(r.history.grants[1].client, "client2");
    EXPECT_GE(r.history.grants[1].granted, r.history.grants[0].belief_end);
  }
}

TEST(RealMemberLinks, AOneWayCutBetweenMembersHoldsOnlyThatWayAsSimulated) {
  for (const std::string protocol : {"lease", "zookeeper"}) {
    std::string why;
    if (skip(protocol, why)) {
      std::cout << "skipped " << protocol << ": " << why << "\n";
      continue;
    }
    const Scenario sc = scaled(load_scenario(kDir + "/one-way-cut-between-members.toml"), 0.3);
    ASSERT_FALSE(not_reproducible(sc, protocol).has_value()) << *not_reproducible(sc, protocol);
    const RunOutput r = run_real(sc, protocol);
    const RunOutput sim = run_scenario(sc, protocol);
    EXPECT_TRUE(no_children()) << protocol;
    EXPECT_EQ(r.verdict(), sim.verdict()) << protocol;
    EXPECT_TRUE(r.check.safe) << protocol;
    const std::string m1 = is_etcd(protocol) ? "raft1" : "zk1";
    const std::string m2 = is_etcd(protocol) ? "raft2" : "zk2";
    const std::string m3 = is_etcd(protocol) ? "raft3" : "zk3";
    EXPECT_EQ(partition_name(r), "#1 " + m1 + " -> " + m2 + "," + m3);
    EXPECT_EQ(partition_name(sim), partition_name(r));
    const std::string cuts = note(r, "proxy-cut");
    EXPECT_NE(cuts.find(m1 + "->" + m2), std::string::npos) << cuts;
    EXPECT_NE(cuts.find(m1 + "->" + m3), std::string::npos) << cuts;
    EXPECT_EQ(cuts.find(m2 + "->"), std::string::npos) << cuts;  // one way only
    EXPECT_EQ(cuts.find("client"), std::string::npos) << cuts;
    EXPECT_GT(member_bytes(r), 1000u) << note(r, "proxy-member-links");
    EXPECT_FALSE(note(r, "leader-at-end").empty()) << protocol;
    ASSERT_EQ(r.history.grants.size(), 2u) << protocol;
  }
}

TEST(RealityPlan, PartitionsBetweenMembersAndLeaderSplitsRunForReal) {
  const Scenario pl = load_scenario(kDir + "/partition-the-leader-3.toml");
  for (const std::string protocol : {"lease", "zookeeper"}) {
    std::string why;
    if (skip(protocol, why)) continue;
    EXPECT_FALSE(not_reproducible(pl, protocol).has_value()) << protocol;
    EXPECT_TRUE(needs_proxy(pl, protocol)) << protocol;
  }
  // A Redis without a replica has no member links: the split is refused with its reason, not dropped.
  const auto redis = not_reproducible(pl, "redis");
  ASSERT_TRUE(redis.has_value());
  EXPECT_NE(redis->find("a split (sides from the leader) is not run for real with redis"), std::string::npos)
      << *redis;
}

}  // namespace
}  // namespace locksim::reality
