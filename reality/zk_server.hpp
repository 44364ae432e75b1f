#pragma once
/// A real 3- or 5-member ZooKeeper ensemble (Debian: zookeeper, ZooKeeper 3.8) on free 127.0.0.1 ports: each
/// member its own `java ... QuorumPeerMain zoo.cfg` process in a folder of its own under the run's temporary
/// folder (its zoo.cfg, its dataDir with myid, its log), started and killed by locksim. Readiness and the
/// leader are read with the `srvr` four-letter command (4lw.commands.whitelist=*), over a plain socket.
///
/// The grants' ground truth comes from ZooKeeper itself: ZkRecorder (zk_client.hpp) is a session of the
/// parent that watches the lock parent's children and records each node that becomes the lowest.
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "reality/redis_server.hpp"  // StartError

namespace locksim::reality {

/// Why ZooKeeper cannot run here (empty: it can): java or the server jar is missing, or locksim was built
/// without the ZooKeeper C client.
std::string zk_missing();
/// Whether the ZooKeeper C client was built in (zk_client.cpp: yes; zk_none.cpp: no).
bool zk_client_built();

class ZkRecorder;

class ZkEnsemble {
 public:
  /// Members `names` (zk1..zk3), folders under `dir`, free ports, `tick_ms` ZooKeeper's tickTime; starts
  /// nothing.
  ZkEnsemble(std::vector<std::string> names, const std::string& dir, std::int64_t tick_ms,
             std::string lock_key);
  ~ZkEnsemble();
  ZkEnsemble(const ZkEnsemble&) = delete;
  ZkEnsemble& operator=(const ZkEnsemble&) = delete;

  /// Starts every member and waits (at most 20 s) until each answers `srvr` as leader or follower with one
  /// leader among them. Throws StartError (every member killed first, the members' log tails in the message).
  void start();
  /// Opens the recorder's session (the lock parent created, its children watched). Called once the clients
  /// are forked: the C client's threads must not run in a process that forks (a child could inherit one of
  /// the library's locks held, and hang in zookeeper_init). Throws StartError.
  void start_recorder();
  /// SIGKILL of one member / the same member again on its folder (not waited for: it rejoins on its own).
  void kill(const std::string& name);
  void restart(const std::string& name);
  bool has(const std::string& name) const;
  bool running(const std::string& name) const;
  /// The member whose `srvr` says "Mode: leader" now; empty: none.
  std::string leader() const;
  std::vector<std::uint16_t> client_ports() const;
  /// "127.0.0.1:p1,127.0.0.1:p2,..." for zookeeper_init.
  std::string connect_string() const;
  /// The member whose client port is `port` (empty: none).
  std::string member_of_port(std::uint16_t port) const;
  std::vector<std::uint16_t> all_ports() const;
  std::vector<pid_t> pids() const;
  /// The process of member `name` now (-1: not running, or no such member).
  pid_t pid(const std::string& name) const;
  /// Each member's name with the quorum and election ports it binds (its own server.N= line).
  struct PeerPorts {
    std::string name;
    std::uint16_t quorum = 0, election = 0;
  };
  std::vector<PeerPorts> peer_ports() const;
  /// Before start(): in member `from`'s own zoo.cfg, member `to`'s server.N= line names these ports (a
  /// proxy's, in front of `to`'s real ones) instead of `to`'s own; every member's config then differs in the
  /// lines of the others only (a static config, reconfigEnabled=false: the config version stays 0).
  void route(const std::string& from, const std::string& to, std::uint16_t quorum, std::uint16_t election);
  ZkRecorder& recorder() { return *recorder_; }

 private:
  struct Member {
    std::string name, dir;
    std::uint16_t client = 0, quorum = 0, election = 0;
    std::map<std::string, std::pair<std::uint16_t, std::uint16_t>> via;  ///< other member -> its ports here
    pid_t pid = -1;
  };
  void write_config(const Member& m) const;
  void spawn(Member& m);
  void kill_all();
  [[noreturn]] void fail(const std::string& why);
  std::vector<Member> members_;
  std::int64_t tick_ms_;
  std::string lock_key_;
  std::unique_ptr<ZkRecorder> recorder_;
};

}  // namespace locksim::reality
