// The network of a real run: the proxy on every client link (reality/proxy.hpp), the scenario's delays on
// it, and its partitions, heals and delay spikes fired on it.
#include <fmt/format.h>

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "locksim/scenarios/runner.hpp"
#include "reality/plan.hpp"
#include "reality/real_run.hpp"

namespace locksim::reality::detail {

namespace {

/// How long a connection to a ZooKeeper member's quorum port waits for it to listen (a follower's own
/// retries last initLimit ticks: 20 s here).
constexpr std::chrono::seconds kQuorumPatience{5};

bool on(const std::vector<std::string>& side, const std::string& n) {
  return std::find(side.begin(), side.end(), n) != side.end();
}

bool matches(const std::string& pattern, const std::string& name) {
  return pattern.empty() || pattern == "*" || pattern == name;
}

/// The delay of the directed link from → to: the first [[network.link]] naming both exactly, else the first
/// that matches with "*", else [network]'s.
const Dist& delay_of(const Scenario& sc, const std::string& from, const std::string& to) {
  for (const LinkSpec& l : sc.links)
    if (l.from == from && l.to == to) return l.options.delay;
  for (const LinkSpec& l : sc.links)
    if (matches(l.from, from) && matches(l.to, to)) return l.options.delay;
  return sc.network.defaults.delay;
}

std::string describe(const Dist& d) {
  if (d.is_constant()) return fmt::format("{} ms", static_cast<double>(d.min.count()) / 1e6);
  return fmt::format("drawn ({}..{} ms)", static_cast<double>(d.min.count()) / 1e6,
                     static_cast<double>(d.max.count()) / 1e6);
}

/// The process among `pids` that holds the other end of `fd`, a connection accepted on loopback port
/// `port`: the peer's port from getpeername, its socket's inode from /proc/net/tcp (local = that port, remote
/// = `port`), then `socket:[inode]` among /proc/<pid>/fd. Empty: not found (not one of them, or gone).
std::optional<std::string> dialer(int fd, std::uint16_t port,
                                  const std::vector<std::pair<std::string, pid_t>>& pids) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) < 0 || a.sin_family != AF_INET) return {};
  const std::string local = fmt::format("0100007F:{:04X}", ntohs(a.sin_port));
  const std::string remote = fmt::format("0100007F:{:04X}", port);
  std::ifstream tcp("/proc/net/tcp");
  std::string line, inode;
  while (inode.empty() && std::getline(tcp, line)) {
    char l[64], r[64];
    unsigned long ino = 0;
    if (std::sscanf(line.c_str(), " %*d: %63s %63s %*x %*s %*s %*s %*d %*d %lu", l, r, &ino) == 3 &&
        l == local && r == remote)
      inode = fmt::format("socket:[{}]", ino);
  }
  if (inode.empty()) return {};
  for (const auto& [name, pid] : pids) {
    if (pid <= 0) continue;
    const std::string dir = fmt::format("/proc/{}/fd", pid);
    DIR* d = ::opendir(dir.c_str());
    if (!d) continue;
    bool found = false;
    while (const dirent* e = ::readdir(d)) {
      char buf[64];
      const std::string path = dir + "/" + e->d_name;
      const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
      if (n > 0 && inode.compare(0, std::string::npos, buf, static_cast<std::size_t>(n)) == 0) {
        found = true;
        break;
      }
    }
    ::closedir(d);
    if (found) return name;
  }
  return {};
}

}  // namespace

std::vector<std::pair<std::string, std::uint16_t>> RealRun::server_ports() const {
  std::vector<std::pair<std::string, std::uint16_t>> out;
  for (const auto& s : servers_) out.emplace_back(s->name(), s->port());
  if (sentinel_) out.emplace_back("sentinel1", sentinel_->port());  // the clients ask it for the master
  if (etcd_) {
    const auto ports = etcd_->client_ports();
    const auto peers = etcd_->peer_ports();
    for (std::size_t i = 0; i < ports.size(); ++i) out.emplace_back(peers.at(i).first, ports[i]);
  }
  if (zk_) {
    const auto ports = zk_->client_ports();
    const auto peers = zk_->peer_ports();
    for (std::size_t i = 0; i < ports.size(); ++i) out.emplace_back(peers.at(i).name, ports[i]);
  }
  if (pg_) out.emplace_back("db1", pg_->port());
  out.emplace_back(sc_.resource_name, store_->port());
  return out;
}

