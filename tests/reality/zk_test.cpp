// Real runs against a 3-member ZooKeeper ensemble (zookeeper, zookeeper+fence) judged by the simulator's
// checker: the verdicts the catalog expects, the ground truth they rest on (the store's log, the lowest lock
// nodes as the parent's own ZooKeeper session saw them), and nothing left behind: no JVM, port or folder
// after a run, a failed start, or Ctrl-C.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "leftovers.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "reality/children.hpp"
#include "reality/plan.hpp"
#include "reality/run.hpp"
#include "reality/zk_server.hpp"

namespace locksim::reality {
namespace {

using namespace locksim::reality::leftovers;

namespace fs = std::filesystem;

#define REQUIRE_ZOOKEEPER()                                                      \
  do {                                                                           \
    if (const std::string why = zk_missing(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

TEST(RealZooKeeper, GcPauseLetsTheStaleWriteThroughAsSimulated) {
  REQUIRE_ZOOKEEPER();
  const Scenario sc = scaled(load_scenario("kleppmann-gc-pause"), 0.3);
  const RunOutput r = run_real(sc, "zookeeper");
  EXPECT_TRUE(no_children());
  ASSERT_EQ(r.history.grants.size(), 2u);
  EXPECT_FALSE(r.check.safe);
  EXPECT_EQ(r.check.count(kStaleWriteAccepted), 1u);
  ASSERT_EQ(r.history.resource_log.size(), 2u);
  EXPECT_EQ(r.history.writes[r.history.resource_log[1].request].client, "client1");
  // Every grant is backed by the parent's own session seeing the client's node become the lowest child, and
  // the record's value is that node's czxid as ZooKeeper reported it.
  EXPECT_EQ(r.check.unbacked_grants, 0u);
  ASSERT_EQ(r.history.service_sets.size(), 2u);
  EXPECT_EQ(r.history.service_sets[0].value, r.history.grants[0].value);
  ASSERT_TRUE(r.history.grants[0].token && r.history.grants[1].token);
  EXPECT_LT(*r.history.grants[0].token, *r.history.grants[1].token);
  // client2 got the lock only once ZooKeeper expired client1's session: its 3 s timeout (tickTime 600 ms,
  // the scaled 2 s), counted from client1's last ping before its SIGSTOP.
  EXPECT_GE(r.history.grants[1].granted.count(), 3'000'000'000);
  EXPECT_EQ(run_scenario(sc, "zookeeper").verdict(), r.verdict());
}

TEST(RealZooKeeper, FencedGcPauseRejectsTheStaleWriteAsSimulated) {
  REQUIRE_ZOOKEEPER();
  const Scenario sc = scaled(load_scenario("kleppmann-gc-pause"), 0.3);
  const RunOutput r = run_real(sc, "zookeeper+fence");
  EXPECT_TRUE(no_children());
  EXPECT_TRUE(r.check.safe) << r.check.violations.size();
  ASSERT_EQ(r.history.resource_log.size(), 2u);
  EXPECT_TRUE(r.history.resource_log[0].accepted);
  EXPECT_FALSE(r.history.resource_log[1].accepted);  // client1's czxid < client2's
  EXPECT_EQ(r.check.unbacked_grants, 0u);
  EXPECT_EQ(run_scenario(sc, "zookeeper+fence").verdict(), r.verdict());
}

TEST(RealZooKeeper, LeaderFailoverTokensCarryTheNewEpoch) {
  REQUIRE_ZOOKEEPER();
  const Scenario sc = scaled(load_scenario("zookeeper-leader-failover"), 0.3);
  ASSERT_FALSE(not_reproducible(sc, "zookeeper+fence").has_value());
  const RunOutput r = run_real(sc, "zookeeper+fence");
  EXPECT_TRUE(no_children());
  EXPECT_TRUE(r.check.safe);
  EXPECT_EQ(r.check.unbacked_grants, 0u);
  const auto crash = std::find_if(r.trace.begin(), r.trace.end(),
                                  [](const TraceEvent& e) { return e.kind == TraceKind::crash; });
  ASSERT_NE(crash, r.trace.end());
  EXPECT_EQ(r.name_of(crash->proc).rfind("zk", 0), 0u);
  ASSERT_EQ(r.history.grants.size(), 2u);
  ASSERT_TRUE(r.history.grants[0].token && r.history.grants[1].token);
  // czxid = epoch << 32 | counter: client2's node was created under the new leader's epoch.
  EXPECT_GT(*r.history.grants[1].token >> 32, *r.history.grants[0].token >> 32);
}

TEST(RealZooKeeperPlan, TickTimeIsScaledWithTheScenario) {
  // tickTime bounds the session timeout ([2, 20] x tickTime): scaled with the TTL, so a 10 s TTL x 0.3 is a
  // 3 s session, not the 4 s floor of an unscaled 2 s tick.
  const Scenario sc = scaled(load_scenario("kleppmann-gc-pause"), 0.3);
  EXPECT_EQ(sc.config_for("zookeeper").extra.at("zookeeper.tick_time_ns"), "600000000");
}

TEST(RealZooKeeperCleanup, AMissingZooKeeperLeavesNothing) {
  const std::string tmp = fresh_tmpdir("nostart");
  ASSERT_FALSE(tmp.empty());
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", tmp.c_str(), 1);  // no java there (Debian's is /usr/bin/java, not in /usr/sbin or /sbin)
  ::setenv("TMPDIR", tmp.c_str(), 1);
  std::string what;
  try {
    run_real(scaled(load_scenario("kleppmann-gc-pause"), 0.3), "zookeeper");
  } catch (const StartError& e) {
    what = e.what();
  }
  ::setenv("PATH", old_path.c_str(), 1);
  ::unsetenv("TMPDIR");
  EXPECT_TRUE(what.find("apt-get install zookeeper") != std::string::npos ||
              what.find("libzookeeper-mt-dev") != std::string::npos)
      << what;
  EXPECT_TRUE(no_children());
  EXPECT_TRUE(fs::is_empty(tmp));
  fs::remove_all(tmp);
}

TEST(RealZooKeeperCleanup, AMemberThatExitsAtStartUpLeavesNothing) {
  REQUIRE_ZOOKEEPER();
  const std::string tmp = fresh_tmpdir("badstart");
  ASSERT_FALSE(tmp.empty());
  // A `java` that fails at once, first on $PATH.
  const std::string bin = tmp + "/bin";
  fs::create_directory(bin);
  {
    std::ofstream(bin + "/java")
        << "#!/bin/sh\necho 'java.net.BindException: Address already in use' >&2\nexit 1\n";
  }
  ::chmod((bin + "/java").c_str(), 0755);
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (bin + ":" + old_path).c_str(), 1);
  ::setenv("TMPDIR", tmp.c_str(), 1);
  std::string what;
  try {
    run_real(scaled(load_scenario("kleppmann-gc-pause"), 0.3), "zookeeper");
  } catch (const StartError& e) {
    what = e.what();
  }
  ::setenv("PATH", old_path.c_str(), 1);
  ::unsetenv("TMPDIR");
  EXPECT_NE(what.find("ZooKeeper exited at start-up"), std::string::npos) << what;
  EXPECT_NE(what.find("Address already in use"), std::string::npos) << what;  // its log's tail
  EXPECT_TRUE(no_children());
  EXPECT_EQ(processes_with_tmpdir(tmp), 0);
  fs::remove_all(bin);
  EXPECT_TRUE(fs::is_empty(tmp));
  fs::remove_all(tmp);
}

TEST(RealZooKeeperCleanup, AnEnsembleLeavesNoProcessOrPort) {
  REQUIRE_ZOOKEEPER();
  const std::string tmp = fresh_tmpdir("ensemble");
  ASSERT_FALSE(tmp.empty());
  std::vector<std::uint16_t> ports;
  std::vector<pid_t> pids;
  {
    ZkEnsemble z({"zk1", "zk2", "zk3"}, tmp, 600, "lock");
    z.start();
    z.start_recorder();
    ports = z.all_ports();
    pids = z.pids();
    for (std::uint16_t p : z.client_ports()) EXPECT_TRUE(port_open(p)) << p;
    EXPECT_FALSE(z.leader().empty());
    EXPECT_EQ(processes_with_tmpdir(tmp), 3);
  }
  EXPECT_TRUE(no_children());
  for (pid_t p : pids) EXPECT_NE(::kill(p, 0), 0) << p;
  for (std::uint16_t p : ports) EXPECT_FALSE(port_open(p)) << p;
  EXPECT_EQ(processes_with_tmpdir(tmp), 0);
  fs::remove_all(tmp);
}

TEST(RealZooKeeperCleanup, ARunLeavesNoProcessOrFolder) {
  REQUIRE_ZOOKEEPER();
  const std::string tmp = fresh_tmpdir("run");
  ASSERT_FALSE(tmp.empty());
  ::setenv("TMPDIR", tmp.c_str(), 1);
  const RunOutput r = run_real(scaled(load_scenario("no-faults"), 0.3), "zookeeper+fence");
  ::unsetenv("TMPDIR");
  EXPECT_EQ(r.history.service_nodes.size(), 3u);
  EXPECT_TRUE(no_children());
  EXPECT_EQ(processes_with_tmpdir(tmp), 0);
  EXPECT_TRUE(fs::is_empty(tmp));
  fs::remove_all(tmp);
}

TEST(RealZooKeeperCleanup, CtrlCInTheMiddleOfARunKillsEverything) {
  REQUIRE_ZOOKEEPER();
  // Three JVMs up, client1 acquired and paused (SIGSTOP) for 7.5 s: the middle of the run. Processes:
  // locksim, 3 JVMs, 2 clients.
  interrupt_mid_run("sigint", {"reality", "kleppmann-gc-pause", "-p", "zookeeper", "--time-scale", "0.5"}, 6,
                    std::chrono::milliseconds(500));
}

}  // namespace
}  // namespace locksim::reality
