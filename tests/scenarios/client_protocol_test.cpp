// A client's own protocol settings ([[client]] protocol = { ... }): what the loader accepts and refuses, what
// `explain` says, the replay round trip, and two clients of one scenario each running by its own settings
// while the servers keep the shared config.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/loader/schema.hpp"
#include "locksim/scenarios/replay.hpp"
#include "locksim/scenarios/runner.hpp"

using namespace locksim;

namespace {

InputError load_error(const std::string& text) {
  try {
    (void)load_scenario_text(text, "c.toml");
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "loaded without error:\n" << text;
  return InputError("c.toml", 1, "none", "none");
}

RunOutput run_text(const std::string& text, const std::string& protocol, std::uint64_t seed = 1) {
  const Scenario sc = load_scenario_text(text, "client_protocol_test.toml");
  RunOptions ro;
  ro.seed = seed;
  ro.keep_trace = true;
  return run_scenario(sc, protocol, ro);
}

std::size_t count_notes(const RunOutput& r, const std::string& label, const std::string& proc) {
  std::size_t n = 0;
  for (const TraceEvent& e : r.trace)
    if (e.kind == TraceKind::note && e.label == label && r.name_of(e.proc) == proc) ++n;
  return n;
}

std::size_t grants_of(const RunOutput& r, const std::string& client) {
  std::size_t n = 0;
  for (const GrantRecord& g : r.history.grants)
    if (g.client == client) ++n;
  return n;
}

/// Three Redlock clients over a 5 ms network, one after the other (no contention): `fast` times a node out
/// after 1 ms and tries 3 times in one acquire, `once` the same with no retry, `normal` runs the shared
/// config (50 ms, 10 retries). Each acquire that gives up is not tried again (give_up_at).
const char* kThree = R"(
[lock]
ttl = "10s"
[network]
delay = "5ms"
[limits]
max_time = "30s"
[[client]]
name = "fast"
retry_delay = "20s"
give_up_at = "1s"
protocol = { node_timeout = "1ms", retry_count = 2, retry_delay = "10ms", retry_jitter = "0" }
[[client]]
name = "once"
start = "2s"
retry_delay = "20s"
give_up_at = "3s"
[client.protocol]
node_timeout = "1ms"
retry_count = 0
[[client]]
name = "normal"
start = "4s"
)";

}  // namespace

// ------------------------------------------------------------------------------------------ the loader

TEST(ClientProtocol, InlineAndSubTableFormsSetOnlyWhatTheyName) {
  const Scenario s = load_scenario_text(kThree, "c.toml");
  ASSERT_EQ(s.clients.size(), 3u);
  const ClientSettings& fast = s.clients[0].protocol;
  EXPECT_EQ(fast.node_timeout, Duration{1ms});
  EXPECT_EQ(fast.retry_count, 2u);
  EXPECT_EQ(fast.retry_delay, Duration{10ms});
  EXPECT_EQ(fast.retry_jitter, Duration{0});
  EXPECT_FALSE(fast.rpc_timeout);
  EXPECT_FALSE(fast.drift_factor_ppm);
  EXPECT_EQ(s.clients[0].retry_delay, Duration{20s});  // the workload's own retry_delay is apart
  EXPECT_EQ(s.clients[1].protocol.retry_count, 0u);
  EXPECT_EQ(s.clients[1].protocol.node_timeout, Duration{1ms});
  EXPECT_TRUE(s.clients[2].protocol.empty());
  // The scenario's shared config is untouched.
  EXPECT_EQ(s.config.node_timeout, Duration{50ms});
  EXPECT_EQ(s.config.retry_count, 10u);
}

TEST(ClientProtocol, EveryClientKeyReadsAsInProtocol) {
  const Scenario s = load_scenario_text(R"(
[[client]]
[client.protocol]
drift_factor = 0.02
clock_drift_allowance = "3ms"
node_timeout = "7ms"
retry_count = 4
retry_delay = "1s"
retry_jitter = "5ms"
elapsed_recheck = true
keepalive_interval = "2s"
rpc_timeout = "300ms"
)",
                                        "c.toml");
  const ClientSettings& c = s.clients[0].protocol;
  ProtocolConfig cfg;
  c.apply(cfg);
  EXPECT_EQ(cfg.drift_factor_ppm, 20'000);
  EXPECT_EQ(cfg.clock_drift_allowance, Duration{3ms});
  EXPECT_EQ(cfg.node_timeout, Duration{7ms});
  EXPECT_EQ(cfg.retry_count, 4u);
  EXPECT_EQ(cfg.retry_delay, Duration{1s});
  EXPECT_EQ(cfg.retry_jitter, Duration{5ms});
  EXPECT_TRUE(cfg.elapsed_recheck);
  EXPECT_EQ(cfg.keepalive_interval, Duration{2s});
  EXPECT_EQ(cfg.rpc_timeout, Duration{300ms});
  EXPECT_EQ(cfg.nodes, ProtocolConfig{}.nodes);  // nothing else moves
}

