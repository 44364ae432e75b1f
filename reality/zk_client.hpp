#pragma once
/// The ZooKeeper C client (libzookeeper_mt, synchronous API) as locksim uses it for real runs:
///  - ZkLink: the Link of Curator's InterProcessMutex recipe (protocols/zookeeper/lock_recipe.hpp), run by a
///    forked client process (client.cpp): a session of the protocol's timeout; an EPHEMERAL_SEQUENTIAL node
///    /locks/<key>/_c_<key>-lock-<seq> with the client's name as data; the children read: the lowest holds;
///    otherwise an exists-watch on the predecessor and wait. The token is the node's czxid (zoo_create2's
///    Stat). A holder learns that its session expired only when the client library reconnects and the
///    ensemble tells it (Expired); until then it believes it holds.
///  - ZkRecorder: the parent's sessions, one pinned to each member, that watch the lock parent's children
///    and record every node that becomes the lowest child (its czxid, read from ZooKeeper with exists), when
///    the first of them sees it: the service's own grant decisions, independent of what the clients say. A
///    session per member, because a stopped member (SIGSTOP) stalls its sessions without closing them, and
///    the C client notices only after two thirds of the session timeout.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "locksim/protocols/zookeeper/lock_recipe.hpp"

namespace locksim::reality {

/// The lowest node of the lock parent at some moment, as the recorder saw it.
struct ZkRecord {
  std::int64_t mono_ns = 0;  ///< CLOCK_MONOTONIC when the recorder read it
  std::string server;        ///< host:port of the member the recorder's session was connected to
  std::string node;          ///< lock-0000000003
  std::uint64_t czxid = 0;
  std::int64_t ctime_ms = 0;         ///< the node's creation on the leader's clock (ms since the epoch)
  std::int64_t ephemeral_owner = 0;  ///< the session that created it
};

/// Creates /locks and /locks/<key> (persistent) on the ensemble at `hosts`; throws std::runtime_error.
class ZkRecorder {
 public:
  /// `hosts`: the members' host:port, comma-separated; the recorder keeps a session on each.
  ZkRecorder(std::string hosts, std::string lock_key);
  ~ZkRecorder();
  ZkRecorder(const ZkRecorder&) = delete;
  ZkRecorder& operator=(const ZkRecorder&) = delete;
  /// Opens the sessions (at most `timeout_ns`), creates the lock parent, starts watching. Throws
  /// std::runtime_error.
  void start(std::int64_t timeout_ns);
  void stop();
  /// Waits at most `timeout_ns` until a record with this czxid exists.
  bool wait_record(std::uint64_t czxid, std::int64_t timeout_ns);
  std::vector<ZkRecord> records() const;
  /// Wakes the recorder to read the children again (its watch fired, or a record is awaited).
  void wake();
  struct Impl;  ///< the C client's handles

 private:
  void loop(std::size_t member);
  void scan(std::size_t member);
  std::vector<std::string> hosts_;
  std::string parent_;
  Impl* impl_ = nullptr;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::uint64_t wakes_ = 0;
  std::vector<std::string> lowest_;  ///< per member's session
  std::vector<ZkRecord> records_;    ///< one per czxid: the first session to see it
  std::vector<std::thread> threads_;
};

/// Curator's lock recipe's world in a client process: protocols/zookeeper/lock_recipe.hpp's Link over the C
/// client, so the real client runs the simulated client's own recipe (LockRecipe). The session is the C
/// library's (it pings, reconnects to another member and learns Expired from the ensemble, as the simulated
/// session thread models); a request that meets a connection loss is asked again until its deadline (a
/// create finds the node its protected name made first, as Curator does).
class ZkLink final : public zk::Link {
 public:
  /// `note(label, detail)` reports a note to the parent (and waits for its ack). `t0`: the run's start on
  /// CLOCK_MONOTONIC. `client`: the data of the lock nodes.
  using Note = std::function<void(const std::string&, const std::string&)>;
  ZkLink(std::string hosts, std::string client, Duration rpc_timeout, std::int64_t t0, std::uint64_t seed,
         Note note);
  ~ZkLink() override;
  ZkLink(const ZkLink&) = delete;
  ZkLink& operator=(const ZkLink&) = delete;

  Time now() override;
  Rng& rng() override { return rng_; }
  void note(std::string_view label, std::string detail) override;
  bool ensure_session(Duration ttl, Time give_up) override;
  std::uint64_t session_id() const override;
  Duration session_timeout() const override;
  Duration rpc_timeout() const override { return rpc_timeout_; }
  bool expired() const override;
  void mark_expired() override;
  zk::Created create(std::uint64_t session, const std::string& parent, std::uint64_t key,
                     Time deadline) override;
  zk::Position position(std::uint64_t session, const std::string& node, Time deadline) override;
  void remove(std::uint64_t session, const std::string& path, std::uint64_t key, Time deadline) override;
  void wait_watch(const std::string& predecessor, Time until) override;
  zk::Status ping(std::uint64_t session, Time deadline) override;
  struct Impl;  ///< the C client's handle and what its watcher tells

 private:
  void close();
  std::string hosts_, client_;
  Duration rpc_timeout_;
  std::int64_t t0_;
  Rng rng_;
  Note note_;
  Impl* impl_ = nullptr;
};

}  // namespace locksim::reality
