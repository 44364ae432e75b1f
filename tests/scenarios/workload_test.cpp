// Client programs (each step kind, repetition, skipping) and background renewal, end to end: scenario text →
// world → workload → history. The ground truth each step records is asserted, not only the verdict.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/replay.hpp"
#include "locksim/scenarios/runner.hpp"
#include "locksim/scenarios/workload.hpp"

using namespace locksim;

namespace {

RunOutput run_text(const std::string& text, const std::string& protocol, std::uint64_t seed = 1) {
  const Scenario sc = load_scenario_text(text, "workload_test.toml");
  RunOptions ro;
  ro.seed = seed;
  ro.keep_trace = true;
  return run_scenario(sc, protocol, ro);
}

/// Notes with `label` logged by the process named `proc` (any when empty), in trace order.
std::vector<TraceEvent> notes(const RunOutput& r, const std::string& label, const std::string& proc = {}) {
  std::vector<TraceEvent> out;
  for (const TraceEvent& e : r.trace)
    if (e.kind == TraceKind::note && e.label == label && (proc.empty() || r.name_of(e.proc) == proc))
      out.push_back(e);
  return out;
}

std::vector<const WriteRecord*> writes_of(const RunOutput& r, const std::string& client) {
  std::vector<const WriteRecord*> out;
  for (const WriteRecord& w : r.history.writes)
    if (w.client == client) out.push_back(&w);
  return out;
}

const GrantRecord& first_grant(const RunOutput& r, const std::string& client) {
  for (const GrantRecord& g : r.history.grants)
    if (g.client == client) return g;
  throw std::runtime_error("no grant of " + client);
}

/// One client running `steps` (TOML array text) against a 10 s lock, plus optional extra TOML.
std::string one_client(const std::string& steps, const std::string& extra = {},
                       const std::string& client = {}) {
  return "[lock]\nttl = \"10s\"\n[[client]]\nname = \"client1\"\n" + client + "steps = " + steps + "\n" +
         extra;
}

}  // namespace

// ------------------------------------------------------------------------------------------ the default

TEST(Program, FlagsBuildTheLoopAsSteps) {
  ClientSpec spec;
  spec.acquisitions = 3;
  spec.writes_per_hold = 2;
  spec.read_modify_write = true;
  spec.work_min = 1s;
  spec.work_max = 2s;
  spec.extend_before_write = true;
  spec.think_min = spec.think_max = 500ms;
  const auto p = default_program(spec);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].kind, ClientStep::Kind::repeat);
  EXPECT_EQ(p[0].count, 3u);
  const auto& hold = p[0].steps;
  ASSERT_EQ(hold.size(), 4u);
  EXPECT_EQ(hold[0].kind, ClientStep::Kind::acquire);
  EXPECT_EQ(hold[1].kind, ClientStep::Kind::repeat);
  EXPECT_EQ(hold[1].count, 2u);
  std::vector<ClientStep::Kind> per_write;
  for (const auto& s : hold[1].steps) per_write.push_back(s.kind);
  EXPECT_EQ(per_write, (std::vector<ClientStep::Kind>{ClientStep::Kind::read, ClientStep::Kind::work,
                                                      ClientStep::Kind::extend, ClientStep::Kind::check,
                                                      ClientStep::Kind::write}));
  EXPECT_EQ(hold[2].kind, ClientStep::Kind::release);
  EXPECT_EQ(hold[3].kind, ClientStep::Kind::sleep);
  // No work step for work_max = 0 (a zero sleep would still yield), no sleep for no think, no release.
  ClientSpec plain;
  plain.release = false;
  const auto q = default_program(plain);
  ASSERT_EQ(q[0].steps.size(), 2u);
  EXPECT_EQ(q[0].steps[1].steps.size(), 2u);  // check, write
}

TEST(Program, WrittenOutDefaultRunsAsTheFlags) {
  const std::string flags = R"(
[lock]
ttl = "10s"
[[client]]
name = "client1"
acquisitions = 2
writes_per_hold = 2
read_modify_write = true
work_min = "100ms"
work_max = "900ms"
think = "300ms"
[[client]]
name = "client2"
start = "50ms"
acquisitions = 2
)";
  const std::string steps = R"(
[lock]
ttl = "10s"
[[client]]
name = "client1"
steps = [{ repeat = 2, steps = ["acquire",
           { repeat = 2, steps = ["read", { work = { kind = "uniform", min = "100ms", max = "900ms" } },
                                  "check", "write"] },
           "release", { sleep = "300ms" }] }]
