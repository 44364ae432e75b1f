// ZooKeeper on the Raft core and Curator's InterProcessMutex: the znode tree's sequence numbers and zxids,
// session expiry timing, the recipe's order and its watches (one-shot, lost with a leader change), czxid
// tokens across a leader failover, and the sequence-number token going back after the lock parent is
// re-created.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "locksim/protocols/zookeeper/zookeeper.hpp"

using namespace locksim;
using namespace locksim::zk;

namespace {

WorldOptions opts(std::uint64_t seed) {
  WorldOptions o;
  o.seed = seed;
  o.keep_trace = false;
  o.network.defaults.delay = DelayDist::uniform_of(1ms, 5ms);
  return o;
}

struct Hold {
  std::string client;
  std::uint64_t token = 0;
  Time granted{}, released{};
};

ProtocolConfig config(Duration ttl = 10s) {
  ProtocolConfig c;
  c.ttl = ttl;
  return c;
}

/// Spawns the ensemble of `cfg` with an observer that counts watch-free holder changes and expiries.
struct Ensemble {
  std::vector<ProcId> ids;
  std::shared_ptr<std::vector<std::pair<Time, std::uint64_t>>> expired =
      std::make_shared<std::vector<std::pair<Time, std::uint64_t>>>();
  std::shared_ptr<std::string> leader = std::make_shared<std::string>();
  Ensemble(World& w, const ProtocolConfig& cfg) {
    auto obs = std::make_shared<EnsembleObserver>();
    auto ex = expired;
    auto l = leader;
    World* wp = &w;
    obs->on_expire = [ex, wp](const std::string&, std::uint64_t s) { ex->push_back({wp->now(), s}); };
    obs->group.on_leader = [l](const std::string& n, std::uint64_t) { *l = n; };
    ids = spawn_ensemble(w, ensemble_options(cfg), obs);
  }
};

ZkClient make(Context& ctx, const ProtocolConfig& cfg) {
  std::vector<ProcId> servers;
  for (int i = 1; i <= 3; ++i) servers.push_back(ctx.lookup(fmt::format("zk{}", i)));
  return ZkClient(servers, 600ms, 60s, cfg.variant == "sequence-token");
}

}  // namespace

TEST(ZnodeTree, SequenceIsTheParentsCversionAndTheLowestChildHolds) {
  ZnodeTree t;
  std::vector<ZnodeTree::Change> holders, deleted;
  const auto s1 = t.apply(1, 1, {ZOp::create_session, 0, 0, 10s, false, {}}, holders, deleted).value;
  const auto s2 = t.apply(1, 2, {ZOp::create_session, 0, 0, 1s, false, {}}, holders, deleted).value;
  EXPECT_EQ(t.sessions().at(s2).timeout, 4s);  // negotiated up to 2 × tickTime
  auto a = t.apply(1, 3, {ZOp::create, s1, 11, 0ns, false, "/locks/L"}, holders, deleted);
  auto b = t.apply(2, 9, {ZOp::create, s2, 12, 0ns, false, "/locks/L"}, holders, deleted);
  EXPECT_EQ(child_seq(a.data), 0u);
  EXPECT_EQ(child_seq(b.data), 1u);
  EXPECT_LT(a.value, b.value);  // czxid
  EXPECT_EQ(b.value, make_zxid(2, 1));
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].node, a.data);
  auto cb = t.apply(2, 10, {ZOp::check, s2, 0, 0ns, false, b.data}, holders, deleted);
  EXPECT_EQ(cb.value, 0u);
  EXPECT_EQ(cb.data, a.data);  // watch the predecessor
  holders.clear();
  t.apply(2, 11, {ZOp::close_session, s1, 0, 0ns, true, {}}, holders, deleted);  // a's ephemeral goes
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].node, b.data);
  EXPECT_EQ(t.apply(2, 12, {ZOp::check, s2, 0, 0ns, false, b.data}, holders, deleted).value, 1u);
  // A retried create of the same attempt finds its node (protection mode).
  EXPECT_EQ(t.apply(2, 13, {ZOp::create, s2, 12, 0ns, false, "/locks/L"}, holders, deleted).data, b.data);
}

