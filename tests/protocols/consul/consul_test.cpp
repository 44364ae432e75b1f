// Consul on the Raft core and the `consul lock` client: the KV store's acquire check-and-set and its
// LockIndex/ModifyIndex, the leader's session timer (TTL × multiplier after the last renewal, started afresh
// by a new leader), lock-delay after an invalidation, the monitor that tells a holder its key is lost, and
// ModifyIndex tokens across leader failovers.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "locksim/protocols/consul/consul.hpp"

using namespace locksim;
using namespace locksim::consul;

namespace {

WorldOptions opts(std::uint64_t seed) {
  WorldOptions o;
  o.seed = seed;
  o.keep_trace = false;
  o.network.defaults.delay = DelayDist::uniform_of(1ms, 5ms);
  return o;
}

ProtocolConfig config(double multiplier = 2.0, Duration delay = 15s) {
  ProtocolConfig c;
  c.ttl = 10s;
  c.extra[kTtlMultiplierKey] = std::to_string(static_cast<std::int64_t>(multiplier * 1e6));
  c.extra[kLockDelayKey] = std::to_string(delay.count());
  return c;
}

/// The servers of `cfg`, with an observer that records invalidations and the current leader.
struct Servers {
  std::vector<ProcId> ids;
  std::shared_ptr<std::vector<Time>> invalidated = std::make_shared<std::vector<Time>>();
  std::shared_ptr<std::string> leader = std::make_shared<std::string>();
  std::shared_ptr<std::vector<Time>> elected = std::make_shared<std::vector<Time>>();
  Servers(World& w, const ProtocolConfig& cfg) {
    auto obs = std::make_shared<ServerObserver>();
    auto inv = invalidated;
    auto l = leader;
    auto el = elected;
    World* wp = &w;
    obs->on_invalidate = [inv, wp](const std::string&, std::uint64_t) { inv->push_back(wp->now()); };
    obs->group.on_leader = [l, el, wp](const std::string& n, std::uint64_t) {
      *l = n;
      el->push_back(wp->now());
    };
    ids = spawn_servers(w, server_options(cfg), obs);
  }
};

ConsulClient make(Context& ctx, const ProtocolConfig& cfg) {
  std::vector<ProcId> servers;
  for (int i = 1; i <= 3; ++i) servers.push_back(ctx.lookup(fmt::format("consul{}", i)));
  return ConsulClient(servers, 600ms, 60s, lock_delay(cfg));
}

KCommand cmd(KOp op, std::uint64_t session, std::string key = {}) {
  KCommand c;
  c.op = op;
  c.session = session;
  c.key = std::move(key);
  return c;
}

}  // namespace

TEST(KvStore, AcquireIsACheckAndSetOnTheKeyAndANewHolderBumpsLockIndex) {
  KvStore kv;
  std::vector<KvStore::Change> ch;
  KCommand create = cmd(KOp::session_create, 0);
  create.ttl = 10s;
  const auto s1 = kv.apply(1, create, ch).value;
  const auto s2 = kv.apply(2, create, ch).value;
  auto a = kv.apply(3, cmd(KOp::acquire, s1, "L"), ch);
  ASSERT_TRUE(a.ok);
  EXPECT_EQ(a.value, 3u) << "the token is the ModifyIndex: the acquire's Raft index";
  EXPECT_EQ(kv.find("L")->lock_index, 1u);
  EXPECT_FALSE(kv.apply(4, cmd(KOp::acquire, s2, "L"), ch).ok) << "held by s1: the CAS fails";
  EXPECT_EQ(kv.find("L")->session, s1);
  EXPECT_TRUE(kv.apply(5, cmd(KOp::acquire, s1, "L"), ch).ok) << "the holder may acquire again";
  EXPECT_EQ(kv.find("L")->lock_index, 1u);
  EXPECT_FALSE(kv.apply(6, cmd(KOp::release, s2, "L"), ch).ok) << "only the holder releases";
  EXPECT_TRUE(kv.apply(7, cmd(KOp::release, s1, "L"), ch).ok);
  auto b = kv.apply(8, cmd(KOp::acquire, s2, "L"), ch);
  ASSERT_TRUE(b.ok);
  EXPECT_EQ(b.value, 8u);
  EXPECT_EQ(kv.find("L")->lock_index, 2u);
  // Behavior release: destroying the holder's session frees the key, which stays.
  ch.clear();
  EXPECT_TRUE(kv.apply(9, cmd(KOp::session_destroy, s2), ch).ok);
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].released_by, s2);
  EXPECT_EQ(kv.find("L")->session, 0u);
  EXPECT_EQ(kv.find("L")->modify_index, 9u);
  EXPECT_EQ(kv.apply(10, cmd(KOp::acquire, s2, "L"), ch).error, "invalid-session");
}

