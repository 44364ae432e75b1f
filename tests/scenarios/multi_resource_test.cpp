// Several protected resources in one scenario ([[resource]]): each a process of its own, a step names the one
// it acts on, each judged by its own kind's property from its own log, every report naming the resource an
// anomaly happened at, and the replay file keeping them all.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "locksim/reports/report.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/replay.hpp"
#include "locksim/scenarios/runner.hpp"

using namespace locksim;

namespace {

constexpr const char* kLeader = "scheduler-leader-checkpoint-and-email-gc-pause";

std::size_t entries_at(const RunOutput& r, const std::string& resource, ResourceKind kind) {
  std::size_t n = 0;
  for (const ResourceEntry& e : r.history.resource_log)
    if (e.resource == resource) {
      EXPECT_EQ(e.kind, kind) << resource;
      ++n;
    }
  return n;
}

}  // namespace

TEST(SeveralResources, TheFileDeclaresThemInOrderAndStepsNameTheirs) {
  const Scenario sc = load_scenario(kLeader);
  EXPECT_EQ(sc.resource_name, "checkpoints");
  EXPECT_EQ(sc.resource_kind, ResourceKind::checkpoint_table);
  ASSERT_EQ(sc.more_resources.size(), 1u);
  EXPECT_EQ(sc.more_resources[0].name, "mailer");
  EXPECT_EQ(sc.more_resources[0].kind, ResourceKind::external_api);
  EXPECT_EQ(sc.more_resources[0].key, "reports");
  // "read" (the first resource), then { step = "read", resource = "mailer" }.
  const auto& steps = sc.clients[0].steps;
  ASSERT_GE(steps.size(), 4u);
  EXPECT_EQ(steps[1].resource, "");
  EXPECT_EQ(steps[2].resource, "mailer");
  EXPECT_EQ(steps[3].steps[1].resource, "mailer");
  EXPECT_EQ(steps[3].steps[2].resource, "");
}

// The fence protects the resource that checks it: with a token the checkpoint table refuses the paused
// leader's late checkpoint, while the mail API, which cannot check one, sends the report twice.
TEST(SeveralResources, TheTokenProtectsTheTableNotTheMailApi) {
  const Scenario sc = load_scenario(kLeader);
  const RunOutput r = run_scenario(sc, "lease+fence");
  // Each resource's requests reach its own process and its own log.
  EXPECT_GT(entries_at(r, "checkpoints", ResourceKind::checkpoint_table), 0u);
  EXPECT_GT(entries_at(r, "mailer", ResourceKind::external_api), 0u);
  EXPECT_FALSE(r.check.safe);
  EXPECT_GE(r.check.count(kDuplicateEffect), 1u);
  EXPECT_EQ(r.check.count(kCheckpointRewind), 0u);
  EXPECT_EQ(r.check.count(kDuplicateProcessing), 0u);
  for (const Violation& v : r.check.violations) EXPECT_EQ(v.resource, "mailer") << v.kind;
  ASSERT_FALSE(r.check.refused.empty());
  EXPECT_EQ(r.check.refused[0].write.client, "client1");
  EXPECT_EQ(refusal_kind(r, r.check.refused[0]), ResourceKind::checkpoint_table);

  const std::string text = text_report(r, sc);
  EXPECT_NE(text.find("resource: checkpoints fenced checkpoint-table, mailer unfenced external-api"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("refused checkpoint: client1's"), std::string::npos) << text;
  EXPECT_NE(text.find("[mailer, external-api] Charged twice: job 4 by client2"), std::string::npos) << text;
  const nlohmann::json j = nlohmann::json::parse(json_report(r, sc));
  ASSERT_TRUE(j.contains("resources"));
  ASSERT_EQ(j.at("resources").size(), 2u);
  EXPECT_EQ(j.at("resources").at(1).at("name"), "mailer");
  EXPECT_EQ(j.at("resources").at(1).at("kind"), "external-api");
  ASSERT_TRUE(j.contains("violations") && !j.at("violations").empty());
  EXPECT_EQ(j.at("violations").at(0).at("resource"), "mailer");
  ASSERT_TRUE(j.contains("anomalies"));
  EXPECT_TRUE(j.at("anomalies").contains("checkpoint-rewind"));
  EXPECT_TRUE(j.at("anomalies").contains("duplicate-effect"));
  const std::string html = html_report(r, sc);
  EXPECT_NE(html.find("\"name\":\"mailer\""), std::string::npos);
  EXPECT_NE(html.find("resource (external-api)"), std::string::npos);
  EXPECT_NE(html.find("resource (checkpoint-table)"), std::string::npos);
}

// Without a token both resources suffer, each in its own terms, and each anomaly names its resource.
TEST(SeveralResources, WithoutATokenBothResourcesSufferEachInItsOwnTerms) {
  const RunOutput r = run_scenario(load_scenario(kLeader), "lease");
  EXPECT_FALSE(r.check.safe);
  EXPECT_GE(r.check.count(kDuplicateEffect), 1u);
  EXPECT_GE(r.check.count(kCheckpointRewind), 1u);
  for (const Violation& v : r.check.violations)
    EXPECT_EQ(v.resource, v.kind == kDuplicateEffect ? "mailer" : "checkpoints") << v.kind;
  const std::string text = text_report(r, load_scenario(kLeader));
  EXPECT_NE(text.find("[checkpoints, checkpoint-table] Checkpoint of shard 3 moved back"), std::string::npos)
      << text;
}

TEST(SeveralResources, TheReplayFileKeepsEveryResourceAndReproducesTheRun) {
  const Scenario sc = load_scenario(kLeader);
  for (const auto& [p, e] : sc.expect) {
    const RunOutput r = run_scenario(sc, p);
    ReplayInfo info{p, r.trace_hash, r.verdict(), "multi_resource_test", ""};
    const std::string text = scenario_to_toml(sc, &info);
    EXPECT_NE(text.find("[[resource]]\nname = \"mailer\""), std::string::npos) << text;
    EXPECT_NE(text.find("resource = \"mailer\""), std::string::npos) << text;
    const ReplayFile f = load_replay_text(text, std::string(kLeader) + ".replay.toml");
    EXPECT_EQ(scenario_to_toml(f.scenario, &info), text) << p;
    EXPECT_TRUE(replay(f).hash_matches) << p << "\n" << text;
  }
}

// One [[resource]] table is the same scenario as a [resource] table.
TEST(SeveralResources, OneResourceAsAnArrayIsTheSameAsATable) {
  const char* body = R"(
[[client]]
name = "client1"
steps = ["acquire", "read", "write", "release"]
[[client]]
name = "client2"
start = "100ms"
steps = ["acquire", "read", "write", "release"]
)";
  const Scenario a = load_scenario_text(
      std::string("name = \"x\"\n[resource]\nkind = \"cas-row\"\nkey = \"k\"\n") + body, "a.toml");
  const Scenario b = load_scenario_text(
      std::string("name = \"x\"\n[[resource]]\nkind = \"cas-row\"\nkey = \"k\"\n") + body, "b.toml");
  EXPECT_TRUE(b.more_resources.empty());
  EXPECT_EQ(run_scenario(a, "redis").trace_hash, run_scenario(b, "redis").trace_hash);
  EXPECT_EQ(scenario_to_toml(a), scenario_to_toml(b));
}
