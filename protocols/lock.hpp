#pragma once
/// The one interface every lock protocol implements, and the registry that maps names to protocols.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "locksim/protocols/history.hpp"
#include "locksim/protocols/variant.hpp"
#include "locksim/sim/world.hpp"

namespace locksim {

/// What a client got from a successful acquire.
struct Grant {
  std::string key;
  std::string value;                   ///< holder identity (random value, lease id, ...)
  std::optional<std::uint64_t> token;  ///< fencing token, if the protocol has one
  Time valid_until{};          ///< on the client's own monotonic clock: when it believes the lock ends
  std::uint64_t lease_id = 0;  ///< protocol-private handle (lease id for consensus leases)
};

/// One service node's own persistence, overriding the protocol's ([[node]] in a scenario).
struct NodeSettings {
  std::optional<bool> aof;
  std::optional<FsyncPolicy> fsync;
  std::optional<Duration> fsync_period;
};

struct ProtocolConfig;

/// One client's own client-side protocol settings, overriding the scenario's for that client only
/// ([[client]] protocol = { ... }): the settings a client library takes (node-redlock's timeouts and
/// retries, the lease client's RPC timeout and keep-alive). The service's settings are shared by every
/// client and are not here. Unset fields keep the scenario's value.
struct ClientSettings {
  std::optional<std::int64_t> drift_factor_ppm;
  std::optional<Duration> clock_drift_allowance;
  std::optional<Duration> node_timeout;
  std::optional<std::uint32_t> retry_count;
  std::optional<Duration> retry_delay;
  std::optional<Duration> retry_jitter;
  std::optional<bool> elapsed_recheck;
  std::optional<Duration> keepalive_interval;
  std::optional<Duration> rpc_timeout;

  /// No field set: the client uses the scenario's config as it is.
  bool empty() const { return *this == ClientSettings{}; }
  /// Writes the fields that are set into `c`.
  void apply(ProtocolConfig& c) const;
  bool operator==(const ClientSettings&) const = default;
};

/// Every parameter a built-in protocol understands (option struct, not a string registry). A user protocol
/// may read its own parameters from `extra`.
struct ProtocolConfig {
  std::uint32_t nodes = 0;  ///< 0: protocol default (redis 1, redlock 5, lease 3)
  Duration ttl{10s};        ///< lock TTL / lease TTL asked for by clients

  // Redis / Redlock
  FsyncPolicy fsync = FsyncPolicy::never;  ///< AOF fsync policy (appendfsync)
  bool aof = false;                        ///< persistence on (append-only file); off = in memory only
  Duration fsync_period{1s};
  bool replica = false;              ///< single redis: an async replica that takes over on failure
  Duration replication_delay{50ms};  ///< async replication lag
  Duration failover_after{5s};       ///< sentinel down-after-milliseconds
  bool incr_token = false;           ///< single redis: token from INCR on the master (Redisson RFencedLock)
  std::int64_t drift_factor_ppm = 10'000;  ///< Redlock drift = ttl * factor + 2 ms (0.01 = 10,000 ppm)
  Duration clock_drift_allowance{2ms};
  Duration node_timeout{50ms};     ///< Redlock per-node timeout
  std::uint32_t retry_count = 10;  ///< node-redlock defaults
  /// node-redlock's wait between the attempts of one acquire (not ClientSpec::retry_delay, the workload's
  /// wait after an acquire gave up).
  Duration retry_delay{200ms};
  Duration retry_jitter{100ms};
  bool elapsed_recheck = false;  ///< antirez: re-check elapsed time on the monotonic clock after acquiring

  // Consensus lease
  Duration keepalive_interval{0};  ///< 0: ttl / 3
  /// The lease client's RPC timeout; 0: max(2 × election_timeout_max, 100 ms).
  Duration rpc_timeout{0};
  /// How often the service's leader looks for expired leases (etcd's lessor: every 500 ms).
  Duration expiry_check_interval{500ms};
  Duration election_timeout_min{150ms};
  Duration election_timeout_max{300ms};
  Duration heartbeat{50ms};

