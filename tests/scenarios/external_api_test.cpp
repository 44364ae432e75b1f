// The external API (protocols/external_api.hpp) and its anomaly: the API process's idempotency keys and
// their retention on a bare world, the checker on hand-built logs, the catalog's payment API scenarios end to
// end with their story in the API's own words, and a rapidcheck property: with idempotency keys kept longer
// than the run, no random plan of pauses and delay spikes charges a job twice.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "locksim/protocols/external_api.hpp"
#include "locksim/reports/report.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/replay.hpp"
#include "locksim/scenarios/runner.hpp"

using namespace locksim;

namespace {

// ---------------------------------------------------------------------------------------- the API process

/// Two requests for job 1 with the same idempotency key, sent `gap` apart (constant 1 ms network delay, so
/// they reach the API `gap` apart on its clock). Returns whether the API performed the second.
bool second_performed(Duration retention, Duration gap, bool with_key = true) {
  WorldOptions o;
  o.keep_trace = false;
  o.network.defaults.delay = DelayDist::constant_of(1ms);
  World w(o);
  History h;
  const ProcId api = spawn_external_api(w, "payments", ExternalApiOptions{retention}, h);
  bool performed = false;
  w.spawn("client1", [&](Context& ctx) {
    const std::optional<std::string> key =
        with_key ? std::optional<std::string>(idempotency_key_for("3", 1)) : std::nullopt;
    const Time start = ctx.now();
    auto send = [&] {
      auto rep = ctx.call(api, Message::of(kApiRequestType, ApiRequest{"3", 1, key, "client1", kNoId}), 5s);
      return rep && rep->as<ApiReply>() && rep->as<ApiReply>()->performed;
    };
    EXPECT_TRUE(send());
    ctx.sleep(start + gap - ctx.now());
    performed = send();
  });
  w.run();
  EXPECT_EQ(h.resource_log.size(), 2u);
  return performed;
}

}  // namespace

TEST(ExternalApi, AKeyIsRememberedForExactlyTheRetention) {
  EXPECT_FALSE(second_performed(10s, 10s - 1ns));  // deduplicated: the first result replayed
  EXPECT_TRUE(second_performed(10s, 10s));         // forgotten at first_seen + retention
  EXPECT_TRUE(second_performed(10s, 2s, false));   // no key: every request is a new effect
  EXPECT_FALSE(idempotency_key_retained(Time{0}, Time{0} + 24h, 24h));
  EXPECT_TRUE(idempotency_key_retained(Time{0}, Time{0} + 24h - 1ns, 24h));
}

TEST(ExternalApi, ADeduplicatedRequestReturnsTheFirstResultAndTheReadTheHighestJob) {
  World w(WorldOptions{});
  History h;
  const ProcId api = spawn_external_api(w, "payments", ExternalApiOptions{}, h);
  w.spawn("client1", [&](Context& ctx) {
    auto send = [&](std::int64_t job, std::optional<std::string> key) {
      auto rep = ctx.call(
          api, Message::of(kApiRequestType, ApiRequest{"3", job, std::move(key), "client1", kNoId}), 5s);
      return *rep->as<ApiReply>();
    };
    const ApiReply a = send(1, "job-3-1"), b = send(2, "job-3-2"), again = send(1, "job-3-1");
    EXPECT_TRUE(a.performed);
    EXPECT_TRUE(b.performed);
    EXPECT_FALSE(again.performed);
    EXPECT_EQ(again.result, a.result);
    auto rd = ctx.call(api, Message::of(kApiReadType, ApiRead{"3", kNoId}), 5s);
    EXPECT_EQ(rd->as<ApiLastJob>()->job, 2);
  });
  w.run();
  ASSERT_EQ(h.resource_log.size(), 4u);
  EXPECT_FALSE(h.resource_log[2].applied);
  EXPECT_EQ(h.resource_log[2].idempotency_key, "job-3-1");
  EXPECT_EQ(h.resource_log[2].kind, ResourceKind::external_api);
  EXPECT_EQ(h.resource_log[3].op, ResourceEntry::Op::read);
}

// ---------------------------------------------------------------------------------- the checker, by hand

