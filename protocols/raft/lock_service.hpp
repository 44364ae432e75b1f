#pragma once
/// The etcd-like lock service that the Raft group replicates (protocols/raft/raft.hpp): its commands and its
/// deterministic state machine, the same on every member for the same log prefix.
///  - grant(ttl) creates a lease whose id is the log index of the grant entry. A grant may carry a key chosen
///    by the client (Command::lease, non-zero): a retried grant with the same key names the lease the first
///    one created instead of creating a second (etcd lets a client choose the lease id for the same reason);
///  - keepalive(lease), revoke(lease): the lease must exist;
///  - lock(name, lease) creates key name/lease with create revision = the log index of the lock entry (or
///    returns the existing one: retries are idempotent); the holder is the key with the lowest revision;
///  - unlock(name, lease) deletes the key.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "locksim/sim/time.hpp"

namespace locksim::raft {

/// A state-machine command.
enum class Op : std::uint8_t { noop, grant, keepalive, revoke, lock, unlock };
std::string_view to_string(Op op);

struct Command {
  Op op = Op::noop;
  /// keepalive / revoke / lock / unlock: the lease; grant: the client's grant key (0: none), so that a
  /// retried grant is not a second lease
  std::uint64_t lease = 0;
  Duration ttl{0};   ///< grant only
  std::string name;  ///< lock / unlock: the lock name
  bool expired =
      false;  ///< revoke only: decided by the leader because the lease ran out (not asked by a client)
  friend bool operator==(const Command&, const Command&) = default;
};

/// A command's text in the log (LogEntry::cmd): `<op> <lease> <ttl ns> <expired> <name>`.
std::string encode_command(const Command& c);
std::optional<Command> decode_command(std::string_view s);

/// The lock service: deterministic, the same on every member for the same log prefix.
class LockService {
 public:
  struct Lease {
    Duration ttl{0};
    std::set<std::string> locks;  ///< lock names with a key under this lease
  };
  /// A key became the holder of its lock.
  struct HolderChange {
    std::string lock;
    std::uint64_t lease = 0;
    std::uint64_t rev = 0;
  };
  struct Result {
    bool ok = false;
    std::uint64_t value = 0;  ///< grant: lease id; lock: create revision; otherwise the lease
    std::string error;        ///< "lease-not-found", "no-key"
  };

  /// Apply the command of log entry `index`; holder changes it caused are appended to `changes`.
  Result apply(std::uint64_t index, const Command& c, std::vector<HolderChange>& changes);
  /// The holder of `lock`: (lease, create revision).
  std::optional<std::pair<std::uint64_t, std::uint64_t>> holder(const std::string& lock) const;
  /// The create revision of key lock/lease, if it exists.
  std::optional<std::uint64_t> key_rev(const std::string& lock, std::uint64_t lease) const;
  const std::map<std::uint64_t, Lease>& leases() const { return leases_; }

 private:
  void delete_key(const std::string& lock, std::uint64_t lease, std::vector<HolderChange>& changes);
  std::map<std::uint64_t, Lease> leases_;
  std::map<std::string, std::map<std::uint64_t, std::uint64_t>> keys_;  // lock → rev → lease
  std::map<std::uint64_t, std::uint64_t> grant_keys_;                   // client grant key → lease
};

}  // namespace locksim::raft
