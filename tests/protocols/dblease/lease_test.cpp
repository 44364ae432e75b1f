// The `db-lease` protocols through the Protocol interface: two concurrent acquires serialize (one wins, the
// next token is one more), expiry by the database's clock (a jump of db1's wall clock frees the row), the
// wall-clock deadline hazard against the monotonic-deadline variant, token reuse after a failover to a
// lagging replica, and the app-counter variant's tokens.
#include <gtest/gtest.h>

#include "locksim/protocols/dblease/dblease.hpp"

using namespace locksim;

namespace {

WorldOptions opts() {
  WorldOptions o;
  o.seed = 3;
  o.keep_trace = false;
  o.network.defaults.delay = DelayDist::constant_of(1ms);
  o.limits.max_time = Time{120s};
  return o;
}

struct DbRun {
  explicit DbRun(ProtocolConfig c, const char* name = "db-lease+fence") : world(opts()), cfg(std::move(c)) {
    register_dblease_protocols(ProtocolRegistry::instance());
    proto = ProtocolRegistry::instance().make(name);
    history.protocol = name;
    history.service = proto->declare(cfg);
    proto->build(world, cfg, history);
  }
  World world;
  History history;
  ProtocolConfig cfg;
  std::unique_ptr<Protocol> proto;
};

struct Got {
  std::optional<std::uint64_t> token;
  Time at{};
};

/// A client process that sleeps `start`, then acquires "L" once; its grant (or none) goes to `out`.
void acquirer(DbRun& r, const std::string& name, Duration start, Got& out, int tries = 1) {
  r.world.spawn(name, [&r, start, &out, tries](Context& ctx) {
    auto c = r.proto->make_client(ctx, r.cfg);
    ctx.sleep(start);
    for (int i = 0; i < tries; ++i) {
      if (auto g = c->acquire(ctx, "L", r.cfg.ttl)) {
        out = Got{g->token, r.world.now()};
        return;
      }
      ctx.sleep(500ms);
    }
  });
}

}  // namespace

TEST(DbLease, DeclaresItsServiceAndVariants) {
  register_dblease_protocols(ProtocolRegistry::instance());
  auto p = ProtocolRegistry::instance().make("db-lease");
  ProtocolConfig cfg;
  EXPECT_EQ(p->declare(cfg).names(), (std::vector<std::string>{"db1"}));
  cfg.replica = true;
  EXPECT_EQ(p->declare(cfg).names(), (std::vector<std::string>{"db1", "db2"}));
  EXPECT_FALSE(p->fenced());
  EXPECT_TRUE(ProtocolRegistry::instance().make("db-lease+fence")->fenced());
  EXPECT_EQ(p->variants().size(), 2u);
  EXPECT_EQ(p->renewal_defaults(ProtocolConfig{}).every, Duration{10s} / 3);
}

// Two clients run AcquireLease at the same instant: the row lock and serializable isolation let exactly one
// of them in; the other gets the lease only once it expired by the database's clock, with the next token.
TEST(DbLease, TwoConcurrentAcquiresSerialize) {
  DbRun r(ProtocolConfig{});
  Got a, b;
  acquirer(r, "client1", 10ms, a);
  acquirer(r, "client2", 10ms, b);
  r.world.run();
  EXPECT_NE(a.token.has_value(), b.token.has_value()) << "both or neither acquired";
  EXPECT_EQ(a.token.value_or(0) + b.token.value_or(0), 1u);
  ASSERT_EQ(r.history.service_sets.size(), 1u);
  EXPECT_EQ(r.history.service_sets[0].node, "db1");
}

// The lease ends by the database's clock: db1's wall clock jumps 20 s forward and the row is free at once
// for the next client (token 2), although the holder's 10 s have not passed.
TEST(DbLease, ExpiryByTheDatabaseClock) {
  DbRun r(ProtocolConfig{});
  Got a, b;
  acquirer(r, "client1", 0ms, a);
  acquirer(r, "client2", 1500ms, b);
  r.world.schedule(Time{1s}, [&] { r.world.clock_jump(r.world.find("db1"), 20s); });
  r.world.run();
  ASSERT_TRUE(a.token && b.token);
  EXPECT_EQ(*b.token, *a.token + 1);
  EXPECT_LT(b.at, Time{2s});
}

// The client takes Expires (the database's timestamp) as its deadline on its own wall clock: 5 s behind the
// database, it still believes at 12 s into a 10 s lease. The monotonic-deadline variant does not.
TEST(DbLease, WallClockDeadlineHazard) {
  for (const bool monotonic : {false, true}) {
    ProtocolConfig cfg;
    if (monotonic) cfg.variant = "monotonic-deadline";
    DbRun r(cfg);
    std::optional<bool> believes;
    const ProcId c1 = r.world.spawn("client1", [&](Context& ctx) {
      auto c = r.proto->make_client(ctx, r.cfg);
      auto g = c->acquire(ctx, "L", r.cfg.ttl);
      ASSERT_TRUE(g);
      ctx.sleep(12s);
      believes = c->believes_valid(ctx, *g);
    });
    r.world.clock(c1).jump(Time{0}, -5s);
    r.world.run();
    ASSERT_TRUE(believes);
    EXPECT_EQ(*believes, !monotonic) << (monotonic ? "monotonic-deadline" : "wall-clock deadline");
  }
}

// db1 dies before its commit of client 1's lease reached the asynchronous replica db2; db2 is promoted and
// hands out the same token again. With a replica that keeps up, the token grows.
TEST(DbLease, LaggingReplicaReusesToken) {
  for (const Duration lag : {Duration{2s}, Duration{10ms}}) {
    ProtocolConfig cfg;
    cfg.replica = true;
    cfg.replication_delay = lag;
    cfg.failover_after = 1s;
    cfg.rpc_timeout = 300ms;
    DbRun r(cfg);
    Got a, b;
    acquirer(r, "client1", 0ms, a);
    acquirer(r, "client2", 11s, b, 10);
    r.world.schedule(Time{500ms}, [&] { r.world.crash(r.world.find("db1"), true); });
    r.world.run();
    ASSERT_TRUE(a.token && b.token) << "lag " << lag.count();
    if (lag > 1s)
      EXPECT_EQ(*b.token, *a.token) << "the promoted replica did not reuse the token";
    else
      EXPECT_EQ(*b.token, *a.token + 1);
  }
}

// app-counter: each application process counts its own tokens, so the second client's first token equals
// the first client's.
TEST(DbLease, AppCounterTokensRepeat) {
  ProtocolConfig cfg;
  cfg.variant = "app-counter";
  DbRun r(cfg);
  Got a, b;
  acquirer(r, "client1", 0ms, a);
  acquirer(r, "client2", 11s, b);
  r.world.run();
  ASSERT_TRUE(a.token && b.token);
  EXPECT_EQ(*a.token, *b.token);
}
