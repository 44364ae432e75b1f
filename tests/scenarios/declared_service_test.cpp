// A user protocol whose service is lockd1..lockd3, declared before the run (Protocol::declare): its process
// names work as fault targets in a scenario file, in explore's nemesis plans and in a replay file; the
// `leader` role picks the member it declared leader-capable; build() spawning something else is an error
// naming the protocol; grants its servers do not back (no record, another value, too few records) are
// warned in every report.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "locksim/protocols/history.hpp"
#include "locksim/protocols/lock.hpp"
#include "locksim/reports/report.hpp"
#include "locksim/scenarios/explore.hpp"
#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/nemesis.hpp"
#include "locksim/scenarios/replay.hpp"
#include "locksim/scenarios/runner.hpp"

namespace locksim {
namespace {

struct LockdReq {
  std::string key, value;
  Duration ttl;
  bool release = false;
};
struct LockdRep {
  bool ok = false;
  std::uint64_t token = 0;
};

/// How lockd's servers record their grants (ProtocolConfig::extra["record"]).
enum class Recording { each_grant, nothing, other_value };

/// A lease server per member; lockd1 leads (it alone answers while it is up), the others take over in
/// order: a client asks lockd1, then lockd2, ...
class LockdClient : public LockClient {
 public:
  explicit LockdClient(std::vector<ProcId> servers) : servers_(std::move(servers)) {}
  std::optional<Grant> acquire(Context& ctx, const std::string& key, Duration ttl) override {
    for (int attempt = 0; attempt < 6; ++attempt) {
      const Time start = ctx.now();
      const std::string value = fmt::format("{}-{}", ctx.name(), attempt);
      for (ProcId s : servers_) {
        auto rep = ctx.call(s, Message::of("ACQ", LockdReq{key, value, ttl}), 50ms);
        if (!rep) continue;  // down or slow: the next member
        if (rep->as<LockdRep>()->ok) return Grant{key, value, rep->as<LockdRep>()->token, start + ttl};
        break;
      }
      ctx.sleep(100ms);
    }
    return std::nullopt;
  }
  bool extend(Context&, Grant&, Duration) override { return false; }
  void release(Context& ctx, const Grant& g) override {
    for (ProcId s : servers_)
      if (ctx.call(s, Message::of("REL", LockdReq{g.key, g.value, 0ns, true}), 50ms)) return;
  }

 private:
  std::vector<ProcId> servers_;
};

class LockdProtocol : public Protocol {
 public:
  /// `spawned`: how many servers build() really spawns (0: as declared), to test the runner's check.
  explicit LockdProtocol(std::string name = "lockd", std::uint32_t spawned = 0)
      : name_(std::move(name)), spawned_(spawned) {}
  std::string name() const override { return name_; }
  std::string summary() const override { return "test: lockd1..lockdN, lockd1 leads"; }
  bool fenced() const override { return true; }
  ServiceDecl declare(const ProtocolConfig& cfg) const override {
    ServiceDecl d;
    for (std::uint32_t i = 1; i <= count(cfg); ++i)
      d.processes.push_back({fmt::format("lockd{}", i), {ProcessRole::server, ProcessRole::leader_capable}});
    d.quorum = quorum(cfg);
    d.names_hint = "[protocol] nodes sets the count";
    return d;
  }
  ServiceInfo build(World& world, const ProtocolConfig& cfg, History& history) override {
    const Recording rec = recording(cfg);
    for (std::uint32_t i = 1; i <= (spawned_ ? spawned_ : count(cfg)); ++i) {
      const std::string name = fmt::format("lockd{}", i);
      const ServiceRecorder recorder = history.recorder(world, name);
      world.spawn(
          name,
          [recorder, rec, i](Context& ctx) {
            if (i == 1)
              recorder.leader(1);
            else
              recorder.follower(1);
            std::map<std::string, std::pair<std::string, Time>> held;
            std::uint64_t counter = 100 * i;
            for (;;) {
              auto m = ctx.receive();
              const auto* rq = m->as<LockdReq>();
              if (!rq) continue;
              auto it = held.find(rq->key);
              const bool free = it == held.end() || it->second.second <= ctx.now();
              if (rq->release) {
                if (!free && it->second.first == rq->value) held.erase(it);
                ctx.reply(*m, Message::of("OK", LockdRep{true, 0}));
              } else if (free) {
                held[rq->key] = {rq->value, ctx.now() + rq->ttl};
                if (rec == Recording::each_grant) recorder.grant(rq->key, rq->value);
                if (rec == Recording::other_value) recorder.grant(rq->key, rq->value + "-not-the-grant");
                ctx.reply(*m, Message::of("OK", LockdRep{true, ++counter}));
              } else {
                ctx.reply(*m, Message::of("NO", LockdRep{false, 0}));
              }
            }
          },
          ProcessOptions{.daemon = true});
    }
    return {};
  }
  std::unique_ptr<LockClient> make_client(Context& ctx, const ProtocolConfig& cfg) override {
    std::vector<ProcId> servers;
    for (std::uint32_t i = 1; i <= count(cfg); ++i) servers.push_back(ctx.lookup(fmt::format("lockd{}", i)));
    return std::make_unique<LockdClient>(std::move(servers));
  }

