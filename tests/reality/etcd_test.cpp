// Real runs against a 3- or 5-member etcd cluster (lease, lease+fence) judged by the simulator's checker: the
// verdicts the catalog expects, the ground truth they rest on (the store's log, etcd's own watch events), and
// nothing left behind: no process, port or folder after a run, a failed start, or Ctrl-C.
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
#include "reality/etcd_server.hpp"
#include "reality/plan.hpp"
#include "reality/run.hpp"

namespace locksim::reality {
namespace {

using namespace locksim::reality::leftovers;

namespace fs = std::filesystem;

#define REQUIRE_ETCD()                                                             \
  do {                                                                             \
    if (const std::string why = etcd_missing(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

TEST(RealEtcd, GcPauseLetsTheStaleWriteThroughAsSimulated) {
  REQUIRE_ETCD();
  const Scenario sc = scaled(load_scenario("kleppmann-gc-pause"), 0.3);
  const RunOutput r = run_real(sc, "lease");
  EXPECT_TRUE(no_children());
  ASSERT_EQ(r.history.grants.size(), 2u);
  EXPECT_FALSE(r.check.safe);
  EXPECT_EQ(r.check.count(kStaleWriteAccepted), 1u);
  ASSERT_EQ(r.history.resource_log.size(), 2u);
  EXPECT_EQ(r.history.writes[r.history.resource_log[1].request].client, "client1");
  // Every grant is backed by etcd's own watch event for the key's creation, under the client's lease.
  EXPECT_EQ(r.check.unbacked_grants, 0u);
  ASSERT_EQ(r.history.service_sets.size(), 2u);
  EXPECT_EQ(r.history.service_sets[0].value, r.history.grants[0].value);
  // Tokens are create revisions: client2's key was created after client1's was deleted with its lease.
  ASSERT_TRUE(r.history.grants[0].token && r.history.grants[1].token);
  EXPECT_LT(*r.history.grants[0].token, *r.history.grants[1].token);
  // client2 got the lock only once etcd expired client1's lease (TTL 3 s from client1's grant).
  EXPECT_GE(r.history.grants[1].granted.count(), 3'000'000'000);
  EXPECT_EQ(run_scenario(sc, "lease").verdict(), r.verdict());
}

TEST(RealEtcd, FencedGcPauseRejectsTheStaleWriteAsSimulated) {
  REQUIRE_ETCD();
  const Scenario sc = scaled(load_scenario("kleppmann-gc-pause"), 0.3);
  const RunOutput r = run_real(sc, "lease+fence");
  EXPECT_TRUE(no_children());
  EXPECT_TRUE(r.check.safe) << r.check.violations.size();
  ASSERT_EQ(r.history.resource_log.size(), 2u);
  EXPECT_TRUE(r.history.resource_log[0].accepted);
  EXPECT_FALSE(r.history.resource_log[1].accepted);
  EXPECT_EQ(r.check.unbacked_grants, 0u);
  EXPECT_EQ(run_scenario(sc, "lease+fence").verdict(), r.verdict());
}

TEST(RealEtcd, KillingTheLeaderLosesNothingAsSimulated) {
  REQUIRE_ETCD();
  const Scenario sc = scaled(load_scenario("kill-the-leader"), 0.3);
  ASSERT_FALSE(not_reproducible(sc, "lease").has_value());
  const RunOutput r = run_real(sc, "lease");
  EXPECT_TRUE(no_children());
  EXPECT_TRUE(r.check.safe);
  EXPECT_EQ(r.check.unbacked_grants, 0u);
  // The member that led when client1 was granted the lock was SIGKILLed (it comes back 1.5 s later, if the
  // clients are not done by then).
  const auto crash = std::find_if(r.trace.begin(), r.trace.end(),
                                  [](const TraceEvent& e) { return e.kind == TraceKind::crash; });
  ASSERT_NE(crash, r.trace.end());
  EXPECT_EQ(r.name_of(crash->proc).rfind("raft", 0), 0u);
  const auto fault = std::find_if(r.trace.begin(), r.trace.end(),
                                  [](const TraceEvent& e) { return e.kind == TraceKind::fault; });
  ASSERT_NE(fault, r.trace.end());
  EXPECT_NE(fault->detail.find("leader=" + r.name_of(crash->proc)), std::string::npos) << fault->detail;
  EXPECT_EQ(run_scenario(sc, "lease").verdict(), r.verdict());
}

TEST(RealEtcd, ALateLockReplyIsGivenUpUnlessTheClientTrustsItAsSimulated) {
  REQUIRE_ETCD();
  Scenario sc = scaled(
      load_scenario(std::string(LOCKSIM_REALITY_SCENARIOS) + "/pause-in-flight-no-elapsed-check.toml"), 0.3);
  ASSERT_EQ(sc.config_for("lease").variant, "trust-reply");
  ASSERT_FALSE(not_reproducible(sc, "lease").has_value());
  // client1 stops right after its v3lock Lock request left; etcd answers at once, the answer waits in the
  // socket while the lease (3 s) runs out and client2 is granted. The variant keeps the late grant.
  const RunOutput late = run_real(sc, "lease");
  EXPECT_TRUE(no_children());
  EXPECT_FALSE(late.check.safe);
  EXPECT_EQ(late.check.count(kStaleWriteAccepted), 1u);
  EXPECT_EQ(late.check.unbacked_grants, 0u);
  EXPECT_EQ(run_scenario(sc, "lease").verdict(), late.verdict());
  ASSERT_EQ(late.history.grants.size(), 2u);
  const GrantRecord& g1 =
      late.history.grants[0].client == "client1" ? late.history.grants[0] : late.history.grants[1];
  EXPECT_LT(g1.believed_valid_until, g1.granted);  // believed until a moment before it heard

  // The algorithm without the variant compares the reply's arrival with its lease and gives it up.
  sc.per_protocol.at("lease").variant.clear();
  const RunOutput checked = run_real(sc, "lease");
  EXPECT_TRUE(no_children());
  EXPECT_TRUE(checked.check.safe);
  EXPECT_EQ(run_scenario(sc, "lease").verdict(), checked.verdict());
}

TEST(RealEtcdPlan, WholeSecondTtlsOnly) {
  // 10 s × 0.25 = 2.5 s: etcd's lease TTL is in whole seconds.
  const auto why = not_reproducible(scaled(load_scenario("kleppmann-gc-pause"), 0.25), "lease");
  ASSERT_TRUE(why.has_value());
  if (etcd_missing().empty()) {
    EXPECT_NE(why->find("whole-second"), std::string::npos) << *why;
    EXPECT_FALSE(not_reproducible(scaled(load_scenario("kleppmann-gc-pause"), 0.3), "lease").has_value());
  } else {
    EXPECT_NE(why->find("etcd"), std::string::npos) << *why;
  }
}

TEST(RealEtcdCleanup, AMissingEtcdLeavesNothing) {
  const std::string tmp = fresh_tmpdir("nostart");
  ASSERT_FALSE(tmp.empty());
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", tmp.c_str(), 1);  // no etcd there (Debian's is /usr/bin/etcd, not in /usr/sbin or /sbin)
  ::setenv("TMPDIR", tmp.c_str(), 1);
  std::string what;
  try {
    run_real(scaled(load_scenario("kleppmann-gc-pause"), 0.3), "lease");
  } catch (const StartError& e) {
    what = e.what();
  }
  ::setenv("PATH", old_path.c_str(), 1);
  ::unsetenv("TMPDIR");
  // The apt package to install: etcd-server, or libcurl4-openssl-dev when locksim was built without libcurl.
  EXPECT_TRUE(what.find("apt-get install etcd-server") != std::string::npos ||
              what.find("libcurl4-openssl-dev") != std::string::npos)
      << what;
  EXPECT_TRUE(no_children());
  EXPECT_TRUE(fs::is_empty(tmp));
  fs::remove_all(tmp);
}

TEST(RealEtcdCleanup, AMemberThatExitsAtStartUpLeavesNothing) {
  REQUIRE_ETCD();
  const std::string tmp = fresh_tmpdir("badstart");
  ASSERT_FALSE(tmp.empty());
  // An `etcd` that fails at once, first on $PATH; the real one would have run in the other members.
  const std::string bin = tmp + "/bin";
  fs::create_directory(bin);
  {
    std::ofstream(bin + "/etcd")
        << "#!/bin/sh\necho 'etcdmain: listen tcp: address already in use' >&2\nexit 1\n";
  }
  ::chmod((bin + "/etcd").c_str(), 0755);
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (bin + ":" + old_path).c_str(), 1);
  ::setenv("TMPDIR", tmp.c_str(), 1);
  std::string what;
  try {
    run_real(scaled(load_scenario("kleppmann-gc-pause"), 0.3), "lease");
  } catch (const StartError& e) {
    what = e.what();
  }
  ::setenv("PATH", old_path.c_str(), 1);
  ::unsetenv("TMPDIR");
  EXPECT_NE(what.find("etcd exited at start-up"), std::string::npos) << what;
  EXPECT_NE(what.find("address already in use"), std::string::npos) << what;  // its log's tail
  EXPECT_TRUE(no_children());
  EXPECT_EQ(processes_with_tmpdir(tmp), 0);
  fs::remove_all(bin);
  EXPECT_TRUE(fs::is_empty(tmp));
  fs::remove_all(tmp);
}

TEST(RealEtcdCleanup, AClusterLeavesNoProcessOrPort) {
  REQUIRE_ETCD();
  const std::string tmp = fresh_tmpdir("cluster");
  ASSERT_FALSE(tmp.empty());
  std::vector<std::uint16_t> ports;
  std::vector<pid_t> pids;
  {
    EtcdCluster c({"raft1", "raft2", "raft3"}, tmp, "lock");
    c.start();
    ports = c.all_ports();
    pids = c.pids();
    for (std::uint16_t p : ports) EXPECT_TRUE(port_open(p)) << p;
    EXPECT_FALSE(c.leader().empty());
    EXPECT_EQ(processes_with_tmpdir(tmp), 3);
  }
  EXPECT_TRUE(no_children());
  for (pid_t p : pids) EXPECT_NE(::kill(p, 0), 0) << p;
  for (std::uint16_t p : ports) EXPECT_FALSE(port_open(p)) << p;
  EXPECT_EQ(processes_with_tmpdir(tmp), 0);
  fs::remove_all(tmp);
}

TEST(RealEtcdCleanup, ARunLeavesNoProcessOrFolder) {
  REQUIRE_ETCD();
  const std::string tmp = fresh_tmpdir("run");
  ASSERT_FALSE(tmp.empty());
  ::setenv("TMPDIR", tmp.c_str(), 1);
  const RunOutput r = run_real(scaled(load_scenario("kill-the-leader"), 0.3), "lease+fence");
  ::unsetenv("TMPDIR");
  EXPECT_EQ(r.history.service_nodes.size(), 3u);
  EXPECT_TRUE(no_children());
  EXPECT_EQ(processes_with_tmpdir(tmp), 0);
  EXPECT_TRUE(fs::is_empty(tmp));
  fs::remove_all(tmp);
}

TEST(RealEtcdCleanup, CtrlCInTheMiddleOfARunKillsEverything) {
  REQUIRE_ETCD();
  // Three members up, client1 acquired and paused (SIGSTOP) for 7.5 s: the middle of the run. Processes:
  // locksim, 3 etcd, 2 clients.
  interrupt_mid_run("sigint", {"reality", "kleppmann-gc-pause", "-p", "lease", "--time-scale", "0.5"}, 6);
}

}  // namespace
}  // namespace locksim::reality
