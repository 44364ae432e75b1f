// The top level of a scenario file and the small tables ([lock], [resource], [limits], [[clock]]): the order
// in which tables are read (limits first: other checks need max_time), the process names a file may use, and
// the entry points.
#include "locksim/scenarios/loader/loader_internal.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace locksim::loading {

namespace {
constexpr FieldDoc kTopFields[] = {
    {"name", "string (letters, digits, _ - . +)", "the file name without .toml", "catalog name"},
    {"title", "string", "\"\"", "one line for `locksim list`"},
    {"source", "string", "\"\"",
     "the paper, post or report the scenario reproduces (catalog files must have it)"},
    {"teaches", "string", "\"\"", "one paragraph: what it teaches (catalog files must have it)"},
    {"seed", "integer 0..2^63-1", "1", "the world's seed (`--seed` overrides it)"},
    {"lock", "table", "", "the lock: [lock]"},
    {"resource", "table, or array of tables", "",
     "the protected resource: [resource]; several: [[resource]], each named"},
    {"protocol", "table", "", "parameters for every protocol: [protocol]"},
    {"protocols", "table of tables", "", "per-protocol overrides: [protocols.<name>]"},
    {"network", "table", "", "the network: [network]"},
    {"clock", "array of tables", "", "node clocks: [[clock]]"},
    {"node", "array of tables", "", "one service node's persistence and clock: [[node]]"},
    {"client", "array of tables", "required", "clients and their workload: [[client]]"},
    {"fault", "array of tables", "", "the fault plan: [[fault]]"},
    {"limits", "table", "", "when a run stops: [limits]"},
    {"expect", "table", "", "expected verdicts: [expect]"},
    {"replay", "table", "",
     "written by `locksim explore` into replay files; ignored when loading a scenario"},
};
constexpr FieldDoc kLockFields[] = {
    {"key", "string", "\"lock\"", "the lock's name"},
    {"ttl", "duration > 0", "\"10s\"", "the TTL / lease TTL clients ask for"},
};
constexpr FieldDoc kResourceFields[] = {
    {"name", "process name", "\"store\"", "its process name"},
    {"key", "string", "\"data\"", "the key the clients write"},
    {"mode", "\"auto\" | \"unfenced\" | \"fenced\"", "\"auto\"",
     "auto: fenced iff the protocol sends tokens; otherwise forced"},
    {"kind",
     "\"store\" | \"checkpoint-table\" | \"external-api\" | \"cas-row\" | \"job-queue\" | \"object-store\"",
     "\"store\"",
     "what the resource is: a key-value store, the shard_checkpoint table, a payment API that "
     "cannot check tokens, a row with a version column, a job queue, an object store whose manifest commits "
     "batches "
     "(docs/safety.md)"},
    {"idempotency_keys", "bool", "false",
     "external-api: the clients send an idempotency key per logical job (job-<key>-<job>)"},
    {"idempotency_retention", "duration > 0", "\"24h\"",
     "external-api: how long the API remembers a key after performing it, on its own clock"},
    {"variant", "string", "\"\"", "a teaching or mutant variant of the resource (`locksim list` lists them)"},
    {"max_retries", "integer 0..1,000", "5",
     "cas-row only: how many times a client re-reads and writes again after a conflict before giving up"},
    {"period", "duration > 0", "\"5s\"",
     "job-queue only: a leader enqueues one job per period of its wall clock"},
    {"job", "string", "\"report\"", "job-queue only: the job's name; a job id is \"<job>-<hh:mm:ss>\""},
};
constexpr FieldDoc kLimitsFields[] = {
    {"max_time", "duration > 0", "\"60s\"", "the run stops at this simulated time"},
    {"max_events", "integer 1..50,000,000", "5000000",
     "the run stops after this many events: inconclusive (exit 2) unless an anomaly was already recorded"},
    {"max_mailbox", "integer 1..1,000,000", "1000000",
     "the run stops when one mailbox holds more messages: inconclusive (exit 2) unless an anomaly was "
     "already "
     "recorded"},
};
constexpr FieldDoc kNodeFields[] = {
    {"name", "service process name", "required",
     "the node: a process a protocol declares (redis1..redisN, replica1, raft1..raftN, a user protocol's)"},
    {"aof", "bool", "[protocol] aof", "this node's persistence on (append-only file)"},
    {"fsync", "\"never\" | \"periodic\" | \"always\"", "[protocol] fsync",
     "this node's appendfsync (Redis) or WAL fsync (Raft members); needs aof = true for Redis"},
    {"fsync_period", "duration > 0", "[protocol] fsync_period", "this node's period of fsync = \"periodic\""},
    {"offset", "duration, may be negative", "\"0\"", "this node's clock: as [[clock]] offset"},
    {"drift_ppm", "integer -500,000..500,000", "0", "this node's clock: as [[clock]] drift_ppm"},
};
constexpr FieldDoc kClockFields[] = {
    {"node", "process name", "required", "whose clock"},
    {"offset", "duration, may be negative", "\"0\"", "wall clock minus true time at the start"},
    {"drift_ppm", "integer -500,000..500,000", "0", "+100 runs 100 µs per second fast (both clocks)"},
};
}  // namespace

