#pragma once
/// Redis master → replica replication as Redis does it (PSYNC, Redis 4.0 and later), in a command-count
/// model.
///
/// - A master numbers every write it propagates with its replication offset (master_repl_offset; Redis counts
///   stream bytes, we count commands: offset 1 is the first command) and keeps the last `backlog_size`
///   commands in its replication backlog (repl-backlog-size). A master with no replica yet has no backlog and
///   its offset does not move (Redis creates the backlog when the first replica attaches).
/// - Each streamed command carries the master's replication ID and its offset (`repl.cmd`). The replica
///   applies commands strictly in offset order: a duplicate (offset <= applied) is ignored; a gap (offset >
///   applied + 1: something was lost or overtaken) stops the apply and the replica asks for a resync from its
///   offset (`repl.psync <replid> <applied + 1>`). The master answers with the backlog suffix when it still
///   holds it and the ID matches (`repl.continue`, a partial resync) or with its whole dataset and offset
///   (`repl.fullsync`, a full resync: the RDB transfer).
/// - The link. Redis replicates over one TCP connection: ordered and reliable while it lasts, broken by a
///   partition or a crash, after which the replica reconnects and PSYNCs. Our network delivers datagrams that
///   may be lost, duplicated or reordered; the offsets make any such fault visible and a resync repairs it,
///   so the replica's dataset is always the master's dataset after some prefix of its stream. A lost *last*
///   command leaves no gap to see: the replica's `repl.ack` (REPLCONF ACK <offset>, every second) tells the
///   master where it is, and a master that has streamed further (or does not know this replica, or runs under
///   another replication ID, e.g. after a restart) answers with a `repl.ping` carrying its ID and streamed
///   offset, which the replica compares with its own. The master also pings every `ping_period`
///   (repl-ping-replica-period; these pings take no offset here). A replica that hears nothing from its
///   master for `timeout` (repl-timeout) PSYNCs again; a master whose replica has not acked for `timeout`
///   drops it and stops streaming to it (it comes back through PSYNC). An unanswered PSYNC is re-sent every
///   `psync_retry` (a connection attempt that got no answer).
/// - Failover: a promoted replica keeps what it applied (writes the old master acknowledged but had not yet
///   streamed are lost: the asynchronous-replication lock loss), takes a new replication ID and keeps the old
///   one with its offset as replid2, so a replica of the old master that is no further along can still resync
///   partially.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "locksim/sim/message.hpp"
#include "locksim/sim/time.hpp"