namespace {

/// A history with one backed grant per client (epochs in the order given) and the API's log entries.
struct ApiHistory {
  History h;
  std::uint64_t grant(const std::string& client, Time at) {
    h.service_sets.push_back({at, "redis1", "lock", client});
    GrantRecord g;
    g.client = client;
    g.key = "lock";
    g.value = client;
    g.requested = at;
    g.granted = at;
    return h.add_grant(g);
  }
  /// A request for `job` by the grant's client, processed at `at`: performed or deduplicated.
  std::uint64_t request(std::uint64_t grant, std::int64_t job, Time at, bool performed,
                        bool acknowledged = true, std::string key = "") {
    WriteRecord w;
    w.client = h.grants[grant].client;
    w.grant = grant;
    w.key = "3";
    w.value = fmt::format("{}", job);
    w.sent = at;
    w.acknowledged = acknowledged;
    const std::uint64_t id = h.add_write(w);
    h.log(ResourceEntry{.op = ResourceEntry::Op::write,
                        .time = at,
                        .resource = "payments",
                        .key = "3",
                        .request = id,
                        .accepted = true,
                        .applied = performed,
                        .value = w.value,
                        .kind = ResourceKind::external_api,
                        .worker = w.client,
                        .job = job,
                        .idempotency_key = std::move(key)});
    return id;
  }
  ApiHistory() { h.service_nodes = {"redis1"}; }
};

}  // namespace

TEST(ExternalApiChecker, AJobPerformedByTwoClientsIsADuplicateEffect) {
  ApiHistory t;
  const auto g1 = t.grant("client1", 0s), g2 = t.grant("client2", 10s);
  t.request(g1, 1, 1s, true);
  t.request(g2, 2, 11s, true);
  t.request(g1, 2, 15s, true);  // the paused holder's late request: charged again
  const CheckResult r = check(t.h);
  EXPECT_FALSE(r.safe);
  ASSERT_EQ(r.count(kDuplicateEffect), 1u);
  const Violation& v = r.violations[0];
  EXPECT_EQ(v.key, "3");
  EXPECT_EQ(v.reason, "job 2");
  EXPECT_EQ(v.earlier.client, "client2");
  EXPECT_EQ(v.earlier.arrived, 11s);
  EXPECT_EQ(v.later.client, "client1");
  EXPECT_EQ(v.later.arrived, 15s);
  EXPECT_EQ(v.time, 15s);
  EXPECT_EQ(r.count(kStaleWriteAccepted), 0u);  // the API's entries are not store writes
  EXPECT_TRUE(r.missing.empty());
}

TEST(ExternalApiChecker, OneClientPerformingAJobTwiceIsADuplicateEffectToo) {
  ApiHistory t;
  const auto g1 = t.grant("client1", 0s);
  t.request(g1, 1, 1s, true, false);  // its answer never came back
  t.request(g1, 1, 7s, true);         // the retry, without a key: a second charge
  const CheckResult r = check(t.h);
  ASSERT_EQ(r.count(kDuplicateEffect), 1u);
  EXPECT_EQ(r.violations[0].earlier.client, "client1");
  EXPECT_EQ(r.violations[0].later.client, "client1");
}

TEST(ExternalApiChecker, ADeduplicatedRequestIsNoAnomaly) {
  ApiHistory t;
  const auto g1 = t.grant("client1", 0s), g2 = t.grant("client2", 10s);
  t.request(g1, 1, 1s, true, true, "job-3-1");
  t.request(g2, 1, 11s, false, true, "job-3-1");  // within the retention: the first result replayed
  t.request(g2, 2, 12s, true, true, "job-3-2");
  const CheckResult r = check(t.h);
  EXPECT_TRUE(r.safe);
  EXPECT_TRUE(r.missing.empty());
}

