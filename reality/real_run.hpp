#pragma once
/// One real run's state, shared by the files that implement it: run.cpp (start-up, the clients, the loop),
/// faults.cpp (firing a fault the real way) and assemble.cpp (the History from what was recorded).
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "reality/children.hpp"
#include "reality/client.hpp"
#include "reality/etcd_server.hpp"
#include "reality/pg_server.hpp"
#include "reality/proxy.hpp"
#include "reality/redis_server.hpp"
#include "reality/run.hpp"
#include "reality/sentinel.hpp"
#include "reality/store_server.hpp"
#include "reality/zk_server.hpp"

namespace locksim::reality::detail {

/// One forked client as the parent sees it.
struct Child {
  std::string name;
  ProcId id;
  pid_t pid = -1;
  int report = -1, ack = -1;  // the parent's ends
  std::string buffer;
  bool done = false;
  std::map<std::uint64_t, GrantRecord> grants;  // by the client's own grant number
  std::map<std::uint64_t, WriteRecord> writes;  // by the client's own write number
  std::map<std::uint64_t, std::uint64_t> write_grant;
};

/// A fault of the plan as the parent fires it.
struct Armed {
  const FaultSpec* spec = nullptr;
  std::size_t index = 0;  // in Scenario::faults
  std::uint32_t seen = 0;
  bool fired = false;
  std::string target;  ///< the process it hit: the spec's target, or the member that led when it fired
};

/// fire a fault; resume a paused client; restart a crashed server; heal a partition's links; end a delay
/// spike.
enum class ActionKind : std::uint8_t { fire, resume, restart, heal, unspike };
struct Action {
  std::int64_t at = 0;
  ActionKind kind = ActionKind::fire;
  std::size_t armed = 0;
};

class RealRun {
 public:
  RealRun(const Scenario& sc, std::string protocol, const RealOptions& opts);

  ~RealRun();

  /// Starts the servers, forks the clients, fires the faults, and returns the judged history.
  RunOutput run();

 private:
  std::int64_t now() const { return mono_ns() - t0_; }
  ProcId id_of(const std::string& name) const {
    auto it = std::find(names_.begin(), names_.end(), name);
    return it == names_.end() ? ProcId{} : ProcId{static_cast<std::uint32_t>(it - names_.begin())};
  }
  void trace(TraceKind k, const std::string& proc, std::string label, std::string detail = {},
             std::int64_t t = -1) {
    const Time at{t < 0 ? now() : t};
    out_.trace.push_back({at, at, at, k, id_of(proc), {}, 0, std::move(label), std::move(detail)});
  }

  void fork_client(const ClientSpec& c, const ProtocolConfig& cfg, std::uint32_t n);

  Child* child(const std::string& name) {
    for (Child& c : children_)
      if (c.name == name) return &c;
    return nullptr;
  }
  RedisServer* server(const std::string& name) {
    for (auto& s : servers_)
      if (s->name() == name) return s.get();
    return nullptr;
  }
  RecordListener* listener(const std::string& name) {
    for (std::size_t i = 0; i < servers_.size(); ++i)
      if (servers_[i]->name() == name) return listeners_[i].get();
    return nullptr;
  }

  /// Fires armed fault `a` now (faults.cpp).
  void fire(std::size_t a);

  void restart(RedisServer& s);
  /// The process of a server (a Redis node, an etcd or ZooKeeper member) now; -1: none running.
  pid_t server_pid(const std::string& name) const;
  /// Pauses (SIGSTOP; the store: stalls) or resumes the fault's target server, and arms the resume.
  void pause_server(std::size_t armed, bool on);

  /// redis, redis+incr with replica = true: replica1 (a redis-server replicating from redis1 through the
  /// proxy, its initial sync done) and sentinel1 (knowing replica1), before time 0. When the scenario needs
  /// the proxy, the sentinel's links and the replication link are member links of proxy_ (network.cpp);
  /// else the replication link is repl_proxy_'s only one.
  void start_replica(const ProtocolConfig& cfg);
  /// At time 0: the replication stream's master→replica direction held replication_delay per chunk.
  void lag_replication(const ProtocolConfig& cfg);
  /// The sentinel's failover events from its log, as notes of sentinel1 at their times.
  void trace_sentinel();

