// The `redlock` protocol: majority, validity arithmetic, unlock-all, retries, extension, elapsed re-check.
#include <gtest/gtest.h>

#include "harness.hpp"

using namespace locksim;
using namespace locksim::redis;
using namespace locksim::redis::test;

namespace {

ProtocolConfig redlock_cfg(std::uint32_t retries = 0) {
  ProtocolConfig c;
  c.retry_count = retries;
  c.retry_delay = 20ms;
  c.retry_jitter = 10ms;
  return c;
}

std::vector<ProcId> nodes(Harness& h, std::initializer_list<int> which) {
  std::vector<ProcId> out;
  for (int i : which) out.push_back(h.world.find(fmt::format("redis{}", i)));
  return out;
}

}  // namespace

TEST(Redlock, DriftAndMajority) {
  ProtocolConfig c;
  EXPECT_EQ(redlock_drift(c, 10s), 102ms);  // 10 s * 0.01 + 2 ms
  c.drift_factor_ppm = 0;
  c.clock_drift_allowance = 0ms;
  EXPECT_EQ(redlock_drift(c, 10s), 0ms);
  EXPECT_EQ(majority(5), 3u);
  EXPECT_EQ(majority(4), 3u);
  EXPECT_EQ(majority(3), 2u);
  EXPECT_EQ(majority(1), 1u);
}

TEST(Redlock, MutualExclusionWithoutFaults) {
  Harness h("redlock", redlock_cfg(200));
  EXPECT_EQ(h.info.servers.size(), 5u);
  EXPECT_EQ(h.history.service_quorum, 3u);
  std::vector<Holding> hs;
  for (int i = 1; i <= 5; ++i) h.looping_client(fmt::format("client{}", i), 8, 5ms, hs);
  auto r = h.world.run();
  EXPECT_EQ(r.reason, StopReason::done);
  EXPECT_EQ(hs.size(), 40u);
  EXPECT_FALSE(first_overlap(hs));
  // On every node, no value was set while the value set before it on that node was still held.
  for (int n = 1; n <= 5; ++n) {
    const ServiceSet* prev = nullptr;
    for (const auto& s : h.history.service_sets) {
      if (s.node != fmt::format("redis{}", n)) continue;
      if (prev != nullptr) {
        for (const auto& x : hs) {
          if (x.value == prev->value) {
            EXPECT_LE(x.believed_until, s.time);
          }
        }
      }
      prev = &s;
    }
  }
}

TEST(Redlock, ValidityIsTtlMinusElapsedMinusDrift) {
  for (bool recheck : {false, true}) {
    ProtocolConfig cfg = redlock_cfg();
    cfg.elapsed_recheck = recheck;
    Harness h("redlock", cfg);  // constant 1 ms links: elapsed = one round trip = 2 ms
    std::optional<Grant> g;
    h.client("client1", [&](Context& ctx, LockClient& lock) { g = lock.acquire(ctx, "lock", 10s); });
    h.world.run();
    ASSERT_TRUE(g);
    // Read at 2 ms: now + (ttl - elapsed - drift) = start + ttl - drift.
    EXPECT_EQ(g->valid_until, 2ms + (10s - 2ms - 102ms));
    EXPECT_FALSE(g->token);
  }
}

TEST(Redlock, NeedsAMajority) {
  for (std::uint32_t n : {5u, 4u, 3u}) {
    for (std::uint32_t reachable = 0; reachable <= n; ++reachable) {
      ProtocolConfig cfg = redlock_cfg();
      cfg.nodes = n;
      Harness h("redlock", cfg);
      std::optional<Grant> g;
      const ProcId c2 =
          h.client("client2", [&](Context& ctx, LockClient& lock) { g = lock.acquire(ctx, "k", 10s); });
      std::vector<ProcId> cut;
      for (std::uint32_t i = reachable + 1; i <= n; ++i)
        cut.push_back(h.world.find(fmt::format("redis{}", i)));
      if (!cut.empty()) h.world.partition({c2}, cut, false);
      h.world.run();
      EXPECT_EQ(g.has_value(), reachable >= majority(n)) << "n=" << n << " reachable=" << reachable;
    }
  }
}