void RealRun::make_member_links() {
  if (!proxy_) proxy_ = std::make_unique<Proxy>(sc_.seed);
  const auto link = [&](const std::string& from, const std::string& to, std::uint16_t target, bool hidden,
                        const char* what) {
    const std::size_t l =
        hidden ? proxy_->add_hidden_link(from, to, target) : proxy_->add_link(from, to, target);
    member_links_.push_back(l);
    const Dist& up = delay_of(sc_, from, to);
    const Dist& down = delay_of(sc_, to, from);
    proxy_->set_delay(l, Proxy::Dir::up, up);
    proxy_->set_delay(l, Proxy::Dir::down, down);
    member_lines_.push_back(fmt::format("{}->{} {}{} -> {} (delay {} / {})", from, to, what,
                                        hidden ? std::string() : fmt::format(" port {}", proxy_->port(l)),
                                        target, describe(up), describe(down)));
    return l;
  };
  if (zk_) {
    // A link per ordered pair (the dialing member -> the other) and port: member `from`'s own zoo.cfg names
    // the proxy's ports in `to`'s line.
    const auto peers = zk_->peer_ports();
    std::map<std::pair<std::string, std::string>, std::size_t> election;
    for (const auto& from : peers)
      for (const auto& to : peers) {
        if (from.name == to.name) continue;
        const std::size_t q = link(from.name, to.name, to.quorum, false, "quorum");
        // A leader opens its quorum port once elected; a follower that dials it first is refused and
        // retries (for initLimit ticks): the proxy waits for the port rather than close the connection.
        proxy_->set_connect_patience(q, kQuorumPatience);
        const std::size_t e = link(from.name, to.name, to.election, false, "election");
        election[{from.name, to.name}] = e;
        zk_->route(from.name, to.name, proxy_->port(q), proxy_->port(e));
      }
    // A member keeps the election connection of a pair only from the higher id; dialed by the lower one,
    // the higher closes it and dials back the address the lower announced in its first message (its own
    // server.N line: its real election port). Announced through the proxy as the port of the link back.
    for (const auto& [pair, e] : election)
      for (const auto& p : peers)
        if (p.name == pair.first)
          proxy_->set_rewrite(
              e, Proxy::Dir::up, fmt::format("127.0.0.1:{}", p.election),
              fmt::format("127.0.0.1:{}", proxy_->port(election.at({pair.second, pair.first}))));
  }
  if (etcd_) {
    // Every member dials a member at the one peer URL it advertises (stored cluster-wide): that is the
    // entry link's port, and each connection accepted there is given to the link of the member that dialed
    // it (its process found by its socket), or stays on the entry link (forwarded, never cut) with a note.
    const auto peers = etcd_->peer_ports();
    const EtcdCluster* cluster = etcd_.get();
    for (const auto& [to, target] : peers) {
      const std::size_t entry = link("?", to, target, false, "peer (unattributed)");
      std::map<std::string, std::size_t> from_link;
      for (const auto& [from, unused] : peers)
        if (from != to) from_link[from] = link(from, to, target, true, "peer");
      const std::uint16_t port = proxy_->port(entry);
      etcd_->advertise_peer(to, port);
      auto unattributed = unattributed_;
      proxy_->set_classifier(entry,
                             [cluster, from_link, port, unattributed](int fd) -> std::optional<std::size_t> {
                               if (const auto who = dialer(fd, port, cluster->live_pids()))
                                 if (auto it = from_link.find(*who); it != from_link.end()) return it->second;
                               ++*unattributed;
                               return std::nullopt;
                             });
    }
  }
  if (!etcd_ && !zk_ && servers_.size() == 2) {
    // Redis with a replica and a sentinel. Each server gets one entry port, the only address the others
    // have for it: replica1 replicates from redis1's (REPLICAOF), the sentinel monitors redis1 there (the
    // same address, or it would "fix" replica1's master: +fix-slave-config), replica1 announces its own
    // (replica-announce-port), which redis1's INFO lists and the sentinel dials, and after a failover hands
    // to the clients (RedisLink::discover maps it to the client's own link to replica1). Each connection
    // accepted there is given to the link of the process that dialed it (found by its socket, as for etcd).
    auto pids = redis_pids_;
    auto unattributed = unattributed_;
    for (const auto& server : servers_) {
      const std::string& to = server->name();
      const std::size_t entry = link("?", to, server->port(), false, "entry (unattributed)");
      std::map<std::string, std::size_t> from_link;
      for (const std::string from : {"redis1", "replica1", "sentinel1"})
        if (from != to)
          from_link[from] =
              link(from, to, server->port(), true, from == "sentinel1" ? "sentinel" : "replication");
      if (to == "redis1") {
        repl_ = proxy_.get();
        repl_link_ = from_link.at("replica1");
      }
      const std::uint16_t port = proxy_->port(entry);
      redis_entry_ports_.push_back(port);
      proxy_->set_classifier(entry,
                             [pids, from_link, port, unattributed](int fd) -> std::optional<std::size_t> {
                               std::vector<std::pair<std::string, pid_t>> live;
                               {
                                 std::lock_guard<std::mutex> lock(pids->mu);
                                 live = pids->v;
                               }
                               if (const auto who = dialer(fd, port, live))
                                 if (auto it = from_link.find(*who); it != from_link.end()) return it->second;
                               ++*unattributed;
                               return std::nullopt;
                             });
    }
  }
  proxy_->start();  // before the members start: they reach each other through it
}