TEST(ExternalApiChecker, JobsNeverPerformedAreListedBesideTheVerdict) {
  ApiHistory t;
  const auto g1 = t.grant("client1", 0s);
  t.request(g1, 1, 1s, true);
  t.request(g1, 2, 2s, false, true, "job-3-2");  // acknowledged, but nothing was ever performed for job 2
  t.request(g1, 4, 4s, true);                    // job 3 was never even requested
  const CheckResult r = check(t.h);
  EXPECT_TRUE(r.safe);  // a missing effect is not a safety anomaly
  ASSERT_EQ(r.missing.size(), 2u);
  EXPECT_EQ(r.missing[0].job, 2);
  EXPECT_EQ(r.missing[0].key, "3");
  EXPECT_EQ(r.missing[0].resource, "payments");
  ASSERT_TRUE(r.missing[0].acknowledged.valid());
  EXPECT_EQ(r.missing[0].acknowledged.client, "client1");
  EXPECT_EQ(r.missing[1].job, 3);
  EXPECT_FALSE(r.missing[1].acknowledged.valid());
}

// ---------------------------------------------------------------------------------------- end to end

TEST(ExternalApiScenario, WithoutKeysEveryProtocolChargesTwiceFencedOrNot) {
  const Scenario sc = load_scenario("payment-api-gc-pause");
  for (const char* p : {"lease", "lease+fence"}) {
    SCOPED_TRACE(p);
    const RunOutput r = run_scenario(sc, p);
    EXPECT_FALSE(r.check.safe);
    ASSERT_EQ(r.check.count(kDuplicateEffect), 1u);
    const Violation& v = r.check.violations[0];
    EXPECT_EQ(v.earlier.client, "client2");
    EXPECT_EQ(v.later.client, "client1");
    EXPECT_EQ(r.history.writes[v.later.write].value, "4");
    const std::string told = story(r);
    EXPECT_NE(told.find("Charged twice: job 4 by client2 at 15.006 s and by client1 at 49.217 s"),
              std::string::npos)
        << told;
    EXPECT_NE(told.find("without an idempotency key"), std::string::npos) << told;
    EXPECT_TRUE(r.check.missing.empty());
  }
  const RunOutput r = run_scenario(sc, "lease");
  const auto j = nlohmann::json::parse(json_report(r, sc));
  EXPECT_EQ(j["resource_kind"], "external-api");
  EXPECT_EQ(j["anomalies"]["duplicate-effect"], 1);
  EXPECT_EQ(j["violations"][0]["kind"], "duplicate-effect");
  EXPECT_EQ(j["violations"][0]["reason"], "job 4");
  EXPECT_EQ(j["violations"][0]["writes"][1]["client"], "client1");
  EXPECT_TRUE(j["missing_effects"].empty());
  EXPECT_EQ(j["idempotency_keys"], false);
  const std::string html = html_report(r, sc);
  EXPECT_NE(html.find("resource (external-api)"), std::string::npos);  // the API's own lane
  EXPECT_NE(html.find("data-kind=\"duplicate-effect\""), std::string::npos);
  EXPECT_NE(html.find(fmt::format("data-writes=\"{} {}\"", r.check.violations[0].earlier.write,
                                  r.check.violations[0].later.write)),
            std::string::npos);  // both requests ringed
  EXPECT_NE(text_report(r, sc).find("verdict: UNSAFE — 1 duplicate-effect"), std::string::npos);
}

TEST(ExternalApiScenario, WithKeysTheLateRequestIsDeduplicated) {
  const Scenario sc = load_scenario("payment-api-gc-pause-idempotency-keys");
  for (const char* p : {"lease", "redis", "zookeeper+fence"}) {
    SCOPED_TRACE(p);
    const RunOutput r = run_scenario(sc, p);
    EXPECT_TRUE(r.check.safe);
    EXPECT_TRUE(r.check.missing.empty());
    bool deduplicated = false;
    for (const ResourceEntry& e : r.history.resource_log)
      if (e.op == ResourceEntry::Op::write && !e.applied && e.job == 4 && e.worker == "client1" &&
          e.idempotency_key == "job-3-4")
        deduplicated = true;
    EXPECT_TRUE(deduplicated) << "client1's late job 4 should have reached the API and been deduplicated";
  }
}

TEST(ExternalApiScenario, AKeyForgottenDuringALongPauseChargesTwiceAgain) {
  const Scenario sc = load_scenario("payment-api-key-retention-expired");
  EXPECT_EQ(sc.idempotency_retention, 1min);
  const RunOutput r = run_scenario(sc, "lease+fence");
  EXPECT_FALSE(r.check.safe);
  ASSERT_EQ(r.check.count(kDuplicateEffect), 1u);
  const std::string told = story(r);
  EXPECT_NE(told.find("Charged twice: job 4 by client2"), std::string::npos) << told;
  EXPECT_NE(told.find("key job-3-4 forgotten"), std::string::npos) << told;
  EXPECT_NE(told.find("retention 60.000 s"), std::string::npos) << told;
}

