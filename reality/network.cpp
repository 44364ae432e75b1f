// The network of a real run: the proxy on every client link (reality/proxy.hpp), the scenario's delays on
// it, and its partitions, heals and delay spikes fired on it.
#include <fmt/format.h>

#include <algorithm>

#include "reality/plan.hpp"
#include "reality/real_run.hpp"

namespace locksim::reality::detail {

namespace {

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

}  // namespace

std::vector<std::pair<std::string, std::uint16_t>> RealRun::server_ports() const {
  std::vector<std::pair<std::string, std::uint16_t>> out;
  for (const auto& s : servers_) out.emplace_back(s->name(), s->port());
  if (etcd_ || zk_) {
    const auto ports = etcd_ ? etcd_->client_ports() : zk_->client_ports();
    for (std::size_t i = 0; i < ports.size(); ++i)
      out.emplace_back(out_.history.service_nodes.at(i), ports[i]);
  }
  if (pg_) out.emplace_back("db1", pg_->port());
  out.emplace_back(sc_.resource_name, store_->port());
  return out;
}

void RealRun::make_proxy() {
  proxy_ = std::make_unique<Proxy>(sc_.seed);
  std::vector<std::string> lines;
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
    // side_a -> side_b is cut; side_b -> side_a too unless one-way. A link's up direction is client ->
    // server.
    std::vector<std::string> cuts;
    for (std::size_t l = 0; l < proxy_->links(); ++l) {
      const std::string &client = proxy_->from(l), &server = proxy_->to(l);
      const bool ab_up = on(fs.side_a, client) && on(fs.side_b, server);    // a=client -> b=server
      const bool ab_down = on(fs.side_a, server) && on(fs.side_b, client);  // a=server -> b=client
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
    std::string name = fmt::format("#{} {}{}{}", ++partitions_, present(fs.side_a),
                                   f.one_way ? " -> " : " | ", present(fs.side_b));
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

void RealRun::end_network(const Action& act) {
  if (act.kind == ActionKind::heal) {
    auto it = cut_by_.find(act.armed);
    if (it == cut_by_.end()) return;  // healed by a heal fault already
    for (const auto& [l, d] : it->second) cut(l, d, false);
    cut_by_.erase(it);
    trace(TraceKind::network, "", "heal", partition_names_[act.armed]);
    partition_names_.erase(act.armed);
  } else if (act.kind == ActionKind::unspike) {
    for (const auto& [l, d] : spiked_by_[act.armed]) proxy_->set_spike(l, d, 0ns, 0);
    spiked_by_.erase(act.armed);
    trace(TraceKind::note, "", "delay-spike-end");
  }
}

}  // namespace locksim::reality::detail