std::string RealRun::redis_master() const {
  if (!sentinel_) return {};
  // Asked directly (the run's own question, not a client's): the port it names is an entry port.
  const auto port = sentinel_->master_port(200);
  if (port && redis_entry_ports_.size() == 2 && *port == redis_entry_ports_[1]) return "replica1";
  if (port && servers_.size() == 2 && redis_entry_ports_.empty() && *port == servers_[1]->port())
    return "replica1";
  return "redis1";
}

void RealRun::make_proxy() {
  if (!proxy_) proxy_ = std::make_unique<Proxy>(sc_.seed);
  std::vector<std::string> lines = member_lines_;
  for (const ClientSpec& c : sc_.clients)
    for (const auto& [server, port] : server_ports()) {
      const std::size_t l = proxy_->add_link(c.name, server, port);
      proxy_links_[{c.name, server}] = l;
      const Dist& up = delay_of(sc_, c.name, server);
      const Dist& down = delay_of(sc_, server, c.name);
      proxy_->set_delay(l, Proxy::Dir::up, up);
      proxy_->set_delay(l, Proxy::Dir::down, down);
      lines.push_back(fmt::format("{}<->{} port {} -> {} (delay {} / {})", c.name, server, proxy_->port(l),
                                  port, describe(up), describe(down)));
    }
  trace(TraceKind::note, "", "proxy", fmt::format("{} links: {}", proxy_->links(), fmt::join(lines, "; ")));
}

std::uint16_t RealRun::port_for(const std::string& client, const std::string& server,
                                std::uint16_t real) const {
  if (!proxy_) return real;
  auto it = proxy_links_.find({client, server});
  return it == proxy_links_.end() ? real : proxy_->port(it->second);
}

void RealRun::cut(std::size_t link, Proxy::Dir d, bool on) {
  int& n = cut_count_[{link, static_cast<int>(d)}];
  n = on ? n + 1 : std::max(0, n - 1);
  proxy_->set_cut(link, d, n > 0);
}

