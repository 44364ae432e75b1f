// The `redis` protocol (single node, optional replica + sentinel) and its `redis+incr` teaching variant.
#include <gtest/gtest.h>

#include "harness.hpp"

using namespace locksim;
using namespace locksim::redis;
using namespace locksim::redis::test;

namespace {

ProtocolConfig fast_retries(std::uint32_t count = 50) {
  ProtocolConfig c;
  c.retry_count = count;
  c.retry_delay = 20ms;
  c.retry_jitter = 10ms;
  return c;
}

/// Every service set on `node` must come after the previous holder released (no two live holders).
void expect_no_two_live_holders(const History& h, const std::vector<Holding>& hs, const std::string& node) {
  const ServiceSet* prev = nullptr;
  for (const auto& s : h.service_sets) {
    if (s.node != node) continue;
    if (prev != nullptr) {
      auto it = std::find_if(hs.begin(), hs.end(), [&](const Holding& x) { return x.value == prev->value; });
      ASSERT_NE(it, hs.end()) << "a set nobody held: " << prev->value;
      EXPECT_LE(it->believed_until, s.time)
          << "set of " << s.value << " while " << prev->value << " was held";
    }
    prev = &s;
  }
}

}  // namespace

TEST(Redis, RegistryNamesAndFencing) {
  ProtocolRegistry r;
  register_redis_protocols(r);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"redis", "redis+incr", "redlock"}));
  EXPECT_FALSE(r.make("redis")->fenced());
  EXPECT_TRUE(r.make("redis+incr")->fenced());
  EXPECT_FALSE(r.make("redlock")->fenced());
  EXPECT_EQ(r.make("redis+incr")->name(), "redis+incr");
}

TEST(Redis, MutualExclusionWithoutFaults) {
  Harness h("redis", fast_retries());
  std::vector<Holding> hs;
  for (int i = 1; i <= 4; ++i) h.looping_client(fmt::format("client{}", i), 15, 5ms, hs);
  auto r = h.world.run();
  EXPECT_EQ(r.reason, StopReason::done);
  EXPECT_EQ(h.history.service_quorum, 1u);
  EXPECT_EQ(hs.size(), 60u);
  EXPECT_EQ(h.history.service_sets.size(), 60u);
  EXPECT_FALSE(first_overlap(hs));
  expect_no_two_live_holders(h.history, hs, "redis1");
}

TEST(Redis, ForwardWallJumpOnTheNodeLetsASecondClientIn) {
  for (bool jump : {false, true}) {
    Harness h("redis", fast_retries(3));
    std::vector<Holding> hs;
    h.looping_client("client1", 1, 5s, hs);
    if (jump) h.world.schedule(500ms, [&] { h.world.clock_jump(h.info.servers[0], 20s); });
    std::optional<Grant> second;
    h.client("client2", [&](Context& ctx, LockClient& lock) {
      ctx.sleep(1s);
      second = lock.acquire(ctx, "lock", 10s);
    });
    h.world.run();
    ASSERT_EQ(hs.size(), 1u);
    EXPECT_EQ(second.has_value(), jump);
  }
}

TEST(Redis, CrashWithoutAofLosesTheKey) {
  Harness h("redis", fast_retries(0));
  std::vector<Holding> hs;
  h.looping_client("client1", 1, 5s, hs);
  const ProcId node = h.info.servers[0];
  h.world.schedule(100ms, [&] { h.world.crash(node, false); });
  h.world.schedule(101ms, [&] { h.world.restart(node); });
  std::optional<std::string> seen;
  bool answered = false;
  h.probe("redis1", "lock", 150ms, seen, answered);
  std::optional<Grant> second;
  h.client("client2", [&](Context& ctx, LockClient& lock) {
    ctx.sleep(200ms);
    second = lock.acquire(ctx, "lock", 10s);
  });
  h.world.run();
  EXPECT_TRUE(answered);
  EXPECT_FALSE(seen.has_value());
  ASSERT_TRUE(second.has_value());
  ASSERT_EQ(hs.size(), 1u);
  EXPECT_GT(hs[0].believed_until, 200ms) << "client1 still believes it holds the lock";
}