 private:
  static std::uint32_t count(const ProtocolConfig& cfg) { return cfg.nodes ? cfg.nodes : 3; }
  static std::uint32_t quorum(const ProtocolConfig& cfg) {
    auto it = cfg.extra.find("quorum");
    return it == cfg.extra.end() ? 1 : static_cast<std::uint32_t>(std::stoul(it->second));
  }
  static Recording recording(const ProtocolConfig& cfg) {
    auto it = cfg.extra.find("record");
    if (it == cfg.extra.end()) return Recording::each_grant;
    return it->second == "nothing" ? Recording::nothing : Recording::other_value;
  }
  std::string name_;
  std::uint32_t spawned_;
};

void register_lockd() {
  register_builtin_protocols();
  auto& reg = ProtocolRegistry::instance();
  reg.add("lockd", "test", [] { return std::make_unique<LockdProtocol>(); });
}

/// Two clients one after the other; `fault` is one [[fault]] table's body.
std::string scenario_text(const std::string& fault, const std::string& extra = "") {
  return fmt::format(R"(name = "lockd-test"
[lock]
ttl = "2s"
{}
[[client]]
name = "client1"
[[client]]
name = "client2"
start = "500ms"
[[fault]]
{}
)",
                     extra, fault);
}

bool trace_has(const RunOutput& r, TraceKind kind, const std::string& proc) {
  for (const TraceEvent& ev : r.trace)
    if (ev.kind == kind && r.name_of(ev.proc) == proc) return true;
  return false;
}

TEST(DeclaredService, AUserProcessIsAFaultTargetInAScenarioFile) {
  register_lockd();
  const Scenario sc =
      load_scenario_text(scenario_text("kind = \"crash\"\nat = \"100ms\"\ntarget = \"lockd1\"",
                                       "[[node]]\nname = \"lockd2\"\noffset = \"5ms\""),
                         "lockd.toml");
  const RunOutput r = run_scenario(sc, "lockd");
  EXPECT_EQ(r.servers, (std::vector<std::string>{"lockd1", "lockd2", "lockd3"}));
  ASSERT_EQ(r.faults.size(), 1u);
  EXPECT_EQ(r.name_of(r.faults[0].target), "lockd1");
  EXPECT_TRUE(trace_has(r, TraceKind::crash, "lockd1"));
  EXPECT_EQ(r.check.unbacked_grants, 0u);  // lockd2 took over and recorded its grants
  EXPECT_GE(r.history.grants.size(), 2u);
  EXPECT_TRUE(run_warnings(r).empty());
  // The same file runs against a built-in, which has no lockd1: the fault does not apply there.
  EXPECT_TRUE(run_scenario(sc, "redis").faults.empty());
}

TEST(DeclaredService, UnknownNamesListTheDeclaredOnes) {
  register_lockd();
  try {
    load_scenario_text(scenario_text("kind = \"crash\"\nat = \"1s\"\ntarget = \"lockd4\""), "lockd.toml");
    FAIL() << "lockd4 is not declared";
  } catch (const InputError& e) {
    EXPECT_NE(e.message.find("unknown process 'lockd4': this file's lock services have consul1..consul3, "
                             "db1, lockd1..lockd3, raft1"),
              std::string::npos)
        << e.message;
    EXPECT_NE(e.message.find("nodes sets the count"), std::string::npos) << e.message;
  }
  try {
    load_scenario_text(scenario_text("kind = \"crash\"\nat = \"1s\"\ntarget = \"lokd2\""), "lockd.toml");
    FAIL() << "lokd2 is a typo";
  } catch (const InputError& e) {
    EXPECT_NE(e.message.find("did you mean 'lockd2'?"), std::string::npos) << e.message;
  }
  // nodes = 4 declares lockd4.
  EXPECT_NO_THROW(load_scenario_text(
      scenario_text("kind = \"crash\"\nat = \"1s\"\ntarget = \"lockd4\"", "[protocols.lockd]\nnodes = 4"),
      "lockd.toml"));
}

TEST(DeclaredService, TheLeaderRoleIsTheMemberThatDeclaredItCanLeadAndLeads) {
  register_lockd();
  const Scenario sc = load_scenario_text(
      scenario_text("kind = \"pause\"\nat = \"100ms\"\nduration = \"1s\"\ntarget = \"leader\""),
      "lockd.toml");
  const RunOutput r = run_scenario(sc, "lockd");
  EXPECT_TRUE(trace_has(r, TraceKind::pause, "lockd1"));
  EXPECT_FALSE(trace_has(r, TraceKind::pause, "lockd2"));
}

TEST(DeclaredService, ExploreAimsAtTheDeclaredProcessesAndItsReplayFileReplays) {
  register_lockd();
  const Scenario sc = load_scenario_text(
      scenario_text("kind = \"pause\"\nat = \"1s\"\nduration = \"10ms\"\ntarget = \"client1\""),
      "lockd.toml");
  const NemesisTargets targets = nemesis_targets(sc, "lockd");
  EXPECT_EQ(targets.servers, (std::vector<std::string>{"lockd1", "lockd2", "lockd3"}));
  ExploreOptions opts;
  opts.protocol = "lockd";
  int aimed = 0;
  for (std::uint64_t seed = 1; seed <= 40 && aimed < 3; ++seed) {
    const FaultPlan plan = make_fault_plan(sc, targets, seed, opts.nemesis);
    const bool at_lockd = std::any_of(plan.faults.begin(), plan.faults.end(), [](const FaultSpec& f) {
      return f.target.starts_with("lockd") || f.peer.starts_with("lockd");
    });
    if (!at_lockd) continue;
    ++aimed;
    const RunRecord rec = explore_one(sc, targets, seed, opts);
    EXPECT_TRUE(rec.error.empty()) << seed << ": " << rec.error;
    // The counterexample file explore would write for it loads and replays with the same trace hash.
    ReplayInfo info{.protocol = "lockd",
                    .expected_trace_hash = rec.trace_hash,
                    .verdict = rec.safe ? Verdict::safe : Verdict::unsafe};
    Scenario planned = apply_plan(sc, plan);
    planned.seed = seed;  // explore seeds the world with the plan's seed
    const std::string file = scenario_to_toml(planned, &info);
    EXPECT_NE(file.find("\"lockd"), std::string::npos);
    const ReplayCheck c = replay(load_replay_text(file, "lockd-replay.toml"));
    EXPECT_TRUE(c.hash_matches) << seed;
  }
  EXPECT_EQ(aimed, 3);
}

TEST(DeclaredService, AReplayFileNamingAUserProcessLoads) {
  register_lockd();
  const Scenario sc = load_scenario_text(
      scenario_text("kind = \"crash\"\nat = \"100ms\"\ntarget = \"lockd1\""), "lockd.toml");
  const RunOutput r = run_scenario(sc, "lockd");
  ReplayInfo info{.protocol = "lockd", .expected_trace_hash = r.trace_hash, .verdict = r.verdict()};
  const std::string text = scenario_to_toml(sc, &info);
  ASSERT_NE(text.find("target = \"lockd1\""), std::string::npos) << text;
  const ReplayFile f = load_replay_text(text, "lockd-replay.toml");
  const ReplayCheck c = replay(f);
  EXPECT_TRUE(c.hash_matches);
  EXPECT_TRUE(trace_has(c.run, TraceKind::crash, "lockd1"));
}

TEST(DeclaredService, BuildSpawningOtherThanTheDeclarationIsAnErrorNamingTheProtocol) {
  register_builtin_protocols();
  ProtocolRegistry::instance().add("lockd-short", "test",
                                   [] { return std::make_unique<LockdProtocol>("lockd-short", 2); });
  Scenario sc;
  sc.name = "short";
  sc.file = "test";
  sc.clients = {ClientSpec{.name = "client1"}};
  try {
    run_scenario(sc, "lockd-short");
    FAIL() << "build() spawned two of three declared processes";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("protocol 'lockd-short' declared its service as [lockd1, lockd2, "
                                         "lockd3] but build() spawned [lockd1, lockd2]"),
              std::string::npos)
        << e.what();
  }
}

