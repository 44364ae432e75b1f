#pragma once
/// Small hand-built worlds for the Redis protocol tests: the service from Protocol::build, client processes
/// that call make_client + acquire/release, and probes that talk to a node directly.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "locksim/protocols/redis/redis.hpp"

namespace locksim::redis::test {

/// A lock holding as seen by a client, in true time.
struct Holding {
  std::string client;
  std::string value;
  std::optional<std::uint64_t> token;
  Time granted{};         ///< acquire returned
  Time believed_until{};  ///< min(release began, valid_until mapped to true time)
};

struct Harness {
  explicit Harness(const std::string& protocol, ProtocolConfig c = {}, WorldOptions wo = {})
      : world(wo), cfg(std::move(c)) {
    ProtocolRegistry registry;
    register_redis_protocols(registry);
    proto = registry.make(protocol);
    info = build_service(*proto, world, cfg, history);
  }

  /// A client process running `body` with its own LockClient.
  ProcId client(const std::string& name, std::function<void(Context&, LockClient&)> body,
                ProcessOptions po = {}) {
    Protocol* p = proto.get();
    const ProtocolConfig* c = &cfg;
    return world.spawn(
        name,
        [p, c, body = std::move(body)](Context& ctx) {
          auto lock = p->make_client(ctx, *c);
          body(ctx, *lock);
        },
        po);
  }

  /// The true time at which client `proc`'s monotonic clock reads `local`.
  Time true_time(ProcId proc, Time local) { return world.clock(proc).true_time_at(local); }

  /// A client that loops `rounds` times: acquire, hold for `hold`, release; records each holding in `out`.
  ProcId looping_client(const std::string& name, int rounds, Duration hold, std::vector<Holding>& out,
                        Duration ttl = 10s) {
    World* w = &world;
    std::vector<Holding>* o = &out;
    return client(name, [=](Context& ctx, LockClient& lock) {
      for (int i = 0; i < rounds; ++i) {
        auto g = lock.acquire(ctx, "lock", ttl);
        if (!g) continue;
        const Time granted = w->now();
        ctx.sleep(hold);
        const Time until = std::min(w->now(), w->clock(ctx.self()).true_time_at(g->valid_until));
        o->push_back({ctx.name(), g->value, g->token, granted, until});
        lock.release(ctx, *g);
      }
    });
  }

  /// A probe: at true time `at`, GET `key` from `node`; the answer (or "timeout") goes to `out`.
  void probe(const std::string& node, const std::string& key, Time at, std::optional<std::string>& out,
             bool& answered) {
    World* w = &world;
    auto* o = &out;
    auto* a = &answered;
    world.spawn(fmt::format("probe-{}-{}", node, at.count()), [=](Context& ctx) {
      ctx.sleep(at - w->now());
      auto m = ctx.call(ctx.lookup(node), command_message({.op = Op::get, .key = key}), 1s);
      *a = m.has_value();
      if (m) *o = m->as<Reply>()->value;
    });
  }

  World world;
  History history;
  ProtocolConfig cfg;
  std::unique_ptr<Protocol> proto;
  ServiceInfo info;
};

/// True if two holdings by different clients overlap in true time.
inline bool overlap(const Holding& a, const Holding& b) {
  return a.client != b.client && a.granted < b.believed_until && b.granted < a.believed_until;
}

inline std::optional<std::pair<Holding, Holding>> first_overlap(const std::vector<Holding>& hs) {
  for (std::size_t i = 0; i < hs.size(); ++i)
    for (std::size_t j = i + 1; j < hs.size(); ++j)
      if (overlap(hs[i], hs[j])) return std::pair{hs[i], hs[j]};
  return std::nullopt;
}

}  // namespace locksim::redis::test
