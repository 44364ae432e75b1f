// The job queue (protocols/job_queue.hpp) and its anomaly: the checker on hand-built logs, the catalog's
// scheduler leader end to end with its story in the queue's own words, and a rapidcheck property: with the
// safe configuration (a fenced protocol, a fenced queue, a leader that lists the queue before it enqueues) no
// random plan of pauses and delay spikes enqueues a job twice.
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

/// A history with one backed grant per leader (epochs in the order given) and the queue's log entries.
struct QueueHistory {
  History h;
  std::uint64_t grant(const std::string& client, Time at, std::uint64_t token) {
    h.service_sets.push_back({at, "redis1", "lock", client});
    GrantRecord g;
    g.client = client;
    g.key = "lock";
    g.value = client;
    g.token = token;
    g.requested = at;
    g.granted = at;
    return h.add_grant(g);
  }
  /// An enqueue of `job` by the grant's client, processed at `at`.
  std::uint64_t enqueue(std::uint64_t grant, const std::string& job, Time at, bool accepted) {
    WriteRecord w;
    w.client = h.grants[grant].client;
    w.grant = grant;
    w.key = "jobs";
    w.value = job;
    w.token = h.grants[grant].token;
    w.sent = at;
    const std::uint64_t id = h.add_write(w);
    h.log(ResourceEntry{.op = ResourceEntry::Op::write,
                        .time = at,
                        .resource = "queue",
                        .key = "jobs",
                        .request = id,
                        .token = w.token,
                        .accepted = accepted,
                        .applied = accepted,
                        .value = job,
                        .reason = accepted ? "" : "token 1 < highest 2",
                        .kind = ResourceKind::job_queue,
                        .worker = w.client});
    return id;
  }
  QueueHistory() {
    h.service_nodes = {"redis1"};
    h.tokens_fence = true;
  }
};

}  // namespace

TEST(JobQueue, OneJobAcceptedTwiceIsADuplicateEnqueue) {
  QueueHistory t;
  const auto g1 = t.grant("client1", 0s, 1), g2 = t.grant("client2", 10s, 2);
  t.enqueue(g1, "report-00:00:00", 1s, true);
  const auto first = t.enqueue(g2, "report-00:00:05", 11s, true);
  const auto again = t.enqueue(g1, "report-00:00:05", 15s, true);  // the paused leader's late enqueue
  t.enqueue(g2, "report-00:00:10", 16s, true);
  const CheckResult r = check(t.h);
  EXPECT_FALSE(r.safe);
  ASSERT_EQ(r.count(kDuplicateEnqueue), 1u);
  const Violation& v = r.violations[0];
  EXPECT_EQ(v.key, "report-00:00:05");
  EXPECT_EQ(v.earlier.write, first);
  EXPECT_EQ(v.earlier.client, "client2");
  EXPECT_EQ(v.later.write, again);
  EXPECT_EQ(v.later.client, "client1");
  EXPECT_EQ(v.later.epoch, 1u);
  EXPECT_EQ(r.queue.enqueues, 4u);
  EXPECT_EQ(r.queue.accepted, 4u);
  // The queue's entries are not store writes: none of the store's anomalies on them.
  EXPECT_EQ(r.count(kStaleWriteAccepted), 0u);
}

TEST(JobQueue, OneLeadersJobLandingTwiceIsADuplicateToo) {
  QueueHistory t;
  const auto g1 = t.grant("client1", 0s, 1);
  t.enqueue(g1, "report-00:00:00", 1s, true);
  t.enqueue(g1, "report-00:00:00", 2s, true);
  EXPECT_EQ(check(t.h).count(kDuplicateEnqueue), 1u);
}

TEST(JobQueue, ARefusedEnqueueIsNoAnomalyAndIsListedBesideTheVerdict) {
  QueueHistory t;
  const auto g1 = t.grant("client1", 0s, 1), g2 = t.grant("client2", 10s, 2);
  t.enqueue(g2, "report-00:00:05", 11s, true);
  t.enqueue(g1, "report-00:00:05", 15s, false);  // fenced out
  t.enqueue(g2, "report-00:00:10", 16s, false);  // the newest holder refused
  const CheckResult r = check(t.h);
  EXPECT_TRUE(r.safe);
  ASSERT_EQ(r.refused.size(), 2u);
  EXPECT_EQ(r.refused[0].key, "report-00:00:05");
  EXPECT_FALSE(r.refused[0].newest);
  EXPECT_TRUE(r.refused[1].newest);
  EXPECT_EQ(r.queue.refused, 2u);
  EXPECT_EQ(r.count(kFreshWriteRejected), 0u);
}