TEST(Redlock, UnlocksAllNodesOnFailure) {
  for (bool fail : {true, false}) {
    Harness h("redlock", redlock_cfg());
    std::optional<Grant> g;
    const ProcId c =
        h.client("client1", [&](Context& ctx, LockClient& lock) { g = lock.acquire(ctx, "lock", 10s); });
    if (fail) h.world.partition({c}, nodes(h, {3, 4, 5}), false);  // 2 votes of 5
    std::optional<std::string> v1, v2;
    bool a1 = false, a2 = false;
    h.probe("redis1", "lock", 1s, v1, a1);
    h.probe("redis2", "lock", 1s, v2, a2);
    h.world.run();
    ASSERT_TRUE(a1 && a2);
    EXPECT_EQ(g.has_value(), !fail);
    // The two nodes that said OK were unlocked by the failed attempt (their keys would live for 10 s).
    EXPECT_EQ(v1.has_value(), !fail);
    EXPECT_EQ(v2.has_value(), !fail);
    EXPECT_EQ(h.history.service_sets.size(), fail ? 2u : 5u);
  }
}

TEST(Redlock, NonPositiveValidityFailsAndUnlocks) {
  // 40 ms each way: elapsed 80 ms, drift 100 ms * 0.01 + 2 ms = 3 ms; a 82 ms ttl leaves -1 ms.
  for (Duration ttl : {82ms, 84ms}) {
    ProtocolConfig cfg = redlock_cfg();
    cfg.node_timeout = 500ms;
    WorldOptions wo;
    wo.network.defaults.delay = DelayDist::constant_of(40ms);
    Harness h("redlock", cfg, wo);
    std::optional<Grant> g;
    h.client("client1", [&](Context& ctx, LockClient& lock) { g = lock.acquire(ctx, "lock", ttl); });
    h.world.run();
    EXPECT_EQ(g.has_value(), ttl == 84ms) << format_time(ttl);
    if (g) {
      EXPECT_EQ(g->valid_until, 80ms + 84ms - 80ms - 2ms - 840us);
    }
    bool unlock_sent = false;
    for (const auto& e : h.world.trace().events())
      unlock_sent |= e.kind == TraceKind::send && e.label == "DEL-IF";
    EXPECT_EQ(unlock_sent, !g.has_value());
  }
}

TEST(Redlock, RetriesWithJitterAreDeterministicPerSeed) {
  auto send_times = [](std::uint64_t seed) {
    ProtocolConfig cfg;  // node-redlock defaults: 10 retries, 200 ms +- 100 ms
    Harness h("redlock", cfg, WorldOptions{.seed = seed});
    std::vector<Holding> hs;
    h.looping_client("holder", 1, 30s, hs);
    const ProcId c = h.client("waiter", [](Context& ctx, LockClient& lock) {
      ctx.sleep(10ms);
      EXPECT_FALSE(lock.acquire(ctx, "lock", 10s));
    });
    h.world.run();
    std::vector<Time> out;
    for (const auto& e : h.world.trace().events())
      if (e.kind == TraceKind::send && e.proc == c && e.label == "SET") out.push_back(e.time);
    return std::pair{out, h.world.trace().hash()};
  };
  const auto [a, ha] = send_times(11);
  const auto [b, hb] = send_times(11);
  const auto [c, hc] = send_times(12);
  EXPECT_EQ(a, b);
  EXPECT_EQ(ha, hb);
  EXPECT_NE(a, c);
  ASSERT_EQ(a.size(), 11u * 5u);
  for (std::size_t i = 5; i < a.size(); i += 5) {
    const Duration gap = a[i] - a[i - 5] - 2ms - 2ms;  // minus the SET and the unlock round trips
    EXPECT_GE(gap, 100ms);
    EXPECT_LE(gap, 300ms);
  }
}

