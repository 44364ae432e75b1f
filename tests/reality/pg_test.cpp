// Real runs of the database lease (db-lease, db-lease+fence) against PostgreSQL, judged by the simulator's
// checker: the verdicts the catalog expects, the ground truth they rest on (the store's log or db1's
// resource_log, db1's lease_grants), and nothing left behind: no process, port or folder after a run, a
// failed start, or Ctrl-C. Skipped with the apt package to install when PostgreSQL 15 is absent.
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
#include "reality/pg_server.hpp"
#include "reality/plan.hpp"
#include "reality/run.hpp"

namespace locksim::reality {
namespace {

using namespace locksim::reality::leftovers;

namespace fs = std::filesystem;

#define REQUIRE_PG()                                                             \
  do {                                                                           \
    if (const std::string why = pg_missing(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

/// Waits (at most 3 s) until no process works under `dir`: a postmaster's backends leave just after it.
int settle(const std::string& dir) {
  for (int i = 0; i < 150 && processes_with_tmpdir(dir) > 0; ++i) ::usleep(20'000);
  return processes_with_tmpdir(dir);
}

TEST(RealPg, GcPauseLetsTheStaleWriteThroughAsSimulated) {
  REQUIRE_PG();
  const Scenario sc = scaled(load_scenario("kleppmann-gc-pause"), 0.3);
  ASSERT_FALSE(not_reproducible(sc, "db-lease").has_value());
  const RunOutput r = run_real(sc, "db-lease");
  EXPECT_TRUE(no_children());
  ASSERT_EQ(r.history.grants.size(), 2u);
  EXPECT_FALSE(r.check.safe);
  EXPECT_EQ(r.check.count(kStaleWriteAccepted), 1u);
  // The store is the resource, as in the simulated scenario: both writes accepted, client1's last.
  ASSERT_EQ(r.history.resource_log.size(), 2u);
  EXPECT_EQ(r.history.resource_log[1].resource, sc.resource_name);
  EXPECT_EQ(r.history.writes[r.history.resource_log[1].request].client, "client1");
  // Every grant is backed by a lease_grants row the database's trigger wrote in the granting transaction.
  EXPECT_EQ(r.check.unbacked_grants, 0u);
  ASSERT_EQ(r.history.service_sets.size(), 2u);
  EXPECT_EQ(r.history.service_sets[0].node, "db1");
  EXPECT_EQ(r.history.service_sets[0].value, r.history.grants[0].value);
  // row.Token++: 1, then 2.
  ASSERT_TRUE(r.history.grants[0].token && r.history.grants[1].token);
  EXPECT_EQ(*r.history.grants[0].token, 1u);
  EXPECT_EQ(*r.history.grants[1].token, 2u);
  // client2 got the lease only once it expired by the database's clock (TTL 3 s from client1's BEGIN).
  EXPECT_GE(r.history.grants[1].granted.count(), 3'000'000'000);
  EXPECT_EQ(run_scenario(sc, "db-lease").verdict(), r.verdict());
}

TEST(RealPg, FencedGcPauseRejectsTheStaleWriteAsSimulated) {
  REQUIRE_PG();
  const Scenario sc = scaled(load_scenario("kleppmann-gc-pause"), 0.3);
  const RunOutput r = run_real(sc, "db-lease+fence");
  EXPECT_TRUE(no_children());
  EXPECT_TRUE(r.check.safe) << r.check.violations.size();
  ASSERT_EQ(r.history.resource_log.size(), 2u);
  EXPECT_TRUE(r.history.resource_log[0].accepted);
  EXPECT_FALSE(r.history.resource_log[1].accepted);
  EXPECT_EQ(r.history.resource_log[1].reason, "token 1 < highest 2");
  EXPECT_EQ(r.check.unbacked_grants, 0u);
  EXPECT_EQ(run_scenario(sc, "db-lease+fence").verdict(), r.verdict());
}

// The real client runs the simulated client's own algorithm (protocols/dblease/lease_algorithm.hpp), its
// variants included: with app-counter each client counts its tokens itself, both hold token 1, and the fenced
// store lets the paused client's write through after the newer one, for real as in the simulation.
TEST(RealPg, AppCounterTokensRepeatForRealAsSimulated) {
  REQUIRE_PG();
  Scenario sc = scaled(load_scenario("kleppmann-gc-pause"), 0.3);
  ProtocolConfig cfg = sc.config_for("db-lease+fence");
  cfg.variant = "app-counter";
  sc.per_protocol["db-lease+fence"] = cfg;
  ASSERT_FALSE(not_reproducible(sc, "db-lease+fence").has_value());
  const RunOutput r = run_real(sc, "db-lease+fence");
  EXPECT_TRUE(no_children());
  ASSERT_EQ(r.history.grants.size(), 2u);
  ASSERT_TRUE(r.history.grants[0].token && r.history.grants[1].token);
  EXPECT_EQ(*r.history.grants[0].token, 1u);
  EXPECT_EQ(*r.history.grants[1].token, 1u);
  EXPECT_FALSE(r.check.safe);
  EXPECT_EQ(r.check.count(kStaleWriteAccepted), 1u);
  // The database's own records still carry its row tokens (1, 2): the grants are backed all the same.
  EXPECT_EQ(r.check.unbacked_grants, 0u);
  EXPECT_EQ(run_scenario(sc, "db-lease+fence").verdict(), r.verdict());
}

TEST(RealPg, SameDbWriteWithFenceIsTheDatabasesOwnLog) {
  REQUIRE_PG();
  const Scenario sc = scaled(load_scenario("db-lease-gc-pause-same-db"), 0.3);
  for (const char* p : {"db-lease", "db-lease+fence"}) {
    const RunOutput r = run_real(sc, p);
    EXPECT_TRUE(no_children());
    ASSERT_EQ(r.history.resource_log.size(), 2u) << p;
    // The log is db1's resource_log, under db1's name as the simulated database logs it.
    EXPECT_EQ(r.history.resource_log[0].resource, "db1") << p;
    EXPECT_TRUE(r.history.resource_log[0].accepted) << p;
    EXPECT_EQ(r.history.resource_log[1].accepted, std::string(p) == "db-lease") << p;
    EXPECT_EQ(r.check.unbacked_grants, 0u) << p;
    EXPECT_EQ(run_scenario(sc, p).verdict(), r.verdict()) << p;
  }
}

TEST(RealPgPlan, ClocksAndFailoverAreNotReproducible) {
  REQUIRE_PG();
  for (const char* name :
       {"db-lease-clock-skew", "db-lease-clock-skew-monotonic", "db-lease-replica-failover"}) {
    const auto why = not_reproducible(load_scenario(name), "db-lease+fence");
    ASSERT_TRUE(why.has_value()) << name;
    EXPECT_NE(why->find("not reproducible in reality"), std::string::npos) << *why;
  }
  EXPECT_FALSE(not_reproducible(load_scenario("kleppmann-fencing-tokens"), "db-lease+fence").has_value());
}

TEST(RealPgCleanup, MissingBinariesNameTheAptPackageAndLeaveNothing) {
  const std::string tmp = fresh_tmpdir("nobin");
  ASSERT_FALSE(tmp.empty());
  ::setenv("LOCKSIM_PG_BINDIR", tmp.c_str(), 1);  // no initdb there
  ::setenv("TMPDIR", tmp.c_str(), 1);
  std::string what;
  const auto why = not_reproducible(load_scenario("kleppmann-gc-pause"), "db-lease");
  try {
    run_real(scaled(load_scenario("kleppmann-gc-pause"), 0.3), "db-lease");
  } catch (const StartError& e) {
    what = e.what();
  }
  ::unsetenv("LOCKSIM_PG_BINDIR");
  ::unsetenv("TMPDIR");
  // The apt package to install: postgresql, or libpq-dev when locksim was built without libpq.
  EXPECT_TRUE(what.find("apt-get install postgresql") != std::string::npos ||
              what.find("libpq-dev") != std::string::npos)
      << what;
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, what);  // --all skips the cells with the same reason
  EXPECT_TRUE(no_children());
  EXPECT_TRUE(fs::is_empty(tmp));
  fs::remove_all(tmp);
}

TEST(RealPgCleanup, APostgresThatExitsAtStartUpLeavesNothing) {
  REQUIRE_PG();
  const std::string tmp = fresh_tmpdir("badstart");
  ASSERT_FALSE(tmp.empty());
  // An initdb that makes the data folder and a postgres that fails at once.
  const std::string bin = tmp + "/bin";
  fs::create_directory(bin);
  ::chmod(bin.c_str(), 0755);
  std::ofstream(bin + "/initdb") << "#!/bin/sh\nmkdir -p \"$2\"\n";
  std::ofstream(bin + "/postgres") << "#!/bin/sh\necho 'FATAL:  could not create lock file "
                                      "\"postmaster.pid\": No space left' >&2\nexit 1\n";
  ::chmod((bin + "/initdb").c_str(), 0755);
  ::chmod((bin + "/postgres").c_str(), 0755);
  ::setenv("LOCKSIM_PG_BINDIR", bin.c_str(), 1);
  ::setenv("TMPDIR", tmp.c_str(), 1);
  std::string what;
  try {
    run_real(scaled(load_scenario("kleppmann-gc-pause"), 0.3), "db-lease");
  } catch (const StartError& e) {
    what = e.what();
  }
  ::unsetenv("LOCKSIM_PG_BINDIR");
  ::unsetenv("TMPDIR");
  EXPECT_NE(what.find("postgres exited at start-up"), std::string::npos) << what;
  EXPECT_NE(what.find("could not create lock file"), std::string::npos) << what;  // its log's tail
  EXPECT_TRUE(no_children());
  EXPECT_EQ(processes_with_tmpdir(tmp), 0);
  fs::remove_all(bin);
  EXPECT_TRUE(fs::is_empty(tmp));
  fs::remove_all(tmp);
}

TEST(RealPgCleanup, AServerLeavesNoProcessOrPort) {
  REQUIRE_PG();
  const std::string tmp = fresh_tmpdir("server");
  ASSERT_FALSE(tmp.empty());
  std::uint16_t port = 0;
  pid_t pid = -1;
  {
    PgServer s("db1", tmp + "/db1");
    s.start();
    port = s.port();
    pid = s.pid();
    EXPECT_TRUE(port_open(port));
    EXPECT_GE(processes_with_tmpdir(tmp), 2);  // the postmaster and its background processes
    EXPECT_TRUE(s.grants().empty());
  }
  EXPECT_TRUE(no_children());
  EXPECT_NE(::kill(pid, 0), 0);
  EXPECT_FALSE(port_open(port));
  EXPECT_EQ(settle(tmp), 0);
  fs::remove_all(tmp);
}

TEST(RealPgCleanup, ARunLeavesNoProcessOrFolder) {
  REQUIRE_PG();
  const std::string tmp = fresh_tmpdir("run");
  ASSERT_FALSE(tmp.empty());
  ::setenv("TMPDIR", tmp.c_str(), 1);
  const RunOutput r = run_real(scaled(load_scenario("no-faults"), 0.3), "db-lease+fence");
  ::unsetenv("TMPDIR");
  EXPECT_EQ(r.history.service_nodes.size(), 1u);
  EXPECT_TRUE(r.check.safe);
  // Three clients competing for the row (serialization failures retried): one lease_grants row per grant.
  EXPECT_GE(r.history.grants.size(), 3u);
  EXPECT_EQ(r.history.service_sets.size(), r.history.grants.size());
  EXPECT_EQ(r.check.unbacked_grants, 0u);
  EXPECT_TRUE(no_children());
  EXPECT_EQ(settle(tmp), 0);
  EXPECT_TRUE(fs::is_empty(tmp));
  fs::remove_all(tmp);
}

TEST(RealPgCleanup, CtrlCInTheMiddleOfARunKillsEverything) {
  REQUIRE_PG();
  // PostgreSQL up, client1 acquired and paused (SIGSTOP) for 7.5 s: the middle of the run. Processes:
  // locksim, the postmaster and its processes, 2 clients.
  interrupt_mid_run("sigint", {"reality", "kleppmann-gc-pause", "-p", "db-lease", "--time-scale", "0.5"}, 6,
                    std::chrono::milliseconds(1500));
}

}  // namespace
}  // namespace locksim::reality
