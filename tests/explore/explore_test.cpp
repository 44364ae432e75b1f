// Tests of chaos exploration: the nemesis, explore (threads, JSONL, resume, shards, merge), shrinking and
// replay.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "locksim/scenarios/cli/cli.hpp"
#include "locksim/scenarios/explore.hpp"
#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/nemesis.hpp"
#include "locksim/scenarios/replay.hpp"
#include "locksim/scenarios/shrink.hpp"
#include "tests/explore/toy_protocol.hpp"

using namespace locksim;
using locksim::cli::cmd_explore;
using locksim::cli::cmd_merge;
using locksim::cli::cmd_replay;
using locksim::cli::ExploreArgs;
using locksim::test::register_toy;
using locksim::test::toy_scenario;

namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::path(testing::TempDir()) / fmt::format("locksim-explore-{}-{}", name, getpid());
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

/// JSONL lines of a sweep, collected through the sink.
std::vector<std::string> sweep(const Scenario& sc, const ExploreOptions& o, std::uint64_t first,
                               std::uint64_t n, std::uint32_t jobs) {
  std::vector<std::string> lines;
  explore_seeds(sc, o, SeedSequence(first, n), jobs,
                [&](const RunRecord& r) { lines.push_back(r.to_json()); });
  return lines;
}

/// `explore` arguments for the toy scenario, written to `dir`: no shrinking, no progress bar.
ExploreArgs toy_explore_args(const fs::path& dir, std::uint64_t seeds, std::uint32_t jobs) {
  register_toy();
  const fs::path scen = dir / "toy.toml";
  write_text_file(scen.string(), scenario_to_toml(toy_scenario()));
  ExploreArgs a;
  a.scenario = scen.string();
  a.protocol = "toylock";
  a.seeds = seeds;
  a.jobs = jobs;
  a.shrink = false;
  a.no_progress = true;
  return a;
}

const NemesisTargets& toy_targets() {
  static const NemesisTargets t = [] {
    register_toy();
    return nemesis_targets(toy_scenario(), "toylock");
  }();
  return t;
}

}  // namespace

// ------------------------------------------------------------------------------------------------ nemesis

TEST(Nemesis, TargetsComeFromTheWorld) {
  const NemesisTargets& t = toy_targets();
  EXPECT_EQ(t.servers, std::vector<std::string>{"redis1"});
  EXPECT_EQ(t.clients, (std::vector<std::string>{"client1", "client2"}));
  EXPECT_EQ(t.resource, "store");
  EXPECT_EQ(world_process_names(toy_scenario(), "toylock"),
            (std::vector<std::string>{"redis1", "store", "client1", "client2"}));
  EXPECT_THROW(world_process_names(toy_scenario(), "no-such-protocol"), InputError);
}

TEST(Nemesis, SameSeedSamePlanDifferentSeedsDiffer) {
  const Scenario sc = toy_scenario();
  std::set<std::string> distinct;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    for (NemesisMode m : {NemesisMode::within, NemesisMode::anything}) {
      NemesisOptions o{m, 6};
      SwarmMix ma, mb;
      const FaultPlan a = make_fault_plan(sc, toy_targets(), seed, o, &ma);
      const FaultPlan b = make_fault_plan(sc, toy_targets(), seed, o, &mb);
      ASSERT_EQ(scenario_to_toml(apply_plan(sc, a)), scenario_to_toml(apply_plan(sc, b))) << seed;
      ASSERT_EQ(ma.describe(), mb.describe());
      distinct.insert(scenario_to_toml(apply_plan(sc, a)));
    }
  }
  EXPECT_GT(distinct.size(), 390u);  // 400 plans: (nearly) all different
}

TEST(Nemesis, PinnedPlanForSeedOne) {
  // Golden value: the plan of a seed must not change between builds, compilers or machines (replay files and
  // JSONL sweeps depend on it). Update deliberately when the nemesis changes.
  const FaultPlan p = make_fault_plan(toy_scenario(), toy_targets(), 1, {NemesisMode::anything, 6});
  const std::string text = describe(p);
  EXPECT_EQ(text, describe(make_fault_plan(toy_scenario(), toy_targets(), 1, {NemesisMode::anything, 6})));
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(
      stable_hash(text),
      stable_hash(describe(make_fault_plan(toy_scenario(), toy_targets(), 1, {NemesisMode::anything, 6}))));
}

