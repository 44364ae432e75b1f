#pragma once
/// A real redis-server on a free 127.0.0.1 port in a folder of its own, started and killed by locksim, and
/// the listener that collects the server-side grant records.
///
/// Ground truth from the server: the clients' acquire script (client.cpp) runs `SET key value NX PX ttl`
/// and, only when that SET took effect, publishes "key, value, server TIME" on the channel locksim:sets from
/// inside the same script (atomic with the SET). A listener in the parent subscribes to every server, so the
/// service records do not depend on what a client says about itself, and they outlive a server that loses
/// its memory (the published message is already out).
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "locksim/sim/storage.hpp"
#include "reality/children.hpp"  // StartError

struct redisContext;

namespace locksim::reality {

/// A hiredis connection to 127.0.0.1:port, made within `timeout_ms`; null when it cannot be made.
redisContext* redis_connect(std::uint16_t port, int timeout_ms);

struct RedisOptions {
  std::string name;  ///< redis1..redisN, as in the simulated world
  bool aof = false;
  FsyncPolicy fsync = FsyncPolicy::periodic;
  /// Non-zero: started as a replica of 127.0.0.1:`replicaof` (`--replicaof`), the port of the proxy's link
  /// towards its master, so the replication stream goes through the proxy.
  std::uint16_t replicaof = 0;
  /// Non-zero: the port a replica announces to its master (`--replica-announce-port`), which the master's
  /// INFO lists and the sentinel dials: the proxy's entry link towards it.
  std::uint16_t announce_port = 0;
};

/// Thrown when a server cannot be started; says why (the apt package when the binary is missing).
class RedisServer {
 public:
  /// Makes `dir` (a subfolder of the run's temporary folder) and picks a free port; starts nothing.
  RedisServer(RedisOptions opts, std::string dir);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  /// Starts redis-server (again, on the same port and folder: a restart reads its AOF) and waits until it
  /// answers PING, at most 5 s. Throws StartError (the child is killed first).
  void start();
  /// SIGKILL: the crash (what was not written to the AOF file is lost).
  void kill();
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  std::uint16_t port() const { return port_; }
  const std::string& name() const { return opts_.name; }
  /// RedisOptions::announce_port from the next start() on (the proxy's port towards this server is made
  /// once its own port is known).
  void announce(std::uint16_t port) { opts_.announce_port = port; }
  /// Runs one command on the server (setup: the INCR counter's start); throws StartError on failure.
  void command(const std::vector<std::string>& argv);
  /// A field of `INFO section` ("master_link_status" of "replication"); empty when the server does not
  /// answer or has no such field.
  std::string info(const std::string& section, const std::string& field) const;

 private:
  RedisOptions opts_;
  std::string dir_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

/// One service record: a SET NX that took effect on `node`, at the server's own TIME (CLOCK_REALTIME, ns).
struct SetRecord {
  std::int64_t real_ns = 0;
  std::string node, key, value;
};

/// Subscribes to locksim:sets on one server, reconnecting after a crash, until stopped. A message naming
/// another server's port is a replica's copy of its master's record (scripts' effects, PUBLISH included, are
/// replicated, and a replica delivers them to its own subscribers): not a set on this node, not recorded.
class RecordListener {
 public:
  RecordListener(std::string node, std::uint16_t port);
  ~RecordListener();
  /// Waits (at most 5 s) until the listener is subscribed to the server as it runs now (after `start` or a
  /// restart), so no grant can be made unseen. Throws StartError.
  void wait_subscribed();
  /// Waits (at most 5 s) until the listener has seen its connection end (after the server was killed).
  void wait_disconnected();
  /// The records so far.
  std::vector<SetRecord> records() const;
  /// Messages seen that were a replica's copies of its master's records (not recorded).
  std::uint64_t copies() const { return copies_.load(); }

 private:
  void loop();
  std::string node_;
  std::uint16_t port_;
  std::atomic<bool> stop_{false};
  std::atomic<int> fd_{-1};
  std::atomic<std::uint64_t> subscribed_{0};  ///< connection generations subscribed so far
  std::atomic<std::uint64_t> lost_{0};        ///< connections lost so far
  std::atomic<std::uint64_t> copies_{0};
  mutable std::mutex mu_;
  std::vector<SetRecord> records_;
  std::thread thread_;
};

}  // namespace locksim::reality