bool RealRun::fire_network(std::size_t a) {
  const FaultSpec& fs = *armed_[a].spec;
  const Fault& f = fs.fault;
  if (f.kind == Fault::Kind::heal) {
    if (!proxy_) return true;
    for (auto& [key, n] : cut_count_) {
      n = 0;
      proxy_->set_cut(key.first, static_cast<Proxy::Dir>(key.second), false);
    }
    cut_by_.clear();
    partition_names_.clear();
    trace(TraceKind::network, "", "heal", "all");  // as the simulator names a heal of every partition
    return true;
  }
  if (f.kind == Fault::Kind::partition) {
    if (static_partition(sc_, protocol_, fs) || !proxy_)
      return true;  // the clients never contact those nodes
    // Roles and split resolved now, from the real cluster's leader, as the simulator resolves them when the
    // fault fires.
    std::string resolved;
    const auto [side_a, side_b] = resolve_sides(fs, resolved);
    if (!resolved.empty()) trace(TraceKind::note, "", "partition-sides", resolved);
    if (side_a.empty() || side_b.empty()) return true;
    // side_a -> side_b is cut; side_b -> side_a too unless one-way. A link's up direction is from its
    // dialing side (a client, a member dialing another) to the listening one.
    std::vector<std::string> cuts;
    for (std::size_t l = 0; l < proxy_->links(); ++l) {
      const std::string &client = proxy_->from(l), &server = proxy_->to(l);
      const bool ab_up = on(side_a, client) && on(side_b, server);    // a=client -> b=server
      const bool ab_down = on(side_a, server) && on(side_b, client);  // a=server -> b=client
      for (const auto& [hit, dir, both] : {std::tuple{ab_up, Proxy::Dir::up, Proxy::Dir::down},
                                           std::tuple{ab_down, Proxy::Dir::down, Proxy::Dir::up}}) {
        if (!hit) continue;
        cut(l, dir, true);
        cut_by_[a].emplace_back(l, dir);
        cuts.push_back(fmt::format("{}{}{}", dir == Proxy::Dir::up ? client : server,
                                   f.one_way ? "->" : "<->", dir == Proxy::Dir::up ? server : client));
        if (!f.one_way) {
          cut(l, both, true);
          cut_by_[a].emplace_back(l, both);
        }
      }
    }
    // Named as the simulator names a partition: "#1 client1 | redis1,redis2" ("->" when one-way), with the
    // sides' processes this run has; the proxy's cut directions in a note beside it.
    const auto present = [&](const std::vector<std::string>& side) {
      std::vector<std::string> out;
      for (const std::string& n : side)
        if (std::find(names_.begin(), names_.end(), n) != names_.end()) out.push_back(n);
      return fmt::format("{}", fmt::join(out, ","));
    };
    std::string name = fmt::format("#{} {}{}{}", ++partitions_, present(side_a), f.one_way ? " -> " : " | ",
                                   present(side_b));
    trace(TraceKind::network, "", "partition", name);
    trace(TraceKind::note, "", "proxy-cut",
          fmt::format("{}{}", fmt::join(cuts, " "),
                      f.duration > 0ns ? fmt::format(" for {} ns", f.duration.count()) : std::string()));
    partition_names_[a] = std::move(name);
    if (f.duration > 0ns) actions_.push_back({now() + f.duration.count(), ActionKind::heal, a});
    return true;
  }
  if (f.kind == Fault::Kind::delay_spike) {
    if (!proxy_) return true;
    std::vector<std::string> hit;
    for (std::size_t l = 0; l < proxy_->links(); ++l) {
      const std::string &client = proxy_->from(l), &server = proxy_->to(l);
      for (const auto& [sender, receiver, dir] :
           {std::tuple{client, server, Proxy::Dir::up}, std::tuple{server, client, Proxy::Dir::down}}) {
        if (!matches(fs.target, sender) || !matches(fs.peer, receiver)) continue;
        proxy_->set_spike(l, dir, f.extra, f.count);
        spiked_by_[a].emplace_back(l, dir);
        hit.push_back(fmt::format("{}->{}", sender, receiver));
      }
    }
    trace(TraceKind::note, "", "delay-spike",
          fmt::format("+{} ns on {} ({})", f.extra.count(), fmt::join(hit, " "),
                      f.count ? fmt::format("the next {} chunk(s)", f.count) : std::string("every chunk")));
    if (f.duration > 0ns) actions_.push_back({now() + f.duration.count(), ActionKind::unspike, a});
    return true;
  }
  return false;
}