RC_GTEST_PROP(Nemesis, PlansStayWithinTheirModeAndTheScenarioLimits, (std::uint64_t seed, bool within)) {
  const Scenario sc = toy_scenario();
  const NemesisMode mode = within ? NemesisMode::within : NemesisMode::anything;
  const FaultPlan plan = make_fault_plan(sc, toy_targets(), seed, {mode, 6});
  RC_ASSERT(!plan.faults.empty());
  RC_ASSERT(plan.faults.size() <= 6u);
  const Duration cap = sc.config.ttl / 20;
  for (const FaultSpec& f : plan.faults) {
    const Fault& x = f.fault;
    RC_ASSERT(x.when.at <= sc.max_time);
    RC_ASSERT(x.when.delay <= sc.max_time);
    RC_ASSERT(x.duration <= sc.max_time);
    RC_ASSERT(-x.duration <= sc.max_time);
    RC_ASSERT(x.when.nth >= 1u);
    if (x.kind == Fault::Kind::crash) RC_ASSERT(f.target != sc.resource_name);
    if (mode == NemesisMode::within) {
      RC_ASSERT(x.kind != Fault::Kind::crash);
      RC_ASSERT(x.kind != Fault::Kind::clock_jump);
      RC_ASSERT(!x.one_way);
      if (x.kind == Fault::Kind::pause) RC_ASSERT(x.duration <= cap);
      if (x.kind == Fault::Kind::delay_spike) RC_ASSERT(x.extra <= cap);
      if (x.kind == Fault::Kind::clock_drift) RC_ASSERT(std::abs(x.ppm) <= 10'000);
    }
  }
  if (plan.network && mode == NemesisMode::within) RC_ASSERT(plan.network->loss_ppm <= 10'000u);
  for (const ClockSpec& c : plan.clocks) {
    if (mode == NemesisMode::within) {
      RC_ASSERT(std::abs(c.clock.drift_ppm) <= 10'000);
      RC_ASSERT(c.clock.offset == 0ns);
    }
  }
}

RC_GTEST_PROP(Nemesis, EveryPlanSurvivesTheTomlRoundTrip, (std::uint64_t seed)) {
  // A replay file of any plan loads again, to the same scenario (written back identically).
  register_toy();
  const Scenario sc = apply_plan(
      toy_scenario(), make_fault_plan(toy_scenario(), toy_targets(), seed, {NemesisMode::anything, 6}));
  const std::string text = scenario_to_toml(sc);
  const Scenario back = load_scenario_text(text, "roundtrip.toml");
  RC_ASSERT(scenario_to_toml(back) == text);
  RC_ASSERT(back.faults.size() == sc.faults.size());
}

// ------------------------------------------------------------------------------------------------ explore

TEST(Explore, JobsDoNotChangeTheLines) {
  register_toy();
  ExploreOptions o;
  o.protocol = "toylock";
  const Scenario sc = toy_scenario();
  const auto one = sweep(sc, o, 1, 300, 1);
  const auto two = sweep(sc, o, 1, 300, 2);
  const auto three = sweep(sc, o, 1, 300, 3);
  ASSERT_EQ(one.size(), 300u);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, three);
  // Each line is its seed's, in seed order, and explore_one gives the same record alone.
  for (std::size_t i = 0; i < one.size(); ++i) {
    const RunRecord r = RunRecord::from_json(one[i]);
    ASSERT_EQ(r.seed, i + 1);
    EXPECT_EQ(r.to_json(), one[i]);
  }
  EXPECT_EQ(explore_one(sc, toy_targets(), 17, o).to_json(), one[16]);
}

TEST(Explore, AnythingGoesFindsViolationsAndFencingStopsThem) {
  register_toy();
  const Scenario sc = toy_scenario();
  ExploreOptions o;
  o.protocol = "toylock";
  ExploreSummary unfenced, fenced;
  explore_seeds(sc, o, SeedSequence(1, 2000), 2, [&](const RunRecord& r) { unfenced.add(r); });
  o.protocol = "toylock+fence";
  std::uint64_t fenced_without_regression = 0;
  explore_seeds(sc, o, SeedSequence(1, 2000), 2, [&](const RunRecord& r) {
    fenced.add(r);
    if (r.failed() && !r.anomalies.count("token-regression")) ++fenced_without_regression;
  });
  EXPECT_EQ(unfenced.runs, 2000u);
  EXPECT_GT(unfenced.unsafe, 0u);
  EXPECT_EQ(unfenced.errors, 0u);
  EXPECT_NE(unfenced.render().find("first failing seeds"), std::string::npos);
  // The toy's server keeps its token counter in memory: the only way past its fence is to crash the server so
  // tokens start again, which breaks the fencing contract (a token regression) whether or not a stale write
  // then gets through. Every fenced failure is that anomaly and must shrink to exactly that story.
  EXPECT_GT(fenced.failures(), 0u);
  EXPECT_EQ(fenced_without_regression, 0u);
  for (std::uint64_t seed : fenced.failing) {
    const FaultPlan plan = make_fault_plan(sc, toy_targets(), seed, o.nemesis);
    const ShrinkResult r = shrink_failure(sc, "toylock+fence", plan, seed);
    ASSERT_TRUE(r.failed_at_start);
    bool server_crash = false;
    for (const FaultSpec& f : r.plan.faults)
      server_crash |= f.fault.kind == Fault::Kind::crash && f.target == "redis1";
    EXPECT_TRUE(server_crash) << seed << ":\n" << describe(r.plan);
  }
  // Within the assumptions (no crashes) the fence holds on every seed.
  o.nemesis.mode = NemesisMode::within;
  ExploreSummary within;
  explore_seeds(sc, o, SeedSequence(1, 2000), 2, [&](const RunRecord& r) { within.add(r); });
  EXPECT_EQ(within.failures(), 0u) << within.render();
}

TEST(Explore, ShardsPartitionTheSeeds) {
  std::set<std::uint64_t> all;
  std::size_t total = 0;
  for (std::uint32_t k = 0; k < 4; ++k) {
    const SeedSequence seq(10, 103, k, 4);
    for (std::uint64_t i = 0; i < seq.size(); ++i) {
      all.insert(seq[i]);
      ++total;
    }
  }
  EXPECT_EQ(total, 103u);
  EXPECT_EQ(all.size(), 103u);
  EXPECT_EQ(*all.begin(), 10u);
  EXPECT_EQ(*all.rbegin(), 112u);
}

RC_GTEST_PROP(Explore, SeedSequenceIsTheShardWithoutTheDoneSeeds,
              (std::uint64_t first, std::uint8_t count, std::uint8_t shards_minus_1, std::uint8_t shard_pick,
               std::vector<std::uint8_t> done_offsets)) {
  // Seeds near the top of the range too: first + count - 1 must not overflow (the caller's check).
  first = std::min<std::uint64_t>(first, ~std::uint64_t{0} - count);
  const std::uint32_t shards = 1u + shards_minus_1 % 8;
  const std::uint32_t shard = shard_pick % shards;
  std::vector<std::uint64_t> done;
  for (std::uint8_t d : done_offsets) done.push_back(first + d);  // some in the sweep, some past its end
  done.push_back(first == 0 ? 0 : first - 1);                     // before it: ignored
  std::vector<std::uint64_t> expected;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t s = first + i;
    if (i % shards == shard && std::find(done.begin(), done.end(), s) == done.end()) expected.push_back(s);
  }
  const SeedSequence seq(first, count, shard, shards, done);
  RC_ASSERT(seq.size() == expected.size());
  for (std::uint64_t i = 0; i < seq.size(); ++i) RC_ASSERT(seq[i] == expected[i]);
}

TEST(Explore, AHugeSweepTakesNoMemoryForItsSeeds) {
  // 10^15 seeds: a vector of them, or a slot per run, would not fit in any memory. The sink stops the sweep
  // after 300 runs; the lines up to there are in order.
  register_toy();
  const Scenario sc = toy_scenario();
  ExploreOptions o;
  o.protocol = "toylock";
  struct Enough {};
  std::vector<std::uint64_t> seen;
  EXPECT_THROW(explore_seeds(sc, o, SeedSequence(1000, 1'000'000'000'000'000), 2,
                             [&](const RunRecord& r) {
                               seen.push_back(r.seed);
                               if (seen.size() == 300) throw Enough{};
                             }),
               Enough);
  ASSERT_EQ(seen.size(), 300u);
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1000 + i);
}

TEST(Explore, ThreadsWaitWhenTheyGetAWindowAhead) {
  // Reorder windows of 1 to 4 runs on 3 threads: threads keep waiting for the oldest run to be written. The
  // same lines, in the same order, as on one thread (and as with the default window).
  register_toy();
  const Scenario sc = toy_scenario();
  ExploreOptions o;
  o.protocol = "toylock";
  const auto one = sweep(sc, o, 5, 600, 1);
  for (std::uint64_t window : {1, 2, 4}) {
    std::vector<std::string> lines;
    explore_seeds(
        sc, o, SeedSequence(5, 600), 3, [&](const RunRecord& r) { lines.push_back(r.to_json()); }, {},
        window);
    EXPECT_EQ(lines, one) << "window " << window;
  }
}

TEST(Explore, BadNumbersAreInputErrors) {
  register_toy();
  ExploreArgs a;
  a.scenario = "no-faults";
  a.protocol = "lease";
  a.no_progress = true;
  const auto field_of = [](const ExploreArgs& args) {
    try {
      cmd_explore(args);
    } catch (const InputError& e) {
      return e.field;
    }
    return std::string("(no error)");
  };
  ExploreArgs past = a;
  past.first_seed = 2;
  past.seeds = ~std::uint64_t{0};
  EXPECT_EQ(field_of(past), "--seeds");
  // Seeds end at 2^63 - 1: a replay file holds its seed as a TOML integer.
  ExploreArgs top = a;
  top.first_seed = Scenario::kMaxSeed;
  top.seeds = 2;
  EXPECT_EQ(field_of(top), "--seeds");
  top.first_seed = Scenario::kMaxSeed + 1;
  top.seeds = 1;
  EXPECT_EQ(field_of(top), "--first-seed");
  ExploreArgs jobs = a;
  jobs.jobs = ExploreArgs::kMaxJobs + 1;
  EXPECT_EQ(field_of(jobs), "--jobs");
  ExploreArgs faults = a;
  faults.max_faults = ExploreArgs::kMaxFaults + 1;
  EXPECT_EQ(field_of(faults), "--max-faults");
}

TEST(Explore, WilsonInterval) {
  auto [lo, hi] = wilson_interval(10, 100);
  EXPECT_NEAR(lo, 0.0552, 1e-4);
  EXPECT_NEAR(hi, 0.1744, 1e-4);
  auto [lo0, hi0] = wilson_interval(0, 10000);
  EXPECT_EQ(lo0, 0.0);
  EXPECT_NEAR(hi0, 0.000384, 1e-5);
  EXPECT_EQ(wilson_interval(0, 0), (std::pair<double, double>{0.0, 0.0}));
}

TEST(Explore, ResumeAfterAKillRunsEverySeedExactlyOnce) {
  const fs::path dir = temp_dir("resume");
  ExploreArgs a = toy_explore_args(dir, 120, 2);
  a.out = (dir / "full.jsonl").string();
  const int rc_full = cmd_explore(a);
  const std::string full = read_file(a.out);
  ASSERT_EQ(lines_of(full).size(), 120u);

  // A run killed mid-line: keep 50 lines and half of the 51st.
  const auto lines = lines_of(full);
  std::string cut;
  for (int i = 0; i < 50; ++i) cut += lines[i] + "\n";
  cut += lines[50].substr(0, lines[50].size() / 2);
  const fs::path part = dir / "part.jsonl";
  std::ofstream(part, std::ios::binary) << cut;
  a.out = part.string();
  a.resume = true;
  EXPECT_EQ(cmd_explore(a), rc_full);
  EXPECT_EQ(read_file(part), full);  // every seed exactly once, same lines, same order
  // Resuming a finished sweep runs nothing and changes nothing.
  EXPECT_EQ(cmd_explore(a), rc_full);
  EXPECT_EQ(read_file(part), full);
  std::set<std::uint64_t> seeds;
  for (const RunRecord& r : read_jsonl(part.string())) EXPECT_TRUE(seeds.insert(r.seed).second);
  EXPECT_EQ(seeds.size(), 120u);
  fs::remove_all(dir);
}

TEST(Explore, ResumeOfAFileOutOfOrderSkipsEachSeedItHolds) {
  // A file put together by hand: seeds 3, 1, 2 and 2 again. --resume runs only 4 and 5, appended.
  const fs::path dir = temp_dir("resume-unordered");
  ExploreArgs a = toy_explore_args(dir, 5, 2);
  a.out = (dir / "full.jsonl").string();
  cmd_explore(a);
  const auto full = lines_of(read_file(a.out));
  ASSERT_EQ(full.size(), 5u);
  const std::string held = full[2] + "\n" + full[0] + "\n" + full[1] + "\n" + full[1] + "\n";
  const fs::path part = dir / "part.jsonl";
  std::ofstream(part, std::ios::binary) << held;
  a.out = part.string();
  a.resume = true;
  cmd_explore(a);
  EXPECT_EQ(read_file(part), held + full[3] + "\n" + full[4] + "\n");
  fs::remove_all(dir);
}

TEST(Explore, ShardFilesMergeIntoTheWholeSweep) {
  const fs::path dir = temp_dir("merge");
  ExploreArgs a = toy_explore_args(dir, 90, 1);
  a.out = (dir / "s{shard}.jsonl").string();
  std::vector<RunRecord> merged;
  for (int k = 0; k < 3; ++k) {
    a.shard = fmt::format("{}/3", k);
    cmd_explore(a);
    for (auto& r : read_jsonl((dir / fmt::format("s{}.jsonl", k)).string())) merged.push_back(r);
  }
  a.shard.clear();
  a.out = (dir / "all.jsonl").string();
  const int rc_all = cmd_explore(a);
  const auto all = read_jsonl(a.out);
  ASSERT_EQ(merged.size(), all.size());
  std::sort(merged.begin(), merged.end(),
            [](const RunRecord& x, const RunRecord& y) { return x.seed < y.seed; });
  for (std::size_t i = 0; i < all.size(); ++i) {
    // The same runs; each line says which shard of the sweep it came from.
    ASSERT_TRUE(merged[i].sweep && all[i].sweep);
    EXPECT_EQ(merged[i].sweep->shards, 3u);
    EXPECT_EQ(merged[i].sweep->shard, (merged[i].seed - a.first_seed) % 3);
    EXPECT_EQ(all[i].sweep->shards, 1u);
    EXPECT_EQ(merged[i].sweep->first_seed, all[i].sweep->first_seed);
    EXPECT_EQ(merged[i].sweep->last_seed, all[i].sweep->last_seed);
    merged[i].sweep.reset();
    RunRecord whole = all[i];
    whole.sweep.reset();
    EXPECT_EQ(merged[i].to_json(), whole.to_json());
  }
  EXPECT_EQ(
      cmd_merge({(dir / "s0.jsonl").string(), (dir / "s1.jsonl").string(), (dir / "s2.jsonl").string()}),
      rc_all);
  // The index from the environment, as a Kubernetes Indexed Job sets it.
  ::setenv("JOB_COMPLETION_INDEX", "1", 1);
  a.shards = 3;
  a.out = (dir / "env{shard}.jsonl").string();
  cmd_explore(a);
  ::unsetenv("JOB_COMPLETION_INDEX");
  EXPECT_EQ(read_file(dir / "env1.jsonl"), read_file(dir / "s1.jsonl"));
  // A broken line in the middle of a file is an input error; a bad shard too.
  std::ofstream(dir / "bad.jsonl") << all[0].to_json() << "\nnot json\n" << all[1].to_json() << "\n";
  EXPECT_THROW(cmd_merge({(dir / "bad.jsonl").string()}), InputError);
  // A directory, and files with no run at all (shards that all died), are input errors too; an empty
  // shard beside full ones is not.
  EXPECT_THROW(cmd_merge({dir.string()}), InputError);
  std::ofstream(dir / "empty.jsonl").flush();
  EXPECT_THROW(cmd_merge({(dir / "empty.jsonl").string(), (dir / "empty.jsonl").string()}), InputError);
  EXPECT_EQ(cmd_merge({(dir / "empty.jsonl").string(), (dir / "s0.jsonl").string(),
                       (dir / "s1.jsonl").string(), (dir / "s2.jsonl").string()}),
            rc_all);
  a.shards = 0;
  a.shard = "3/3";
  EXPECT_THROW(cmd_explore(a), InputError);
  fs::remove_all(dir);
}

TEST(Explore, MergeNamesMissingShardsGapsAndCutFiles) {
  const fs::path dir = temp_dir("partial");
  ExploreArgs a = toy_explore_args(dir, 40, 1);
  a.out = (dir / "s{shard}.jsonl").string();
  for (int k = 1; k <= 4; ++k) {
    a.shard_number = fmt::format("{}/4", k);
    cmd_explore(a);
  }
  const auto path = [&](int k) { return (dir / fmt::format("s{}.jsonl", k)).string(); };
  const auto merge = [&](std::vector<std::string> files, bool allow, std::string* out) {
    testing::internal::CaptureStdout();
    const int rc = cmd_merge(files, allow);
    *out = testing::internal::GetCapturedStdout();
    return rc;
  };
  std::string out;
  const int rc_complete = merge({path(0), path(1), path(2), path(3)}, false, &out);
  EXPECT_NE(out.find("complete"), std::string::npos) << out;
  EXPECT_EQ(out.find("INCOMPLETE"), std::string::npos) << out;
  // Shard 2 (--shard-number 3/4) never ran: the merge names it and fails, whatever the runs say.
  EXPECT_EQ(merge({path(0), path(1), path(3)}, false, &out), 1);
  EXPECT_NE(out.find("shard 2 of 4 missing"), std::string::npos) << out;
  EXPECT_NE(out.find("--shard-number 3/4"), std::string::npos) << out;
  EXPECT_NE(out.find("10 of 40 seed(s) missing"), std::string::npos) << out;
  // Accepted on request, still reported.
  EXPECT_EQ(merge({path(0), path(1), path(3)}, true, &out), rc_complete);
  EXPECT_NE(out.find("shard 2 of 4 missing"), std::string::npos) << out;
  // A gap inside a shard: seeds 5 and 9 of shard 0 (seeds 1, 5, 9, ...) lost.
  std::vector<std::string> lines;
  {
    std::ifstream in(path(0));
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  ASSERT_EQ(lines.size(), 10u);
  {
    std::ofstream o(dir / "gap.jsonl");
    for (std::size_t i = 0; i < lines.size(); ++i)
      if (i != 1 && i != 2) o << lines[i] << "\n";
  }
  EXPECT_EQ(merge({(dir / "gap.jsonl").string(), path(1), path(2), path(3)}, false, &out), 1);
  EXPECT_NE(out.find("shard 0 of 4: 2 of its 10 seed(s) missing: 5..9 (2 seeds, one in 4)"),
            std::string::npos)
      << out;
  // A file cut short in its last line (a killed pod).
  {
    std::ofstream o(dir / "cut.jsonl");
    for (const std::string& l : lines) o << l << "\n";
    o << lines.back().substr(0, 20);
  }
  EXPECT_EQ(merge({(dir / "cut.jsonl").string(), path(1), path(2), path(3)}, false, &out), 1);
  EXPECT_NE(out.find("cut.jsonl: its last line was cut short"), std::string::npos) << out;
  // A line whose seed is not in the shard it names is a bad line.
  RunRecord r = RunRecord::from_json(lines[0]);
  r.sweep->shard = 1;
  EXPECT_THROW(RunRecord::from_json(r.to_json()), std::invalid_argument);
  fs::remove_all(dir);
}

// ------------------------------------------------------------------------------------------------ shrinking

TEST(Shrink, ReducesAKnownFailingPlan) {
  register_toy();
  const Scenario base = toy_scenario();
  // The story (a 15 s pause right after the lease check) buried in noise.
  FaultPlan plan;
  plan.faults = toy_scenario(15s).faults;
  FaultSpec drift;
  drift.fault.kind = Fault::Kind::clock_drift;
  drift.fault.when = Trigger::at_time(2s);
  drift.fault.ppm = 3000;
  drift.target = "store";
  FaultSpec spike;
  spike.fault.kind = Fault::Kind::delay_spike;
  spike.fault.when = Trigger::at_time(30s);
  spike.fault.extra = 40ms;
  spike.fault.duration = 1s;
  FaultSpec late_pause;
  late_pause.fault.kind = Fault::Kind::pause;
  late_pause.fault.when = Trigger::at_time(50s);
  late_pause.fault.duration = 2s;
  late_pause.target = "redis1";
  FaultSpec part;
  part.fault.kind = Fault::Kind::partition;
  part.fault.when = Trigger::at_time(45s);
  part.fault.duration = 3s;
  part.side_a = {"client2"};
  part.side_b = {"store"};
  plan.faults.insert(plan.faults.begin(), drift);
  plan.faults.push_back(spike);
  plan.faults.push_back(late_pause);
  plan.faults.push_back(part);
  LinkOptions noise = base.network.defaults;
  noise.duplicate_ppm = 1000;
  plan.network = noise;
  plan.clocks.push_back(ClockSpec{"redis1", ClockOptions{0ns, 200}});

  RunOptions ro;
  ro.seed = 5;
  ASSERT_FALSE(run_scenario(apply_plan(base, plan), "toylock", ro).check.safe);
  const ShrinkResult r = shrink_failure(base, "toylock", plan, 5);
  ASSERT_TRUE(r.failed_at_start);
  EXPECT_EQ(r.size_before, 7u);
  EXPECT_LE(r.plan.size(), 2u);
  ASSERT_EQ(r.plan.faults.size(), 1u) << describe(r.plan);
  EXPECT_EQ(r.plan.faults[0].fault.kind, Fault::Kind::pause);
  EXPECT_EQ(r.plan.faults[0].target, "client1");
  EXPECT_LT(r.plan.faults[0].fault.duration, 15s);  // shortened, to about the lease's remaining time
  EXPECT_GT(r.plan.faults[0].fault.duration, 8s);
  EXPECT_LE(r.runs, 400u);
  // The result still fails, with the hash the shrinker reports.
  const RunOutput again = run_scenario(r.scenario, "toylock", ro);
  EXPECT_FALSE(again.check.safe);
  EXPECT_EQ(again.trace_hash, r.trace_hash);
  // A plan that does not fail is returned untouched.
  const ShrinkResult none = shrink_failure(base, "toylock+fence", plan, 5);
  EXPECT_FALSE(none.failed_at_start);
  EXPECT_EQ(none.plan.size(), 7u);
}

TEST(Shrink, DropsClientsNothingNeeds) {
  register_toy();
  Scenario base = toy_scenario();
  base.clients.push_back(ClientSpec{.name = "client3", .start = 40s});
  FaultPlan plan;
  plan.faults = toy_scenario(15s).faults;
  const ShrinkResult r = shrink_failure(base, "toylock", plan, 3);
  ASSERT_TRUE(r.failed_at_start);
  EXPECT_EQ(r.clients_before, 3u);
  EXPECT_EQ(r.base.clients.size(),
            2u);  // client1 (named by the fault) and client2 (needed for a second epoch)
}

// ------------------------------------------------------------------------------------------------ replay

TEST(Replay, RoundTripReproducesTheHash) {
  register_toy();
  FaultPlan plan;
  plan.faults = toy_scenario(15s).faults;
  const ShrinkResult r = shrink_failure(toy_scenario(), "toylock", plan, 9);
  ASSERT_TRUE(r.failed_at_start);
  Scenario sc = r.scenario;
  sc.seed = 9;
  ReplayInfo info{"toylock", r.trace_hash, Verdict::unsafe, "test", describe(r.plan)};
  const std::string text = scenario_to_toml(sc, &info);
  const ReplayFile f = load_replay_text(text, "replay.toml");
  EXPECT_EQ(f.info.protocol, "toylock");
  EXPECT_EQ(f.info.expected_trace_hash, r.trace_hash);
  EXPECT_EQ(f.scenario.seed, 9u);
  const ReplayCheck c = replay(f);
  EXPECT_TRUE(c.hash_matches);
  EXPECT_TRUE(c.verdict_matches);
  EXPECT_FALSE(
      c.run.trace.empty());  // the full trace is kept for reports, and the hash is the same without it

  const fs::path dir = temp_dir("replay");
  const fs::path good = dir / "good.toml";
  write_text_file(good.string(), text);
  std::string seen;
  EXPECT_EQ(cmd_replay(good.string(),
                       [&](const RunOutput& run, const Scenario&) {
                         seen = hash_text(run.trace_hash);
                         return std::string();
                       }),
            0);
  EXPECT_EQ(seen, hash_text(r.trace_hash));
  // A different expected hash fails loudly.
  std::string bad = text;
  const std::string h = hash_text(r.trace_hash);
  bad.replace(bad.find(h), h.size(), hash_text(r.trace_hash ^ 1));
  write_text_file((dir / "bad.toml").string(), bad);
  EXPECT_EQ(cmd_replay((dir / "bad.toml").string(), {}), 1);
  // Not a replay file, a bad hash, an unknown key: input errors naming the line.
  EXPECT_THROW(load_replay_text(scenario_to_toml(sc), "plain.toml"), InputError);
  std::string worse = text;
  worse.replace(worse.find(h), h.size(), "0xnothex");
  try {
    load_replay_text(worse, "worse.toml");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field, "replay.expected_trace_hash");
    EXPECT_GT(e.line, 1u);
  }
  fs::remove_all(dir);
}

TEST(Replay, ScenarioTomlIsExact) {
  // Every field the writer knows comes back from the loader unchanged.
  register_toy();
  Scenario sc = toy_scenario();
  sc.config.drift_factor_ppm = 12'345;
  sc.config.nodes = 5;
  sc.config.extra["x"] = "y \"quoted\"";
  sc.per_protocol["lease+fence"] = sc.config;
  sc.per_protocol["lease+fence"].ttl = 7s;
  sc.network.defaults.delay = DelayDist{DelayDist::Kind::long_tail, 1ms, 2s, 5ms, 1.5};
  sc.network.defaults.loss_ppm = 1;
  sc.links.push_back(LinkSpec{"client1", "store", LinkOptions{DelayDist::constant_of(3ns), 0, 5, 0, 0ns}});
  sc.clocks.push_back(ClockSpec{"redis3", ClockOptions{-250ms, -7}});
  sc.faults = toy_scenario(1500000001ns).faults;
  sc.resource_mode = ResourceMode::fenced;
  sc.teaches = "two\nlines";
  sc.expect["toylock"] = Verdict::unsafe;
  sc.protocols = {"toylock"};
  const std::string text = scenario_to_toml(sc);
  const Scenario back = load_scenario_text(text, "x.toml");
  EXPECT_EQ(scenario_to_toml(back), text);
  EXPECT_EQ(back.config.drift_factor_ppm, 12'345);
  EXPECT_EQ(back.per_protocol.at("lease+fence").ttl, 7s);
  EXPECT_EQ(back.network.defaults.delay.alpha, 1.5);
  EXPECT_EQ(back.links.at(0).options.delay.min, 3ns);
  EXPECT_EQ(back.clocks.at(0).clock.offset, -250ms);
  EXPECT_EQ(back.faults.at(0).fault.duration, 1500000001ns);
  EXPECT_EQ(back.teaches, "two\nlines");
  EXPECT_EQ(back.config.extra.at("x"), "y \"quoted\"");
}

TEST(Replay, TheLargestSeedComesBackAndALargerOneIsRefused) {
  // explore once wrote seed 9223372036854776131 into a replay file that no TOML reader could load.
  register_toy();
  Scenario sc = toy_scenario();
  sc.seed = Scenario::kMaxSeed;
  EXPECT_EQ(load_scenario_text(scenario_to_toml(sc), "top.toml").seed, Scenario::kMaxSeed);
  sc.seed = Scenario::kMaxSeed + 1;
  EXPECT_THROW(scenario_to_toml(sc), std::invalid_argument);
}

TEST(ExploreSummary, ASlackOfZeroIsACrossedLineOnlyInAnUnsafeRun) {
  // A stale write that arrives at the same instant as the first newer write, and is taken after it, is a
  // violation with a write margin of exactly 0; a safe run can have 0 too (a tie the newer write lost).
  auto run = [](std::uint64_t seed, bool safe, std::int64_t slack) {
    RunRecord r;
    r.scenario = "s";
    r.protocol = "redis";
    r.seed = seed;
    r.safe = safe;
    r.violations = safe ? 0 : 1;
    r.slack_ns = slack;
    return r;
  };
  ExploreSummary tie;
  tie.add(run(7, false, 0));
  tie.add(run(8, true, 5));
  EXPECT_TRUE(tie.min_slack_unsafe);
  EXPECT_NE(tie.render().find("min slack   0s (seed 7)  zero: a stale write tied with a newer one and was "
                              "taken after it: a line was crossed"),
            std::string::npos)
      << tie.render();
  ExploreSummary safe_tie;
  safe_tie.add(run(9, true, 0));
  EXPECT_NE(safe_tie.render().find("min slack   0s (seed 9)\n"), std::string::npos) << safe_tie.render();
  ExploreSummary crossed;
  crossed.add(run(3, true, 0));
  crossed.add(run(4, false, -1'000'000));
  EXPECT_TRUE(crossed.min_slack_unsafe);  // the min slack's own run, not the safe tie of seed 3
  EXPECT_NE(crossed.render().find("min slack   -0.001s (seed 4)  negative: a line was crossed"),
            std::string::npos)
      << crossed.render();
  // A holder whose belief never ended (a lock with no time-based validity, kept to the end of time) gives a
  // margin near minus the end of time: the summary names it rather than printing a huge negative number.
  ExploreSummary forever;
  forever.add(run(627, true, (Time{} - kTimeMax).count() + 5'000'000'000));
  const std::string text = forever.render();
  EXPECT_NE(text.find("min slack   unbounded (seed 627)  a holder still believed when the next grant came"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("-9223372"), std::string::npos) << text;
}

TEST(RunRecord, JsonRoundTripAndErrors) {
  RunRecord r;
  r.scenario = "s";
  r.protocol = "lease+fence";
  r.mode = "within";
  r.seed = 18'446'744'073'709'551'615ull;
  r.safe = false;
  r.violations = 2;
  r.slack_ns = -5;
  r.trace_hash = 0xfedcba9876543210ull;
  r.stop = "done";
  r.mix = "pause x1 i0";
  EXPECT_EQ(RunRecord::from_json(r.to_json()).to_json(), r.to_json());
  r.error = "boom";
  EXPECT_EQ(RunRecord::from_json(r.to_json()).error, "boom");
  EXPECT_THROW(RunRecord::from_json("{\"seed\": 1}"), std::invalid_argument);
  EXPECT_THROW(RunRecord::from_json("[1,2]"), std::invalid_argument);
}
