#pragma once
/// A real PostgreSQL server (Debian: postgresql-15) for the database lease (db-lease, db-lease+fence): a
/// cluster made with `initdb` (trust authentication, superuser `locksim`) in a folder of its own under the
/// run's temporary folder, `postgres` listening on a free 127.0.0.1 port only (its Unix socket in that
/// folder), started, killed and stopped by locksim. PostgreSQL refuses to run as root: when locksim is root,
/// the folder is given to the user `postgres` and initdb / postgres run as that user (setgid + setuid after
/// the fork).
///
/// The schema is the design notes' (created by the parent once the server answers):
///   leases(name, owner, token, expires)                 the lease row of AcquireLease
///   lease_grants(seq, name, owner, token, expires, recorded)   one row per grant, written inside the
///                                                       acquiring transaction: the service's own records
///   fence(key, value, highest)                          the protected data of `resource = "same-db"`
///   resource_log(seq, key, client, write_id, token, accepted, value, reason, at)
///   write_with_fence(key, client, write_id, token, value)  WriteWithFence in one statement: the fence row
///                                                       locked, token < highest refused (equal accepted,
///                                                       no token: accepted), the decision logged
/// Both logs are stamped with clock_timestamp() (the server's wall clock when the row was written).
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reality/redis_server.hpp"  // StartError

namespace locksim::reality {

/// Why PostgreSQL cannot run here (empty: it can): the binaries are missing, or locksim was built without
/// libpq.
std::string pg_missing();

/// One row of lease_grants: a grant the database committed.
struct PgGrant {
  std::int64_t real_ns = 0;  ///< clock_timestamp() of the row (CLOCK_REALTIME, microseconds)
  std::string name, owner;
  std::uint64_t token = 0;
};

/// One row of resource_log: a write the database decided.
struct PgWrite {
  std::int64_t real_ns = 0;
  std::string key, client, value, reason;
  std::uint64_t write = 0;  ///< the client's own write number
  std::optional<std::uint64_t> token;
  bool accepted = false;
};

class PgServer {
 public:
  /// `name` (db1) in folder `dir` (made here, empty), on a free port; starts nothing.
  PgServer(std::string name, std::string dir);
  ~PgServer();  ///< stops the server (immediate shutdown, then SIGKILL) if it runs
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  /// initdb (the first time), postgres, and waits (at most 10 s) until it answers a query; then the schema.
  /// Throws StartError with the log's tail (the server killed first).
  void start();
  /// SIGKILL of the postmaster (its backends follow it).
  void kill();
  bool running() const { return pid_ > 0; }
  const std::string& name() const { return name_; }
  std::uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }
  /// libpq's connection string for this server; with `port`, for this server reached on another port (the
  /// run's TCP proxy).
  std::string conninfo() const { return conninfo(port_); }
  std::string conninfo(std::uint16_t port) const;
  /// lease_grants and resource_log, in the order the database wrote them. Throws std::runtime_error.
  std::vector<PgGrant> grants() const;
  std::vector<PgWrite> writes() const;

 private:
  pid_t spawn(const std::vector<std::string>& args, const std::string& log);
  void stop();
  std::string name_, dir_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
  bool initialized_ = false, schema_ = false;
};

}  // namespace locksim::reality
