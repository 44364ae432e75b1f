// The [protocol] and [protocols.<name>] tables: every ProtocolConfig field.
#include "locksim/scenarios/loader/loader_internal.hpp"

namespace locksim::loading {

namespace {
constexpr FieldDoc kProtocolFields[] = {
    {"nodes", "integer 1..99", "per protocol (redis 1, redlock 5, raft 3)", "number of lock-service nodes"},
    {"aof", "bool", "false", "Redis persistence (append-only file) on"},
    {"fsync", "\"never\" | \"periodic\" | \"always\"", "\"never\"", "appendfsync; needs aof = true"},
    {"fsync_period", "duration > 0", "\"1s\"", "period of fsync = \"periodic\""},
    {"replica", "bool", "false",
     "single Redis: an async replica (replica1) and a sentinel (sentinel1) that fails over; db-lease: an "
     "async hot standby (db2) promoted once it has not heard db1 for failover_after"},
    {"replication_delay", "duration", "\"50ms\"",
     "async replication lag: how long a write waits on the master before it is streamed"},
    {"failover_after", "duration", "\"5s\"",
     "sentinel down-after-milliseconds; db-lease: how long db2 waits without hearing db1 before it is "
     "promoted"},
    {"incr_token", "bool", "false", "single Redis: fencing token from INCR on the master"},
    {"drift_factor", "number 0..1", "0.01",
     "Redlock drift = ttl * factor + clock_drift_allowance (stored exactly in ppm)"},
    {"clock_drift_allowance", "duration", "\"2ms\"", "the + 2 ms of Redlock's drift"},
    {"node_timeout", "duration > 0", "\"50ms\"", "Redlock per-node timeout"},
    {"retry_count", "integer 0..1,000,000", "10",
     "Redlock, Redis: attempts after the first within one acquire before it gives up"},
    {"retry_delay", "duration", "\"200ms\"",
     "node-redlock's wait between the attempts of one acquire (not [[client]] retry_delay, the workload's "
     "wait after an acquire gave up)"},
    {"retry_jitter", "duration", "\"100ms\"", "random extra wait between retries, in [-jitter, +jitter]"},
    {"elapsed_recheck", "bool", "false",
     "antirez: re-check the elapsed time on the monotonic clock after acquiring"},
    {"keepalive_interval", "duration", "\"0\"", "lease keep-alive period; \"0\" means ttl / 3"},
    {"rpc_timeout", "duration", "\"0\"",
     "lease client's RPC timeout; \"0\" means max(2 × election_timeout_max, 100ms); db-lease: how long one "
     "transaction may take (\"0\" means the TTL, as cirello.io/pglock)"},
    {"expiry_check_interval", "duration", "\"500ms\"",
     "lease: how often the leader looks for expired leases (etcd's lessor: every 500 ms; \"0\" = at the "
     "exact "
     "instant), so a lease ends up to this much after its TTL"},
    {"first_token", "integer 0..2^53", "0",
     "the first fencing token: redis+incr's first INCR returns it; the lease's revisions start at it "
     "(0 = the service's own start, 1)"},
    {"idle_in_transaction_timeout", "duration", "\"0\"",
     "db-lease: PostgreSQL's idle_in_transaction_session_timeout, a session idle inside a transaction this "
     "long is ended and rolled back (\"0\" = off, PostgreSQL's default)"},
    {"resource", "\"store\" | \"same-db\"", "\"store\"",
     "db-lease: where the fenced resource lives, the store process or the lease's own database (the fence "
     "row and the write in one transaction on db1)"},
    {"election_timeout_min", "duration > 0", "\"150ms\"", "Raft"},
    {"election_timeout_max", "duration > 0", "\"300ms\"", "Raft; at least election_timeout_min"},
    {"heartbeat", "duration > 0", "\"50ms\"", "Raft; shorter than election_timeout_min"},
    {"tick_time", "duration > 0", "\"2s\"",
     "ZooKeeper tickTime: a session's timeout (the TTL) is negotiated into [2, 20] × tick_time, and expires "
     "at a multiple of it"},
    {"container_check_interval", "duration > 0", "\"60s\"",
     "ZooKeeper: how often the leader deletes empty lock parents (znode.container.checkIntervalMs)"},
    {"lock_delay", "duration 0s..60s", "\"15s\"",
     "Consul: after a session is invalidated, the keys it held cannot be acquired for this long (the "
     "session's LockDelay)"},
    {"session_ttl_multiplier", "number 1..2", "2.0",
     "Consul: the leader invalidates a session this many TTLs after its last renewal (Consul's code: 2; "
     "its documentation promises only not before 1)"},
    {"variant", "string", "\"\"",
     "a protocol variant, broken on purpose for teaching (`locksim list` lists them)"},
    {"extra", "table of strings", "", "string parameters for a user protocol: [protocol.extra]"},
    {"ttl", "duration > 0", "[lock] ttl", "per-protocol TTL ([protocols.<name>] only)"},
};

/// The keys of [protocol] a client library takes, which one client may set for itself ([[client]]
/// protocol = { ... }); read by Loader::client_settings for both tables.
constexpr std::string_view kClientKeys[] = {
    "drift_factor", "clock_drift_allowance", "node_timeout",       "retry_count", "retry_delay",
    "retry_jitter", "elapsed_recheck",       "keepalive_interval", "rpc_timeout",
};
}  // namespace

std::vector<TableDoc> protocol_tables() {
  return {{"protocol", "[protocol] and [protocols.<name>]: protocol parameters", kProtocolFields}};
}

std::span<const FieldDoc> client_protocol_fields() {
  static const std::vector<FieldDoc> rows = [] {
    std::vector<FieldDoc> out;
    for (const FieldDoc& f : kProtocolFields)
      if (std::find(std::begin(kClientKeys), std::end(kClientKeys), f.name) != std::end(kClientKeys))
        out.push_back(f);
    return out;
  }();
  return rows;
}

std::string Loader::protocol_name(const std::string& name, std::uint32_t line,
                                  const std::string& field) const {
  if (std::find(protocol_names_.begin(), protocol_names_.end(), name) == protocol_names_.end()) {
    fail(line, field,
         fmt::format("unknown protocol '{}'{}", name, suggestion(name, protocol_names_, "protocols")));
  }
  return name;
}

ClientSettings Loader::client_settings(const Tab& t) const {
  ClientSettings c;
  c.drift_factor_ppm = fraction_ppm(t, "drift_factor", 1.0);
  c.clock_drift_allowance = duration(t, "clock_drift_allowance", Sign::non_negative);
  c.node_timeout = duration(t, "node_timeout", Sign::positive);
  if (auto v = integer(t, "retry_count", 0, 1'000'000)) c.retry_count = static_cast<std::uint32_t>(*v);
  c.retry_delay = duration(t, "retry_delay", Sign::non_negative);
  c.retry_jitter = duration(t, "retry_jitter", Sign::non_negative);
  c.elapsed_recheck = boolean(t, "elapsed_recheck");
  c.keepalive_interval = duration(t, "keepalive_interval", Sign::non_negative);
  c.rpc_timeout = duration(t, "rpc_timeout", Sign::non_negative);
  return c;
}

ClientSettings Loader::client_protocol(const Tab& t) const {
  const std::vector<std::string> client_keys = schema_keys("client.protocol");
  const std::vector<std::string> protocol_keys = schema_keys("protocol");
  // The first service key in the file, if any: it is refused as what it is, not as a misspelling.
  const toml::node* worst = nullptr;
  std::string worst_key;
  for (const auto& [k, v] : *t.t) {
    const std::string key(k.str());
    if (std::find(client_keys.begin(), client_keys.end(), key) != client_keys.end()) continue;
    if (std::find(protocol_keys.begin(), protocol_keys.end(), key) == protocol_keys.end()) continue;
    if (!worst || line_of(v) < line_of(*worst)) {
      worst = &v;
      worst_key = key;
    }
  }
  if (worst) {
    const std::string& key = worst_key;
    fail(line_of(*worst), t.field(key),
         key == "ttl"
             ? std::string("the TTL is the same for every client: set it in [lock] (ttl = \"10s\") or "
                           "[protocols.<name>]")
         : key == "variant" || key == "extra"
             ? fmt::format("'{}' is a setting of the whole protocol, not of one client: set it in [protocol]",
                           key)
             : fmt::format("'{}' is a service setting, shared by every client of the lock service: set it in "
                           "[protocol] or [protocols.<name>] (a client's protocol table takes only client "
                           "settings: {})",
                           key, join(client_keys)));
  }
  only_schema(t, "client.protocol");
  return client_settings(t);
}

void Loader::protocol_config(const Tab& t, ProtocolConfig& c, bool allow_ttl) const {
  if (!allow_ttl && t.has("ttl")) {
    fail_at(t, "ttl", "the TTL is set in [lock] (ttl = \"10s\"), or per protocol in [protocols.<name>]");
  }
  only_schema(t, "protocol");
  if (auto v = duration(t, "ttl", Sign::positive)) c.ttl = *v;
  if (auto v = integer(t, "nodes", 1, 99)) c.nodes = static_cast<std::uint32_t>(*v);
  if (auto v = fsync_policy(t, "fsync")) {
    c.fsync = *v;
  }
  if (auto v = boolean(t, "aof")) c.aof = *v;
  if (t.has("fsync") && c.fsync != FsyncPolicy::never && !c.aof) {
    fail_at(t, "fsync", "fsync has no effect without persistence: add aof = true");
  }
  if (auto v = duration(t, "fsync_period", Sign::positive)) c.fsync_period = *v;
  if (auto v = boolean(t, "replica")) c.replica = *v;
  if (auto v = duration(t, "replication_delay", Sign::non_negative)) c.replication_delay = *v;
  if (auto v = duration(t, "failover_after", Sign::non_negative)) c.failover_after = *v;
  if (auto v = boolean(t, "incr_token")) c.incr_token = *v;
  client_settings(t).apply(c);
  if (auto v = duration(t, "expiry_check_interval", Sign::non_negative)) c.expiry_check_interval = *v;
  if (auto v = integer(t, "first_token", 0, std::int64_t{1} << 53))
    c.first_token = static_cast<std::uint64_t>(*v);
  if (auto v = duration(t, "idle_in_transaction_timeout", Sign::non_negative))
    c.idle_in_transaction_timeout = *v;
  if (auto v = enumeration<bool>(t, "resource", {{"store", false}, {"same-db", true}}))
    c.same_db_resource = *v;
  if (auto v = duration(t, "election_timeout_min", Sign::positive)) c.election_timeout_min = *v;
  if (auto v = duration(t, "election_timeout_max", Sign::positive)) c.election_timeout_max = *v;
  if (auto v = duration(t, "heartbeat", Sign::positive)) c.heartbeat = *v;
  // ZooKeeper's settings travel in `extra` under reserved names (protocols/zookeeper/zookeeper.hpp reads
  // them).
  if (auto v = duration(t, "tick_time", Sign::positive))
    c.extra["zookeeper.tick_time_ns"] = std::to_string(v->count());
  if (auto v = duration(t, "container_check_interval", Sign::positive))
    c.extra["zookeeper.container_check_interval_ns"] = std::to_string(v->count());
  // Consul's too (protocols/consul/consul.hpp).
  if (auto v = duration(t, "lock_delay", Sign::non_negative)) {
    if (*v > 60s)
      fail_at(t, "lock_delay",
              fmt::format("lock_delay {} is out of range: Consul takes 0s to 60s", format_time(*v)));
    c.extra["consul.lock_delay_ns"] = std::to_string(v->count());
  }
  if (auto v = fraction_ppm(t, "session_ttl_multiplier", 1000.0)) {
    if (*v < 1'000'000 || *v > 2'000'000)
      fail_at(t, "session_ttl_multiplier",
              "session_ttl_multiplier is out of range: must be between 1.0 (invalidation at the TTL, the "
              "earliest Consul promises) and 2.0 (Consul's code, SessionTTLMultiplier)");
    c.extra["consul.session_ttl_multiplier_ppm"] = std::to_string(*v);
  }
  if (c.election_timeout_min > c.election_timeout_max) {
    const char* k = t.has("election_timeout_max") ? "election_timeout_max" : "election_timeout_min";
    fail_at(t, k,
            fmt::format("election_timeout_min ({}) is greater than election_timeout_max ({})",
                        format_time(c.election_timeout_min), format_time(c.election_timeout_max)));
  }
  if (c.heartbeat >= c.election_timeout_min && (t.has("heartbeat") || t.has("election_timeout_min"))) {
    const char* k = t.has("heartbeat") ? "heartbeat" : "election_timeout_min";
    fail_at(t, k,
            fmt::format(
                "heartbeat ({}) must be shorter than election_timeout_min ({}), or followers start elections "
                "against a live leader",
                format_time(c.heartbeat), format_time(c.election_timeout_min)));
  }
  if (auto v = str(t, "variant", true)) c.variant = *v;
  if (auto x = sub_table(t, "extra")) {
    for (const auto& [k, v] : *x->t) {
      if (!v.is_string()) {
        fail(line_of(v), x->field(k.str()),
             fmt::format("extra parameters are strings (write it in quotes), got {}", type_name(v)));
      }
      c.extra[std::string(k.str())] = *v.value<std::string>();
    }
  }
}

namespace {

std::vector<Variant> variants_of(const std::string& protocol) {
  auto& reg = ProtocolRegistry::instance();
  if (!reg.has(protocol)) return {};
  return reg.make(protocol)->variants();
}

std::vector<std::string> names_of(const std::vector<Variant>& vs) {
  std::vector<std::string> out;
  for (const Variant& v : vs) out.push_back(v.name);
  return out;
}

}  // namespace

/// Every variant named in the file must be one its protocol (or, in [protocol], one of the protocols the file
/// runs) or the resource understands: a misspelled variant would otherwise run as no variant at all.
void Loader::variants(const Tab& root, const Scenario& s) const {
  auto check = [&](const Tab& t, const std::vector<std::string>& valid, const std::string& whose) {
    const auto v = str(t, "variant", true);
    if (!v || v->empty()) return;
    if (std::find(valid.begin(), valid.end(), *v) != valid.end()) return;
    fail_at(t, "variant",
            valid.empty()
                ? fmt::format("unknown variant '{}': {} has no variants", *v, whose)
                : fmt::format("unknown variant '{}' of {}{}", *v, whose, suggestion(*v, valid, "variants")));
  };
  if (const toml::node* rn = root.get("resource"); rn && rn->is_array()) {
    const std::vector<Tab> rs = table_array(root, "resource");
    const std::vector<ResourceSpec> all = s.all_resources();
    for (std::size_t i = 0; i < rs.size() && i < all.size(); ++i)
      check(rs[i], names_of(resource_variants(all[i].kind)), fmt::format("the {}", to_string(all[i].kind)));
  } else if (auto r = sub_table(root, "resource")) {
    check(*r, names_of(resource_variants(s.resource_kind)),
          fmt::format("the {}", to_string(s.resource_kind)));
  }
  if (auto p = sub_table(root, "protocol")) {
    std::vector<std::string> runs = s.protocols;
    if (runs.empty()) runs = ProtocolRegistry::instance().names();
    std::vector<std::string> valid;
    for (const auto& name : runs)
      for (const auto& v : names_of(variants_of(name)))
        if (std::find(valid.begin(), valid.end(), v) == valid.end()) valid.push_back(v);
    check(*p, valid, fmt::format("the protocols this file runs ({})", join(runs)));
  }
  if (auto ps = sub_table(root, "protocols")) {
    for (const auto& [k, v] : *ps->t) {
      const std::string name(k.str());
      if (!v.is_table() || !ProtocolRegistry::instance().has(name)) continue;
      check(Tab{v.as_table(), fmt::format("protocols.\"{}\"", name), line_of(v)}, names_of(variants_of(name)),
            name);
    }
  }
}

void Loader::protocol_limits(const Tab& root, const Scenario& s) const {
  std::set<std::string> named(s.protocols.begin(), s.protocols.end());
  for (const auto& [name, c] : s.per_protocol) named.insert(name);
  for (const auto& [name, e] : s.expect) named.insert(name);
  auto& reg = ProtocolRegistry::instance();
  for (const std::string& name : named) {
    if (!reg.has(name)) continue;
    auto problem = reg.make(name)->config_problem(s.config_for(name));
    if (!problem) continue;
    const std::string what = fmt::format("{}: {}", name, *problem);
    if (auto ps = sub_table(root, "protocols"))
      if (auto own = sub_table(*ps, name); own && own->has("ttl")) fail_at(*own, "ttl", what);
    if (auto l = sub_table(root, "lock"); l && l->has("ttl"))
      fail_at(*l, "ttl",
              fmt::format("{} (give it a TTL of its own in [protocols.\"{}\"] ttl = \"10s\")", what, name));
    fail(1, "lock.ttl", what);
  }
}

}  // namespace locksim::loading
