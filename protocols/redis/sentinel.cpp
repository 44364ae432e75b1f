// The sentinel-like failover daemon of the `redis` protocol (declared in redis_node.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <vector>

#include "locksim/protocols/redis/redis_node.hpp"

namespace locksim::redis {

ProcId spawn_sentinel(World& world, const SentinelOptions& opts) {
  return world.spawn(
      opts.name,
      [opts](Context& ctx) {
        const std::size_t n = opts.nodes.size();
        std::vector<ProcId> ids;
        for (const auto& name : opts.nodes) ids.push_back(ctx.lookup(name));
        std::size_t master = 0;
        std::vector<Time> last_ok(n, ctx.now());  // every node is presumed up when the sentinel starts
        std::map<std::uint64_t, std::size_t> pings;
        const Duration interval = std::max(opts.ping_interval, Duration{1ms});
        Time next_tick = ctx.now();
        for (;;) {
          if (ctx.now() >= next_tick) {
            const Time now = ctx.now();
            if (n > 1 && now - last_ok[master] >= opts.failover_after) {
              // The master has been silent for down-after-milliseconds: promote a node that answers.
              for (std::size_t j = 0; j < n; ++j) {
                if (j == master || now - last_ok[j] >= opts.failover_after) continue;
                ctx.note("failover", fmt::format("{} -> {}", opts.nodes[master], opts.nodes[j]));
                master = j;
                ctx.send(ids[j], command_message(Command{.op = Op::promote}));
                break;
              }
            }
            pings.clear();  // a ping unanswered for a whole interval is lost
            for (std::size_t i = 0; i < n; ++i) {
              pings[ctx.send(ids[i], command_message(Command{.op = Op::ping}))] = i;
            }
            next_tick = now + interval;
          }
          auto m = ctx.receive(std::max(Duration{0}, next_tick - ctx.now()));
          if (!m) continue;
          if (auto it = pings.find(m->reply_to); it != pings.end()) {
            const std::size_t i = it->second;
            pings.erase(it);
            const auto* r = m->as<Reply>();
            if (r == nullptr) continue;
            last_ok[i] = ctx.now();
            // Reconcile roles with what the sentinel decided (a restarted old master comes back as a master).
            if (i == master && r->role != "master") {
              ctx.send(ids[i], command_message(Command{.op = Op::promote}));
            } else if (i != master && r->role == "master") {
              ctx.send(ids[i], command_message(Command{.op = Op::replicaof, .peer = opts.nodes[master]}));
            }
          } else if (const auto* c = m->as<Command>(); c != nullptr && c->op == Op::get_master) {
            Reply rep;
            rep.ok = true;
            rep.value = opts.nodes[master];
            ctx.reply(*m, Message::of("master", rep, opts.nodes[master]));
          }
        }
      },
      ProcessOptions{.daemon = true});
}

}  // namespace locksim::redis