struct PersistenceCase {
  bool aof;
  FsyncPolicy fsync;
  bool power_loss;
  Duration crash_at;
  bool second_acquires;  ///< the key was lost
};

class RedisPersistence : public ::testing::TestWithParam<PersistenceCase> {};

TEST_P(RedisPersistence, RestartKeepsOrLosesTheKey) {
  const auto& pc = GetParam();
  ProtocolConfig cfg = fast_retries(0);
  cfg.aof = pc.aof;
  cfg.fsync = pc.fsync;
  cfg.fsync_period = 1s;
  Harness h("redis", cfg);
  std::vector<Holding> hs;
  h.looping_client("client1", 1, 8s, hs);
  const ProcId node = h.info.servers[0];
  h.world.schedule(pc.crash_at, [&] { h.world.crash(node, pc.power_loss); });
  h.world.schedule(pc.crash_at + 1ms, [&] { h.world.restart(node); });
  std::optional<Grant> second;
  h.client("client2", [&](Context& ctx, LockClient& lock) {
    ctx.sleep(pc.crash_at + 100ms);
    second = lock.acquire(ctx, "lock", 10s);
  });
  h.world.run();
  EXPECT_EQ(second.has_value(), pc.second_acquires);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RedisPersistence,
    ::testing::Values(PersistenceCase{false, FsyncPolicy::never, false, 100ms, true},   // memory only
                      PersistenceCase{true, FsyncPolicy::periodic, true, 100ms, true},  // everysec, fresh key
                      PersistenceCase{true, FsyncPolicy::periodic, true, 1500ms, false},  // everysec, synced
                      PersistenceCase{true, FsyncPolicy::always, true, 100ms, false},  // appendfsync always
                      PersistenceCase{true, FsyncPolicy::never, false, 100ms,
                                      false},  // process crash: OS has it
                      PersistenceCase{true, FsyncPolicy::periodic, false, 100ms, false}));  // process crash

/// Failover with the INCR token (Redisson RFencedLock): the master crashes at `crash_at`; replication lag 50
/// ms.
struct FailoverRun {
  std::optional<Grant> first, second;
  Time second_at{};
  std::vector<Holding> hs;
};

FailoverRun run_failover(Duration crash_at, Duration ttl) {
  ProtocolConfig cfg = fast_retries(0);
  cfg.replica = true;
  cfg.incr_token = true;
  cfg.replication_delay = 50ms;
  cfg.failover_after = 1s;
  Harness h("redis", cfg);
  EXPECT_TRUE(h.proto->fenced());
  FailoverRun out;
  h.client("client1", [&](Context& ctx, LockClient& lock) { out.first = lock.acquire(ctx, "lock", ttl); });
  h.world.schedule(crash_at, [&] { h.world.crash(h.info.servers[0], true); });
  h.client("client2", [&](Context& ctx, LockClient& lock) {
    ctx.sleep(300ms);
    for (int i = 0; i < 100 && !out.second; ++i) {
      out.second = lock.acquire(ctx, "lock", ttl);
      if (!out.second) ctx.sleep(100ms);
    }
    out.second_at = ctx.now();
  });
  h.world.run();
  return out;
}

TEST(Redis, FailoverBeforeReplicationGrantsTheKeyTwiceAndTheTokenDoesNotIncrease) {
  FailoverRun r = run_failover(10ms, 10s);
  ASSERT_TRUE(r.first && r.second);
  ASSERT_TRUE(r.first->token && r.second->token);
  EXPECT_EQ(*r.first->token, 1u);
  EXPECT_LE(*r.second->token, *r.first->token) << "INCR on the promoted replica restarts from what it had";
  EXPECT_LT(r.second_at, r.first->valid_until) << "granted while client1's lock was still valid";
  EXPECT_GE(r.second_at, 1s) << "only after the sentinel's failover";
}

