#pragma once
/// The ZooKeeper C client (libzookeeper_mt, synchronous API) as locksim uses it for real runs:
///  - ZkLock: Curator's InterProcessMutex recipe, run by a forked client process (client.cpp): a session of
///    the protocol's timeout; an EPHEMERAL_SEQUENTIAL node /locks/<key>/lock-<seq> with the client's name as
///    data; the children read: the lowest holds; otherwise an exists-watch on the predecessor and wait. The
///    token is the node's czxid (zoo_create2's Stat). A holder learns that its session expired only when the
///    client library reconnects and the ensemble tells it (Expired); until then it believes it holds.
///  - ZkRecorder: a session of the parent that watches the lock parent's children and records every node
///    that becomes the lowest child (its czxid, read from ZooKeeper with exists): the service's own grant
///    decisions, independent of what the clients say.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

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
  ZkRecorder(std::string hosts, std::string lock_key);
  ~ZkRecorder();
  ZkRecorder(const ZkRecorder&) = delete;
  ZkRecorder& operator=(const ZkRecorder&) = delete;
  /// Opens the session (at most `timeout_ns`), creates the lock parent, starts watching. Throws
  /// std::runtime_error.
  void start(std::int64_t timeout_ns);
  void stop();
  /// Waits at most `timeout_ns` until a record with this czxid exists.
  bool wait_record(std::uint64_t czxid, std::int64_t timeout_ns);
  std::vector<ZkRecord> records() const;
  /// Wakes the recorder to read the children again (its watch fired, or a record is awaited).
  void wake();
  struct Impl;  ///< the C client's handle

 private:
  void loop();
  void scan();
  std::string hosts_, parent_;
  Impl* impl_ = nullptr;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, woken_ = false;
  std::string lowest_;
  std::vector<ZkRecord> records_;
  std::thread thread_;
};

/// What ZkLock::acquire got: the node and its czxid.
struct ZkHold {
  std::string node;
  std::uint64_t czxid = 0;
};

class ZkLock {
 public:
  /// `note(label, detail)` reports a note to the parent (and waits for its ack).
  using Note = std::function<void(const std::string&, const std::string&)>;
  ZkLock(std::string hosts, std::string lock_key, std::string client, std::int64_t session_timeout_ns,
         Note note);
  ~ZkLock();
  ZkLock(const ZkLock&) = delete;
  ZkLock& operator=(const ZkLock&) = delete;
  /// One acquisition, given up at `give_up_ns` (CLOCK_MONOTONIC; the attempt deletes its node then).
  std::optional<ZkHold> acquire(std::int64_t give_up_ns);
  /// Deletes the node (best effort: an expired session's node is gone already).
  void release(const ZkHold& h);
  /// The client library has told this client its session expired (it learns it only from the ensemble).
  bool expired() const;
  struct Impl;  ///< the C client's handle and what its watcher tells

 private:
  bool ensure_session(std::int64_t give_up_ns);
  /// A call answered ZSESSIONEXPIRED (the watcher's session event may come after it).
  void mark_expired();
  void close();
  std::string hosts_, parent_, client_;
  std::int64_t timeout_ns_;
  Note note_;
  Impl* impl_ = nullptr;
};

}  // namespace locksim::reality