TEST(DeclaredService, ARecorderRefusesWhatTheDeclarationDoesNotAllow) {
  World w;
  History h;
  h.protocol = "p";
  h.service.processes = {{"s1", {ProcessRole::server}}, {"watch", {ProcessRole::sentinel}}};
  EXPECT_NO_THROW(h.recorder(w, "s1").grant("lock", "v"));
  EXPECT_THROW(h.recorder(w, "s9"), std::logic_error);
  EXPECT_THROW(h.recorder(w, "watch").grant("lock", "v"), std::logic_error);
  EXPECT_THROW(h.recorder(w, "s1").leader(1), std::logic_error);  // not declared leader-capable
  ASSERT_EQ(h.service_sets.size(), 1u);
  EXPECT_EQ(h.service_sets[0].node, "s1");
}

/// lockd with `extra` set, run on a plain two-client scenario.
RunOutput run_lockd(const std::string& protocol_table) {
  register_lockd();
  const Scenario sc = load_scenario_text(
      scenario_text("kind = \"pause\"\nat = \"30s\"\nduration = \"1ms\"\ntarget = \"client1\"",
                    "[protocols.lockd]\n" + protocol_table),
      "lockd.toml");
  return run_scenario(sc, "lockd");
}

void expect_warned_everywhere(const RunOutput& r, const std::string& why, const std::string& words) {
  const Scenario sc;
  ASSERT_FALSE(r.history.grants.empty());
  EXPECT_EQ(r.check.unbacked.size(), r.history.grants.size());
  for (const UnbackedGrant& u : r.check.unbacked) EXPECT_EQ(to_string(u.why), why);
  const auto warnings = run_warnings(r);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("none of the"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find(words), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("safety cannot be judged from service records"), std::string::npos);

  EXPECT_NE(text_report(r, sc).find("warning: none of the"), std::string::npos);
  const auto j = nlohmann::json::parse(json_report(r, sc));
  ASSERT_EQ(j["warnings"].size(), 1u);
  EXPECT_EQ(j["warnings"][0], warnings[0]);
  EXPECT_EQ(j["grants"][0]["unbacked"]["why"], why);
  JUnitCase jc{"lockd-test", "lockd", "safe", "safe", 0.0, ""};
  jc.warnings = warnings;
  EXPECT_NE(junit_report({jc}).find("warning: none of the"), std::string::npos);
  jc.got = "unsafe";  // a failure: the warning follows the details
  jc.details = "the story";
  EXPECT_NE(junit_report({jc}).find("the story\nwarning: none of the"), std::string::npos);
  EXPECT_NE(html_report(r, sc).find("class=\"warning\""), std::string::npos);
}

TEST(DeclaredService, GrantsItsServersDoNotRecordAreWarnedInEveryReport) {
  expect_warned_everywhere(run_lockd("extra = { record = \"nothing\" }"), "no-record",
                           "no record by a declared service process");
}

TEST(DeclaredService, GrantsRecordedWithAnotherValueAreWarnedInEveryReport) {
  expect_warned_everywhere(run_lockd("extra = { record = \"other\" }"), "value-mismatch", "value mismatch");
}

TEST(DeclaredService, GrantsShortOfTheDeclaredQuorumAreWarned) {
  const RunOutput r = run_lockd("extra = { quorum = \"2\" }");
  EXPECT_EQ(r.history.service_quorum, 2u);
  expect_warned_everywhere(r, "quorum-not-met", "quorum not met");
}

TEST(DeclaredService, BackedGrantsWarnNothing) {
  const RunOutput r = run_lockd("nodes = 3");
  EXPECT_EQ(r.check.unbacked_grants, 0u);
  EXPECT_TRUE(run_warnings(r).empty());
  EXPECT_EQ(text_report(r, Scenario{}).find("warning:"), std::string::npos);
}

}  // namespace
}  // namespace locksim