[[client]]
name = "client2"
start = "50ms"
steps = [{ repeat = 2, steps = ["acquire", "check", "write", "release"] }]
)";
  for (const char* p : {"redis", "lease+fence"}) {
    SCOPED_TRACE(p);
    const RunOutput a = run_text(flags, p, 3), b = run_text(steps, p, 3);
    EXPECT_EQ(a.trace_hash, b.trace_hash);
    EXPECT_EQ(a.history.writes.size(), 6u);
    EXPECT_EQ(b.history.writes.size(), 6u);
  }
}

// ------------------------------------------------------------------------------------------ step kinds

TEST(Program, WritesWorkAndReleaseRecordWhatHappened) {
  const RunOutput r =
      run_text(one_client(R"(["acquire", "write", { work = "1.5s" }, "write", "release"])"), "redis");
  const auto w = writes_of(r, "client1");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0]->value, "client1#1.0");
  EXPECT_EQ(w[1]->value, "client1#1.1");
  EXPECT_FALSE(w[0]->read_modify_write);
  EXPECT_TRUE(w[0]->acknowledged && w[1]->acknowledged);
  EXPECT_EQ(w[1]->sent - w[0]->sent, 1500ms + 2ms);  // the first write's round trip, then the work
  const GrantRecord& g = first_grant(r, "client1");
  EXPECT_EQ(g.end_reason, "released");
  EXPECT_LE(g.belief_end, w[1]->arrived + 2ms);
  ASSERT_EQ(notes(r, "released").size(), 1u);
  EXPECT_GE(notes(r, "released")[0].time, g.belief_end);  // the belief ended before the unlock went out
}

TEST(Program, ReadThenWriteIsAReadModifyWriteAndIncrementIsBoth) {
  const RunOutput r = run_text(
      one_client(R"(["acquire", "increment", "read", { work = "10ms" }, "write", "release"])"), "redis");
  ASSERT_EQ(r.history.reads.size(), 2u);
  const auto w = writes_of(r, "client1");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0]->value, "1");
  EXPECT_EQ(w[1]->value, "2");
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(w[i]->read_modify_write);
    EXPECT_EQ(w[i]->read, r.history.reads[i].id);
    ASSERT_TRUE(w[i]->read_value.has_value());
    EXPECT_EQ(*w[i]->read_value, static_cast<std::int64_t>(i));
    EXPECT_TRUE(r.history.reads[i].answered);
  }
  EXPECT_EQ(r.history.reads[1].observed, "1");
}

TEST(Program, ANonIntegerReadIncrementsFromNothing) {
  const RunOutput r = run_text(one_client(R"(["acquire", "write", "increment", "release"])"), "redis");
  const auto w = writes_of(r, "client1");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(r.history.reads[0].observed, "client1#1.0");
  EXPECT_EQ(w[1]->value, "1");
  EXPECT_FALSE(w[1]->read_value.has_value());
}

TEST(Program, ACheckThatFindsTheLeaseExpiredLosesTheHold) {
  // Work past the 10 s TTL, then check: expired; the write after it and the release are skipped, a sleep
  // runs.
  const RunOutput r = run_text(
      one_client(
          R"(["acquire", { work = "11s" }, "check", "write", "release", { sleep = "1s", note = "after" }])"),
      "redis");
  EXPECT_EQ(notes(r, "expired").size(), 1u);
  EXPECT_TRUE(writes_of(r, "client1").empty());
  EXPECT_TRUE(notes(r, "released").empty());
  EXPECT_EQ(first_grant(r, "client1").end_reason, "expired");
  ASSERT_EQ(notes(r, "after").size(), 1u);
  EXPECT_EQ(r.run.end, notes(r, "after")[0].time + 1s);
}

TEST(Program, ACheckRecordsItsTimeOnTheWritesOfItsHold) {
  const RunOutput r =
      run_text(one_client(R"(["acquire", "check", { work = "2s" }, "write", "write", "release"])"), "redis");
  const auto w = writes_of(r, "client1");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0]->checked, w[1]->checked);
  EXPECT_EQ(w[0]->sent - w[0]->checked, 2s);
}

TEST(Program, ExtendMovesTheBeliefAndARefusalLosesTheHold) {
  const RunOutput ok = run_text(
      one_client(R"(["acquire", { work = "8s" }, "extend", { work = "8s" }, "write", "release"])"), "redis");
  EXPECT_EQ(notes(ok, "extended").size(), 1u);
  ASSERT_EQ(writes_of(ok, "client1").size(), 1u);
  EXPECT_GT(first_grant(ok, "client1").believed_valid_until, 17s);
  // Past the TTL the key is gone: the extension is refused and the write skipped.
  const RunOutput late =
      run_text(one_client(R"(["acquire", { work = "11s" }, "extend", "write", "release"])"), "redis");
  EXPECT_EQ(notes(late, "extend-failed").size(), 1u);
  EXPECT_TRUE(writes_of(late, "client1").empty());
  EXPECT_EQ(first_grant(late, "client1").end_reason, "extend failed");
}

