// End-to-end tests of the runner with a small user-defined protocol: shows that a user plugs a protocol in through
// the registry without touching sim/, and that the workload, history, checker and reports work together.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "reports/report.hpp"
#include "scenarios/catalog.hpp"
#include "scenarios/runner.hpp"

using namespace locksim;

namespace {

/// "toylock": one server, leases by the server's monotonic clock, a token counter. Fenced when asked.
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
        "toy1",
        [h, w](Context& ctx) {
          std::map<std::string, std::pair<std::string, Time>> held;
          std::uint64_t counter = 33;
          for (;;) {
            auto m = ctx.receive();
            const auto* rq = m->as<ToyReq>();
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
    return std::make_unique<ToyClient>(ctx.lookup("toy1"));
  }

 private:
  bool fenced_;
};

void register_toy() {
  auto& reg = ProtocolRegistry::instance();
  reg.add("toylock", "test", [] { return std::make_unique<ToyProtocol>(false); });
  reg.add("toylock+fence", "test", [] { return std::make_unique<ToyProtocol>(true); });
}

Scenario gc_pause(Duration pause) {
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

}  // namespace

TEST(Runner, NoFaultsIsSafe) {
  register_toy();
  RunOutput r = run_scenario(gc_pause(0ns), "toylock");
  EXPECT_TRUE(r.check.safe);
  ASSERT_EQ(r.history.grants.size(), 2u);
  EXPECT_EQ(r.history.writes.size(), 3u);
  for (const auto& w : r.history.writes) EXPECT_TRUE(w.accepted);
  EXPECT_EQ(r.run.reason, StopReason::done);
}

TEST(Runner, GcPauseUnfencedIsUnsafeAndTheStoryNamesIt) {
  register_toy();
  RunOutput r = run_scenario(gc_pause(15s), "toylock");
  ASSERT_FALSE(r.check.safe);
  ASSERT_EQ(r.check.violations.size(), 1u);
  const Violation& v = r.check.violations[0];
  EXPECT_EQ(v.later.client, "client1");
  EXPECT_EQ(v.earlier.client, "client2");
  EXPECT_LT(v.later.epoch, v.earlier.epoch);
  const std::string s = story(r);
  EXPECT_NE(s.find("client1 acquired the lock at"), std::string::npos) << s;
  EXPECT_NE(s.find("paused from"), std::string::npos) << s;
  EXPECT_NE(s.find("ACCEPTED"), std::string::npos) << s;
  // The stale write arrived after the pause (15 s) and after client2's writes.
  EXPECT_GT(r.history.writes.at(v.later.write).arrived, 15s);
}

TEST(Runner, GcPauseFencedIsSafe) {
  register_toy();
  RunOutput r = run_scenario(gc_pause(15s), "toylock+fence");
  EXPECT_TRUE(r.check.safe);
  bool rejected = false;
  for (const auto& w : r.history.writes)
    if (w.client == "client1" && !w.accepted) rejected = true;
  EXPECT_TRUE(rejected);
}

TEST(Runner, SameSeedSameTraceHashAndBytes) {
  register_toy();
  for (std::uint64_t seed : {1ull, 2ull, 99ull}) {
    RunOptions ro;
    ro.seed = seed;
    RunOutput a = run_scenario(gc_pause(15s), "toylock", ro);
    RunOutput b = run_scenario(gc_pause(15s), "toylock", ro);
    EXPECT_EQ(a.trace_hash, b.trace_hash);
    ASSERT_EQ(a.trace.size(), b.trace.size());
    Scenario sc = gc_pause(15s);
    EXPECT_EQ(json_report(a, sc), json_report(b, sc));
    EXPECT_EQ(text_report(a, sc), text_report(b, sc));
  }
  RunOptions s1, s2;
  s1.seed = 1;
  s2.seed = 2;
  EXPECT_NE(run_scenario(gc_pause(15s), "toylock", s1).trace_hash,
            run_scenario(gc_pause(15s), "toylock", s2).trace_hash);
}

TEST(Runner, UnknownProcessInFaultIsAnInputError) {
  register_toy();
  Scenario sc = gc_pause(15s);
  sc.faults[0].target = "client9";
  sc.faults[0].line = 12;
  try {
    run_scenario(sc, "toylock");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.line, 12u);
    EXPECT_NE(std::string(e.what()).find("client9"), std::string::npos);
  }
}

