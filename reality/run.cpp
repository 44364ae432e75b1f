#include "reality/run.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <sstream>

#include "locksim/protocols/lock.hpp"
#include "locksim/protocols/zookeeper/zookeeper.hpp"
#include "locksim/scenarios/services.hpp"
#include "reality/children.hpp"
#include "reality/client.hpp"
#include "reality/etcd_server.hpp"
#include "reality/pg_server.hpp"
#include "reality/plan.hpp"
#include "reality/real_run.hpp"
#include "reality/redis_server.hpp"
#include "reality/store_server.hpp"
#include "reality/zk_client.hpp"
#include "reality/zk_server.hpp"

namespace locksim::reality {

namespace detail {

namespace {

std::optional<std::uint64_t> parse_token(const std::string& t) {
  if (t == "-") return std::nullopt;
  return std::stoull(t);
}

}  // namespace

RealRun::RealRun(const Scenario& sc, std::string protocol, const RealOptions& opts)
    : sc_(sc), protocol_(std::move(protocol)), opts_(opts), dir_("locksim-reality-") {}

RealRun::~RealRun() {
  // A server whose pause outlasts the run runs again first: what closes its sessions (the ZooKeeper
  // recorder's) waits for its answer.
  for (const auto& a : armed_)
    if (a.spec->fault.kind == Fault::Kind::pause && !child(a.target))
      if (const pid_t pid = server_pid(a.target); pid > 0) ::kill(pid, SIGCONT);
  for (Child& c : children_) {
    kill_and_reap(c.pid);
    if (c.report >= 0) ::close(c.report);
    if (c.ack >= 0) ::close(c.ack);
  }
  proxy_.reset();  // its connections and ports closed
  sentinel_.reset();
  repl_proxy_.reset();
  listeners_.clear();
  servers_.clear();  // kills what still runs
  etcd_.reset();
  pg_.reset();
  zk_.reset();
  reap_adopted();  // what a killed server had started (a redis-server's fork, a postmaster's backends)
}

RunOutput RealRun::run() {
  register_builtin_protocols();
  auto proto = ProtocolRegistry::instance().make(protocol_);
  const ProtocolConfig& cfg = sc_.config_for(protocol_);
  fenced_ = proto->fenced() || (protocol_ == "redis" && cfg.incr_token);
  const ResourceMode mode =
      sc_.resource_mode.value_or(fenced_ ? ResourceMode::fenced : ResourceMode::unfenced);

  out_.scenario = sc_.name;
  out_.protocol = protocol_;
  out_.seed = sc_.seed;
  out_.real = true;
  out_.config = cfg;
  out_.resource_mode = mode;
  History& h = out_.history;
  h.protocol = protocol_;
  h.service = proto->declare(cfg);
  h.service_quorum = std::max<std::uint32_t>(1, h.service.quorum);
  h.tokens_fence = fenced_;

  // The servers, each answering PING and watched by its record listener before anything else happens.
  const std::uint32_t n = node_count(sc_, protocol_);
  if (is_etcd(protocol_)) {
    // etcd: the members the simulated world names (raft1..raftN), with leaders and the watcher running.
    std::vector<std::string> members;
    for (const ServiceProcess& p : h.service.processes) members.push_back(p.name);
    etcd_ = std::make_unique<EtcdCluster>(members, dir_.path(), sc_.lock_key);
    if (needs_proxy(sc_, protocol_)) make_member_links();  // the members reach each other through the proxy
    etcd_->start();
    if (cfg.first_token > 1) etcd_->advance_revision(cfg.first_token - 1);
    for (const std::string& m : members) {
      h.service_nodes.push_back(m);
      names_.push_back(m);
      out_.servers.push_back(m);
    }
  }
  if (is_pg(protocol_)) {
    // PostgreSQL: db1, as the simulated world names it, answering a query, with the schema made.
    pg_ = std::make_unique<PgServer>("db1", dir_.path() + "/db1");
    pg_->start();
    h.service_nodes.push_back("db1");
    names_.push_back("db1");
    out_.servers.push_back("db1");
  }
  if (is_zk(protocol_)) {
    // ZooKeeper: zk1..zkN with the scenario's (scaled) tickTime, a leader elected, the recorder watching.
    std::vector<std::string> members;
    for (const ServiceProcess& p : h.service.processes) members.push_back(p.name);
    const auto tick =
        std::chrono::duration_cast<std::chrono::milliseconds>(zk::ensemble_options(cfg).tick_time);
    zk_ = std::make_unique<ZkEnsemble>(members, dir_.path(), tick.count(), sc_.lock_key);
    if (needs_proxy(sc_, protocol_)) make_member_links();  // the members reach each other through the proxy
    zk_->start();
    for (const std::string& m : members) {
      h.service_nodes.push_back(m);
      names_.push_back(m);
      out_.servers.push_back(m);
    }
  }
  for (std::uint32_t i = 1; i <= n && !etcd_ && !pg_ && !zk_; ++i) {
    const std::string name = fmt::format("redis{}", i);
    servers_.push_back(
        std::make_unique<RedisServer>(RedisOptions{name, cfg.aof, cfg.fsync}, dir_.path() + "/" + name));
    servers_.back()->start();
    listeners_.push_back(std::make_unique<RecordListener>(name, servers_.back()->port()));
    listeners_.back()->wait_subscribed();
    h.service_nodes.push_back(name);
    names_.push_back(name);
    out_.servers.push_back(name);
  }
  if (fenced_ && cfg.first_token > 1 && !servers_.empty())
    servers_[0]->command({"SET", sc_.lock_key + ":token", std::to_string(cfg.first_token - 1)});
  if (cfg.replica && !servers_.empty()) start_replica(cfg);
  names_.push_back(sc_.resource_name);
  out_.resource = sc_.resource_name;

  const std::int64_t m1 = mono_ns(), r = real_ns(), m2 = mono_ns();
  t0_ = m1 + (m2 - m1) / 2;
  real0_ = r;
  if (repl_) lag_replication(cfg);
  store_ = std::make_unique<StoreServer>(mode == ResourceMode::fenced, t0_);
  if (needs_proxy(sc_, protocol_)) make_proxy();  // its listening ports before the clients are forked
  for (const ClientSpec& c : sc_.clients) fork_client(c, cfg, n);
  if (zk_) zk_->start_recorder();  // its threads start after the last fork
  if (proxy_) proxy_->start();     // likewise (already running when it carries the members' links)
  store_->start();
  for (std::size_t i = 0; i < sc_.faults.size(); ++i)
    if (fault_applies(sc_, protocol_, sc_.faults[i])) {
      armed_.push_back({&sc_.faults[i], i});
      const FaultSpec& fs = sc_.faults[i];
      if (!static_partition(sc_, protocol_, fs) && fs.fault.when.kind == Trigger::Kind::at)
        actions_.push_back({fs.fault.when.at.count(), ActionKind::fire, armed_.size() - 1});
    }
  loop();
  trace_member_links();
  if (const std::uint64_t n = *unattributed_)
    trace(TraceKind::note, "", "proxy-unattributed",
          fmt::format("{} connection(s) to a member's peer port came from no member's process: forwarded, "
                      "never cut",
                      n));
  assemble();
  return std::move(out_);
}

void RealRun::fork_client(const ClientSpec& c, const ProtocolConfig& cfg, std::uint32_t n) {
  ClientPlan plan;
  plan.protocol = protocol_;
  plan.config = cfg;
  plan.spec = c;
  plan.lock_key = sc_.lock_key;
  plan.resource_key = sc_.resource_key;
  plan.send_tokens = fenced_;
  for (auto& s : servers_) plan.ports.push_back(s->port());
  if (sentinel_) {
    // Through the client's own link to sentinel1 when the links are proxied; the sentinel names the ports it
    // monitors (the entry links' when the Redis processes are linked through the proxy).
    plan.sentinel_port = port_for(c.name, "sentinel1", sentinel_->port());
    plan.real_ports = redis_entry_ports_.empty() ? plan.ports : redis_entry_ports_;
  }
  if (etcd_) plan.ports = etcd_->client_ports();
  if (pg_) {
    plan.ports = {pg_->port()};
    // Through the client's link of the proxy when there is one.
    plan.pg_conninfo = pg_->conninfo(port_for(c.name, "db1", pg_->port()));
    // The simulated server's idle_in_transaction_timeout is PostgreSQL's own setting, per session.
    if (const auto idle = cfg.idle_in_transaction_timeout.count() / 1'000'000; idle > 0)
      plan.pg_conninfo += fmt::format(" options='-c idle_in_transaction_session_timeout={}'", idle);
    plan.same_db = cfg.same_db_resource;
  }
  if (zk_) plan.ports = zk_->client_ports();
  if (proxy_) {
    // Every server and the store through the client's own links of the proxy.
    const auto servers = server_ports();
    for (std::size_t i = 0; i < plan.ports.size() && i < servers.size(); ++i)
      plan.ports[i] = port_for(c.name, servers[i].first, servers[i].second);
  }
  plan.cut.assign(n, 0);
  for (const FaultSpec& f : sc_.faults) {
    if (!fault_applies(sc_, protocol_, f) || !static_partition(sc_, protocol_, f)) continue;
    auto on = [&](const std::vector<std::string>& side, const std::string& x) {
      return std::find(side.begin(), side.end(), x) != side.end();
    };
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::string node = fmt::format("redis{}", i + 1);
      if ((on(f.side_a, c.name) && on(f.side_b, node)) || (on(f.side_b, c.name) && on(f.side_a, node)))
        plan.cut[i] = 1;
    }
  }
  plan.store_port = port_for(c.name, sc_.resource_name, store_->port());
  plan.t0 = t0_;
  int rep[2], ack[2];
  if (::pipe2(rep, O_CLOEXEC) < 0 || ::pipe2(ack, O_CLOEXEC) < 0) throw std::runtime_error("pipe failed");
  plan.report_fd = rep[1];
  plan.ack_fd = ack[0];
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    become_child();
    ::close(rep[0]);
    ::close(ack[1]);
    try {
      client_main(plan);
    } catch (...) {
    }
    ::_exit(4);
  }
  register_child(pid);
  ::close(rep[1]);
  ::close(ack[0]);
  Child ch;
  ch.name = c.name;
  names_.push_back(c.name);
  ch.id = id_of(c.name);
  ch.pid = pid;
  ch.report = rep[0];
  ch.ack = ack[1];
  children_.push_back(std::move(ch));
  out_.clients.push_back(c.name);
}