  /// The first fencing token the service hands out: redis+incr's INCR counter starts just below it; the
  /// lease's revisions start at it (so its first token is at least this). 0: the service's own start (1).
  std::uint64_t first_token = 0;

  // Database lease
  /// PostgreSQL's idle_in_transaction_session_timeout: a session idle inside a transaction this long is
  /// ended, its transaction rolled back (0: off, PostgreSQL's default).
  Duration idle_in_transaction_timeout{0};
  /// The fenced resource lives in the lease's own database (the fence row and the write in one
  /// transaction), not in the store process.
  bool same_db_resource = false;

  // Variants for teaching (broken on purpose).
  std::string variant;  ///< e.g. "gt-fence" (">" instead of ">="), "client-check"

  std::map<std::string, std::string> extra;  ///< user protocol parameters
  /// Per-node persistence by process name (redis1, replica1, raft2...); nodes not named use the above.
  std::map<std::string, NodeSettings> node_settings;
};

inline void ClientSettings::apply(ProtocolConfig& c) const {
  if (drift_factor_ppm) c.drift_factor_ppm = *drift_factor_ppm;
  if (clock_drift_allowance) c.clock_drift_allowance = *clock_drift_allowance;
  if (node_timeout) c.node_timeout = *node_timeout;
  if (retry_count) c.retry_count = *retry_count;
  if (retry_delay) c.retry_delay = *retry_delay;
  if (retry_jitter) c.retry_jitter = *retry_jitter;
  if (elapsed_recheck) c.elapsed_recheck = *elapsed_recheck;
  if (keepalive_interval) c.keepalive_interval = *keepalive_interval;
  if (rpc_timeout) c.rpc_timeout = *rpc_timeout;
}

/// A client's view of a lock service. All calls block the calling fiber (straight-line code).
class LockClient {
 public:
  virtual ~LockClient() = default;
  /// Try to acquire `key` (including the protocol's own retries). Nothing if it gave up.
  virtual std::optional<Grant> acquire(Context& ctx, const std::string& key, Duration ttl) = 0;
  /// Extend the lock; true if it is still held (grant.valid_until updated).
  virtual bool extend(Context& ctx, Grant& grant, Duration ttl) = 0;
  /// Release the lock (best effort).
  virtual void release(Context& ctx, const Grant& grant) = 0;
  /// Whether the client believes it still holds the lock (default: its own validity estimate).
  virtual bool believes_valid(Context& ctx, const Grant& grant) { return ctx.now() < grant.valid_until; }
};

/// How the client library a protocol models renews a held lock in the background (in a thread of the client
/// process: scenarios/workload.cpp runs it), and what its holder does when renewal fails. A scenario may
/// override each field for one client (docs/scenario-format.md, `renew`).
struct RenewalDefaults {
  /// Renew this long after the grant and after each renewal that went through (0: not on a period).
  Duration every{0};
  /// Renew once no more than this remains of the client's own validity estimate (0: not by the estimate).
  Duration before_expiry{0};
  /// After a renewal that failed, try again this long later, while the estimate still holds.
  Duration retry{0};
  /// When renewal failed for good (the estimate ran out with no renewal through): the holder stops acting as
  /// holder at its next step (true), or goes on, not told (false).
  bool stop_on_failure = false;
  /// Where these numbers come from (the library, its source file and setting), for docs and reports.
  std::string source;
};

/// The processes a protocol's service spawned, in spawn order. With a declaration (Protocol::declare) the
/// runner checks them against it; a protocol that declares its service may return {} (the runner takes the
/// processes build() spawned).
struct ServiceInfo {
  std::vector<ProcId> servers;
};

/// A lock protocol: builds its service inside a world and makes clients for it.
class Protocol {
 public:
  virtual ~Protocol() = default;
  virtual std::string name() const = 0;
  /// One line for `locksim list`.
  virtual std::string summary() const = 0;
  /// The variants this protocol understands (ProtocolConfig::variant); a scenario naming another is an error.
  virtual std::vector<Variant> variants() const { return {}; }
  /// Whether writes carry the grant's token to the resource (fencing).
  virtual bool fenced() const { return false; }
  /// The service build() will spawn for `cfg`, known before the run: process names in spawn order, their
  /// roles, the quorum of server records that backs a grant. The loader, the nemesis and the replay loader
  /// accept exactly the declared names; build() must spawn exactly these processes (the runner checks it).
  /// The default declares nothing (deprecated: such a protocol's names are unknown to scenario files, and
  /// it sets History::service_quorum and records with History::service_set by hand).
  virtual ServiceDecl declare(const ProtocolConfig& cfg) const {
    (void)cfg;
    return {};
  }
  /// Why this protocol cannot run `cfg` (a setting the real system refuses, such as a Consul session TTL
  /// under 10 s), naming the setting in the scenario's words; nothing (the default) when it can. The loader
  /// reports it at the setting's line, a run at the file.
  virtual std::optional<std::string> config_problem(const ProtocolConfig& cfg) const {
    (void)cfg;
    return std::nullopt;
  }
  /// Spawn the service's processes. Servers record service-side grants through History::recorder (write
  /// only).
  virtual ServiceInfo build(World& world, const ProtocolConfig& cfg, History& history) = 0;
  /// The declared process that serves the resource's reads and writes itself, when the protected data lives
  /// in the lock service (a database holding the fence row beside the lease row); "" (the default): the
  /// store process does.
  virtual std::string resource_process(const ProtocolConfig& cfg) const {
    (void)cfg;
    return {};
  }
  /// A client for one client process (called inside that process's fiber, before its first acquire), or for
  /// one thread of it (a renewal thread makes its own, on its own Context; LockClient::extend must work on a
  /// grant another client of the same process acquired).
  virtual std::unique_ptr<LockClient> make_client(Context& ctx, const ProtocolConfig& cfg) = 0;
  /// The background renewal of the library this protocol models. The default, for a protocol that names
  /// none: renew every ttl / 3 (a third of the lease, as etcd and Redisson do), retry at the same period, go
  /// on after a failure.
  virtual RenewalDefaults renewal_defaults(const ProtocolConfig& cfg) const {
    return {.every = cfg.ttl / 3,
            .before_expiry = Duration{0},
            .retry = cfg.ttl / 3,
            .stop_on_failure = false,
            .source = "locksim's default for a protocol that names none: every ttl/3"};
  }
};

/// Builds `protocol`'s service as a run does: records its declaration in `history` (History::protocol,
/// service, service_quorum, service_nodes), calls build(), and checks that build() spawned exactly the
/// declared processes in the declared order (std::logic_error naming the protocol otherwise). Returns the
/// spawned processes. A protocol that declares nothing is built as before declarations (deprecated): its
/// ServiceInfo names its processes and build() sets the quorum.
ServiceInfo build_service(Protocol& protocol, World& world, const ProtocolConfig& cfg, History& history);

using ProtocolFactory = std::function<std::unique_ptr<Protocol>()>;

/// Name → factory. Built-ins register themselves; users call register_protocol from their own code.
class ProtocolRegistry {
 public:
  static ProtocolRegistry& instance();
  void add(std::string name, std::string summary, ProtocolFactory f);
  std::unique_ptr<Protocol> make(const std::string& name) const;
  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  /// Names in sorted order.
  std::vector<std::string> names() const;
  const std::string& summary(const std::string& name) const { return entries_.at(name).summary; }

 private:
  struct Entry {
    std::string summary;
    ProtocolFactory factory;
  };
  std::map<std::string, Entry> entries_;
};

/// Registers the built-in protocols (idempotent). Call before using the registry.
void register_builtin_protocols();

}  // namespace locksim