// Issue 3's persistence matrix for Redlock, on the catalog's restart scenario: a node of client1's majority crashes
// and restarts at once, and client2 gets a majority that includes it. What survives the crash decides the verdict.
namespace {
Verdict restart_verdict(bool aof, FsyncPolicy fsync, bool power_loss) {
  Scenario sc = load_scenario("redis-restart-no-fsync");
  sc.config.aof = aof;
  sc.config.fsync = fsync;
  sc.per_protocol.clear();
  for (auto& f : sc.faults) {
    if (f.fault.kind != Fault::Kind::crash) continue;
    f.fault.power_loss = power_loss;
    f.fault.when.at = 500ms;  // inside the first fsync period: the key was written at ~0.1 s, not yet synced
  }
  return run_scenario(sc, "redlock").verdict();
}
}  // namespace

TEST(RedlockPersistence, NoAofIsUnsafe) { EXPECT_EQ(restart_verdict(false, FsyncPolicy::never, true), Verdict::unsafe); }
TEST(RedlockPersistence, AofEverySecondPowerLossIsUnsafe) {
  EXPECT_EQ(restart_verdict(true, FsyncPolicy::periodic, true), Verdict::unsafe);
}
TEST(RedlockPersistence, AofAlwaysPowerLossIsSafe) {
  EXPECT_EQ(restart_verdict(true, FsyncPolicy::always, true), Verdict::safe);
}
TEST(RedlockPersistence, AofProcessCrashIsSafeEvenWithoutFsync) {
  EXPECT_EQ(restart_verdict(true, FsyncPolicy::periodic, false), Verdict::safe);
  EXPECT_EQ(restart_verdict(true, FsyncPolicy::never, false), Verdict::safe);
}

// Determinism over the whole catalog: every scenario × protocol twice gives the same trace hash and byte-identical
// JSON report; a different seed gives a different trace.
TEST(CatalogDeterminism, SameSeedSameBytes) {
  for (const auto& name : catalog_names()) {
    Scenario sc = load_scenario(name);
    for (const auto& [p, v] : sc.expect) {
      RunOutput a = run_scenario(sc, p), b = run_scenario(sc, p);
      EXPECT_EQ(a.trace_hash, b.trace_hash) << name << " " << p;
      EXPECT_EQ(json_report(a, sc), json_report(b, sc)) << name << " " << p;
      RunOptions other;
      other.seed = sc.seed + 1;
      EXPECT_NE(run_scenario(sc, p, other).trace_hash, a.trace_hash) << name << " " << p;
    }
  }
}

// Counterfactual replay: the same plan against redlock and lease+fence; the histories agree until client1's stale
// write, which one store accepts and the other rejects.
TEST(Compare, ShowsWhereTheHistoriesPart) {
  Scenario sc = load_scenario("kleppmann-gc-pause");
  std::vector<RunOutput> runs{run_scenario(sc, "redlock"), run_scenario(sc, "lease+fence")};
  const std::string out = compare_report(runs, sc, TextStyle{false, 120});
  const auto part = out.find("-- the histories part here --");
  ASSERT_NE(part, std::string::npos) << out;
  const std::string after = out.substr(part);
  const auto next_line = after.substr(after.find('\n') + 1);
  const auto row = next_line.substr(0, next_line.find('\n'));
  EXPECT_NE(row.find("client1 write-accepted"), std::string::npos) << out;
  EXPECT_NE(row.find("client1 write-rejected"), std::string::npos) << out;
  EXPECT_NE(out.find("verdicts:  redlock unsafe  lease+fence safe"), std::string::npos) << out;
}