std::vector<TableDoc> root_tables() {
  return {{"", "Top level", kTopFields},
          {"lock", "[lock]", kLockFields},
          {"resource", "[resource]: the protected store", kResourceFields},
          {"clock", "[[clock]]: node clocks", kClockFields},
          {"node", "[[node]]: one service node's own settings", kNodeFields},
          {"limits", "[limits]", kLimitsFields}};
}

void Loader::check_process(const std::string& name, std::uint32_t line, const std::string& field,
                           bool allow_any) const {
  if (allow_any && name == "*") return;
  if (process_set_.count(name)) return;
  if (services_.in_family(name)) {
    const std::string hints = services_.hints();
    fail(line, field,
         fmt::format("unknown process '{}': this file's lock services have {}{}", name, services_.summary(),
                     hints.empty() ? "" : fmt::format(" ({})", hints)));
  }
  const std::string near = nearest_name(name, processes_);
  if (!near.empty()) fail(line, field, fmt::format("unknown process '{}' (did you mean '{}'?)", name, near));
  fail(line, field,
       fmt::format("unknown process '{}' (processes: {}{})", name, join(service_summary_),
                   allow_any ? ", or \"*\" for any" : ""));
}

Scenario Loader::load(const toml::table& root_table) {
  Scenario s;
  s.file = file_;
  Tab root{&root_table, "", 1};
  only_schema(root, "");
  protocol_names_ = valid_protocol_names();

  s.name = str(root, "name").value_or(std::filesystem::path(file_).stem().string());
  if (!valid_ident(s.name)) {
    if (root.has("name"))
      fail_at(root, "name",
              fmt::format("'{}' is not a valid name: use letters, digits, '_', '-', '.'", s.name));
    s.name = "scenario";
  }
  s.title = str(root, "title").value_or("");
  s.source = str(root, "source").value_or("");
  s.teaches = str(root, "teaches").value_or("");
  if (auto v = integer(root, "seed", 0, static_cast<std::int64_t>(Scenario::kMaxSeed)))
    s.seed = static_cast<std::uint64_t>(*v);

  if (auto l = sub_table(root, "limits")) {
    only_schema(*l, "limits");
    if (auto v = duration(*l, "max_time", Sign::positive)) s.max_time = *v;
    // At most the kernel's own default: a file cannot ask for more events (and so more trace memory) than
    // that.
    if (auto v = integer(*l, "max_events", 1, 50'000'000LL)) s.max_events = static_cast<std::uint64_t>(*v);
    if (auto v = integer(*l, "max_mailbox", 1, 1'000'000LL)) s.max_mailbox = static_cast<std::size_t>(*v);
  }
  max_time_ = s.max_time;

  if (auto l = sub_table(root, "lock")) {
    only_schema(*l, "lock");
    if (auto v = str(*l, "key")) s.lock_key = *v;
    if (auto v = duration(*l, "ttl", Sign::positive)) s.config.ttl = *v;
  }
  // [resource], or [[resource]] for several: the first is the scenario's own fields, the rest more_resources.
  if (const toml::node* rn = root.get("resource"); rn && rn->is_array()) {
    const std::vector<Tab> rs = table_array(root, "resource");
    if (rs.empty())
      fail(line_of(*rn), "resource", "an empty [[resource]] list: give one table or leave it out");
    std::map<std::string, std::uint32_t> seen;
    for (std::size_t i = 0; i < rs.size(); ++i) {
      if (rs.size() > 1) need(rs[i], "name", "name = \"checkpoints\" (each of several resources is named)");
      ResourceSpec spec = resource_table(rs[i]);
      const std::uint32_t at = rs[i].has("name") ? line_of(*rs[i].get("name")) : rs[i].line;
      if (auto [it, fresh] = seen.emplace(spec.name, at); !fresh)
        fail_at(rs[i], "name",
                fmt::format("a resource named '{}' is already declared at line {}", spec.name, it->second));
      if (i == 0) {
        s.set_first_resource(spec);
      } else {
        s.more_resources.push_back(std::move(spec));
      }
    }
  } else if (auto r = sub_table(root, "resource")) {
    s.set_first_resource(resource_table(*r));
  }

  if (auto p = sub_table(root, "protocol")) protocol_config(*p, s.config, false);
  if (auto ps = sub_table(root, "protocols")) {
    for (const auto& [k, v] : *ps->t) {
      const std::string name(k.str());
      const std::string field = ps->field(name);
      protocol_name(name,
                    k.source().begin.line ? static_cast<std::uint32_t>(k.source().begin.line) : line_of(v),
                    field);
      if (!v.is_table())
        fail(line_of(v), field,
             fmt::format("expected a table [protocols.\"{}\"], got {}", name, type_name(v)));
      ProtocolConfig c = s.config;
      protocol_config(Tab{v.as_table(), fmt::format("protocols.\"{}\"", name), line_of(v)}, c, true);
      s.per_protocol[name] = std::move(c);
    }
  }

  // Service process names: the union of what every protocol the file may run declares for its config
  // (scenarios/services.hpp). A world only has some of them; the builder ignores names its protocol lacks.
  services_ = declared_services(s);
  auto add = [&](const std::string& n) {
    if (process_set_.insert(n).second) processes_.push_back(n);
  };
  for (const ResourceSpec& r : s.all_resources()) {
    add(r.name);
    resource_names_.push_back(r.name);
  }
  for (const std::string& n : services_.names) add(n);

  clients(root, s);
  if (s.clients.empty()) fail(1, "client", "a scenario needs at least one [[client]] (name = \"client1\")");
  for (const auto& c : s.clients) add(c.name);
  // For messages: clients first (what people mostly target), then the services compactly.
  if (s.clients.size() <= 6) {
    for (const auto& c : s.clients) service_summary_.push_back(c.name);
  } else {
    service_summary_.push_back(fmt::format("{}..{}", s.clients.front().name, s.clients.back().name));
  }
  service_summary_.push_back(s.resource_name);
  for (const ResourceSpec& r : s.more_resources) service_summary_.push_back(r.name);
  if (!services_.names.empty()) service_summary_.push_back(services_.summary());

  network(root, s);
  clocks(root, s);

  for (const Tab& f : table_array(root, "fault")) s.faults.push_back(fault(f, s));

  expect(root, s);
  variants(root, s);
  protocol_limits(root, s);
  return s;
}

