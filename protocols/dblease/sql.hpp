#pragma once
/// A SQL-like database server process and the client side of its sessions, as the design notes' lease code
/// needs them (protocols/dblease/README.md says what is modelled and how):
///  - sessions over the network; a transaction is BEGIN, statements and COMMIT or ROLLBACK, each a round trip
///    from the client; serializable isolation (a row changed by a transaction that committed after this one
///    began cannot be locked or updated: "could not serialize access", SQLSTATE 40001, and the client
///    retries);
///  - `SELECT ... FOR UPDATE` takes the row's lock until the transaction ends; a second locker waits, in
///    arrival order, however long the holder takes (PostgreSQL's default lock_timeout = 0), unless the
///    holder's session is ended by `idle_in_transaction_session_timeout` (default off) or because its client
///    is gone;
///  - `tx.Now()`: the database's own wall clock when the transaction began (PostgreSQL's now());
///  - commit writes the transaction's rows to the process's Storage and fsyncs them (the WAL flush of
///    synchronous_commit = on), so a restart keeps committed rows and loses open transactions;
///  - optionally an asynchronous replica that is promoted once it has not heard its primary for a while.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "locksim/protocols/history.hpp"
#include "locksim/sim/world.hpp"

namespace locksim::dblease {

/// One row. The lease table uses token, owner and expires (the notes' Token, Owner, Expires); the fence
/// table uses token (HighestFenceToken) and value (the protected resource's value).
struct Row {
  std::uint64_t token = 0;
  std::string owner;  ///< "" for a lease nobody holds
  Time expires{};     ///< the database's clock
  std::string value;
  bool operator==(const Row&) const = default;
};

inline constexpr const char* kLeaseTable = "leases";
inline constexpr const char* kFenceTable = "fences";

enum class SqlOp : std::uint8_t { begin, select_for_update, update, commit, rollback };

/// One statement of a session. `session` names the client's connection; `connect` is set on the first
/// statement of a connection (a statement of a session the server does not know, without it, is on a
/// connection the server no longer has: after its restart, or after it ended the session).
struct SqlRequest {
  SqlOp op = SqlOp::begin;
  std::uint64_t session = 0;
  /// The statement's place in its session (1, 2, ...): the server takes each once and in order, as TCP
  /// delivers a stream, whatever the simulated network duplicates.
  std::uint64_t seq = 0;
  bool connect = false;
  std::string table;
  std::string key;
  Row row;  ///< update: the new row
};

/// Errors a statement can get (SqlReply::error).
inline constexpr const char* kSerializationFailure = "serialization-failure";  ///< SQLSTATE 40001
inline constexpr const char* kSessionTerminated = "session-terminated";        ///< the connection is gone
inline constexpr const char* kReadOnly = "read-only";  ///< a replica (hot standby) takes no writes
inline constexpr const char* kNoTransaction = "no-transaction";

struct SqlReply {
  bool ok = false;
  std::string error;
  std::optional<Row> row;  ///< select: the row, if it exists
  Time now{};              ///< begin: tx.Now(), the database's clock
};

/// What the hosts' kernels know of the clients' connections: a connection is closed when its client closes
/// it, or when the client process ends (a crash too): the kernel of its host closes its sockets and the
/// server's side sees the FIN. One per world, shared by the database processes and the clients.
struct Connections {
  std::map<std::uint64_t, bool> closed;
  std::uint64_t last_session = 0;
  /// A new connection's id: unique in the world (a restarted client's new connections too).
  std::uint64_t open() { return ++last_session; }
  void close(std::uint64_t session) { closed[session] = true; }
  bool is_closed(std::uint64_t session) const {
    auto it = closed.find(session);
    return it != closed.end() && it->second;
  }
};

struct DatabaseOptions {
  std::string name = "db1";
  bool replica = false;              ///< starts as a hot standby of `peer`
  std::string peer;                  ///< the primary's replica, or the replica's primary ("" none)
  Duration replication_delay{50ms};  ///< how long a commit waits before it is streamed to the replica
  /// The replica is promoted once it has not heard its primary for this long (a failover manager's rule).
  Duration failover_after{5s};
  /// PostgreSQL's idle_in_transaction_session_timeout: a session idle inside a transaction this long is
  /// ended and its transaction rolled back (0: off, PostgreSQL's default).
  Duration idle_in_transaction_timeout{0};
};

/// Spawns the database server as a daemon process. Lease grants (a commit that makes a new owner the holder
/// of a lease row) are recorded through History::recorder; roles (primary, promoted replica) too. A write or
/// read request (protocols/resource.hpp) is served from the fence table in one transaction and logged in
/// History::resource_log as the store logs its own.
ProcId spawn_database(World& world, const DatabaseOptions& opts, History& history,
                      std::shared_ptr<Connections> connections);

/// The client side of one connection to the database (to the first server that answers as primary). Each
/// statement is one round trip, bounded by a deadline. The connection is closed when this object is
/// destroyed, as a process's sockets close when it ends or crashes.
class SqlConnection {
 public:
  SqlConnection(std::vector<ProcId> servers, std::shared_ptr<Connections> connections);
  ~SqlConnection();
  SqlConnection(const SqlConnection&) = delete;
  SqlConnection& operator=(const SqlConnection&) = delete;

  /// One statement. Nothing if no answer came by `deadline` (the connection is then dropped: the next
  /// statement opens a new one, to the next server if there are several). A "session-terminated" or
  /// "read-only" answer also drops the connection. `note`: logged once the statement has left (fault triggers
  /// fire on it: a pause there stops the client while the answer is in flight).
  std::optional<SqlReply> exec(Context& ctx, SqlRequest rq, Time deadline, std::string_view note = {});
  /// Closes the connection (an open transaction rolls back when the server sees it).
  void drop();
  /// A number no other call in this world returns (for owner names that a restarted client cannot repeat).
  std::uint64_t unique() { return connections_->open(); }

 private:
  std::vector<ProcId> servers_;
  std::shared_ptr<Connections> connections_;
  std::size_t target_ = 0;
  std::uint64_t session_ = 0;  ///< 0: not connected
  std::uint64_t seq_ = 0;      ///< the last statement's SqlRequest::seq on this session
};

}  // namespace locksim::dblease
