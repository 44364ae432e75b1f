// The cas-row (protocols/cas_row.hpp) and its anomaly: the checker on hand-built logs, the catalog's counter
// with no lock, with a lock and with the version check left out, end to end with its story and figures, and a
// rapidcheck property: with the version check, no random plan of pauses and delay spikes loses an update,
// with or without a lock.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "locksim/reports/report.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/replay.hpp"
#include "locksim/scenarios/runner.hpp"

using namespace locksim;

namespace {

/// A history of lock-free clients' statements on row "counter" and the row's log entries.
struct RowHistory {
  History h;
  /// An UPDATE by `client` of `value` computed from `read_version`, processed at `at`; returns its write id.
  std::uint64_t statement(const std::string& client, std::int64_t value, std::uint64_t read_version, Time at,
                          bool applied, std::uint64_t retry_of = kNoId) {
    WriteRecord w;
    w.client = client;
    w.grant = kNoId;
    w.key = "counter";
    w.value = fmt::format("{}", value);
    w.sent = at;
    w.acknowledged = applied;
    w.read_modify_write = true;
    w.retry_of = retry_of;
    const std::uint64_t id = h.add_write(w);
    h.log(ResourceEntry{.op = ResourceEntry::Op::write,
                        .time = at,
                        .resource = "db",
                        .key = "counter",
                        .request = id,
                        .accepted = applied,
                        .applied = applied,
                        .value = w.value,
                        .reason = applied ? "" : "version moved",
                        .kind = ResourceKind::cas_row,
                        .version = read_version});
    return id;
  }
};

}  // namespace

TEST(CasRow, WritesComputedFromTheVersionTheyReplacedAreSafeAndConflictsAreCounted) {
  RowHistory t;
  t.statement("client1", 1, 0, 1s, true);
  const auto lost_race = t.statement("client2", 1, 0, 2s, false);  // the version moved: a conflict
  t.statement("client2", 2, 1, 3s, true, lost_race);               // re-read, retried
  t.statement("client1", 2, 1, 4s, false);                         // a conflict never retried
  const CheckResult r = check(t.h);
  EXPECT_TRUE(r.safe);
  EXPECT_EQ(r.cas.statements, 4u);
  EXPECT_EQ(r.cas.applied, 2u);
  EXPECT_EQ(r.cas.conflicts, 2u);
  EXPECT_EQ(r.cas.retries, 1u);
  EXPECT_EQ(r.cas.gave_up, 1u);
  EXPECT_EQ(r.lost.acknowledged, 2u);
  EXPECT_EQ(r.lost.lost, 0u);
  // The row's entries are not store writes: none of the store's anomalies on them.
  EXPECT_EQ(r.count(kStaleWriteAccepted), 0u);
  EXPECT_EQ(r.count(kFreshWriteRejected), 0u);
}

TEST(CasRow, AnAppliedWriteComputedFromAnOlderVersionIsALostUpdate) {
  RowHistory t;
  const auto w1 = t.statement("client1", 1, 0, 1s, true);
  const auto w2 = t.statement("client2", 2, 1, 2s, true);
  const auto w3 = t.statement("client3", 1, 0, 3s, true);  // computed from version 0, the row held 2
  const CheckResult r = check(t.h);
  EXPECT_FALSE(r.safe);
  ASSERT_EQ(r.count(kLostUpdate), 1u);
  const Violation& v = r.violations[0];
  EXPECT_EQ(v.key, "counter");
  EXPECT_EQ(v.earlier.write, w2);  // the version the row held
  EXPECT_EQ(v.later.write, w3);
  EXPECT_EQ(v.later.epoch, 0u);  // written without a lock
  // Both writes applied since version 0 are overwritten.
  EXPECT_EQ(r.lost.lost, 2u);
  EXPECT_EQ(r.lost.lost_writes, (std::vector<std::uint64_t>{w1, w2}));
}

TEST(CasRow, OnlyACasRowsWritesMayHaveNoGrant) {
  RowHistory t;
  t.statement("client1", 1, 0, 1s, true);
  EXPECT_NO_THROW(check(t.h));
  WriteRecord w;
  w.client = "client2";
  w.grant = kNoId;
  w.key = "data";
  w.value = "x";
  t.h.add_write(w);
  t.h.deliver(1, 2s, true);  // a store's entry naming a write without a grant
  EXPECT_THROW(check(t.h), std::invalid_argument);
}