ResourceSpec Loader::resource_table(const Tab& r) const {
  only_schema(r, "resource");
  ResourceSpec spec;
  if (auto v = str(r, "name")) {
    if (!valid_ident(*v)) fail_at(r, "name", fmt::format("'{}' is not a valid process name", *v));
    spec.name = *v;
  }
  if (auto v = str(r, "key")) spec.key = *v;
  if (r.has("mode")) {
    const auto m = *enumeration<int>(r, "mode", {{"auto", 0}, {"unfenced", 1}, {"fenced", 2}});
    if (m == 1) spec.mode = ResourceMode::unfenced;
    if (m == 2) spec.mode = ResourceMode::fenced;
  }
  if (r.has("kind"))
    spec.kind = *enumeration<ResourceKind>(r, "kind",
                                           {{"store", ResourceKind::store},
                                            {"checkpoint-table", ResourceKind::checkpoint_table},
                                            {"external-api", ResourceKind::external_api},
                                            {"cas-row", ResourceKind::cas_row},
                                            {"job-queue", ResourceKind::job_queue},
                                            {"object-store", ResourceKind::object_store}});
  if (auto v = str(r, "variant", true)) spec.variant = *v;
  for (const char* k : {"idempotency_keys", "idempotency_retention"})
    if (r.has(k) && spec.kind != ResourceKind::external_api)
      fail_at(r, k, fmt::format("{} is a field of kind = \"external-api\" only", k));
  if (auto v = boolean(r, "idempotency_keys")) spec.idempotency_keys = *v;
  if (auto v = duration(r, "idempotency_retention", Sign::positive)) spec.idempotency_retention = *v;
  if (spec.kind == ResourceKind::external_api && spec.mode == ResourceMode::fenced)
    fail_at(r, "mode", "an external API cannot check tokens: mode = \"fenced\" needs another kind");
  kind_fields(r, spec);
  return spec;
}