TEST(Redlock, ExtensionCountsOnlyAMajorityWithinValidity) {
  ProtocolConfig cfg = redlock_cfg();
  Harness h("redlock", cfg);
  std::vector<bool> results;
  std::vector<Time> untils;
  const ProcId c = h.client("client1", [&](Context& ctx, LockClient& lock) {
    auto g = lock.acquire(ctx, "lock", 10s);
    ASSERT_TRUE(g);
    ctx.sleep(5s);
    results.push_back(lock.extend(ctx, *g, 10s));  // all 5 nodes: ok
    untils.push_back(g->valid_until);
    ctx.sleep(1s);
    results.push_back(lock.extend(ctx, *g, 10s));  // 3 reachable: still a majority
    untils.push_back(g->valid_until);
    ctx.sleep(1s);
    results.push_back(lock.extend(ctx, *g, 10s));  // 2 reachable: lost
    untils.push_back(g->valid_until);
    ctx.sleep(20s);
    results.push_back(lock.extend(ctx, *g, 10s));  // everything expired
  });
  h.world.schedule(5500ms, [&] { h.world.partition({c}, nodes(h, {4, 5}), false); });
  h.world.schedule(6500ms, [&] { h.world.partition({c}, nodes(h, {3}), false); });
  h.world.schedule(8s, [&] { h.world.heal(); });
  h.world.run();
  EXPECT_EQ(results, (std::vector<bool>{true, true, false, false}));
  ASSERT_EQ(untils.size(), 3u);
  EXPECT_EQ(untils[0], 5s + 2ms + 10s - 102ms);  // ttl - drift from sending the extension
  // The second one waited for the node timeout (50 ms) before counting 3 votes; still ttl - drift from
  // sending.
  EXPECT_EQ(untils[1], 6s + 4ms + 10s - 102ms);
  EXPECT_EQ(untils[2], untils[1]) << "a failed extension leaves the validity alone";
}

namespace {

struct PauseRun {
  std::optional<Grant> g1, g2;
  Time g1_at{}, g2_at{};
};

/// Kleppmann's pause while replies are in flight: client1 stops for 15 s right after sending (ttl 10 s);
/// client2 acquires at 11 s; optionally client1's wall clock steps back 15 s during the pause (NTP).
PauseRun pause_in_flight(bool recheck, bool wall_steps_back, std::string variant = {}) {
  ProtocolConfig cfg = redlock_cfg();
  cfg.elapsed_recheck = recheck;
  cfg.variant = std::move(variant);
  Harness h("redlock", cfg);
  PauseRun out;
  const ProcId p1 = h.client("client1", [&](Context& ctx, LockClient& lock) {
    out.g1 = lock.acquire(ctx, "lock", 10s);
    out.g1_at = h.world.now();
  });
  h.world.add_fault({.kind = Fault::Kind::pause,
                     .when = Trigger::on_note(p1, "acquire-sent"),
                     .target = p1,
                     .duration = 15s});
  if (wall_steps_back) h.world.schedule(12s, [&, p1] { h.world.clock_jump(p1, -15s); });
  h.client("client2", [&](Context& ctx, LockClient& lock) {
    ctx.sleep(11s);
    out.g2 = lock.acquire(ctx, "lock", 10s);
    out.g2_at = h.world.now();
  });
  h.world.run();
  return out;
}

}  // namespace

TEST(Redlock, APauseInFlightIsCountedByTheWallClockElapsed) {
  for (bool recheck : {false, true}) {
    PauseRun r = pause_in_flight(recheck, false);
    EXPECT_FALSE(r.g1) << "recheck=" << recheck;
    EXPECT_TRUE(r.g2);
  }
}

TEST(Redlock, ElapsedRecheckRejectsAGrantWhoseRepliesWereReadAfterALongPause) {
  // The wall clock stepped back during the pause: the wall-clock elapsed time looks tiny.
  PauseRun plain = pause_in_flight(false, true);
  ASSERT_TRUE(plain.g1 && plain.g2);
  EXPECT_GT(plain.g1_at, plain.g2_at) << "client1 believes it holds a lock client2 already holds";
  EXPECT_GT(plain.g1->valid_until, 15s);

  PauseRun rechecked = pause_in_flight(true, true);
  EXPECT_FALSE(rechecked.g1) << "the monotonic re-check sees the 15 s";
  EXPECT_TRUE(rechecked.g2);
}

TEST(Redlock, NoElapsedCheckVariantKeepsAStaleGrant) {
  PauseRun r = pause_in_flight(false, false, "no-elapsed-check");
  ASSERT_TRUE(r.g1 && r.g2);
  EXPECT_GT(r.g1_at, r.g2_at);
  EXPECT_EQ(r.g1->valid_until, 10s - 102ms);
}