void RealRun::start_replica(const ProtocolConfig& cfg) {
  RedisServer& master = *servers_.at(0);
  {
    std::lock_guard<std::mutex> lock(redis_pids_->mu);
    redis_pids_->v.emplace_back(master.name(), master.pid());
  }
  RedisOptions ro{"replica1", cfg.aof, cfg.fsync};
  const bool linked = needs_proxy(sc_, protocol_);
  if (!linked) {
    // The replication stream through a proxy link of its own (replica1 connects to it as to its master), so
    // its master→replica direction can lag; the client links' proxy (network.cpp) is another one. The
    // sentinel talks to both servers directly.
    repl_proxy_ = std::make_unique<Proxy>(sc_.seed ^ 0x7265706c);
    repl_link_ = repl_proxy_->add_link("replica1", master.name(), master.port());
    repl_proxy_->start();
    repl_ = repl_proxy_.get();
    ro.replicaof = repl_proxy_->port(repl_link_);
  }
  servers_.push_back(std::make_unique<RedisServer>(ro, dir_.path() + "/replica1"));
  RedisServer& replica = *servers_.back();
  // Every link between redis1, replica1 and sentinel1 through proxy_ (network.cpp): replica1 replicates
  // from redis1's entry port and announces its own entry port, which the sentinel reads in redis1's INFO.
  if (linked) {
    make_member_links();
    replica.announce(redis_entry_ports_.at(1));
  }
  replica.start();
  {
    std::lock_guard<std::mutex> lock(redis_pids_->mu);
    redis_pids_->v.emplace_back(replica.name(), replica.pid());
  }
  // Made a replica once its pid is known: its connection to the entry port is given to its own link.
  const std::uint16_t upstream = linked ? redis_entry_ports_.at(0) : ro.replicaof;
  if (linked) replica.command({"REPLICAOF", "127.0.0.1", std::to_string(upstream)});
  listeners_.push_back(std::make_unique<RecordListener>("replica1", replica.port()));
  listeners_.back()->wait_subscribed();
  // Its initial sync done before time 0.
  const std::int64_t sync_start = mono_ns(), deadline = sync_start + 10'000'000'000;
  while (replica.info("replication", "master_link_status") != "up") {
    check_interrupted();
    if (mono_ns() > deadline)
      throw StartError(
          fmt::format("replica1: no master_link_status:up within 10 s (replica of 127.0.0.1:{})", upstream));
    ::usleep(10'000);
  }
  const std::int64_t synced = mono_ns();
  // down-after-milliseconds is the scenario's failover_after. The sentinel monitors redis1 where replica1
  // replicates from it (else the sentinel would "fix" replica1's master address: +fix-slave-config).
  const std::int64_t down_after = std::max<std::int64_t>(1, cfg.failover_after.count() / 1'000'000);
  sentinel_ = std::make_unique<RedisSentinel>(dir_.path() + "/sentinel1", linked ? upstream : master.port(),
                                              down_after, std::max<std::int64_t>(1000, 2 * down_after));
  auto pids = redis_pids_;
  sentinel_->on_spawn([pids](pid_t pid) {
    std::lock_guard<std::mutex> lock(pids->mu);
    pids->v.emplace_back("sentinel1", pid);
  });
  sentinel_->start(1);
  out_.history.service_nodes.push_back("replica1");
  names_.push_back("replica1");
  names_.push_back("sentinel1");
  out_.servers.push_back("replica1");
  out_.servers.push_back("sentinel1");
  trace(
      TraceKind::note, "sentinel1", "sentinel",
      fmt::format("replica1 synced through port {} in {:.0f} ms; sentinel on port {} knew it {:.0f} ms later "
                  "(down-after-milliseconds {})",
                  upstream, static_cast<double>(synced - sync_start) / 1e6, sentinel_->port(),
                  static_cast<double>(mono_ns() - synced) / 1e6, down_after),
      0);
}

void RealRun::lag_replication(const ProtocolConfig& cfg) {
  repl_->set_delay(repl_link_, Proxy::Dir::down, Dist::constant_of(cfg.replication_delay));
  trace(TraceKind::note, "replica1", "replication-lag",
        fmt::format("redis1->replica1 held {} ms per chunk", cfg.replication_delay.count() / 1'000'000), 0);
}

void RealRun::on_line(Child& c, const std::string& line) {
  std::istringstream in(line);
  std::string what;
  in >> what;
  if (what == "note") {
    std::int64_t t = 0;
    std::string label, detail;
    in >> t >> label;
    in >> std::ws;
    std::getline(in, detail);
    trace(TraceKind::note, c.name, label, detail, t);
    if (etcd_ && label == "acquire-committed") {
      // The client counts itself granted after this ack: wait until etcd's own event reached the watcher.
      const auto at = detail.find("revision=");
      if (at != std::string::npos) etcd_->wait_record(std::stoull(detail.substr(at + 9)), 2'000'000'000);
    }
    if (zk_ && label == "acquire-committed") {
      // Likewise: until the parent's own session saw the client's node become the lowest child.
      const auto at = detail.find("czxid=");
      if (at != std::string::npos)
        zk_->recorder().wait_record(std::stoull(detail.substr(at + 6)), 2'000'000'000);
    }
    for (std::size_t a = 0; a < armed_.size(); ++a) {
      const Fault& f = armed_[a].spec->fault;
      if (armed_[a].fired || f.when.kind != Trigger::Kind::note || f.when.label != label) continue;
      const std::string& who = armed_[a].spec->trigger_proc;
      if (!who.empty() && who != "*" && who != c.name) continue;
      if (++armed_[a].seen != std::max<std::uint32_t>(1, f.when.nth)) continue;
      if (f.when.delay > 0ns)
        actions_.push_back({now() + f.when.delay.count(), ActionKind::fire, a});
      else
        fire(a);  // before the ack: the pause falls exactly after the note
    }
    const char b = 'k';
    if (!c.done) (void)!::write(c.ack, &b, 1);
  } else if (what == "grant") {
    std::uint64_t g = 0;
    std::int64_t req = 0, got = 0, until = 0;
    std::string token, value;
    in >> g >> req >> got >> until >> token >> value;
    GrantRecord r;
    r.client = c.name;
    r.key = sc_.lock_key;
    r.value = value;
    r.token = parse_token(token);
    r.requested = Time{req};
    r.granted = Time{got};
    r.believed_valid_until = Time{until};
    c.grants[g] = r;
  } else if (what == "end") {
    std::uint64_t g = 0;
    std::int64_t t = 0;
    std::string reason;
    in >> g >> t >> reason;
    auto it = c.grants.find(g);
    if (it != c.grants.end() && it->second.belief_end == kTimeMax) {
      it->second.belief_end = Time{t};
      it->second.end_reason = reason;
    }
  } else if (what == "write") {
    std::uint64_t w = 0, g = 0;
    std::int64_t sent = 0, checked = 0;
    int lc = 0;
    std::string token, value;
    in >> w >> g >> sent >> checked >> lc >> token >> value;
    WriteRecord r;
    r.client = c.name;
    r.key = sc_.resource_key;
    r.value = value;
    r.token = parse_token(token);
    r.sent = Time{sent};
    r.checked = Time{checked};
    r.lease_checked = lc != 0;
    c.writes[w] = r;
    c.write_grant[w] = g;
  } else if (what == "ack") {
    std::uint64_t w = 0;
    int ok = 0;
    in >> w >> ok;
    if (auto it = c.writes.find(w); it != c.writes.end()) it->second.acknowledged = ok != 0;
  } else if (what == "done") {
    trace(TraceKind::exit, c.name, "exit");
  }
}

void RealRun::read_child(Child& c) {
  char buf[4096];
  const ssize_t n = ::read(c.report, buf, sizeof buf);
  if (n <= 0) {
    ::close(c.report);
    c.report = -1;
    if (c.pid > 0) {
      int st = 0;
      ::waitpid(c.pid, &st, 0);
      forget_child(c.pid);
      c.pid = -1;
    }
    c.done = true;
    return;
  }
  c.buffer.append(buf, static_cast<std::size_t>(n));
  for (std::size_t nl; (nl = c.buffer.find('\n')) != std::string::npos;) {
    const std::string line = c.buffer.substr(0, nl);
    c.buffer.erase(0, nl + 1);
    on_line(c, line);
  }
}

void RealRun::loop() {
  const std::int64_t limit = std::min<std::int64_t>(sc_.max_time.count(), opts_.deadline_ns);
  for (;;) {
    check_interrupted();
    // Due actions, in time order.
    std::sort(actions_.begin(), actions_.end(), [](const Action& a, const Action& b) { return a.at < b.at; });
    while (!actions_.empty() && actions_.front().at <= now()) {
      const Action act = actions_.front();
      actions_.erase(actions_.begin());
      const FaultSpec& fs = *armed_[act.armed].spec;
      if (act.kind == ActionKind::fire) {
        fire(act.armed);
      } else if (act.kind == ActionKind::heal || act.kind == ActionKind::unspike) {
        end_network(act);
      } else if (act.kind == ActionKind::resume) {
        if (Child* c = child(fs.target); c && c->pid > 0) {
          ::kill(c->pid, SIGCONT);
          trace(TraceKind::resume, c->name, "resume", "SIGCONT");
        } else if (!child(fs.target)) {
          pause_server(act.armed, false);
        }
      } else if (RedisServer* s = server(fs.target)) {
        restart(*s);
      } else if (const std::string& m = armed_[act.armed].target;
                 etcd_ && etcd_->has(m) && !etcd_->running(m)) {
        etcd_->restart(m);
        trace(TraceKind::restart, m, "restart", "etcd again on its folder");
      } else if (zk_ && zk_->has(m) && !zk_->running(m)) {
        zk_->restart(m);
        trace(TraceKind::restart, m, "restart", "ZooKeeper again on its folder");
      }
    }
    std::vector<pollfd> fds;
    std::vector<Child*> who;
    for (Child& c : children_)
      if (c.report >= 0) {
        fds.push_back({c.report, POLLIN, 0});
        who.push_back(&c);
      }
    if (fds.empty()) break;  // every client has ended
    if (now() >= limit) {
      if (limit < sc_.max_time.count())
        throw std::runtime_error(fmt::format("{} × {}: the real run did not finish within {} s", sc_.name,
                                             protocol_, opts_.deadline_ns / 1'000'000'000));
      out_.run.reason = StopReason::time_limit;
      break;
    }
    std::int64_t wait = 20'000'000;
    for (const Action& a : actions_) wait = std::min(wait, std::max<std::int64_t>(0, a.at - now()));
    ::poll(fds.data(), fds.size(), static_cast<int>((wait + 999'999) / 1'000'000));
    for (std::size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents) read_child(*who[i]);
  }
  out_.run.end = Time{now()};
}

}  // namespace detail

RunOutput run_real(const Scenario& sc, const std::string& protocol, const RealOptions& opts) {
  install_signal_handlers();
  detail::RealRun run(sc, protocol, opts);
  return run.run();
}

}  // namespace locksim::reality
