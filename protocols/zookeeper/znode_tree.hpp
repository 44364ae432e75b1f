#pragma once
/// ZooKeeper's replicated state, reduced to what the lock recipe needs: sessions and a tree of lock parents
/// (container znodes) with ephemeral sequential children. Deterministic: every member of the ensemble
/// applies the same committed commands in the same order and holds the same tree (protocols/zookeeper/
/// ensemble.hpp runs it on the Raft core).
///  - create_session(timeout): a session whose id is the log index of its entry; the timeout is negotiated
///    into [2, 20] × tickTime (ZooKeeperServer: minSessionTimeout / maxSessionTimeout). A retry with the
///    client's key names the session the first one created;
///  - ping(session): the session must be open (the leader times it: ensemble.hpp);
///  - close_session(session): deletes the session's ephemeral nodes (expired = decided by the leader);
///  - create(session, parent): an EPHEMERAL_SEQUENTIAL child `<parent>/_c_<key>-lock-<seq>`; seq is the
///    parent's cversion (PrepRequestProcessor: `String.format("%010d", parentCVersion)`), which counts the
///    parent's child creations and deletions and starts over when the parent is re-created. The parent is a
///    container created if needed (Curator: creatingParentContainersIfNeeded). A create carrying the key of
///    an existing child of the same session returns that child (Curator's protection mode finds its node
///    after a connection loss);
///  - check(session, node): is `node` the lowest child of its parent (the holder), else its predecessor;
///  - remove(node) deletes it (with a key: the child of parent `path` that the session's attempt `key`
///    created); remove_container(parent): deletes an empty container (ContainerManager).
/// A node's czxid is the zxid of the entry that created it: epoch << 32 | counter, the epoch the entry's Raft
/// term and the counter its place among the entries of that term, from 1 (protocols/zookeeper/README.md says
/// why this is ZooKeeper's order).
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "locksim/sim/time.hpp"

namespace locksim::zk {

enum class ZOp : std::uint8_t {
  noop,
  create_session,
  ping,
  close_session,
  create,
  check,
  remove,
  remove_container
};
std::string_view to_string(ZOp op);

struct ZCommand {
  ZOp op = ZOp::noop;
  std::uint64_t session = 0;  ///< create_session: the client's key (0: none); others: the session
  std::uint64_t key = 0;      ///< create: the protection key of the client's attempt
  Duration timeout{0};        ///< create_session: the timeout the client asks for
  bool expired = false;       ///< close_session: decided by the leader because the session timed out
  std::string path;           ///< create / remove_container: the parent; check / remove: the node
  friend bool operator==(const ZCommand&, const ZCommand&) = default;
};

/// `<op> <session> <key> <timeout ns> <expired> <path>`.
std::string encode(const ZCommand& c);
std::optional<ZCommand> decode(std::string_view s);

/// A zxid: (epoch, counter) as one 64-bit number.
inline std::uint64_t make_zxid(std::uint64_t epoch, std::uint64_t counter) {
  return (epoch << 32) | (counter & 0xffffffffULL);
}

class ZnodeTree {
 public:
  struct Child {
    std::string name;  ///< full path
    std::uint64_t czxid = 0;
    std::uint64_t session = 0;
    std::uint64_t key = 0;
    std::uint32_t seq = 0;
  };
  struct Parent {
    std::uint64_t czxid = 0;
    std::uint32_t cversion = 0;
    std::map<std::uint32_t, Child> children;  ///< by sequence number: the lowest holds
  };
  struct Session {
    Duration timeout{0};
    std::set<std::string> ephemerals;  ///< nodes it owns
  };
  /// A node that became the lowest child of its parent (the lock's holder), or a node that was deleted.
  struct Change {
    std::string node;
    std::string parent;
    std::uint64_t session = 0;
    std::uint64_t czxid = 0;
    std::uint32_t seq = 0;
  };
  struct Result {
    bool ok = false;
    std::uint64_t value = 0;  ///< session id / czxid / 1 if check found the holder
    std::string data;         ///< create: the node path; check: the predecessor's path when not the holder
    std::string error;        ///< "session-expired", "no-node", "not-empty"
  };

  /// Apply the command of log entry `index` of `term` (every entry, in log order, no-ops included); new
  /// holders go to `holders`, deleted nodes to `deleted`.
  Result apply(std::uint64_t term, std::uint64_t index, const ZCommand& c, std::vector<Change>& holders,
               std::vector<Change>& deleted);

  const std::map<std::uint64_t, Session>& sessions() const { return sessions_; }
  const std::map<std::string, Parent>& parents() const { return parents_; }
  /// The child at `node`, if it exists.
  const Child* find(const std::string& node) const;
  /// The timeout a session asking for `asked` gets: clamped into [2, 20] × tick.
  static Duration negotiate(Duration asked, Duration tick);
  void set_tick(Duration tick) { tick_ = tick; }
  /// The zxid of the entry applied last.
  std::uint64_t last_zxid() const { return zxid_; }

 private:
  void remove_node(const std::string& node, std::vector<Change>& holders, std::vector<Change>& deleted);
  std::map<std::uint64_t, Session> sessions_;
  std::map<std::uint64_t, std::uint64_t> session_keys_;  // client key → session
  std::map<std::string, Parent> parents_;
  Duration tick_{2s};
  std::uint64_t epoch_ = 0;        // the term of the entry applied last
  std::uint64_t epoch_start_ = 0;  // the log index of the first entry of that term
  std::uint64_t zxid_ = 0;
};

/// "<parent>/_c_<key hex>-lock-<seq, 10 digits>"; the sequence number of such a name.
std::string child_name(const std::string& parent, std::uint64_t key, std::uint32_t seq);
std::optional<std::uint32_t> child_seq(std::string_view node);
std::string parent_of(std::string_view node);

}  // namespace locksim::zk
