#pragma once
/// "toylock": a tiny user-defined lock protocol for tests that need real runs without the real protocols
/// (redis, raft): one server, leases by the server's monotonic clock, a token counter starting at 33; fenced
/// when asked. It also shows that a user plugs a protocol in through the registry without touching sim/.
/// Header-only so every test folder can reuse it (tests/scenarios/runner_test.cpp has the original copy).
#include <fmt/format.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "locksim/protocols/history.hpp"
#include "locksim/protocols/lock.hpp"
#include "locksim/scenarios/scenario.hpp"
#include "locksim/sim/world.hpp"

namespace locksim::toy {

struct ToyReq {
  std::string key, value;
  Duration ttl;
  bool release = false;
};
struct ToyRep {
  bool ok = false;
  std::uint64_t token = 0;
};

/// Client side: up to five tries 100 ms apart; validity = start of the request + ttl.
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

/// Server side: one process (default "toy1") that records every grant as a service set (ground truth for the
/// checker).
class ToyProtocol : public Protocol {
 public:
  explicit ToyProtocol(bool fenced, std::string server = "toy1")
      : fenced_(fenced), server_(std::move(server)) {}
  std::string name() const override { return fenced_ ? "toylock+fence" : "toylock"; }
  std::string summary() const override { return "test protocol"; }
  bool fenced() const override { return fenced_; }
  ServiceDecl declare(const ProtocolConfig&) const override {
    return ServiceDecl{.processes = {{server_, {ProcessRole::server}}}, .quorum = 1};
  }
  ServiceInfo build(World& world, const ProtocolConfig&, History& history) override {
    const ServiceRecorder recorder = history.recorder(world, server_);
    ProcId s = world.spawn(
        server_,
        [recorder](Context& ctx) {
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
              recorder.grant(rq->key, rq->value);
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
    return std::make_unique<ToyClient>(ctx.lookup(server_));
  }

 private:
  bool fenced_;
  std::string server_;
};

/// Registers "toylock" and "toylock+fence" (idempotent: re-adding replaces the entry) with its server named
/// `server` (declared, so scenario and replay files may name it).
inline void register_toy(const std::string& server = "toy1") {
  auto& reg = ProtocolRegistry::instance();
  reg.add("toylock", "test", [server] { return std::make_unique<ToyProtocol>(false, server); });
  reg.add("toylock+fence", "test", [server] { return std::make_unique<ToyProtocol>(true, server); });
}

/// Kleppmann's GC pause with the toy protocol: client1 is paused for `pause` right after its lease check;
/// client2 acquires once the 10 s lease has expired and writes twice.
inline Scenario gc_pause(Duration pause) {
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

}  // namespace locksim::toy