void Loader::kind_fields(const Tab& r, ResourceSpec& s) const {
  // Each field belongs to one kind: given for another, it is a mistake (a field the resource never reads).
  const std::pair<const char*, ResourceKind> owners[] = {{"max_retries", ResourceKind::cas_row},
                                                         {"period", ResourceKind::job_queue},
                                                         {"job", ResourceKind::job_queue}};
  for (const auto& [field, kind] : owners) {
    if (r.has(field) && s.kind != kind)
      fail_at(r, field,
              fmt::format("'{}' is a field of kind = \"{}\"; this resource is kind = \"{}\"", field,
                          to_string(kind), to_string(s.kind)));
  }
  if (auto v = integer(r, "max_retries", 0, 1000)) s.cas_max_retries = static_cast<std::uint32_t>(*v);
  if (auto v = duration(r, "period", Sign::positive)) s.job_period = *v;
  if (auto v = str(r, "job")) {
    if (!valid_ident(*v)) fail_at(r, "job", fmt::format("'{}' is not a valid job name", *v));
    s.job_name = *v;
  }
}

void Loader::clocks(const Tab& root, Scenario& s) const {
  std::map<std::string, std::uint32_t> clock_nodes;
  for (const Tab& c : table_array(root, "clock")) {
    only_schema(c, "clock");
    ClockSpec spec;
    need(c, "node", "node = \"<process>\"");
    spec.node = *str(c, "node");
    check_process(spec.node, line_of(*c.get("node")), c.field("node"), false);
    if (auto it = clock_nodes.find(spec.node); it != clock_nodes.end()) {
      fail_at(c, "node", fmt::format("the clock of '{}' is already set at line {}", spec.node, it->second));
    }
    clock_nodes.emplace(spec.node, c.line);
    spec.clock = clock_options(c);
    s.clocks.push_back(std::move(spec));
  }
  // [[node]]: one service node's own persistence, and its clock (the same as a [[clock]] table for it).
  std::map<std::string, std::uint32_t> nodes;
  for (const Tab& n : table_array(root, "node")) {
    only_schema(n, "node");
    need(n, "name", "name = \"redis2\" (a lock-service process)");
    const std::string name = *str(n, "name");
    const std::uint32_t l = line_of(*n.get("name"));
    check_process(name, l, n.field("name"), false);
    if (!services_.has(name)) {
      fail(l, n.field("name"),
           fmt::format(
               "'{}' is not a lock-service node: [[node]] sets a service node's persistence (clients and "
               "the store take their clock from [[clock]]); the declared service processes are {}",
               name, services_.summary()));
    }
    if (auto it = nodes.find(name); it != nodes.end())
      fail(l, n.field("name"), fmt::format("'{}' already has a [[node]] table at line {}", name, it->second));
    nodes.emplace(name, n.line);
    NodeSettings ns;
    ns.aof = boolean(n, "aof");
    ns.fsync = fsync_policy(n, "fsync");
    ns.fsync_period = duration(n, "fsync_period", Sign::positive);
    if (ns.fsync && *ns.fsync != FsyncPolicy::never && !ns.aof.value_or(s.config.aof))
      fail_at(n, "fsync", "fsync has no effect without persistence: add aof = true");
    for (auto* c : [&] {
           std::vector<ProtocolConfig*> all{&s.config};
           for (auto& [p, pc] : s.per_protocol) all.push_back(&pc);
           return all;
         }())
      c->node_settings[name] = ns;
    if (n.has("offset") || n.has("drift_ppm")) {
      if (auto it = clock_nodes.find(name); it != clock_nodes.end()) {
        fail_at(n, n.has("offset") ? "offset" : "drift_ppm",
                fmt::format("the clock of '{}' is already set at line {}", name, it->second));
      }
      clock_nodes.emplace(name, n.line);
      ClockSpec spec;
      spec.node = name;
      spec.clock = clock_options(n);
      s.clocks.push_back(std::move(spec));
    }
  }
}

}  // namespace locksim::loading

namespace locksim {

using loading::Loader;

Scenario load_scenario_text(std::string_view text, const std::string& filename) {
  toml::table root;
  try {
    root = toml::parse(text, filename);
  } catch (const toml::parse_error& e) {
    const auto line = static_cast<std::uint32_t>(e.source().begin.line);
    throw InputError(filename, line == 0 ? 1 : line, "syntax",
                     fmt::format("not valid TOML: {}", e.description()));
  }
  return Loader(filename).load(root);
}

Scenario load_scenario_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(path, 0, "file", "is a directory, not a scenario file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, 0, "file", fmt::format("cannot open: {}", std::strerror(errno)));
  constexpr std::size_t kMaxBytes = 16u << 20;
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxBytes)
      throw InputError(path, 0, "file", "is larger than 16 MiB: not a scenario file");
  }
  return load_scenario_text(text, path);
}

}  // namespace locksim