namespace locksim::redis {

/// One stored key.
struct Entry {
  std::string value;
  Time expire_wall = kTimeMax;  ///< absolute expiry on the node's wall clock (kTimeMax: none)
  friend bool operator==(const Entry&, const Entry&) = default;
};

/// A node's dataset (ordered: a snapshot is sent and compared in key order).
using Dataset = std::map<std::string, Entry>;

/// One write a master propagates (effects replication, as Redis does for scripts; a SET carries its absolute
/// expiry, as Redis 7 rewrites PX into PXAT).
struct ReplicationOp {
  std::string key;
  std::optional<Entry> entry;  ///< nothing: the key was deleted
  bool lock_set = false;  ///< the write was a successful SET NX (the replica records it as a service set)
  friend bool operator==(const ReplicationOp&, const ReplicationOp&) = default;
};

struct ReplicationOptions {
  /// repl-backlog-size, in commands. Redis's default is 1 MB of stream; a lock's SET with its 32-character
  /// value and PXAT is about 100 bytes of RESP, so 10,000 commands is about that.
  std::size_t backlog_size = 10'000;
  Duration ack_period{1s};    ///< replica: REPLCONF ACK every second (replicationCron)
  Duration ping_period{10s};  ///< master: repl-ping-replica-period
  Duration timeout{60s};      ///< repl-timeout
  Duration psync_retry{1s};   ///< replica: re-send a PSYNC that got no answer for this long
};

// Message bodies. The ID "?" means none (a replica that never synced: PSYNC ? -1 in Redis).

/// `repl.cmd`: one command of the stream.
struct ReplCommand {
  std::string replid;
  std::uint64_t offset = 0;
  ReplicationOp op;
};
/// `repl.psync`: replica → master, "continue my copy of `replid` from `offset`" (the first command wanted).
struct Psync {
  std::string replid = "?";
  std::uint64_t offset = 0;
};
/// `repl.continue`: a partial resync, the backlog's commands from `first` on under `replid` (which may be a
/// new ID: the master was promoted since).
struct PartialResync {
  std::string replid;
  std::uint64_t first = 0;
  std::vector<ReplicationOp> ops;  ///< offsets first, first + 1, ...
};
/// `repl.fullsync`: a full resync, the master's dataset as of `offset`.
struct FullResync {
  std::string replid;
  std::uint64_t offset = 0;
  Dataset data;
};
/// `repl.ack`: replica → master, REPLCONF ACK: the offset applied under `replid`.
struct ReplAck {
  std::string replid;
  std::uint64_t offset = 0;
};
/// `repl.ping`: master → replica, the master's ID and the offset it has streamed so far.
struct ReplPing {
  std::string replid;
  std::uint64_t offset = 0;
  /// false: the master has no stream to this replica (it restarted, or dropped it after repl-timeout), the
  /// broken connection a real replica would see: PSYNC.
  bool connected = true;
};

Message repl_cmd_message(ReplCommand c);
Message psync_message(Psync p);
Message partial_resync_message(PartialResync p);
Message full_resync_message(FullResync f);
Message ack_message(ReplAck a);
Message ping_message(ReplPing p);

/// The replication backlog: the last `capacity` commands of the stream with their offsets, and the time each
/// is due to be streamed (the replication lag). A replica keeps one too, of what it applied, so that it can
/// serve partial resyncs once promoted.
class Backlog {
 public:
  struct Item {
    ReplicationOp op;
    Time due{};  ///< on the owner's monotonic clock
  };

  explicit Backlog(std::size_t capacity = 0) : capacity_(capacity < 1 ? 1 : capacity) {}

  /// Append the command of offset `offset` (the next after the last; or any, when empty: after a full sync).
  void push(std::uint64_t offset, ReplicationOp op, Time due);
  /// Forget everything; the next push may start at any offset.
  void reset() {
    ring_.clear();
    head_ = 0;
  }

  bool empty() const { return ring_.empty(); }
  std::uint64_t first() const { return last_ + 1 - ring_.size(); }  ///< offset of the oldest command held
  std::uint64_t last() const { return last_; }                      ///< offset of the newest (when not empty)
  /// Whether every command from `offset` to last() is still held (offset == last() + 1: nothing is missing).
  bool covers(std::uint64_t offset) const {
    return offset == last_ + 1 || (!ring_.empty() && offset >= first() && offset <= last_);
  }
  const Item& at(std::uint64_t offset) const { return ring_[(head_ + (offset - first())) % ring_.size()]; }
  /// The commands from `from` to last() (covers(from) must hold).
  std::vector<ReplicationOp> suffix(std::uint64_t from) const;

 private:
  std::size_t capacity_;
  std::uint64_t last_ = 0;
  /// A ring (allocated only once a command is pushed: a node that never replicates pays nothing):
  /// ring_[head_] is the oldest command once it is full.
  std::vector<Item> ring_;
  std::size_t head_ = 0;
};

/// What a node did to its replication state: for tests and tools, never traced (the trace has the messages).
struct ReplicationEvent {
  enum class Kind : std::uint8_t {
    propagated,  ///< a master wrote and appended `op` at `offset`
    applied,     ///< a replica applied `op` at `offset` (from the stream or a partial resync)
    full_sync,   ///< a replica installed a full resync's dataset as of `offset`
    unstreamed,  ///< a master wrote before any replica attached (no backlog yet: the offset stays)
  };
  Kind kind = Kind::applied;
  std::string_view node;
  std::uint64_t offset = 0;
  const ReplicationOp* op = nullptr;  ///< propagated and applied
  const Dataset* data = nullptr;      ///< the node's dataset after the change
};
using ReplicationObserver = std::function<void(const ReplicationEvent&)>;

/// One-line trace text of a replicated write: "SET key value" or "DEL key".
std::string describe(const ReplicationOp& op);

}  // namespace locksim::redis
