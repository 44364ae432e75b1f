// Nothing is left behind: no process, no port, no folder, after a run, after a server that would not start,
// and after Ctrl-C in the middle of a run.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "leftovers.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "reality/children.hpp"
#include "reality/plan.hpp"
#include "reality/redis_server.hpp"
#include "reality/run.hpp"

namespace locksim::reality {
namespace {

using namespace locksim::reality::leftovers;

namespace fs = std::filesystem;

TEST(RealCleanup, AServerThatCannotStartLeavesNothing) {
  const std::string tmp = fresh_tmpdir("nostart");
  ASSERT_FALSE(tmp.empty());
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  const std::string old_tmp = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "";
  ::setenv("PATH", tmp.c_str(), 1);  // no redis-server there
  ::setenv("TMPDIR", tmp.c_str(), 1);
  // find_program also looks in /usr/sbin and /sbin; Debian's redis-server is in /usr/bin.
  const bool hidden = find_program("redis-server").empty();
  std::string what;
  try {
    run_real(scaled(load_scenario("kleppmann-gc-pause"), 0.3), "redlock");
  } catch (const StartError& e) {
    what = e.what();
  }
  ::setenv("PATH", old_path.c_str(), 1);
  if (old_tmp.empty())
    ::unsetenv("TMPDIR");
  else
    ::setenv("TMPDIR", old_tmp.c_str(), 1);
  if (hidden) {
    EXPECT_NE(what.find("apt-get install redis-server"), std::string::npos) << what;
  }
  EXPECT_TRUE(no_children());
  EXPECT_TRUE(fs::is_empty(tmp));  // the run's folder is gone
  fs::remove_all(tmp);
}

TEST(RealCleanup, ARunLeavesNoProcessPortOrFolder) {
  if (find_program("redis-server").empty())
    GTEST_SKIP() << "redis-server is not installed (apt-get install redis-server)";
  const std::string tmp = fresh_tmpdir("run");
  ASSERT_FALSE(tmp.empty());
  ::setenv("TMPDIR", tmp.c_str(), 1);
  std::vector<std::uint16_t> ports;
  {
    // A server of its own, to learn a port it used.
    RedisServer s({"redis1"}, tmp + "/probe");
    s.start();
    ports.push_back(s.port());
    EXPECT_TRUE(port_open(s.port()));
  }
  const RunOutput r = run_real(scaled(load_scenario("redis-restart-no-fsync"), 0.3), "redlock");
  ::unsetenv("TMPDIR");
  EXPECT_EQ(r.history.service_nodes.size(), 5u);
  EXPECT_TRUE(no_children());
  EXPECT_EQ(processes_with_tmpdir(tmp), 0);
  for (std::uint16_t p : ports) EXPECT_FALSE(port_open(p)) << p;
  fs::remove_all(tmp / fs::path("probe"));
  EXPECT_TRUE(fs::is_empty(tmp));
  fs::remove_all(tmp);
}

TEST(RealCleanup, CtrlCInTheMiddleOfARunKillsEverything) {
  if (find_program("redis-server").empty())
    GTEST_SKIP() << "redis-server is not installed (apt-get install redis-server)";
  // Five servers up, client1 acquired and paused (SIGSTOP) for 7.5 s: the middle of the run. Processes:
  // locksim, 5 redis-server, at least 1 client.
  interrupt_mid_run("sigint", {"reality", "kleppmann-gc-pause", "-p", "redlock", "--time-scale", "0.5"}, 7);
}

TEST(RealPorts, HandedOutPortsAreDistinctBindableAndNotOnesTheKernelPicksItself) {
  // A server binds its port a while after it was chosen; meanwhile proxies listen on kernel-picked ports
  // and clients connect out. Neither may land on a chosen port, nor may one port be chosen twice.
  unsigned lo = 32768, hi = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> lo >> hi;
  std::set<std::uint16_t> seen;
  for (int i = 0; i < 2'000; ++i) {
    const std::uint16_t p = free_loopback_port();
    EXPECT_TRUE(seen.insert(p).second) << "port " << p << " handed out twice";
    EXPECT_TRUE(p < lo || p > hi) << "port " << p << " is in the ephemeral range " << lo << ".." << hi;
  }
}

}  // namespace
}  // namespace locksim::reality