TEST(ExternalApiScenario, ReplayFilesKeepTheKeysAndTheRetention) {
  for (const char* name : {"payment-api-gc-pause", "payment-api-gc-pause-idempotency-keys",
                           "payment-api-key-retention-expired"}) {
    const Scenario sc = load_scenario(name);
    for (const char* p : {"redis", "consul+fence"}) {
      const RunOutput r = run_scenario(sc, p);
      ReplayInfo info{p, r.trace_hash, r.verdict(), "external_api_test", ""};
      const std::string text = scenario_to_toml(sc, &info);
      const ReplayFile f = load_replay_text(text, std::string(name) + ".replay.toml");
      EXPECT_EQ(f.scenario.resource_kind, ResourceKind::external_api);
      EXPECT_EQ(f.scenario.idempotency_keys, sc.idempotency_keys) << name;
      EXPECT_EQ(f.scenario.idempotency_retention, sc.idempotency_retention) << name;
      EXPECT_EQ(scenario_to_toml(f.scenario, &info), text) << name << " " << p;
      EXPECT_TRUE(replay(f).hash_matches) << name << " " << p << "\n" << text;
    }
  }
}

// ------------------------------------------------------------------------------------------- property

namespace {

/// Three batch workers on a payment API whose clients send keys kept for 24 h (far longer than the 40 s
/// run), with a random plan of pauses and delay spikes. Every plan is covered, the spikes longer than the
/// 5 s call timeout too: a request that lands after its client gave up and retried carries the same key as
/// the retry (a key is a function of the account and the job only), and the API, which the plans never
/// pause or crash, remembers every key it performed for the whole run on its own monotonic clock. So a job
/// can take effect at most once, whatever the plan: the property holds for every plan, not usually.
std::string random_plan_scenario() {
  std::string s = R"(name = "external-api-random-plan"
[lock]
ttl = "5s"
[resource]
kind = "external-api"
name = "payments"
key = "3"
idempotency_keys = true
idempotency_retention = "24h"
[limits]
max_time = "40s"
)";
  for (const char* c : {"client1", "client2", "client3"}) {
    s += fmt::format(
        "[[client]]\nname = \"{}\"\nstart = \"{}ms\"\nrenew = true\non_renew_failure = \"stop\"\n"
        "steps = [{{ loop = \"until 25s\", steps = [\"acquire\", \"read\", {{ repeat = {}, steps = [{{ work "
        "= \"{}ms\" }}, \"write\"] }}, \"release\"] }}]\n",
        c, *rc::gen::inRange(0, 3000), *rc::gen::inRange(1, 8), *rc::gen::inRange(100, 1500));
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

void a_random_plan_charges_each_job_once() {
  const Scenario sc = load_scenario_text(random_plan_scenario(), "external-api-random-plan.toml");
  RunOptions ro;
  ro.keep_trace = false;
  const RunOutput r = run_scenario(sc, "redis", ro);
  std::uint64_t deduplicated = 0;
  for (const ResourceEntry& e : r.history.resource_log)
    if (e.op == ResourceEntry::Op::write && !e.applied) ++deduplicated;
  RC_TAG(deduplicated == 0 ? "nothing deduplicated" : "some deduplicated");
  RC_ASSERT(r.check.count(kDuplicateEffect) == 0u);
  RC_ASSERT(r.check.safe);
}

}  // namespace

TEST(ExternalApiProperty, KeysKeptLongerThanTheRunChargeEachJobOnceUnderAThousandRandomPlans) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata md;
  md.id = std::string(info->test_suite_name()) + "/" + info->name();
  md.description = info->name();
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = 1000;
  const auto result = rc::detail::checkTestable(&a_random_plan_charges_each_job_once, md, params);
  if (!result.is<rc::detail::SuccessResult>()) {
    std::ostringstream ss;
    rc::detail::printResultMessage(result, ss);
    FAIL() << ss.str();
  }
}
