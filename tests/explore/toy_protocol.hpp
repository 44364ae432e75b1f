#pragma once
// A small protocol for the explore tests (copied from tests/scenarios/runner_test.cpp): one server, leases by
// the server's monotonic clock, a token counter. Its server is named "redis1" so replay files of its runs
// pass the scenario loader's process-name check (clients, the resource, redisN / replicaN / raftN).
#include <fmt/format.h>

#include <map>

#include "scenarios/runner.hpp"

namespace locksim::test {

struct ToyReq {
  std::string key, value;
  Duration ttl;
  bool release = false;
};
struct ToyRep {
  bool ok = false;
  std::uint64_t token = 0;
};

class ToyClient : public LockClient {
 public:
  explicit ToyClient(ProcId server) : server_(server) {}
  std::optional<Grant> acquire(Context& ctx, const std::string& key, Duration ttl) override {
    for (int attempt = 0; attempt < 5; ++attempt) {
      const Time start = ctx.now();
      std::string value = fmt::format("{}-{}", ctx.name(), ctx.rng().next() % 1000000);
      auto rep = ctx.call(server_, Message::of("ACQ", ToyReq{key, value, ttl}), 100ms);
      if (rep && rep->as<ToyRep>()->ok) return Grant{key, value, rep->as<ToyRep>()->token, start + ttl};
      ctx.sleep(100ms);
    }
    return std::nullopt;
  }
  bool extend(Context&, Grant&, Duration) override { return false; }
  void release(Context& ctx, const Grant& g) override {
    ctx.call(server_, Message::of("REL", ToyReq{g.key, g.value, 0ns, true}), 100ms);
  }

 private:
  ProcId server_;
};

class ToyProtocol : public Protocol {
 public:
  explicit ToyProtocol(bool fenced) : fenced_(fenced) {}
  std::string name() const override { return fenced_ ? "toylock+fence" : "toylock"; }
  std::string summary() const override { return "test protocol"; }
  bool fenced() const override { return fenced_; }
  ServiceInfo build(World& world, const ProtocolConfig&, History& history) override {
    History* h = &history;
    World* w = &world;
    ProcId s = world.spawn(
        "redis1",
        [h, w](Context& ctx) {
          std::map<std::string, std::pair<std::string, Time>> held;
          std::uint64_t counter = 33;
          for (;;) {
            auto m = ctx.receive();
            const auto* rq = m->as<ToyReq>();
            if (!rq) continue;
            auto it = held.find(rq->key);
            const bool free = it == held.end() || it->second.second <= ctx.now();
            if (rq->release) {
              if (!free && it->second.first == rq->value) held.erase(it);
              ctx.reply(*m, Message::of("OK", ToyRep{true, 0}));
            } else if (free) {
              held[rq->key] = {rq->value, ctx.now() + rq->ttl};
              h->service_set(w->now(), ctx.name(), rq->key, rq->value);
              ctx.reply(*m, Message::of("OK", ToyRep{true, counter++}));
            } else {
              ctx.reply(*m, Message::of("NO", ToyRep{false, 0}));
            }
          }
        },
        ProcessOptions{.daemon = true});
    return ServiceInfo{{s}};
  }
  std::unique_ptr<LockClient> make_client(Context& ctx, const ProtocolConfig&) override {
    return std::make_unique<ToyClient>(ctx.lookup("redis1"));
  }

 private:
  bool fenced_;
};

/// Registers toylock and toylock+fence once (call before any thread starts).
inline void register_toy() {
  static bool done = false;
  if (done) return;
  done = true;
  register_builtin_protocols();
  auto& reg = ProtocolRegistry::instance();
  reg.add("toylock", "test", [] { return std::make_unique<ToyProtocol>(false); });
  reg.add("toylock+fence", "test", [] { return std::make_unique<ToyProtocol>(true); });
}

/// Kleppmann's story with the toy: client1 acquires at 0, client2 from 1 s; optionally the scripted pause.
inline Scenario toy_scenario(Duration pause = 0ns) {
  Scenario sc;
  sc.name = "toy-gc-pause";
  sc.title = "GC pause after acquire";
  sc.file = "test";
  sc.config.ttl = 10s;
  sc.network.defaults.delay = DelayDist::uniform_of(1ms, 3ms);
  ClientSpec c1{.name = "client1"};
  ClientSpec c2{.name = "client2", .start = 1s, .writes_per_hold = 2, .work_min = 100ms, .work_max = 100ms};
  sc.clients = {c1, c2};
  if (pause > 0ns) {
    FaultSpec f;
    f.fault.kind = Fault::Kind::pause;
    f.fault.duration = pause;
    f.fault.when = Trigger::on_note({}, "lease-check");
    f.target = "client1";
    f.trigger_proc = "client1";
    sc.faults.push_back(f);
  }
  sc.max_time = 60s;
  return sc;
}

}  // namespace locksim::test
