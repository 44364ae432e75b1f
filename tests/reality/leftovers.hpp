// What a real run may leave behind, as the reality tests look for it: unreaped or registered children,
// processes that still carry the run's TMPDIR or work in a folder under it. Shared by the tests of every real
// server.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "reality/children.hpp"

namespace locksim::reality::leftovers {

/// No child process of this test process is left (running or unreaped), and none is registered.
inline bool no_children() {
  return ::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD && registered_children() == 0;
}

/// A fresh folder for TMPDIR: every folder a run makes goes under it, and every process it starts carries
/// TMPDIR=<it> in its environment. Crossable by other users (0711): PostgreSQL, run as the user postgres when
/// the tests run as root, works in a folder of its own under it. Empty when it cannot be made.
inline std::string fresh_tmpdir(const char* tag) {
  namespace fs = std::filesystem;
  std::string t = (fs::temp_directory_path() / (std::string("locksim-test-") + tag + "-XXXXXX")).string();
  if (::mkdtemp(t.data()) == nullptr) return {};
  ::chmod(t.c_str(), 0711);
  return t;
}

/// Processes (this one excluded) working in a folder under `dir` (a server works in its own: redis-server in
/// its --dir, an etcd member, postgres and its backends, a ZooKeeper member's JVM) or carrying TMPDIR=<dir>
/// in their environment (the clients, a child locksim), read from /proc. The working folder matters because
/// redis-server rewrites its environment's memory for its process title.
inline int processes_with_tmpdir(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string marker = "TMPDIR=" + dir;
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos || name == std::to_string(::getpid()))
      continue;
    std::error_code ec;
    const std::string cwd = fs::read_symlink(e.path() / "cwd", ec).string();
    if (!ec && cwd.rfind(dir + "/", 0) == 0) {
      ++n;
      continue;
    }
    std::ifstream in(e.path() / "environ", std::ios::binary);
    const std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::size_t at = 0;
    for (std::size_t z; (z = env.find('\0', at)) != std::string::npos; at = z + 1)
      if (env.compare(at, z - at, marker) == 0) {
        ++n;
        break;
      }
  }
  return n;
}

/// Ctrl-C in the middle of a run: `locksim ARGS` with TMPDIR=<a fresh folder>, waited for (at most 15 s)
/// until at least `processes` processes work under the folder (the servers and clients of the run), then
/// `grace` more, then SIGINT. locksim must exit 130 and, once orphans had 3 s to go (there should be none; a
/// postmaster's backends leave just after it), leave no process and nothing in the folder.
inline void interrupt_mid_run(const char* tag, const std::vector<std::string>& args, int processes,
                              std::chrono::milliseconds grace = std::chrono::milliseconds(300)) {
  namespace fs = std::filesystem;
  const std::string tmp = fresh_tmpdir(tag);
  ASSERT_FALSE(tmp.empty());
  std::vector<const char*> argv{LOCKSIM_BINARY};
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("TMPDIR", tmp.c_str(), 1);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::execv(LOCKSIM_BINARY, const_cast<char* const*>(argv.data()));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (processes_with_tmpdir(tmp) < processes && std::chrono::steady_clock::now() < deadline)
    ::usleep(20'000);
  EXPECT_GE(processes_with_tmpdir(tmp), processes);
  ::usleep(static_cast<useconds_t>(grace.count() * 1000));
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  for (int i = 0; i < 150 && processes_with_tmpdir(tmp) > 0; ++i) ::usleep(20'000);
  EXPECT_EQ(processes_with_tmpdir(tmp), 0);
  EXPECT_TRUE(fs::is_empty(tmp));
  fs::remove_all(tmp);
}

}  // namespace locksim::reality::leftovers