TEST(JobQueue, ThePausedLeaderEnqueuesTwiceWithoutATokenAndIsRefusedWithOne) {
  const Scenario sc = load_scenario("scheduler-leader-job-queue-gc-pause");
  const RunOutput unfenced = run_scenario(sc, "lease");
  EXPECT_FALSE(unfenced.check.safe);
  ASSERT_EQ(unfenced.check.count(kDuplicateEnqueue), 1u);
  const std::string told = story(unfenced);
  EXPECT_NE(told.find("Job report-00:00:05 enqueued twice: by client2 at 15.006 s and client1 at 20.213 s"),
            std::string::npos)
      << told;
  EXPECT_NE(told.find("client1 was paused from"), std::string::npos) << told;
  const auto j = nlohmann::json::parse(json_report(unfenced, sc));
  EXPECT_EQ(j["verdict"], "unsafe");
  EXPECT_EQ(j["resource_kind"], "job-queue");
  EXPECT_EQ(j["anomalies"]["duplicate-enqueue"], 1);
  EXPECT_EQ(j["violations"][0]["kind"], "duplicate-enqueue");
  EXPECT_EQ(j["violations"][0]["key"], "report-00:00:05");
  EXPECT_NE(html_report(unfenced, sc).find("job report-00:00:05 enqueued twice"), std::string::npos);

  // redis+incr: tokens 1, 2, ...: a fence off by one would let the stale leader in.
  for (const char* p : {"redis+incr", "lease+fence"}) {
    SCOPED_TRACE(p);
    const RunOutput fenced = run_scenario(sc, p);
    EXPECT_TRUE(fenced.check.safe);
    ASSERT_EQ(fenced.check.refused.size(), 1u);
    EXPECT_EQ(fenced.check.refused[0].write.client, "client1");
    EXPECT_EQ(fenced.check.refused[0].key, "report-00:00:05");
    EXPECT_FALSE(fenced.check.refused[0].newest);
    const std::string text = text_report(fenced, sc);
    EXPECT_NE(text.find("refused enqueue: client1's job report-00:00:05"), std::string::npos) << text;
    EXPECT_NE(text.find("resource: fenced job-queue"), std::string::npos);
    const auto jf = nlohmann::json::parse(json_report(fenced, sc));
    EXPECT_EQ(jf["job_queue"]["refused"], 1);
  }
}

TEST(JobQueue, JobIdsNameThePeriodsStartOnTheLeadersWallClock) {
  const std::string text = R"(name = "job-ids"
[resource]
kind = "job-queue"
period = "90s"
job = "sync"
[[clock]]
node = "client1"
offset = "3600s"
[[client]]
name = "client1"
steps = ["acquire", "write", { work = "90s" }, "write", "release"]
[limits]
max_time = "300s"
)";
  const RunOutput r = run_scenario(load_scenario_text(text, "job-ids.toml"), "redis");
  ASSERT_EQ(r.history.writes.size(), 2u);
  EXPECT_EQ(r.history.writes[0].value, "sync-01:00:00");
  EXPECT_EQ(r.history.writes[1].value, "sync-01:01:30");
  EXPECT_TRUE(r.check.safe);
}

namespace {

/// Three scheduler leaders on a fenced queue (redis+incr: tokens 1, 2, 3..., so a fence off by one lets a
/// stale leader in), each listing the queue right after it acquires, with a random plan of pauses and delay
/// spikes. Why every plan is safe, long spikes included: an enqueue is accepted only with a token at least
/// the highest the queue has seen, and a leader's listing raised that to its own token before it enqueues
/// anything. So an older leader's enqueue accepted before a newer leader's listing is in that listing (the
/// newer one goes on after its period), and one that lands after it, however late (a spike longer than the
/// 5 s call timeout), is refused. A leader that gets no answer to its listing steps down; one leader never
/// enqueues a period twice (it does not resend an enqueue that timed out). The plan has no network
/// duplication: a duplicated enqueue is one leader's job landing twice, which no token can stop.
std::string random_plan_scenario() {
  std::string s = R"(name = "job-queue-random-plan"
[lock]
ttl = "5s"
[resource]
kind = "job-queue"
key = "jobs"
period = "2s"
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

void a_random_plan_enqueues_each_job_once() {
  const Scenario sc = load_scenario_text(random_plan_scenario(), "job-queue-random-plan.toml");
  RunOptions ro;
  ro.keep_trace = false;
  const RunOutput r = run_scenario(sc, "redis+incr", ro);
  RC_TAG(r.check.refused.empty() ? "no refusal" : "some refused");
  RC_ASSERT(r.check.count(kDuplicateEnqueue) == 0u);
  RC_ASSERT(r.check.safe);
}

}  // namespace

TEST(JobQueueProperty, AFencedQueueNeverTakesAJobTwiceUnderAThousandRandomPlans) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata md;
  md.id = std::string(info->test_suite_name()) + "/" + info->name();
  md.description = info->name();
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = 1000;
  const auto result = rc::detail::checkTestable(&a_random_plan_enqueues_each_job_once, md, params);
  if (!result.is<rc::detail::SuccessResult>()) {
    std::ostringstream ss;
    rc::detail::printResultMessage(result, ss);
    FAIL() << ss.str();
  }
}

// The catalog's replay test stops at its first failure; this one covers the job queue's scenario on its own:
// a replay file keeps the kind, period and job name, and reproduces the run.
TEST(JobQueue, TheCatalogScenarioReplaysFromItsFile) {
  for (const char* name : {"scheduler-leader-job-queue-gc-pause"}) {
    const Scenario sc = load_scenario(name);
    for (const auto& [p, e] : sc.expect) {
      const RunOutput r = run_scenario(sc, p);
      ReplayInfo info{p, r.trace_hash, r.verdict(), "job_queue_test", ""};
      const std::string text = scenario_to_toml(sc, &info);
      const ReplayFile f = load_replay_text(text, std::string(name) + ".replay.toml");
      EXPECT_EQ(scenario_to_toml(f.scenario, &info), text) << name << " " << p;
      EXPECT_TRUE(replay(f).hash_matches) << name << " " << p << "\n" << text;
    }
  }
}
