#pragma once
/// Consul's replicated state, reduced to what a lock needs: sessions and KV entries with their lock fields
/// (agent/consul/state/session.go, kvs.go). Deterministic: every server applies the same committed commands
/// in the same order and holds the same store (protocols/consul/server.hpp runs it on the Raft core).
///  - session_create(ttl, lock_delay): a session (behavior `release`) whose id is the log index of its
///    entry. A retry with the client's key names the session the first one created;
///  - session_renew(session): the session must exist (the leader times it: server.hpp);
///  - session_destroy(session): releases every key the session holds (behavior `release`: the key stays,
///    its Session is cleared, ModifyIndex = this index); invalidated = the leader's TTL timer decided it;
///  - acquire(session, key): PUT ?acquire=<session>, a check-and-set on the key: it succeeds iff the key has
///    no holder (or this session already holds it). A new holder bumps LockIndex; ModifyIndex is the entry's
///    Raft index (kvs.go kvsSetTxn: `entry.ModifyIndex = idx`, LockIndex + 1 when the session changes);
///  - release(session, key): PUT ?release=<session>: clears the holder if it is this session;
///  - get(key, wait_index): a read (a blocking query on the leader when wait_index is not yet passed).
/// Lock-delay is not here: Consul keeps it in each server's memory, set from that server's clock when it
/// applies the destroy, and checks it in the KVS endpoint before the acquire reaches Raft (server.hpp).
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "locksim/sim/time.hpp"

namespace locksim::consul {

enum class KOp : std::uint8_t { noop, session_create, session_renew, session_destroy, acquire, release, get };
std::string_view to_string(KOp op);

struct KCommand {
  KOp op = KOp::noop;
  std::uint64_t session = 0;     ///< session_create: the client's key (0: none); others: the session
  Duration ttl{0};               ///< session_create
  Duration lock_delay{0};        ///< session_create
  bool invalidated = false;      ///< session_destroy: decided by the leader's TTL timer
  std::uint64_t wait_index = 0;  ///< get: answer once the key's ModifyIndex is past it (0: at once)
  std::string key;               ///< acquire / release / get
  friend bool operator==(const KCommand&, const KCommand&) = default;
};

/// `<op> <session> <ttl ns> <lock_delay ns> <invalidated> <wait_index> <key>`.
std::string encode(const KCommand& c);
std::optional<KCommand> decode(std::string_view s);

class KvStore {
 public:
  struct Session {
    Duration ttl{0};
    Duration lock_delay{0};
    std::set<std::string> locks;  ///< keys it holds
  };
  struct Entry {
    std::uint64_t create_index = 0;
    std::uint64_t modify_index = 0;
    std::uint64_t lock_index = 0;
    std::uint64_t session = 0;  ///< the holder (0: none)
  };
  /// A key whose holder changed (a new holder, or released: session 0), with the index that did it.
  struct Change {
    std::string key;
    std::uint64_t session = 0;
    std::uint64_t modify_index = 0;
    std::uint64_t lock_index = 0;
    std::uint64_t released_by = 0;  ///< for a release: the session that held it
  };
  struct Result {
    bool ok = false;
    std::uint64_t value = 0;  ///< session id / acquire: ModifyIndex / get: ModifyIndex
    std::string error;        ///< "invalid-session"
  };

  /// Apply the command of log entry `index` (every entry, in log order); holder changes go to `changes`.
  Result apply(std::uint64_t index, const KCommand& c, std::vector<Change>& changes);

  const std::map<std::uint64_t, Session>& sessions() const { return sessions_; }
  /// The entry of `key`, if it exists.
  const Entry* find(const std::string& key) const;

 private:
  std::map<std::uint64_t, Session> sessions_;
  std::map<std::uint64_t, std::uint64_t> session_keys_;  // client key → session
  std::map<std::string, Entry> kv_;
};

}  // namespace locksim::consul