  // The network (network.cpp): the proxy on every client link, when the scenario needs one.
  /// The servers a client talks to, by name, with their real ports (redis1..N, raft1..3, db1, zk1..3; the
  /// store last).
  std::vector<std::pair<std::string, std::uint16_t>> server_ports() const;
  /// Makes the proxy's links (each client × each server and the store) with the scenario's delays.
  void make_proxy();
  /// etcd, ZooKeeper: the proxy's links between members (each ordered pair), made and started before the
  /// members start, so a partition or a delay spike between two members runs on them. Redis with a replica
  /// (servers_ = redis1, replica1, constructed, not started): an entry link per server, whose connections
  /// go to the link of the dialing process (replica1 -> redis1, sentinel1 -> redis1, sentinel1 -> replica1,
  /// redis1 -> replica1); redis_entry_ports_ their ports.
  void make_member_links();
  /// Redis with a replica and member links: the member the sentinel names master now (redis1 when it does
  /// not answer); empty without a sentinel.
  std::string redis_master() const;
  /// A note with the bytes (dialer -> listener / back) and connections each member link carried.
  void trace_member_links();
  /// A partition's sides with roles and `split` resolved from the real cluster's leader now (side a, side
  /// b), and what was resolved ("split=minority leader=zk2"); empty sides: nothing to resolve (no leader).
  std::pair<std::vector<std::string>, std::vector<std::string>> resolve_sides(const FaultSpec& fs,
                                                                              std::string& detail) const;
  /// The port client `client` connects to for server `server`: the proxy's, or `real` without a proxy.
  std::uint16_t port_for(const std::string& client, const std::string& server, std::uint16_t real) const;
  /// Fires a partition, heal or delay spike on the proxy; false: `a` is not a network fault.
  bool fire_network(std::size_t a);
  /// A heal or unspike action.
  void end_network(const Action& act);
  void cut(std::size_t link, Proxy::Dir d, bool on);

  /// One line a client reported.
  void on_line(Child& c, const std::string& line);

  void read_child(Child& c);

  /// Reads the clients and fires due actions until every client ended or the time limit.
  void loop();

  /// The History from what the clients, the store and the servers recorded, judged (assemble.cpp).
  void assemble();

  const Scenario& sc_;
  std::string protocol_;
  RealOptions opts_;
  TempDir dir_;
  bool fenced_ = false;
  std::int64_t t0_ = 0, real0_ = 0;
  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::vector<std::unique_ptr<RecordListener>> listeners_;
  std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<PgServer> pg_;
  std::unique_ptr<ZkEnsemble> zk_;
  std::unique_ptr<StoreServer> store_;
  std::unique_ptr<Proxy> proxy_;
  std::unique_ptr<RedisSentinel> sentinel_;
  std::unique_ptr<Proxy> repl_proxy_;  ///< the replication stream redis1 → replica1 without proxy_ (one link)
  Proxy* repl_ = nullptr;              ///< the proxy carrying the replication stream: repl_proxy_ or proxy_
  std::size_t repl_link_ = 0;          ///< its link replica1 -> redis1
  /// Redis with a replica and member links: the entry links' ports of redis1 and replica1, the ports the
  /// sentinel monitors and names (empty without member links).
  std::vector<std::uint16_t> redis_entry_ports_;
  /// The Redis processes (redis1, replica1, sentinel1) by pid as they start, for the entry links'
  /// classifiers (on the proxy's thread).
  struct Pids {
    std::mutex mu;
    std::vector<std::pair<std::string, pid_t>> v;
  };
  std::shared_ptr<Pids> redis_pids_ = std::make_shared<Pids>();
  std::map<std::pair<std::string, std::string>, std::size_t> proxy_links_;  ///< (client, server) -> link
  std::map<std::pair<std::size_t, int>, int> cut_count_;  ///< (link, direction): partitions cutting it
  std::map<std::size_t, std::vector<std::pair<std::size_t, Proxy::Dir>>> cut_by_;  ///< armed -> its cuts
  std::map<std::size_t, std::vector<std::pair<std::size_t, Proxy::Dir>>> spiked_by_;
  std::map<std::size_t, std::string>
      partition_names_;  ///< armed -> "#1 client1 | redis1", as the trace names it
  std::uint32_t partitions_ = 0;
  std::vector<std::string> member_lines_;
  std::vector<std::size_t> member_links_;  ///< the proxy's links between members  ///< the member links, for
                                           ///< the proxy's trace note
  /// Connections accepted on an etcd member's entry link that no member's process held (the classifier's
  /// count, on the proxy's thread).
  std::shared_ptr<std::atomic<std::uint64_t>> unattributed_ = std::make_shared<std::atomic<std::uint64_t>>(0);
  std::vector<Child> children_;
  std::vector<std::string> names_;
  std::vector<Armed> armed_;
  std::vector<Action> actions_;
  std::map<std::size_t, std::uint32_t> firings_;
  RunOutput out_;
};

}  // namespace locksim::reality::detail