TEST(Program, RepeatRunsItsBlockNTimes) {
  const RunOutput r =
      run_text(one_client(R"([{ repeat = 3, steps = ["acquire", "increment", "release"] }])"), "redis");
  EXPECT_EQ(r.history.grants.size(), 3u);
  const auto w = writes_of(r, "client1");
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[2]->value, "3");
  EXPECT_EQ(w[2]->value, r.history.resource_log.back().value);
}

TEST(Program, LoopUntilStopsBeginningIterationsAtItsTime) {
  const RunOutput r = run_text(
      one_client(R"([{ loop = "until 5s", steps = ["acquire", "write", "release", { sleep = "1s" }] }])"),
      "redis");
  // Iterations begin at about 0, 1, 2, 3, 4 s (each takes 1 s and a few round trips): five, none at 5 s.
  EXPECT_EQ(r.history.grants.size(), 5u);
  EXPECT_EQ(r.run.reason, StopReason::done);
}

TEST(Program, LoopForeverEndsAtGiveUpAt) {
  const RunOutput r = run_text(
      one_client(R"([{ loop = "forever", steps = ["acquire", "write", "release", { sleep = "1s" }] }])", {},
                 "give_up_at = \"3500ms\"\n"),
      "redis");
  EXPECT_EQ(r.history.grants.size(), 4u);
  EXPECT_EQ(notes(r, "gave-up").size(), 1u);
  EXPECT_EQ(r.run.reason, StopReason::done);
}

TEST(Program, ALoopInWhichNothingHappensEnds) {
  // A check answered from the client's own clock takes no time: the loop would spin at one instant forever.
  const RunOutput r = run_text(
      one_client(R"(["acquire", { loop = "forever", steps = ["check"] }, "write", "release"])"), "redis");
  EXPECT_EQ(notes(r, "lease-check").size(), 1u);
  EXPECT_EQ(writes_of(r, "client1").size(), 1u);
  EXPECT_EQ(r.run.reason, StopReason::done);
}

TEST(Program, AStepsNoteIsWhereAFaultAttaches) {
  const std::string text =
      one_client(R"(["acquire", "write", { step = "write", note = "second-write" }, "release"])",
                 R"(
[[fault]]
kind = "pause"
target = "client1"
duration = "3s"
after = { process = "client1", note = "second-write" }
)");
  const RunOutput r = run_text(text, "redis");
  const auto w = writes_of(r, "client1");
  ASSERT_EQ(w.size(), 2u);
  ASSERT_EQ(notes(r, "second-write").size(), 1u);
  // The pause falls before the write leaves: its send time is after the pause.
  EXPECT_EQ(w[1]->sent, notes(r, "second-write")[0].time + 3s);
}

TEST(Program, AWriteLeavesAfterAPauseItsNoteTriggered) {
  const std::string text = one_client(R"(["acquire", "write", "write", "release"])", R"(
[[fault]]
kind = "pause"
target = "client1"
duration = "3s"
after = { process = "client1", note = "write", nth = 2 }
)");
  const RunOutput r = run_text(text, "redis");
  const auto w = writes_of(r, "client1");
  ASSERT_EQ(w.size(), 2u);
  const auto n = notes(r, "write", "client1");
  ASSERT_EQ(n.size(), 2u);
  EXPECT_EQ(w[1]->sent, n[1].time + 3s);
}

TEST(Program, AReadThatTimesOutSkipsTheWriteItWouldHaveFed) {
  const std::string text =
      one_client(R"(["acquire", "read", { work = "1s" }, "write", "write", "release"])", R"(
[[fault]]
kind = "partition"
side_a = ["client1"]
side_b = ["store"]
duration = "4s"
after = { process = "client1", note = "acquired" }
)");
  const RunOutput r = run_text(text, "redis");
  EXPECT_EQ(notes(r, "read-timeout").size(), 1u);
  const auto w = writes_of(r, "client1");
  ASSERT_EQ(w.size(), 1u);  // the first write (fed by the read) skipped, the second written
  EXPECT_EQ(w[0]->value, "client1#1.1");
  EXPECT_FALSE(w[0]->read_modify_write);
  EXPECT_EQ(notes(r, "released").size(), 1u);
}

