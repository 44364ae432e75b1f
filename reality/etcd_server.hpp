#pragma once
/// A real 3- or 5-member etcd cluster (Debian: etcd-server, etcd 3.4) on free 127.0.0.1 ports, each member in
/// a folder of its own under the run's temporary folder, started and killed by locksim, and the watcher that
/// collects the lock's holders from etcd itself.
///
/// Ground truth from the service: a thread of the parent watches the lock's keys (etcd's v3lock keys
/// "<lock>/<lease hex>") through the v3 gateway's /v3/watch stream from revision 1 (compaction is off), and
/// records every key that becomes the holder, the live key with the lowest create revision (as
/// concurrency.Mutex decides), with the lease etcd attached to it and its create revision: a grant is backed
/// by etcd's own events, not by the client's word. When its member dies the watcher resumes on another member
/// from the next revision, so no event is missed.
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "reality/redis_server.hpp"  // StartError

namespace locksim::reality {

/// A key that became the lock's holder, as etcd's watch stream told it.
struct LeaseRecord {
  std::int64_t mono_ns = 0;  ///< CLOCK_MONOTONIC when the watcher received it (after etcd committed it)
  std::string node;          ///< the member whose stream carried it
  std::string key, lease;    ///< key: the v3lock key (<lock>/<lease hex>); lease: its lease (decimal)
  std::uint64_t revision = 0;
};

/// Why etcd cannot run here (empty: it can): the binary is missing, or locksim was built without libcurl.
std::string etcd_missing();

class EtcdCluster {
 public:
  /// Members `names` (raft1..raft3), folders under `dir`, free ports; starts nothing.
  EtcdCluster(std::vector<std::string> names, const std::string& dir, std::string lock_key);
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  /// Starts every member and waits (at most 10 s) until each answers /health with a leader, then starts the
  /// watcher. Throws StartError (every member killed first).
  void start();
  /// SIGKILL of one member / the same member again on its folder (not waited for: it rejoins the cluster on
  /// its own while the run goes on, and the parent must keep answering its clients meanwhile).
  void kill(const std::string& name);
  void restart(const std::string& name);
  bool has(const std::string& name) const;
  bool running(const std::string& name) const;
  /// Puts a key of its own (not the lock's) until the store's revision is `revision`: the lock's next key
  /// gets revision + 1 as its token (a scenario's first_token). Throws StartError.
  void advance_revision(std::uint64_t revision);
  /// The member that leads now, by /v3/maintenance/status (`leader` vs the member's own id); empty: none.
  std::string leader() const;
  std::vector<std::uint16_t> client_ports() const;
  /// Each member's name and the peer port it listens on (--listen-peer-urls).
  std::vector<std::pair<std::string, std::uint16_t>> peer_ports() const;
  /// Before start(): member `name` advertises `port` as its peer URL (--initial-advertise-peer-urls and its
  /// entry in every member's --initial-cluster) while it still listens on its own peer port: every member
  /// then dials it there (a proxy's port in front of it).
  void advertise_peer(const std::string& name, std::uint16_t port);
  /// The members' names and the pids of their processes, safe to read from another thread (a proxy's
  /// classifier); a killed member's pid may still be listed.
  std::vector<std::pair<std::string, pid_t>> live_pids() const;
  /// Every port of the cluster (client and peer), for the tests.
  std::vector<std::uint16_t> all_ports() const;
  std::vector<pid_t> pids() const;
  /// Member `name` is stopped (SIGSTOP) or resumed: the watcher leaves a stopped member's stream (it stalls
  /// without closing) for another member's, and comes back to it only once it runs again.
  void set_paused(const std::string& name, bool paused);
  /// The process of member `name` now (-1: not running, or no such member).
  pid_t pid(const std::string& name) const;
  /// Waits at most `timeout_ns` until the watcher has seen the key with this create revision become the
  /// holder.
  bool wait_record(std::uint64_t revision, std::int64_t timeout_ns) const;
  std::vector<LeaseRecord> records() const;

 private:
  struct Member {
    std::string name, dir;
    std::uint16_t client = 0, peer = 0, advertised = 0;  ///< advertised: the peer port others dial
    pid_t pid = -1;
  };
  void spawn(Member& m);
  void wait_healthy(const std::vector<Member*>& ms, const char* what);
  void watch_loop();
  std::vector<Member> members_;
  std::string lock_key_, token_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint32_t> paused_{0};  ///< a bit per member (watch order) stopped by the run
  std::atomic<bool> watch_created_{false};
  std::atomic<std::uint64_t> next_revision_{1};
  mutable std::mutex mu_;
  std::vector<LeaseRecord> records_;
  std::vector<std::uint16_t> watch_ports_;  ///< snapshot for the thread
  std::vector<std::string> watch_names_;
  std::unique_ptr<std::atomic<pid_t>[]> live_;  ///< per member, written by spawn
  std::thread watcher_;
};

}  // namespace locksim::reality