namespace {
const RunOutput& no_lock_run() {
  static const RunOutput r = run_scenario(load_scenario("cas-row-no-lock"), "redis");
  return r;
}
}  // namespace

TEST(CasRow, WithNoLockAtAllTheCounterLosesNothingAndRetries) {
  const RunOutput& r = no_lock_run();
  EXPECT_TRUE(r.check.safe);
  EXPECT_TRUE(r.history.grants.empty());
  EXPECT_EQ(r.check.lost.lost, 0u);
  EXPECT_GT(r.check.cas.conflicts, 10u);
  EXPECT_EQ(r.check.cas.retries, r.check.cas.conflicts - r.check.cas.gave_up);
  EXPECT_EQ(r.check.cas.applied, r.check.lost.acknowledged);
  // The row's final value is the number of increments applied: none lost.
  std::string last;
  for (const ResourceEntry& e : r.history.resource_log)
    if (e.kind == ResourceKind::cas_row && e.applied) last = e.value;
  EXPECT_EQ(last, fmt::format("{}", r.check.cas.applied));
  const Scenario sc = load_scenario("cas-row-no-lock");
  const std::string text = text_report(r, sc);
  EXPECT_NE(text.find(fmt::format("{} conflicts (zero rows updated); {} retries after a conflict",
                                  r.check.cas.conflicts, r.check.cas.retries)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("resource: cas-row (version column)"), std::string::npos);
  const auto j = nlohmann::json::parse(json_report(r, sc));
  EXPECT_EQ(j["verdict"], "safe");
  EXPECT_EQ(j["resource_kind"], "cas-row");
  EXPECT_EQ(j["cas_row"]["retries"], r.check.cas.retries);
  EXPECT_EQ(j["cas_row"]["conflicts"], r.check.cas.conflicts);
}

TEST(CasRow, ALockOnlyReducesTheRetriesEveryProtocolIsSafe) {
  const Scenario sc = load_scenario("cas-row-with-lock");
  ASSERT_FALSE(sc.expect.empty());
  for (const auto& [protocol, e] : sc.expect) {
    SCOPED_TRACE(protocol);
    const RunOutput r = run_scenario(sc, protocol);
    EXPECT_TRUE(r.check.safe);
    EXPECT_EQ(r.check.lost.lost, 0u);
    // The paused client's UPDATE finds the version moved: at least one conflict, retried.
    EXPECT_GE(r.check.cas.retries, 1u);
    EXPECT_LT(r.check.cas.retries * 10, no_lock_run().check.cas.retries);
    EXPECT_NE(text_report(r, sc).find("retries after a conflict"), std::string::npos);
  }
}

TEST(CasRow, WithoutTheVersionCheckIncrementsAreLostAndTheStoryTellsTheRow) {
  const Scenario sc = load_scenario("cas-row-blind-update");
  const RunOutput r = run_scenario(sc, "redis");
  EXPECT_FALSE(r.check.safe);
  EXPECT_GT(r.check.count(kLostUpdate), 0u);
  EXPECT_GT(r.check.lost.lost, 0u);
  const std::string told = story(r);
  EXPECT_NE(told.find("Row 'counter' lost client"), std::string::npos) << told;
  EXPECT_NE(told.find("computed from version"), std::string::npos) << told;
  EXPECT_NE(html_report(r, sc).find("lost update"), std::string::npos);
}

TEST(CasRow, AClientGivesUpAfterMaxRetriesConflictsInARow) {
  std::string text = R"(name = "cas-give-up"
[resource]
kind = "cas-row"
key = "counter"
max_retries = 0
[limits]
max_time = "10s"
)";
  for (const char* c : {"client1", "client2"})
    text += fmt::format(
        "[[client]]\nname = \"{}\"\nsteps = [{{ repeat = 10, steps = [\"read\", {{ work = "
        "\"100ms\" }}, \"write\"] }}]\n",
        c);
  const RunOutput r = run_scenario(load_scenario_text(text, "cas-give-up.toml"), "redis");
  EXPECT_TRUE(r.check.safe);
  EXPECT_GT(r.check.cas.conflicts, 0u);
  EXPECT_EQ(r.check.cas.retries, 0u);
  EXPECT_EQ(r.check.cas.gave_up, r.check.cas.conflicts);
}