void RealRun::trace_member_links() {
  if (!proxy_ || member_links_.empty()) return;
  std::vector<std::string> out;
  for (std::size_t l : member_links_)
    out.push_back(fmt::format("{}->{} {}/{} bytes in {} connection(s)", proxy_->from(l), proxy_->to(l),
                              proxy_->forwarded(l, Proxy::Dir::up), proxy_->forwarded(l, Proxy::Dir::down),
                              proxy_->accepted(l)));
  trace(TraceKind::note, "", "proxy-member-links", fmt::format("{}", fmt::join(out, "; ")));
  trace(TraceKind::note, "", "leader-at-end", etcd_ ? etcd_->leader() : zk_ ? zk_->leader() : redis_master());
}

std::pair<std::vector<std::string>, std::vector<std::string>> RealRun::resolve_sides(
    const FaultSpec& fs, std::string& detail) const {
  const auto has_role = [](const std::vector<std::string>& side) {
    return std::any_of(side.begin(), side.end(), [](const std::string& n) { return parse_fault_role(n); });
  };
  if (fs.split.empty() && !has_role(fs.side_a) && !has_role(fs.side_b)) return {fs.side_a, fs.side_b};
  // Redis: the master as the sentinel names it (redis1 until a failover), as the simulator's leader is the
  // newest of redis1's and replica1's role records.
  const std::string leader = etcd_ ? etcd_->leader() : zk_ ? zk_->leader() : redis_master();
  if (leader.empty()) {
    detail = "leader: none answers as leader now; nothing is cut";
    return {};
  }
  std::vector<std::string> a, b;
  if (const auto split = parse_fault_split(fs.split)) {
    // The simulator's rule (scenarios/runner.hpp, split_side_a): members in spawn order, the leader's index.
    // Redis: the service's processes as it declares them, the sentinel too (redis1, replica1, sentinel1).
    std::vector<std::string> members;
    for (const auto& [name, port] : server_ports())
      if ((etcd_ && etcd_->has(name)) || (zk_ && zk_->has(name)) ||
          (sentinel_ && (name == "redis1" || name == "replica1" || name == "sentinel1")))
        members.push_back(name);
    const std::size_t n = members.size();
    const std::size_t at =
        static_cast<std::size_t>(std::find(members.begin(), members.end(), leader) - members.begin());
    for (std::size_t i : split_side_a(*split, n, at)) a.push_back(members[i]);
    for (const std::string& p : names_)
      if (!on(a, p)) b.push_back(p);
    detail = fmt::format("split={} leader={}", fs.split, leader);
  } else {
    const auto expand = [&](const std::vector<std::string>& side, std::vector<std::string>& out) {
      for (const std::string& n : side) {
        const std::string& p = parse_fault_role(n) ? leader : n;
        if (!on(out, p)) out.push_back(p);
      }
    };
    expand(fs.side_a, a);
    expand(fs.side_b, b);
    std::erase_if(b, [&](const std::string& p) { return on(a, p); });
    detail = fmt::format("leader={}", leader);
  }
  return {a, b};
}

void RealRun::end_network(const Action& act) {
  if (act.kind == ActionKind::heal) {
    auto it = cut_by_.find(act.armed);
    if (it == cut_by_.end()) return;  // healed by a heal fault already
    for (const auto& [l, d] : it->second) cut(l, d, false);
    cut_by_.erase(it);
    trace(TraceKind::network, "", "heal", partition_names_[act.armed]);
    partition_names_.erase(act.armed);
    if (etcd_ || zk_ || sentinel_)
      trace(TraceKind::note, "", "leader-at-heal",
            etcd_ ? etcd_->leader()
            : zk_ ? zk_->leader()
                  : redis_master());
  } else if (act.kind == ActionKind::unspike) {
    for (const auto& [l, d] : spiked_by_[act.armed]) proxy_->set_spike(l, d, 0ns, 0);
    spiked_by_.erase(act.armed);
    trace(TraceKind::note, "", "delay-spike-end");
  }
}

}  // namespace locksim::reality::detail
