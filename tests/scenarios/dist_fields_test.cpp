// Distributions in the fields that take one besides the network delay and a pause's length: a client's start
// (drawn once per run) and retry_delay (at each wait), a partition's length, a clock jump's size (forward, or
// back with back = true), a delay spike's extra delay and window. Each is drawn from a stream of its own, is
// the same on the same seed, differs across seeds, and is written back by a replay file that reproduces the
// run's trace hash.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/replay.hpp"
#include "locksim/scenarios/runner.hpp"

namespace locksim {
namespace {

RunOutput run_kept(const Scenario& sc, std::uint64_t seed, const std::string& protocol = "redis") {
  RunOptions ro;
  ro.keep_trace = true;
  ro.seed = seed;
  return run_scenario(sc, protocol, ro);
}

/// The replay file of `a` loads and reproduces its trace hash; returns the file's text.
std::string expect_replays(const Scenario& sc, const RunOutput& a) {
  ReplayInfo info{a.protocol, a.trace_hash, a.verdict(), "test", ""};
  Scenario at_seed = sc;
  at_seed.seed = a.seed;
  const std::string text = scenario_to_toml(at_seed, &info);
  const ReplayFile back = load_replay_text(text, "back.toml");
  const ReplayCheck again = replay(back);
  EXPECT_TRUE(again.hash_matches) << text;
  return text;
}

/// The first time `proc` logged note `label`.
std::optional<Time> first_note(const RunOutput& r, const std::string& proc, const std::string& label) {
  for (const TraceEvent& e : r.trace)
    if (e.kind == TraceKind::note && e.label == label && r.name_of(e.proc) == proc) return e.time;
  return std::nullopt;
}

const char* kRandomStart = R"(
[[client]]
name = "client1"
[[client]]
name = "client2"
start = { kind = "uniform", min = "1s", max = "9s" }
retry_delay = { kind = "exponential", mean = "300ms", min = "100ms", max = "2s" }
[limits]
max_time = "30s"
)";

TEST(DistFields, AClientStartIsDrawnOncePerRunFromItsOwnStream) {
  const Scenario sc = load_scenario_text(kRandomStart, "s.toml");
  ASSERT_TRUE(sc.clients.at(1).start_dist);
  EXPECT_EQ(sc.clients.at(1).start, Duration{9s});  // the latest start: what max_time is checked against
  std::set<Time> starts;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    const RunOutput a = run_kept(sc, seed);
    const auto at = first_note(a, "client2", "acquire");
    ASSERT_TRUE(at) << seed;
    EXPECT_GE(*at, Time{1s});
    EXPECT_LE(*at, Time{9s} + Duration{10ms});
    starts.insert(*at);
    EXPECT_EQ(run_kept(sc, seed).trace_hash, a.trace_hash);  // the same seed, the same draw
    if (seed == 1) {
      const std::string text = expect_replays(sc, a);
      EXPECT_NE(text.find("start = { kind = \"uniform\""), std::string::npos) << text;
      EXPECT_NE(text.find("retry_delay = { kind = \"exponential\""), std::string::npos) << text;
    }
  }
  EXPECT_GE(starts.size(), 6u);  // not one start for every seed
  // client1 draws nothing: its own start is the same on every seed.
  EXPECT_EQ(first_note(run_kept(sc, 1), "client1", "acquire"),
            first_note(run_kept(sc, 2), "client1", "acquire"));
}

TEST(DistFields, ARetryDelayIsDrawnAtEachWait) {
  // client2 asks while client1 holds for 8 s: redis says no at once (no retries of its own inside one
  // acquire), so client2 waits retry_delay each time.
  const Scenario sc = load_scenario_text(R"(
[[client]]
name = "client1"
work = "8s"
[[client]]
name = "client2"
start = "100ms"
retry_delay = { kind = "uniform", min = "100ms", max = "900ms" }
protocol = { retry_count = 0 }
[limits]
max_time = "30s"
)",
                                         "r.toml");
  const RunOutput a = run_kept(sc, 3);
  std::vector<Time> tries;
  for (const TraceEvent& e : a.trace)
    if (e.kind == TraceKind::note && e.label == "acquire" && a.name_of(e.proc) == "client2")
      tries.push_back(e.time);
  ASSERT_GE(tries.size(), 5u);
  std::set<Duration> gaps;
  for (std::size_t k = 1; k < tries.size(); ++k) {
    EXPECT_GE(tries[k] - tries[k - 1], Duration{100ms});
    EXPECT_LE(tries[k] - tries[k - 1], Duration{900ms} + Duration{20ms});
    gaps.insert(tries[k] - tries[k - 1]);
  }
  EXPECT_GT(gaps.size(), 2u);  // drawn anew, not one fixed wait
  expect_replays(sc, a);
}

const char* kRandomFaults = R"(
[[client]]
name = "client1"
acquisitions = 30
work = "1s"
[[fault]]
kind = "partition"
side_a = ["client1"]
side_b = ["redis1"]
duration = { kind = "uniform", min = "100ms", max = "3s" }
at = "1s"
every = "5s"
times = 4
[[fault]]
kind = "clock_jump"
target = "client1"
duration = { kind = "uniform", min = "1s", max = "20s" }
back = true
at = "2s"
every = "4s"
times = 3
[[fault]]
kind = "delay_spike"
target = "client1"
extra = { kind = "lognormal", median = "50ms", sigma = 1.0, min = "1ms", max = "2s" }
duration = { kind = "uniform", min = "200ms", max = "1s" }
at = "500ms"
every = "3s"
times = 5
[limits]
max_time = "40s"
)";