TEST(KvStore, CommandsSurviveTheirText) {
  KCommand c = cmd(KOp::get, 7, "locks/a b");
  c.ttl = 10s;
  c.lock_delay = 15s;
  c.wait_index = 42;
  c.invalidated = true;
  EXPECT_EQ(decode(encode(c)), c);
  EXPECT_FALSE(decode("9 0 0 0 0 0 x"));
}

TEST(ConsulSession, ARenewingHolderKeepsItsSessionAndAPausedOneIsInvalidatedAtTtlTimesTheMultiplier) {
  for (double mult : {2.0, 1.0}) {
    World w(opts(3));
    const ProtocolConfig cfg = config(mult);
    Servers s(w, cfg);
    auto paused_at = std::make_shared<Time>();
    auto learned = std::make_shared<Time>(kTimeMax);
    w.spawn("client1", [&, paused_at, learned](Context& ctx) {
      ConsulClient c = make(ctx, cfg);
      ctx.sleep(1s);
      auto g = c.acquire(ctx, "L", cfg.ttl);
      ASSERT_TRUE(g);
      for (int i = 0; i < 30; ++i) {  // renewals every TTL/2 keep it through three TTLs
        ctx.sleep(1s);
        ASSERT_TRUE(c.believes_valid(ctx, *g)) << "at " << format_time(w.now());
      }
      *paused_at = w.now();
      w.pause(ctx.self(), 30s);
      ctx.sleep(1ms);
      EXPECT_TRUE(c.believes_valid(ctx, *g)) << "its monitor was paused with it";
      while (c.believes_valid(ctx, *g)) ctx.sleep(10ms);
      *learned = w.now();
    });
    w.run_until(Time{80s});
    ASSERT_EQ(s.invalidated->size(), 1u) << mult;
    const Time at = s.invalidated->front();
    const Duration after = invalidation_after(cfg.ttl, static_cast<std::int64_t>(mult * 1e6));
    // The last renewal was at most TTL/2 before the pause.
    EXPECT_GE(at, *paused_at + after - cfg.ttl / 2 - 50ms) << mult;
    EXPECT_LE(at, *paused_at + after + 50ms) << mult;
    EXPECT_GT(*learned, *paused_at + 30s) << "the monitor tells it only after the pause";
    EXPECT_LT(*learned, *paused_at + 31s);
  }
}

TEST(ConsulLockDelay, AfterAnInvalidationTheKeyWaitsTheDelayAndWithoutOneItDoesNot) {
  for (Duration delay : {15s, 0s}) {
    World w(opts(5));
    const ProtocolConfig cfg = config(1.0, delay);
    Servers s(w, cfg);
    auto got = std::make_shared<Time>(kTimeMax);
    w.spawn("client1", [&](Context& ctx) {
      ConsulClient c = make(ctx, cfg);
      ctx.sleep(1s);
      auto g = c.acquire(ctx, "L", cfg.ttl);
      ASSERT_TRUE(g);
      w.pause(ctx.self(), 40s);
      ctx.sleep(1ms);
    });
    w.spawn("client2", [&, got](Context& ctx) {
      ConsulClient c = make(ctx, cfg);
      ctx.sleep(2s);
      std::optional<Grant> g;
      while (!g) g = c.acquire(ctx, "L", cfg.ttl);
      *got = w.now();
    });
    w.run_until(Time{60s});
    ASSERT_GE(s.invalidated->size(), 1u);  // client1's first; client2's once its process ended
    const Time inv = s.invalidated->front();
    ASSERT_NE(*got, kTimeMax);
    EXPECT_GE(*got, inv + delay) << format_time(delay);
    // Refused during the delay, the client retries every 5 s (DefaultLockRetryTime); with no delay its
    // blocking query wakes when the key is released.
    EXPECT_LT(*got, inv + delay + (delay > 0s ? kLockRetryTime + 1s : 1s)) << format_time(delay);
  }
}

