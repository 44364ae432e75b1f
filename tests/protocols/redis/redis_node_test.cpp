// The Redis node model on its own: command semantics, wall-clock expiry, persistence.
#include <gtest/gtest.h>

#include "locksim/protocols/redis/redis_node.hpp"

using namespace locksim;
using namespace locksim::redis;

namespace {

/// Runs `script` as one client against a lone node and returns the replies in order.
struct NodeWorld {
  explicit NodeWorld(NodeOptions o = {.name = "redis1"}) { node = spawn_node(world, o, history); }
  World world;
  History history;
  ProcId node;
  std::vector<std::optional<Reply>> replies;

  void run_script(std::vector<std::pair<Time, Command>> script) {
    world.spawn("client", [this, script](Context& ctx) {
      for (const auto& [at, c] : script) {
        ctx.sleep(at - ctx.now());
        auto m = ctx.call(node, command_message(c), 1s);
        replies.push_back(m ? std::optional<Reply>(*m->as<Reply>()) : std::nullopt);
      }
    });
    world.run();
  }
};

Command set(std::string v, Duration ttl = 10s) {
  return {.op = Op::set_nx, .key = "k", .value = std::move(v), .ttl = ttl};
}
Command get() {
  return {.op = Op::get, .key = "k"};
}

}  // namespace

TEST(RedisNode, SetNxCompareAndDeleteExtendIncr) {
  NodeWorld nw;
  nw.run_script({
      {0ms, set("a")},
      {1s, set("b")},
      {2s, {.op = Op::del_if_value, .key = "k", .value = "b"}},
      {3s, get()},
      {4s, {.op = Op::pexpire_if_value, .key = "k", .value = "b", .ttl = 1min}},
      {5s, {.op = Op::pexpire_if_value, .key = "k", .value = "a", .ttl = 1min}},
      {20s, get()},  // alive thanks to the extension (the SET's 10 s ran out at 10 s)
      {21s, {.op = Op::del_if_value, .key = "k", .value = "a"}},
      {22s, get()},
      {23s, {.op = Op::incr, .key = "n"}},
      {24s, {.op = Op::incr, .key = "n"}},
  });
  ASSERT_EQ(nw.replies.size(), 11u);
  for (const auto& r : nw.replies) ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(nw.replies[0]->ok);
  EXPECT_FALSE(nw.replies[1]->ok);  // NX: held by "a"
  EXPECT_FALSE(nw.replies[2]->ok);  // not b's key
  EXPECT_EQ(nw.replies[3]->value, "a");
  EXPECT_FALSE(nw.replies[4]->ok);
  EXPECT_TRUE(nw.replies[5]->ok);
  EXPECT_EQ(nw.replies[6]->value, "a");
  EXPECT_TRUE(nw.replies[7]->ok);
  EXPECT_FALSE(nw.replies[8]->value.has_value());
  EXPECT_EQ(nw.replies[9]->integer, 1);
  EXPECT_EQ(nw.replies[10]->integer, 2);
  // Only the successful SET NX is a service set.
  ASSERT_EQ(nw.history.service_sets.size(), 1u);
  EXPECT_EQ(nw.history.service_sets[0].value, "a");
  EXPECT_EQ(nw.history.service_sets[0].node, "redis1");
}

TEST(RedisNode, KeysExpireByTheWallClockLazily) {
  for (bool jump : {false, true}) {
    NodeWorld nw;
    if (jump) nw.world.schedule(1s, [&] { nw.world.clock_jump(nw.node, 20s); });
    nw.run_script({{0ms, set("a")}, {2s, get()}, {3s, set("b")}});
    ASSERT_EQ(nw.replies.size(), 3u);
    if (jump) {
      EXPECT_FALSE(nw.replies[1]->value.has_value()) << "a forward wall jump expires the key early";
      EXPECT_TRUE(nw.replies[2]->ok);
    } else {
      EXPECT_EQ(nw.replies[1]->value, "a");
      EXPECT_FALSE(nw.replies[2]->ok);
    }
  }
}

TEST(RedisNode, DriftStretchesExpiryInTrueTime) {
  // A node whose clock runs 10% slow keeps a 10 s key for about 11.1 s of true time.
  NodeWorld nw;
  nw.world.clock_drift(nw.node, -100'000);
  nw.run_script({{0ms, set("a")}, {10'500ms, get()}, {11'200ms, get()}});
  EXPECT_EQ(nw.replies[1]->value, "a");
  EXPECT_FALSE(nw.replies[2]->value.has_value());
}

TEST(RedisNode, AofReloadKeepsAbsoluteExpiry) {
  NodeWorld nw({.name = "redis1", .aof = true, .fsync = FsyncPolicy::always});
  nw.world.schedule(1s, [&] { nw.world.crash(nw.node, true); });
  nw.world.schedule(2s, [&] { nw.world.restart(nw.node); });
  nw.run_script({{0ms, set("a", 5s)}, {3s, get()}, {6s, get()}});
  EXPECT_EQ(nw.replies[1]->value, "a");            // reloaded from the AOF
  EXPECT_FALSE(nw.replies[2]->value.has_value());  // and still expires at 5 s wall time
}

TEST(RedisNode, ReplicaRejectsWritesAndAppliesReplicatedSets) {
  World world;
  History history;
  const ProcId master =
      spawn_node(world, {.name = "redis1", .peer = "replica1", .replication_delay = 50ms}, history);
  const ProcId replica = spawn_node(world, {.name = "replica1", .replica = true, .peer = "redis1"}, history);
  std::vector<std::optional<Reply>> out;
  world.spawn("client", [&](Context& ctx) {
    out.push_back(*ctx.call(replica, command_message(set("x")), 1s)->as<Reply>());
    out.push_back(*ctx.call(master, command_message(set("a")), 1s)->as<Reply>());
    out.push_back(*ctx.call(replica, command_message(get()), 1s)->as<Reply>());  // not replicated yet
    ctx.sleep(100ms);
    out.push_back(*ctx.call(replica, command_message(get()), 1s)->as<Reply>());
  });
  world.run();
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0]->error, "READONLY");
  EXPECT_TRUE(out[1]->ok);
  EXPECT_FALSE(out[2]->value.has_value());
  EXPECT_EQ(out[3]->value, "a");
  ASSERT_EQ(history.service_sets.size(), 2u);
  EXPECT_EQ(history.service_sets[0].node, "redis1");
  EXPECT_EQ(history.service_sets[1].node, "replica1");
  EXPECT_GE(history.service_sets[1].time - history.service_sets[0].time, 50ms);
}