TEST(Program, ACrashInTheHoldEndsTheBelief) {
  const RunOutput r = run_text(one_client(R"(["acquire", { work = "5s" }, "write", "release"])", R"(
[[fault]]
kind = "crash"
target = "client1"
at = "2s"
)"),
                               "redis");
  const GrantRecord& g = first_grant(r, "client1");
  EXPECT_EQ(g.end_reason, "crashed");
  EXPECT_EQ(g.belief_end, 2s);
}

// ------------------------------------------------------------------------------------------ renewal

namespace {

/// client1 holds the lock through a long job; client2 waits for it.
std::string long_job(const std::string& renewal, const std::string& faults = {}) {
  return R"(
[lock]
ttl = "10s"
[[client]]
name = "client1"
)" + renewal +
         R"(
steps = ["acquire", "write", { work = "30s", note = "long-job" }, "write", "release"]
[[client]]
name = "client2"
start = "1s"
retry_delay = "500ms"
check_before_write = false
[limits]
max_time = "120s"
)" + faults;
}

const std::string kPauseInTheJob = R"(
[[fault]]
kind = "pause"
target = "client1"
duration = "20s"
after = { process = "client1", note = "long-job", delay = "12s" }
)";

}  // namespace

TEST(Renewal, KeepsTheLockAcrossALongCriticalSection) {
  for (const char* p : {"redis", "redlock", "lease", "lease+fence"}) {
    SCOPED_TRACE(p);
    const RunOutput r = run_text(long_job("renew = true"), p);
    EXPECT_TRUE(r.check.safe);
    // client2 gets the lock only after client1's release at about 30 s.
    EXPECT_GT(first_grant(r, "client2").granted, 30s);
    const auto w = writes_of(r, "client1");
    ASSERT_EQ(w.size(), 2u);
    EXPECT_TRUE(w[1]->acknowledged);
    EXPECT_GT(first_grant(r, "client1").believed_valid_until, w[1]->sent);
    EXPECT_GE(notes(r, "renewed", "client1/renew").size(), 3u);
    EXPECT_TRUE(notes(r, "renewed", "client1").empty());  // the thread's notes, under its own name
  }
}

TEST(Renewal, WithoutItTheLongJobOutlivesItsLock) {
  const RunOutput r = run_text(long_job(""), "redis");
  EXPECT_FALSE(r.check.safe);
  EXPECT_LT(first_grant(r, "client2").granted, 12s);
}

TEST(Renewal, FollowsEachLibrarysSchedule) {
  // etcd's session and Redisson's watchdog: every TTL/3 after the grant and each renewal; node-redlock:
  // when 500 ms of the validity remain.
  for (const char* p : {"redis", "lease"}) {
    SCOPED_TRACE(p);
    const RunOutput r = run_text(long_job("renew = true"), p);
    const auto sent = notes(r, "renewed", "client1/renew");
    ASSERT_GE(sent.size(), 2u);
    const Duration gap = sent[1].time - sent[0].time;
    EXPECT_GE(gap, Duration{10s} / 3);
    EXPECT_LT(gap, Duration{10s} / 3 + 100ms);
  }
  const RunOutput r = run_text(long_job("renew = true"), "redlock");
  const auto sent = notes(r, "renewed", "client1/renew");
  ASSERT_GE(sent.size(), 2u);
  const Duration gap = sent[1].time - sent[0].time;
  EXPECT_GT(gap, 9s);  // validity 10 s - 102 ms of drift, renewed 500 ms before its end
  EXPECT_LT(gap, 9500ms);
  // A schedule of the client's own replaces the library's.
  const RunOutput own = run_text(long_job("renew = true\nrenew_every = \"2s\""), "redlock");
  const auto mine = notes(own, "renewed", "client1/renew");
  ASSERT_GE(mine.size(), 2u);
  EXPECT_LT(mine[1].time - mine[0].time, 2100ms);
}

TEST(Renewal, APauseStopsTheRenewalThreadToo) {
  const RunOutput r = run_text(long_job("renew = true", kPauseInTheJob), "redis");
  // Paused from 12 s to 32 s: no renewal in between, the estimate ran out, client2 took the lock.
  for (const TraceEvent& e : notes(r, "renewed", "client1/renew")) EXPECT_TRUE(e.time < 12s || e.time >= 32s);
  EXPECT_EQ(notes(r, "renewal-lost", "client1/renew").size(), 1u);
  const GrantRecord& g = first_grant(r, "client1");
  EXPECT_LT(g.believed_valid_until, 22s + 10ms);  // the last renewal (before 12 s) + 10 s
  EXPECT_LT(first_grant(r, "client2").granted, 32s);
  EXPECT_FALSE(r.check.safe);  // Redisson's holder is not told: it writes at 32 s
}

