// What a real run may leave behind, as the reality tests look for it: unreaped or registered children,
// processes that still carry the run's TMPDIR or work in a folder under it. Shared by the tests of every real
// server.
#pragma once

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

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

}  // namespace locksim::reality::leftovers