TEST(ConsulFailover, ANewLeaderStartsTheSessionTimersAfreshAndTheHolderKeepsItsLock) {
  World w(opts(7));
  const ProtocolConfig cfg = config(1.0);
  Servers s(w, cfg);
  auto paused_at = std::make_shared<Time>();
  w.spawn("client1", [&, paused_at](Context& ctx) {
    ConsulClient c = make(ctx, cfg);
    ctx.sleep(1s);
    auto g = c.acquire(ctx, "L", cfg.ttl);
    ASSERT_TRUE(g);
    ctx.sleep(3s);
    w.crash(w.find(*s.leader), false);  // its timer for this session dies with it
    for (int i = 0; i < 20; ++i) {
      ctx.sleep(1s);
      ASSERT_TRUE(c.believes_valid(ctx, *g)) << "at " << format_time(w.now());
    }
    *paused_at = w.now();
    w.pause(ctx.self(), 30s);
    ctx.sleep(1ms);
  });
  w.run_until(Time{70s});
  ASSERT_GE(s.elected->size(), 2u);
  // Not before the pause: the session lived through the failover; the new leader invalidates it, one TTL
  // (multiplier 1) after the last renewal it applied.
  ASSERT_EQ(s.invalidated->size(), 1u);
  EXPECT_GE(s.invalidated->front(), *paused_at + cfg.ttl / 2 - 50ms);
  EXPECT_LE(s.invalidated->front(), *paused_at + cfg.ttl + 50ms);
}

// The holder is paused (no renewal reaches anyone) when the leader that timed its session crashes: the next
// leader starts the session's timer at its election (initializeSessionTimers), so the invalidation comes a
// full TTL after that, later than the dead leader's timer would have fired, and not never.
TEST(ConsulFailover, APausedHoldersSessionIsInvalidatedByTheNextLeaderAFullTtlAfterItsElection) {
  World w(opts(9));
  const ProtocolConfig cfg = config(1.0);
  Servers s(w, cfg);
  w.spawn("client1", [&](Context& ctx) {
    ConsulClient c = make(ctx, cfg);
    ctx.sleep(1s);
    auto g = c.acquire(ctx, "L", cfg.ttl);
    ASSERT_TRUE(g);
    w.pause(ctx.self(), 40s);
    ctx.sleep(1ms);
  });
  w.spawn("chaos", [&](Context& ctx) {
    ctx.sleep(4s);
    w.crash(w.find(*s.leader), false);
  });
  w.run_until(Time{40s});
  ASSERT_GE(s.elected->size(), 2u);
  ASSERT_EQ(s.invalidated->size(), 1u) << "the next leader must time the session too";
  const Time elected = s.elected->back();
  EXPECT_GE(s.invalidated->front(), elected + cfg.ttl - 1ms);
  EXPECT_LE(s.invalidated->front(), elected + cfg.ttl + 50ms);
}

TEST(ConsulFailover, ModifyIndexTokensIncreaseAcrossLeaderChanges) {
  World w(opts(11));
  const ProtocolConfig cfg = config();
  Servers s(w, cfg);
  auto tokens = std::make_shared<std::vector<std::uint64_t>>();
  w.spawn("client1", [&, tokens](Context& ctx) {
    ConsulClient c = make(ctx, cfg);
    ctx.sleep(1s);
    for (int round = 0; round < 4; ++round) {
      for (int k = 0; k < 5; ++k) {
        auto g = c.acquire(ctx, "L", cfg.ttl);
        ASSERT_TRUE(g);
        tokens->push_back(*g->token);
        c.release(ctx, *g);
      }
      const ProcId l = w.find(*s.leader);
      w.crash(l, false);
      ctx.sleep(2s);
      w.restart(l);
      ctx.sleep(1s);
    }
  });
  w.run_until(Time{60s});
  ASSERT_EQ(tokens->size(), 20u);
  for (std::size_t i = 1; i < tokens->size(); ++i)
    EXPECT_GT((*tokens)[i], (*tokens)[i - 1]) << "grant " << i << " after " << (i / 5) << " failovers";
}

TEST(ConsulProtocolConfig, RefusesASessionTtlOutsideConsulsBounds) {
  register_consul_protocols(ProtocolRegistry::instance());
  auto p = ProtocolRegistry::instance().make("consul");
  ProtocolConfig c;
  for (Duration ok : {Duration(10s), Duration(24h)}) {
    c.ttl = ok;
    EXPECT_FALSE(p->config_problem(c)) << format_time(ok);
  }
  for (Duration bad : {Duration(9s), Duration(25h)}) {
    c.ttl = bad;
    EXPECT_TRUE(p->config_problem(c)) << format_time(bad);
  }
  EXPECT_EQ(invalidation_after(10s, 2'000'000), 20s);
  EXPECT_EQ(invalidation_after(24h, 2'000'000), 48h) << "no overflow at the largest TTL";
  EXPECT_EQ(invalidation_after(10s, 1'500'000), 15s);
}