TEST(ZnodeTree, ARecreatedParentStartsItsSequenceOverButNotItsZxid) {
  ZnodeTree t;
  std::vector<ZnodeTree::Change> h, d;
  const auto s = t.apply(1, 1, {ZOp::create_session, 0, 0, 10s, false, {}}, h, d).value;
  std::uint64_t last_czxid = 0;
  std::uint64_t i = 2;
  for (int round = 0; round < 2; ++round) {
    for (int k = 0; k < 3; ++k) {
      auto c = t.apply(1, i++, {ZOp::create, s, 100u + i, 0ns, false, "/locks/L"}, h, d);
      EXPECT_GT(c.value, last_czxid);
      last_czxid = c.value;
      if (round == 1 && k == 0) {
        EXPECT_EQ(child_seq(c.data), 0u) << "the sequence starts over";
      }
      t.apply(1, i++, {ZOp::remove, s, 0, 0ns, false, c.data}, h, d);
    }
    EXPECT_TRUE(t.apply(1, i++, {ZOp::remove_container, 0, 0, 0ns, false, "/locks/L"}, h, d).ok);
  }
}

TEST(ZooKeeperSession, ThePausedClientsSessionExpiresAtATickAfterItsTimeoutAndItLearnsItOnlyAfter) {
  World w(opts(3));
  const ProtocolConfig cfg = config(10s);
  Ensemble e(w, cfg);
  auto learned = std::make_shared<Time>(kTimeMax);
  auto paused_at = std::make_shared<Time>();
  w.spawn("client1", [&, learned](Context& ctx) {
    ZkClient zc = make(ctx, cfg);
    ctx.sleep(1s);
    auto g = zc.acquire(ctx, "L", cfg.ttl);
    ASSERT_TRUE(g);
    // Pings keep the session open through 30 s of holding.
    for (int i = 0; i < 30; ++i) {
      ctx.sleep(1s);
      ASSERT_TRUE(zc.believes_valid(ctx, *g)) << "at " << format_time(w.now());
    }
    *paused_at = w.now();
    w.pause(ctx.self(), 20s);
    ctx.sleep(1ms);
    EXPECT_TRUE(zc.believes_valid(ctx, *g)) << "right after the pause the client has not heard yet";
    while (zc.believes_valid(ctx, *g)) ctx.sleep(10ms);
    *learned = w.now();
  });
  w.run_until(Time{80s});
  ASSERT_EQ(e.expired->size(), 1u);
  const Time at = e.expired->front().first;
  // The last ping was at most a third of the timeout before the pause; expiry comes at least a full timeout
  // after it, rounded up to the next tick (2 s), and not later.
  EXPECT_GE(at, *paused_at + 10s - 10s / 3 - 10ms);
  EXPECT_LE(at, *paused_at + 10s + 2s + 10ms);
  EXPECT_EQ(at.count() % Duration(2s).count(), 0) << "expiry at a multiple of tickTime";
  EXPECT_GT(*learned, *paused_at + 20s) << "learned Expired only after the pause, from the ensemble";
  EXPECT_LT(*learned, *paused_at + 22s);
}

TEST(ZooKeeperRecipe, WaitersGetTheLockInCreationOrderWokenByTheirPredecessorsWatch) {
  World w(opts(5));
  const ProtocolConfig cfg = config(10s);
  Ensemble e(w, cfg);
  auto holds = std::make_shared<std::vector<Hold>>();
  for (int c = 1; c <= 3; ++c) {
    w.spawn(fmt::format("client{}", c), [&, c, holds](Context& ctx) {
      ZkClient zc = make(ctx, cfg);
      ctx.sleep(1s + c * 100ms);  // client1 creates first, then client2, then client3
      auto g = zc.acquire(ctx, "L", cfg.ttl);
      ASSERT_TRUE(g);
      Hold h{ctx.name(), *g->token, w.now(), {}};
      ctx.sleep(2s);
      h.released = w.now();
      zc.release(ctx, *g);
      holds->push_back(h);
    });
  }
  w.run_until(Time{30s});
  ASSERT_EQ(holds->size(), 3u);
  auto hs = *holds;
  std::sort(hs.begin(), hs.end(), [](const Hold& a, const Hold& b) { return a.granted < b.granted; });
  for (int i = 0; i < 3; ++i) EXPECT_EQ(hs[i].client, fmt::format("client{}", i + 1));
  for (int i = 1; i < 3; ++i) {
    EXPECT_GT(hs[i].token, hs[i - 1].token);
    EXPECT_GE(hs[i].granted, hs[i - 1].released);
    // Woken by the watch on its predecessor: within a few round trips of the release, not at a poll.
    EXPECT_LT(hs[i].granted, hs[i - 1].released + 200ms) << hs[i].client;
  }
}