TEST(Renewal, OnFailureStopMakesTheHolderStopAndContinueDoesNot) {
  const RunOutput stop =
      run_text(long_job("renew = true\non_renew_failure = \"stop\"", kPauseInTheJob), "redis");
  EXPECT_TRUE(stop.check.safe);
  EXPECT_EQ(notes(stop, "aborted", "client1").size(), 1u);
  EXPECT_EQ(writes_of(stop, "client1").size(), 1u);  // the write after the job skipped
  EXPECT_EQ(first_grant(stop, "client1").end_reason, "renewal failed");
  EXPECT_TRUE(notes(stop, "released", "client1").empty());  // a lost lock is not released

  const RunOutput go =
      run_text(long_job("renew = true\non_renew_failure = \"continue\"", kPauseInTheJob), "redis");
  EXPECT_FALSE(go.check.safe);
  EXPECT_TRUE(notes(go, "aborted").empty());
  EXPECT_EQ(writes_of(go, "client1").size(), 2u);
}

TEST(Renewal, EachLibrarysDefaultOnFailure) {
  // node-redlock's using() aborts its signal: the holder stops. etcd's holder does not watch Done(): it goes
  // on.
  EXPECT_TRUE(run_text(long_job("renew = true", kPauseInTheJob), "redlock").check.safe);
  EXPECT_FALSE(run_text(long_job("renew = true", kPauseInTheJob), "lease").check.safe);
  EXPECT_FALSE(run_text(long_job("renew = true\non_renew_failure = \"continue\"", kPauseInTheJob), "redlock")
                   .check.safe);
  EXPECT_TRUE(run_text(long_job("renew = true", kPauseInTheJob), "lease+fence").check.safe);
}

TEST(Renewal, ACrashKillsTheRenewalThread) {
  const RunOutput r = run_text(long_job("renew = true", R"(
[[fault]]
kind = "crash"
target = "client1"
after = { process = "client1", note = "long-job", delay = "5s" }
)"),
                               "redis");
  for (const TraceEvent& e : notes(r, "renewed", "client1/renew")) EXPECT_LT(e.time, 5s + 10ms);
  // client2 gets the lock once the last renewal's 10 s have run out.
  EXPECT_GT(first_grant(r, "client2").granted, 10s);
  EXPECT_LT(first_grant(r, "client2").granted, 14s);
}

TEST(Renewal, SameSeedSameTrace) {
  for (const char* p : {"redis", "redlock", "lease"}) {
    EXPECT_EQ(run_text(long_job("renew = true", kPauseInTheJob), p, 5).trace_hash,
              run_text(long_job("renew = true", kPauseInTheJob), p, 5).trace_hash);
  }
}

// ---------------------------------------------------------------------------------- flag distributions

TEST(Program, FlagWorkAndThinkTakeADistributionDrawnAtEachStep) {
  const std::string text =
      "[lock]\nttl = \"10s\"\n[[client]]\nname = \"client1\"\nacquisitions = 6\ncheck_before_write = false\n"
      "work = { kind = \"uniform\", min = \"100ms\", max = \"900ms\" }\n"
      "think = { kind = \"exponential\", mean = \"300ms\", max = \"2s\" }\n";
  const RunOutput r = run_text(text, "redis");
  const auto acquired = notes(r, "acquired"), written = notes(r, "write"), released = notes(r, "released");
  ASSERT_EQ(acquired.size(), 6u);
  ASSERT_EQ(written.size(), 6u);
  std::set<Duration> works;
  for (std::size_t i = 0; i < 6; ++i) {
    const Duration w = written[i].time - acquired[i].time;
    EXPECT_GE(w, 100ms) << i;
    EXPECT_LE(w, 900ms) << i;
    works.insert(w);
  }
  EXPECT_GT(works.size(), 3u);  // drawn at each write, not once
  std::set<Duration> thinks;
  for (std::size_t i = 0; i + 1 < 6; ++i) thinks.insert(notes(r, "acquire")[i + 1].time - released[i].time);
  EXPECT_GT(thinks.size(), 3u);
  EXPECT_EQ(run_text(text, "redis").trace_hash, r.trace_hash);
  // Written back as distributions, the scenario replays to the same trace.
  const Scenario sc = load_scenario_text(text, "workload_test.toml");
  ASSERT_TRUE(sc.clients[0].work_dist && sc.clients[0].think_dist);
  ReplayInfo info{"redis", r.trace_hash, r.verdict(), "workload_test", ""};
  const ReplayFile f = load_replay_text(scenario_to_toml(sc, &info), "replay.toml");
  EXPECT_TRUE(replay(f).hash_matches);
}
