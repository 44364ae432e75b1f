#pragma once
/// The OS processes and folders a reality run owns, and how they are given back: every child (a
/// redis-server, a client) is registered here the moment it is forked, every temporary folder the moment it
/// is made, so that the end of a run, an exception and Ctrl-C (SIGINT, SIGTERM) all leave nothing behind.
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace locksim::reality {

/// A server that could not be started (the message says why: a missing package, its log's last lines).
struct StartError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Thrown by waits when SIGINT or SIGTERM arrived: the children are already killed.
struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};

/// Installs the SIGINT/SIGTERM handler: it SIGKILLs every registered child at once (async-signal-safe) and
/// sets the flag interrupted() reads; the run then unwinds and removes its folders. Also makes this process
/// the subreaper of its descendants (reap_adopted).
void install_signal_handlers();
bool interrupted();
/// Throws Interrupted when interrupted().
void check_interrupted();

/// In a freshly forked child: its own process group (Ctrl-C reaches only the parent, which kills it),
/// default signal dispositions, and an empty child table (it owns nobody).
void become_child();

/// Registers / forgets a child pid (kept in a fixed table the signal handler can read).
void register_child(pid_t pid);
void forget_child(pid_t pid);
/// How many children are registered now (tests: 0 after a run).
int registered_children();

/// How spawn_server starts a server.
struct SpawnOptions {
  std::string dir;  ///< its working folder (empty: this process's)
  std::string log;  ///< its stdout and stderr, appended (empty: /dev/null)
  /// Run as this user and group (PostgreSQL will not run as root); the log is made theirs.
  bool change_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

/// Forks and execs `args` (args[0]: the program's path), stdin from /dev/null, registered as a child the
/// moment it exists. Throws StartError when fork fails; a child that cannot change its folder or user exits
/// 126, one whose exec fails 127, which the caller's start-up wait reads.
pid_t spawn_server(std::vector<std::string> args, const SpawnOptions& o = {});

/// SIGKILLs `pid` (if > 0), reaps it and forgets it.
void kill_and_reap(pid_t pid);
/// SIGKILLs and reaps the children of this process that are not registered: the processes a killed server
/// had started, adopted here (install_signal_handlers makes this process their subreaper). How many.
int reap_adopted();

/// A folder made with mkdtemp under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// A TCP port on 127.0.0.1 that was free a moment ago, outside the kernel's ephemeral range (so no
/// listener bound to port 0 nor outgoing connection takes it before its server binds it), and never
/// handed out twice by one process.
std::uint16_t free_loopback_port();
/// Whether something accepts TCP connections on 127.0.0.1:port now.
bool port_open(std::uint16_t port);

/// Nanoseconds since `t0` on CLOCK_MONOTONIC (shared by every process of the machine).
std::int64_t mono_ns();
/// CLOCK_REALTIME in nanoseconds.
std::int64_t real_ns();
/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns`, in slices, throwing Interrupted on a signal.
void sleep_until_ns(std::int64_t deadline_ns);

/// Where `name` is on $PATH (empty: nowhere).
std::string find_program(const std::string& name);

/// The last `lines` lines of a server's log file, each ending in a newline (empty when it cannot be read),
/// leaving out lines holding `skip` (a server's answers to our own polling): what an error about a server
/// that would not start shows.
std::string log_tail(const std::string& file, std::size_t lines = 5, std::string_view skip = {});

}  // namespace locksim::reality