TEST(ClientProtocol, ServiceKeysAreRefusedAsServiceSettings) {
  for (const char* key :
       {"nodes = 3", "aof = true", "fsync = \"always\"", "replica = true", "expiry_check_interval = \"1s\"",
        "first_token = 33", "election_timeout_min = \"100ms\"", "heartbeat = \"10ms\""}) {
    SCOPED_TRACE(key);
    const InputError e =
        load_error(std::string("[[client]]\nname = \"a\"\n\nprotocol = { retry_count = 1, ") + key + " }\n");
    EXPECT_EQ(e.line, 4u);
    const std::string k = std::string(key).substr(0, std::string(key).find(' '));
    EXPECT_EQ(e.field, "client[0].protocol." + k);
    EXPECT_NE(e.message.find("is a service setting"), std::string::npos) << e.what();
    EXPECT_NE(e.message.find("[protocol]"), std::string::npos) << e.what();
  }
  EXPECT_NE(load_error("[[client]]\nprotocol = { ttl = \"5s\" }\n").message.find("[lock]"),
            std::string::npos);
  EXPECT_NE(load_error("[[client]]\nprotocol = { variant = \"gt-fence\" }\n").message.find("whole protocol"),
            std::string::npos);
}

TEST(ClientProtocol, MistakesNameFileLineFieldWithTheProtocolTablesMessages) {
  const InputError typo = load_error("[[client]]\nprotocol = { node_timout = \"10ms\" }\n");
  EXPECT_STREQ(typo.what(),
               "c.toml:2: client[0].protocol.node_timout: unknown key 'node_timout' (did you mean "
               "'node_timeout'?)");
  // The same words as in [protocol]: one reader for both.
  const InputError neg = load_error("[[client]]\nprotocol = { node_timeout = \"-5ms\" }\n");
  const InputError neg_shared = load_error("[protocol]\nnode_timeout = \"-5ms\"\n[[client]]\n");
  EXPECT_EQ(neg.field, "client[0].protocol.node_timeout");
  EXPECT_EQ(neg.message, neg_shared.message);
  const InputError big = load_error("[[client]]\nprotocol = { retry_count = 2000000 }\n");
  EXPECT_NE(big.message.find("between 0 and 1000000"), std::string::npos) << big.what();
  const InputError flt = load_error("[[client]]\nprotocol = { retry_count = 1.5 }\n");
  EXPECT_NE(flt.message.find("expected an integer"), std::string::npos) << flt.what();
  const InputError str = load_error("[[client]]\nprotocol = \"redlock\"\n");
  EXPECT_EQ(str.field, "client[0].protocol");
  EXPECT_NE(str.message.find("expected a table"), std::string::npos) << str.what();
}

TEST(ClientProtocol, ExplainListsTheClientKeysOnly) {
  const std::string t = explain_schema("client.protocol");
  EXPECT_NE(t.find("node_timeout"), std::string::npos);
  EXPECT_NE(t.find("rpc_timeout"), std::string::npos);
  EXPECT_EQ(t.find("fsync"), std::string::npos);
  EXPECT_EQ(t.find("nodes "), std::string::npos);
  EXPECT_NE(explain_schema("client.protocol.retry_delay").find("not [[client]] retry_delay"),
            std::string::npos);
  EXPECT_NE(explain_schema("client.retry_delay").find("not [protocol] retry_delay"), std::string::npos);
}

// ------------------------------------------------------------------------------------------ the run