namespace {

/// Three counter clients, with no lock or each taking the redis lock around its increment, with a random plan
/// of pauses and delay spikes. Every plan is fair game: a statement that times out (a spike longer than the
/// 5 s call timeout) and lands later is still compared with the version the row holds when it lands, so the
/// property holds for all of them.
std::string random_plan_scenario(bool with_lock) {
  std::string s = R"(name = "cas-row-random-plan"
[lock]
ttl = "5s"
[resource]
kind = "cas-row"
key = "counter"
[limits]
max_time = "40s"
)";
  for (const char* c : {"client1", "client2", "client3"}) {
    const int work = *rc::gen::inRange(0, 1500);
    const std::string rmw = fmt::format("\"read\", {{ work = \"{}ms\" }}, \"write\"", work);
    s += fmt::format(
        "[[client]]\nname = \"{}\"\nstart = \"{}ms\"\nsteps = [{{ loop = \"until 25s\", steps = [{}] }}]\n",
        c, *rc::gen::inRange(0, 3000), with_lock ? "\"acquire\", " + rmw + ", \"release\"" : rmw);
  }
  const int faults = *rc::gen::inRange(0, 5);
  for (int i = 0; i < faults; ++i) {
    const int client = *rc::gen::inRange(1, 4);
    if (*rc::gen::inRange(0, 4) == 0) {
      s += fmt::format(
          "[[fault]]\nkind = \"delay_spike\"\ntarget = \"client{}\"\nat = \"{}ms\"\nduration = \"{}ms\"\n"
          "extra = \"{}ms\"\n",
          client, *rc::gen::inRange(0, 25000), *rc::gen::inRange(1, 5000), *rc::gen::inRange(1, 8000));
    } else {
      s += fmt::format(
          "[[fault]]\nkind = \"pause\"\ntarget = \"client{}\"\nat = \"{}ms\"\nduration = \"{}ms\"\n", client,
          *rc::gen::inRange(0, 25000), *rc::gen::inRange(1, 15000));
    }
  }
  return s;
}

void a_random_plan_loses_no_update() {
  const bool with_lock = *rc::gen::arbitrary<bool>();
  const Scenario sc = load_scenario_text(random_plan_scenario(with_lock), "cas-row-random-plan.toml");
  RunOptions ro;
  ro.keep_trace = false;
  const RunOutput r = run_scenario(sc, "redis", ro);
  RC_TAG(with_lock ? "with a lock" : "no lock", r.check.cas.conflicts > 0 ? "conflicts" : "no conflict");
  RC_ASSERT(r.check.count(kLostUpdate) == 0u);
  RC_ASSERT(r.check.lost.lost == 0u);
  RC_ASSERT(r.check.safe);
}

}  // namespace

TEST(CasRowProperty, TheVersionCheckLosesNoUpdateUnderAThousandRandomPlans) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata md;
  md.id = std::string(info->test_suite_name()) + "/" + info->name();
  md.description = info->name();
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = 1000;
  const auto result = rc::detail::checkTestable(&a_random_plan_loses_no_update, md, params);
  if (!result.is<rc::detail::SuccessResult>()) {
    std::ostringstream ss;
    rc::detail::printResultMessage(result, ss);
    FAIL() << ss.str();
  }
}

// A replay file keeps the kind and max_retries, and reproduces the run of every cas-row scenario.
TEST(CasRow, TheCatalogScenariosReplayFromTheirFiles) {
  for (const char* name : {"cas-row-no-lock", "cas-row-with-lock", "cas-row-blind-update"}) {
    const Scenario sc = load_scenario(name);
    for (const auto& [p, e] : sc.expect) {
      const RunOutput r = run_scenario(sc, p);
      ReplayInfo info{p, r.trace_hash, r.verdict(), "cas_row_test", ""};
      const std::string text = scenario_to_toml(sc, &info);
      EXPECT_NE(text.find("max_retries = "), std::string::npos);
      const ReplayFile f = load_replay_text(text, std::string(name) + ".replay.toml");
      EXPECT_EQ(scenario_to_toml(f.scenario, &info), text) << name << " " << p;
      EXPECT_TRUE(replay(f).hash_matches) << name << " " << p << "\n" << text;
    }
  }
}