TEST(DistFields, FaultLengthsAreDrawnAtEveryFiringAndTheTraceNamesThem) {
  const Scenario sc = load_scenario_text(kRandomFaults, "f.toml");
  const Fault& jump = sc.faults.at(1).fault;
  ASSERT_TRUE(jump.duration_dist);
  EXPECT_TRUE(jump.jump_back);
  EXPECT_EQ(jump.duration, -Duration{20s});  // the plan's description: the largest jump, back
  ASSERT_TRUE(sc.faults.at(2).fault.extra_dist);
  const RunOutput a = run_kept(sc, 1);
  std::set<std::string> partition_lengths, jumps, extras;
  std::vector<Time> wall_before;
  for (const TraceEvent& e : a.trace) {
    if (e.kind != TraceKind::fault) continue;
    if (e.label == "partition") partition_lengths.insert(e.detail);
    if (e.label == "clock_jump") jumps.insert(e.detail);
    if (e.label == "delay_spike") {
      EXPECT_NE(e.detail.find("extra="), std::string::npos) << e.detail;
      extras.insert(e.detail);
    }
  }
  EXPECT_EQ(partition_lengths.size(), 4u);  // four firings, four lengths
  EXPECT_EQ(jumps.size(), 3u);
  for (const std::string& j : jumps) EXPECT_NE(j.find("duration=-"), std::string::npos) << j;  // back
  EXPECT_EQ(extras.size(), 5u);
  const std::string text = expect_replays(sc, a);
  EXPECT_NE(text.find("back = true"), std::string::npos) << text;
  EXPECT_NE(text.find("extra = { kind = \"lognormal\""), std::string::npos) << text;
  EXPECT_NE(run_kept(sc, 2).trace_hash, a.trace_hash);
  EXPECT_EQ(run_kept(sc, 1).trace_hash, a.trace_hash);
}

TEST(DistFields, AFixedFaultRunsAsBeforeBesideADrawnOne) {
  // Adding a distribution to one fault leaves another fault's draws alone: its firings are where they were.
  const std::string fixed = R"(
[[client]]
name = "client1"
acquisitions = 20
work = "1s"
[[fault]]
kind = "pause"
target = "client1"
duration = { kind = "uniform", min = "10ms", max = "500ms" }
at = "1s"
every = "2s"
times = 5
)";
  const std::string more = fixed + R"(
[[fault]]
kind = "delay_spike"
target = "client1"
extra = { kind = "uniform", min = "10ms", max = "90ms" }
at = "1500ms"
)";
  auto pauses = [](const RunOutput& r) {
    std::vector<std::string> out;
    for (const TraceEvent& e : r.trace)
      if (e.kind == TraceKind::fault && e.label == "pause") out.push_back(e.detail);
    return out;
  };
  EXPECT_EQ(pauses(run_kept(load_scenario_text(fixed, "a.toml"), 4)),
            pauses(run_kept(load_scenario_text(more, "b.toml"), 4)));
}

void expect_input_error(const std::string& toml, const std::string& field, const std::string& words) {
  try {
    (void)load_scenario_text(toml, "bad.toml");
    ADD_FAILURE() << "accepted: " << toml;
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(field), std::string::npos) << what;
    EXPECT_NE(what.find(words), std::string::npos) << what;
  }
}

TEST(DistFields, BadDistributionsNameTheirField) {
  const std::string client = "[[client]]\nname = \"client1\"\n";
  expect_input_error(
      "[[client]]\ncount = 3\nstagger = \"1s\"\nstart = { kind = \"uniform\", min = \"0s\", max = \"2s\" }\n",
      "client[0].stagger", "does not combine with a start distribution");
  expect_input_error("[[client]]\nstart = { kind = \"uniform\", min = \"1s\", max = \"90s\" }\n",
                     "client[0].start", "max_time");
  expect_input_error(client +
                         "[[fault]]\nkind = \"clock_jump\"\ntarget = \"client1\"\nduration = \"5s\"\nback = "
                         "true\nat = \"1s\"\n",
                     "fault[0].back", "negative duration");
  expect_input_error(client +
                         "[[fault]]\nkind = \"delay_spike\"\nextra = { kind = \"uniform\", min = \"0s\", max "
                         "= \"1s\" }\nat = \"1s\"\n",
                     "fault[0].extra", "");
  expect_input_error(client +
                         "[[fault]]\nkind = \"partition\"\nside_a = [\"client1\"]\nside_b = [\"redis1\"]\n"
                         "duration = { kind = \"uniform\", min = \"0s\", max = \"1s\" }\nat = \"1s\"\n",
                     "fault[0].duration", "");
  expect_input_error(client +
                         "[[fault]]\nkind = \"pause\"\ntarget = \"client1\"\nduration = \"1s\"\nback = "
                         "true\nat = \"1s\"\n",
                     "fault[0].back", "does not apply to a pause fault");
}

}  // namespace
}  // namespace locksim