TEST(ClientProtocol, EachClientAcquiresByItsOwnSettings) {
  const RunOutput r = run_text(kThree, "redlock");
  // fast: a 1 ms node timeout never sees a 10 ms round trip; it tries 1 + its own retry_count = 3 times.
  EXPECT_EQ(count_notes(r, "acquire-sent", "fast"), 3u);
  EXPECT_EQ(count_notes(r, "attempt-failed", "fast"), 3u);
  EXPECT_EQ(grants_of(r, "fast"), 0u);
  EXPECT_EQ(count_notes(r, "gave-up", "fast"), 1u);
  // once: the same timeout, no retry: one attempt.
  EXPECT_EQ(count_notes(r, "acquire-sent", "once"), 1u);
  EXPECT_EQ(count_notes(r, "attempt-failed", "once"), 1u);
  EXPECT_EQ(grants_of(r, "once"), 0u);
  // normal: the shared 50 ms timeout, granted at the first attempt.
  EXPECT_EQ(count_notes(r, "acquire-sent", "normal"), 1u);
  EXPECT_EQ(count_notes(r, "attempt-failed", "normal"), 0u);
  EXPECT_EQ(grants_of(r, "normal"), 1u);
  // fast's retries came its own retry_delay (10 ms, no jitter) after each failed attempt.
  std::vector<Time> sent;
  for (const TraceEvent& e : r.trace)
    if (e.kind == TraceKind::note && e.label == "acquire-sent" && r.name_of(e.proc) == "fast")
      sent.push_back(e.time);
  ASSERT_EQ(sent.size(), 3u);
  // Each attempt: the 1 ms timeout, the unlock round's 1 ms timeout, then the 10 ms pause.
  EXPECT_EQ(sent[1] - sent[0], Duration{12ms});
  EXPECT_EQ(sent[2] - sent[1], Duration{12ms});
  // The run's own config (the servers') is the shared one.
  EXPECT_EQ(r.config.node_timeout, Duration{50ms});
}

TEST(ClientProtocol, AClientSettingOverridesTheSharedOneForThatClientOnly) {
  // The shared config times every node out; one client's own 50 ms gets it the lock.
  const std::string text = R"(
[protocol]
node_timeout = "1ms"
retry_count = 0
[network]
delay = "5ms"
[[client]]
name = "slow"
give_up_at = "1s"
retry_delay = "10s"
[[client]]
name = "patient"
start = "2s"
protocol = { node_timeout = "50ms" }
)";
  const RunOutput r = run_text(text, "redlock");
  EXPECT_EQ(grants_of(r, "slow"), 0u);
  EXPECT_EQ(grants_of(r, "patient"), 1u);
}

TEST(ClientProtocol, SettingsEqualToTheSharedOnesChangeNothing) {
  const std::string base = "[network]\ndelay = \"5ms\"\n[[client]]\nname = \"a\"\n";
  const RunOutput plain = run_text(base + "[[client]]\nname = \"b\"\n", "redlock");
  const RunOutput same =
      run_text(base + "[[client]]\nname = \"b\"\nprotocol = { node_timeout = \"50ms\", retry_count = 10 }\n",
               "redlock");
  EXPECT_EQ(plain.trace_hash, same.trace_hash);
  const RunOutput other =
      run_text(base + "[[client]]\nname = \"b\"\nprotocol = { node_timeout = \"1ms\" }\n", "redlock");
  EXPECT_NE(plain.trace_hash, other.trace_hash);
}

TEST(ClientProtocol, TheRenewalThreadUsesTheClientsSettings) {
  // The lease's keep-alive period is the renewal schedule (every keepalive_interval): a client's own 1 s
  // renews about three times as often as the shared ttl/3.
  const std::string text = R"(
[lock]
ttl = "9s"
[[client]]
name = "own"
steps = ["acquire", "write", { work = "20s" }, "write", "release"]
renew = true
protocol = { keepalive_interval = "1s" }
[[client]]
name = "shared"
steps = ["acquire", "write", { work = "20s" }, "write", "release"]
renew = true
[expect]
protocols = ["lease+fence"]
)";
  const RunOutput r = run_text(text, "lease+fence");
  const std::size_t own = count_notes(r, "renewed", "own/renew");
  const std::size_t shared = count_notes(r, "renewed", "shared/renew");
  EXPECT_GT(shared, 0u);
  EXPECT_GE(own, 2 * shared) << own << " vs " << shared;
}

TEST(ClientProtocol, AReplayFileWritesTheSettingsBackAndReproducesTheHash) {
  const Scenario sc = load_scenario_text(kThree, "c.toml");
  const RunOutput r = run_text(kThree, "redlock");
  ReplayInfo info{"redlock", r.trace_hash, r.verdict(), "test", ""};
  const std::string text = scenario_to_toml(sc, &info);
  EXPECT_NE(text.find("protocol = { node_timeout = \"0.001s\", retry_count = 2, retry_delay = \"0.01s\""),
            std::string::npos)
      << text;
  const ReplayFile back = load_replay_text(text, "back.toml");
  ASSERT_EQ(back.scenario.clients.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(back.scenario.clients[i].protocol, sc.clients[i].protocol);
  const ReplayCheck again = replay(back);
  EXPECT_TRUE(again.hash_matches);
  EXPECT_EQ(again.run.trace_hash, r.trace_hash);
}