TEST(ZooKeeperRecipe, AWatchLostWithTheLeaderIsMadeGoodByReadingTheChildrenOnReconnect) {
  World w(opts(7));
  const ProtocolConfig cfg = config(10s);
  Ensemble e(w, cfg);
  auto got = std::make_shared<Time>(kTimeMax);
  auto released = std::make_shared<Time>();
  w.spawn("client1", [&, released](Context& ctx) {
    ZkClient zc = make(ctx, cfg);
    ctx.sleep(1s);
    auto g = zc.acquire(ctx, "L", cfg.ttl);
    ASSERT_TRUE(g);
    ctx.sleep(3s);
    // The leader that holds client2's watch crashes; the release commits at the next leader.
    w.crash(w.find(*e.leader), false);
    ctx.sleep(2s);
    *released = w.now();
    zc.release(ctx, *g);
    ctx.sleep(20s);
  });
  w.spawn("client2", [&, got](Context& ctx) {
    ZkClient zc = make(ctx, cfg);
    ctx.sleep(2s);
    auto g = zc.acquire(ctx, "L", cfg.ttl);
    ASSERT_TRUE(g);
    *got = w.now();
  });
  w.run_until(Time{40s});
  ASSERT_NE(*got, kTimeMax) << "client2 never acquired: its watch was lost and it did not re-read";
  EXPECT_GT(*got, *released);
  EXPECT_LT(*got, *released + 10s);
}

TEST(ZooKeeperFailover, CzxidTokensIncreaseAcrossLeaderChanges) {
  World w(opts(11));
  const ProtocolConfig cfg = config(10s);
  Ensemble e(w, cfg);
  auto tokens = std::make_shared<std::vector<std::uint64_t>>();
  w.spawn("client1", [&, tokens](Context& ctx) {
    ZkClient zc = make(ctx, cfg);
    ctx.sleep(1s);
    for (int round = 0; round < 4; ++round) {
      // Many entries in this term, so a counter without its epoch would run ahead of the next term's.
      for (int k = 0; k < 5; ++k) {
        auto g = zc.acquire(ctx, "L", cfg.ttl);
        ASSERT_TRUE(g);
        tokens->push_back(*g->token);
        zc.release(ctx, *g);
      }
      const ProcId l = w.find(*e.leader);
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

TEST(ZooKeeperSequenceToken, GoesBackWhenTheEmptyLockParentIsDeletedAndRecreated) {
  for (const char* variant : {"", "sequence-token"}) {
    World w(opts(13));
    ProtocolConfig cfg = config(10s);
    cfg.variant = variant;
    cfg.extra[kContainerCheckKey] = std::to_string(Duration(1s).count());
    Ensemble e(w, cfg);
    auto tokens = std::make_shared<std::vector<std::uint64_t>>();
    w.spawn("client1", [&, tokens](Context& ctx) {
      ZkClient zc = make(ctx, cfg);
      ctx.sleep(1s);
      for (int k = 0; k < 3; ++k) {  // three holds: sequence numbers 0, 2, 4 (creates and deletes count)
        auto g = zc.acquire(ctx, "L", cfg.ttl);
        ASSERT_TRUE(g);
        tokens->push_back(*g->token);
        zc.release(ctx, *g);
      }
      ctx.sleep(3s);  // the container manager deletes the empty parent
      auto g = zc.acquire(ctx, "L", cfg.ttl);
      ASSERT_TRUE(g);
      tokens->push_back(*g->token);
    });
    w.run_until(Time{20s});
    ASSERT_EQ(tokens->size(), 4u);
    if (std::string(variant).empty()) {
      EXPECT_GT(tokens->back(), (*tokens)[2]) << "czxid";
    } else {
      EXPECT_EQ((*tokens)[2], 4u);
      EXPECT_EQ(tokens->back(), 0u) << "the re-created parent's sequence starts over";
    }
  }
}
