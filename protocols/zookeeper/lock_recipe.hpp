#pragma once
/// Apache Curator's InterProcessMutex recipe, written once against `Link`: what the recipe needs of a
/// ZooKeeper client library (a session, create / position / remove / ping of znodes, an exists-watch). The
/// simulated world implements Link with the client's session machinery over the ensemble model's messages
/// (zookeeper.cpp: ClientCnxn's session thread, requests through the Raft client); `locksim reality` with
/// ZooKeeper's C client against a real ensemble (reality/zk_client.hpp). So the recipe the simulator judges
/// is the recipe that meets real ZooKeeper.
///
/// The recipe: open a session (timeout = the lock's TTL); create an EPHEMERAL_SEQUENTIAL child of
/// /locks/<key> in protection mode (its name carries the attempt's key: /locks/<key>/_c_<key>-lock-<seq>);
/// when it is the lowest child the client holds the lock, otherwise it watches its predecessor and looks
/// again when the watch fires (or the connection changed). The token is the node's czxid (variant
/// "sequence-token": its sequence number). A create that got no answer deletes the node its key made; an
/// attempt that timed out deletes its node (Curator's doDelete). The holder believes it holds the lock until
/// it learns its session expired: Curator tells it nothing else.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "locksim/protocols/lock.hpp"

namespace locksim::zk {

/// How a request ended: answered, refused (session expired; for a node: no such node), or no answer by the
/// deadline.
enum class Status : std::uint8_t { ok, refused, no_answer };

struct Created {
  Status status = Status::no_answer;
  std::string node;  ///< the full path, /locks/<key>/_c_<key>-lock-<seq>
  std::uint64_t czxid = 0;
};

/// Where a node stands among its parent's children (refused: the node is gone).
struct Position {
  Status status = Status::no_answer;
  bool lowest = false;
  std::string predecessor;  ///< the full path of the child just before it
};

/// The world as the lock recipe sees it: a ZooKeeper client library's session and requests.
class Link {
 public:
  virtual ~Link() = default;
  /// The client's monotonic clock.
  virtual Time now() = 0;
  /// The client's random stream (protection keys).
  virtual Rng& rng() = 0;
  /// A note in the trace: a point where a fault plan may pause the client.
  virtual void note(std::string_view label, std::string detail) = 0;
  /// An open session, made (timeout asked: `ttl`) when there is none or the last one expired; false if
  /// none could be opened by `give_up`.
  virtual bool ensure_session(Duration ttl, Time give_up) = 0;
  /// The session's id (0: none).
  virtual std::uint64_t session_id() const = 0;
  /// Negotiated session timeout of the current session.
  virtual Duration session_timeout() const = 0;
  /// How long one request may go unanswered.
  virtual Duration rpc_timeout() const = 0;
  /// Whether the client knows its session expired.
  virtual bool expired() const = 0;
  virtual void mark_expired() = 0;
  /// Creates an EPHEMERAL_SEQUENTIAL child of `parent` in protection mode for attempt `key` (asked again
  /// on the way as the library does until `deadline`: it finds the node an unanswered create made).
  virtual Created create(std::uint64_t session, const std::string& parent, std::uint64_t key,
                         Time deadline) = 0;
  /// Whether `node` is the lowest child of its parent, or which child precedes it.
  virtual Position position(std::uint64_t session, const std::string& node, Time deadline) = 0;
  /// Deletes `path` (key 0), or the child of parent `path` that attempt `key` created.
  virtual void remove(std::uint64_t session, const std::string& path, std::uint64_t key, Time deadline) = 0;
  /// Waits until the watch on `predecessor` fires, the connection changes or the session expires, or
  /// `until`.
  virtual void wait_watch(const std::string& predecessor, Time until) = 0;
  /// Pings session `session`.
  virtual Status ping(std::uint64_t session, Time deadline) = 0;
};

class LockRecipe {
 public:
  LockRecipe(Duration acquire_timeout, bool sequence_token);
  std::optional<Grant> acquire(Link& link, const std::string& key, Duration ttl);
  /// A ping of the grant's session; true while the session is open.
  bool extend(Link& link, Grant& grant, Duration ttl);
  /// Deletes the lock node (the session stays open for the next acquire).
  void release(Link& link, const Grant& grant);
  /// Until the client learns its session expired.
  bool believes_valid(Link& link, const Grant& grant) const;

 private:
  Duration acquire_timeout_;
  bool sequence_token_ = false;
  std::map<std::string, std::string> nodes_;  ///< grant value (czxid) → node path, for release
};

/// The lock parent of `key`: /locks/<key>.
std::string lock_path(const std::string& key);
/// How long the recipe waits for the lock: max(3 × TTL, 5 s), or [protocol] acquire_timeout_ms.
Duration acquire_timeout(const ProtocolConfig& cfg);
/// One request's timeout: rpc_timeout, or max(2 × election_timeout_max, 100 ms).
Duration rpc_timeout(const ProtocolConfig& cfg);

}  // namespace locksim::zk
