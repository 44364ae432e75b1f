// Service settings a scenario can state: the lessor's expiry-check interval, the first token, per-node
// persistence. Each test compares a run with the setting against one without it, so a setting that is parsed
// but never reaches the service fails here.
#include <gtest/gtest.h>

#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/runner.hpp"

using namespace locksim;

namespace {

RunOutput run_text(const std::string& text, const std::string& protocol) {
  const Scenario sc = load_scenario_text(text, "t.toml");
  RunOptions ro;
  ro.keep_trace = false;
  return run_scenario(sc, protocol, ro);
}

/// The true time at which `client` was granted the lock (its first grant), or none.
std::optional<Time> granted(const RunOutput& r, const std::string& client) {
  for (const GrantRecord& g : r.history.grants)
    if (g.client == client) return g.granted;
  return std::nullopt;
}

// client1 takes a 2 s lease and is paused for 10 s, so its lease expires at about 2 s; client2 waits for it.
std::string lessor_scenario(const std::string& interval) {
  return R"(
[lock]
ttl = "2s"
[protocol]
expiry_check_interval = ")" +
         interval + R"("
[[client]]
name = "client1"
writes_per_hold = 0
release = false
[[client]]
name = "client2"
start = "500ms"
writes_per_hold = 0
[[fault]]
kind = "pause"
target = "client1"
duration = "10s"
after = { process = "client1", note = "acquired" }
)";
}

}  // namespace

TEST(ServiceSettings, TheLessorRevokesAtItsNextTick) {
  const RunOutput exact = run_text(lessor_scenario("0"), "lease");
  const RunOutput etcd = run_text(lessor_scenario("500ms"), "lease");
  const auto t0 = granted(exact, "client2"), t1 = granted(etcd, "client2");
  ASSERT_TRUE(t0 && t1);
  const auto expiry = *granted(exact, "client1") + 2s;
  EXPECT_GE(*t0, expiry - 20ms) << "the lease began at the leader, just before client1 heard of it";
  EXPECT_LT(*t0, expiry + 100ms) << "without an interval the lease is revoked at once";
  EXPECT_GT(*t1, *t0) << "with etcd's 500 ms lessor the revoke waits for the next tick";
  EXPECT_LE(*t1, *t0 + 500ms) << "but never longer than one interval";
}

TEST(ServiceSettings, FirstTokenStartsTheCounter) {
  const std::string text = R"(
[protocol]
first_token = 33
[lock]
ttl = "2s"
[[client]]
name = "client1"
acquisitions = 2
)";
  const RunOutput incr = run_text(text, "redis+incr");
  ASSERT_EQ(incr.history.grants.size(), 2u);
  EXPECT_EQ(incr.history.grants[0].token, 33u);
  EXPECT_EQ(incr.history.grants[1].token, 34u);
  const RunOutput lease = run_text(text, "lease+fence");
  ASSERT_EQ(lease.history.grants.size(), 2u);
  EXPECT_GE(*lease.history.grants[0].token, 33u);
  EXPECT_GT(*lease.history.grants[1].token, *lease.history.grants[0].token);
  const RunOutput plain = run_text(R"([[client]]
name = "client1"
)",
                                   "redis+incr");
  EXPECT_EQ(plain.history.grants.at(0).token, 1u);
}

TEST(ServiceSettings, PersistenceOfOneNodeSurvivesItsCrash) {
  // client1 holds a 10 s lock and never releases; redis1 crashes at 1 s and restarts at 2 s; client2 asks
  // from 3 s. Only a redis1 that fsyncs its AOF still knows the lock after the restart.
  auto text = [](const std::string& node) {
    return R"(
[lock]
ttl = "10s"
[[client]]
name = "client1"
writes_per_hold = 0
release = false
[[client]]
name = "client2"
start = "3s"
writes_per_hold = 0
retry_delay = "100ms"
[[fault]]
kind = "crash"
target = "redis1"
at = "1s"
duration = "1s"
power_loss = true
)" + node;
  };
  const RunOutput volatile_node = run_text(text(""), "redis");
  const RunOutput durable_node =
      run_text(text("[[node]]\nname = \"redis1\"\naof = true\nfsync = \"always\"\n"), "redis");
  const auto a = granted(volatile_node, "client2"), b = granted(durable_node, "client2");
  ASSERT_TRUE(a && b);
  EXPECT_LT(*a, Time{4s}) << "the restarted node forgot the lock";
  EXPECT_GE(*b, Time{10s}) << "the node's own fsync kept the lock until its TTL";
}

TEST(ServiceSettings, NodeSettingsApplyToEveryProtocolConfig) {
  const Scenario s = load_scenario_text(R"(
[protocols.redlock]
node_timeout = "20ms"
[[client]]
name = "client1"
[[node]]
name = "redis2"
aof = true
fsync = "periodic"
fsync_period = "2s"
drift_ppm = 100
)",
                                        "t.toml");
  for (const ProtocolConfig* c : {&s.config, &s.config_for("redlock")}) {
    const auto& ns = c->node_settings.at("redis2");
    EXPECT_EQ(ns.aof, true);
    EXPECT_EQ(ns.fsync, FsyncPolicy::periodic);
    EXPECT_EQ(ns.fsync_period, Duration{2s});
  }
  ASSERT_EQ(s.clocks.size(), 1u);
  EXPECT_EQ(s.clocks[0].node, "redis2");
  EXPECT_EQ(s.clocks[0].clock.drift_ppm, 100);
}