TEST(Redis, FailoverAfterReplicationKeepsTheKeyAndTheToken) {
  FailoverRun r = run_failover(200ms, 3s);
  ASSERT_TRUE(r.first && r.second);
  EXPECT_GE(r.second_at, r.first->valid_until) << "the replica had the key: client2 waits for the TTL";
  EXPECT_EQ(*r.second->token, *r.first->token + 1);
}

TEST(Redis, SentinelDemotesTheOldMasterWhenItReturns) {
  ProtocolConfig cfg = fast_retries(0);
  cfg.replica = true;
  cfg.failover_after = 1s;
  Harness h("redis", cfg);
  h.world.schedule(100ms, [&] { h.world.crash(h.info.servers[0], false); });
  h.world.schedule(3s, [&] { h.world.restart(h.info.servers[0]); });
  std::vector<std::optional<Reply>> roles;
  h.world.spawn("probe", [&](Context& ctx) {
    ctx.sleep(5s);
    for (const char* n : {"redis1", "replica1"}) {
      auto m = ctx.call(ctx.lookup(n), command_message({.op = Op::ping}), 1s);
      roles.push_back(m ? std::optional<Reply>(*m->as<Reply>()) : std::nullopt);
    }
  });
  h.world.run();
  ASSERT_EQ(roles.size(), 2u);
  ASSERT_TRUE(roles[0] && roles[1]);
  EXPECT_EQ(roles[0]->role, "replica");
  EXPECT_EQ(roles[1]->role, "master");
}

TEST(Redis, PauseWhileTheReplyIsInFlightYieldsAStaleGrant) {
  // Kleppmann: client1 sends SET, stops for 15 s, the key expires (ttl 10 s), client2 acquires, client1
  // resumes and reads the buffered OK. The single-node client never computes elapsed time: it returns the
  // grant.
  Harness h("redis", fast_retries(0));
  std::optional<Grant> g1, g2;
  Time g1_at{}, g2_at{};
  const ProcId p1 = h.client("client1", [&](Context& ctx, LockClient& lock) {
    g1 = lock.acquire(ctx, "lock", 10s);
    g1_at = h.world.now();
  });
  h.world.add_fault({.kind = Fault::Kind::pause,
                     .when = Trigger::on_note(p1, "acquire-sent"),
                     .target = p1,
                     .duration = 15s});
  h.client("client2", [&](Context& ctx, LockClient& lock) {
    ctx.sleep(11s);
    g2 = lock.acquire(ctx, "lock", 10s);
    g2_at = h.world.now();
  });
  h.world.run();
  ASSERT_TRUE(g1 && g2);
  EXPECT_LT(g2_at, g1_at);
  EXPECT_GE(g1_at, 15s);
  EXPECT_EQ(g1->valid_until, 10s) << "validity is measured from sending, on the monotonic clock";
}

TEST(Redis, RetriesWithJitterAreDeterministicPerSeed) {
  auto send_times = [](std::uint64_t seed) {
    Harness h("redis", ProtocolConfig{}, WorldOptions{.seed = seed});
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
  const auto [a, ha] = send_times(7);
  const auto [b, hb] = send_times(7);
  const auto [c, hc] = send_times(8);
  EXPECT_EQ(a, b);
  EXPECT_EQ(ha, hb);
  EXPECT_NE(a, c);
  ASSERT_EQ(a.size(), 11u);  // node-redlock default: 1 try + 10 retries
  for (std::size_t i = 1; i < a.size(); ++i) {
    const Duration gap = a[i] - a[i - 1] - 2ms;  // minus the round trip
    EXPECT_GE(gap, 100ms);
    EXPECT_LE(gap, 300ms);
  }
}
