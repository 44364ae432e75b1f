// Expectations beyond the verdict ([expect.<protocol>] tables): each property judged from the checker's
// conclusions and the history, and the quantifier over a seed range. Each test states an expectation that
// holds and one that does not, so a judge that always says "met" (or never does) fails here.
#include <gtest/gtest.h>

#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/expectation.hpp"
#include "locksim/scenarios/loader.hpp"

using namespace locksim;

namespace {

Expectation parse(const std::string& table) {
  const Scenario s = load_scenario_text("[[client]]\nname = \"c\"\n[expect.redis]\n" + table, "t.toml");
  return s.expect.at("redis");
}

RunOutput run_of(const std::string& scenario, const std::string& protocol, std::uint64_t seed = 0) {
  const Scenario sc = load_scenario(scenario);
  RunOptions ro;
  ro.keep_trace = false;
  if (seed) ro.seed = seed;
  return run_scenario(sc, protocol, ro);
}

}  // namespace

TEST(Expectation, ParsesEveryProperty) {
  const Expectation e = parse(
      "verdict = \"unsafe\"\nanomalies = [\"lost-update\", \"stale-write-accepted\"]\nlost_updates = \"<= "
      "25%\"\n"
      "tokens = \"regressing\"\nmin_slack = \"-2s\"\nseeds = \"3..7\"\nover = \"all\"\n");
  EXPECT_EQ(e.verdict, Verdict::unsafe);
  ASSERT_TRUE(e.anomalies);
  EXPECT_EQ(e.anomalies->size(), 2u);
  ASSERT_TRUE(e.lost_updates);
  EXPECT_TRUE(e.lost_updates->percent);
  EXPECT_EQ(e.lost_updates->op, CountBound::Op::le);
  EXPECT_EQ(e.lost_updates->value, 25);
  EXPECT_EQ(e.tokens, Expectation::Tokens::regressing);
  EXPECT_EQ(e.min_slack, Duration{-2s});
  EXPECT_EQ(e.seeds, (std::pair<std::uint64_t, std::uint64_t>{3, 7}));
  EXPECT_EQ(e.quantifier(), Expectation::Over::all);
  EXPECT_EQ(parse("verdict = \"unsafe\"\nseeds = \"1..2\"\n").quantifier(), Expectation::Over::any);
  EXPECT_EQ(parse("verdict = \"safe\"\nseeds = \"1..2\"\n").quantifier(), Expectation::Over::all);
}

TEST(Expectation, BoundsCompareCountsAndPercentages) {
  auto b = [](const char* text) { return *parse(fmt::format("lost_updates = \"{}\"\n", text)).lost_updates; };
  EXPECT_TRUE(b("0").holds(0, 0));
  EXPECT_FALSE(b("0").holds(1, 1));
  EXPECT_TRUE(b("> 0").holds(1, 0.1));
  EXPECT_FALSE(b("> 0").holds(0, 0));
  EXPECT_TRUE(b(">= 3").holds(3, 50));
  EXPECT_FALSE(b(">= 3").holds(2, 50));
  EXPECT_TRUE(b("<= 5%").holds(100, 5.0));
  EXPECT_FALSE(b("<= 5%").holds(1, 5.1));
  EXPECT_TRUE(b("< 10%").holds(1, 9.9));
  EXPECT_FALSE(b("<10%").holds(1, 10));
}

TEST(Expectation, JudgesAnomalyKindsAndVerdictOfOneRun) {
  const RunOutput r = run_of("kleppmann-gc-pause", "redis");
  ASSERT_EQ(r.verdict(), Verdict::unsafe);
  Expectation e(Verdict::unsafe);
  EXPECT_TRUE(unmet_in_run(e, r).empty());
  e.anomalies = std::vector<std::string>{kStaleWriteAccepted};
  EXPECT_TRUE(unmet_in_run(e, r).empty());
  e.anomalies = std::vector<std::string>{kLostUpdate};
  ASSERT_EQ(unmet_in_run(e, r).size(), 1u);
  EXPECT_NE(unmet_in_run(e, r)[0].find("anomalies [stale-write-accepted]"), std::string::npos);
  EXPECT_FALSE(unmet_in_run(Expectation(Verdict::safe), r).empty());
}

TEST(Expectation, JudgesLostUpdatesAndTokens) {
  const RunOutput lease = run_of("jepsen-etcd-lock-set", "lease");
  const RunOutput fenced = run_of("jepsen-etcd-lock-set", "lease+fence");
  ASSERT_GT(lease.check.lost.lost, 0u);
  ASSERT_EQ(fenced.check.lost.lost, 0u);
  Expectation some;
  some.lost_updates = CountBound{CountBound::Op::gt, 0, false, "> 0"};
  EXPECT_TRUE(unmet_in_run(some, lease).empty());
  EXPECT_FALSE(unmet_in_run(some, fenced).empty());
  Expectation inc;
  inc.tokens = Expectation::Tokens::increasing;
  EXPECT_TRUE(unmet_in_run(inc, fenced).empty());
  EXPECT_TRUE(tokens_increase(fenced));
  EXPECT_TRUE(tokens_increase(lease)) << "an unfenced lease's grants have tokens its writes do not carry";
  const RunOutput redis = run_of("kleppmann-gc-pause", "redis");
  EXPECT_FALSE(tokens_increase(redis)) << "plain Redis grants carry no token";
  EXPECT_FALSE(unmet_in_run(inc, redis).empty());
  Expectation reg;
  reg.tokens = Expectation::Tokens::regressing;
  EXPECT_TRUE(unmet_in_run(reg, redis).empty());
  EXPECT_FALSE(unmet_in_run(reg, fenced).empty());
}

TEST(Expectation, MinSlackIsALowerBound) {
  const RunOutput r = run_of("kleppmann-gc-pause", "lease+fence");
  ASSERT_TRUE(r.check.slack);
  Expectation below, above;
  below.min_slack = *r.check.slack;
  above.min_slack = *r.check.slack + 1ns;
  EXPECT_TRUE(unmet_in_run(below, r).empty());
  EXPECT_FALSE(unmet_in_run(above, r).empty());
}

TEST(Expectation, SeedRangesQuantifyAllOrAny) {
  // A stand-in run: unsafe on even seeds only.
  auto fake = [](std::uint64_t seed) {
    RunOutput r;
    r.seed = seed;
    r.check.safe = seed % 2 == 1;
    return r;
  };
  Expectation any(Verdict::unsafe);
  any.seeds = std::pair<std::uint64_t, std::uint64_t>{1, 5};
  ExpectationOutcome o = judge_expectation(any, 1, fake);
  EXPECT_TRUE(o.met);
  EXPECT_EQ(o.first_seed, 2u) << "the witness";
  EXPECT_EQ(o.runs, 2u) << "any stops at its first witness";

  Expectation all(Verdict::safe);
  all.seeds = std::pair<std::uint64_t, std::uint64_t>{1, 5};
  o = judge_expectation(all, 1, fake);
  EXPECT_FALSE(o.met);
  EXPECT_EQ(o.first_seed, 2u) << "the first failure";
  EXPECT_NE(o.why.find("seed 2: verdict unsafe"), std::string::npos) << o.why;

  Expectation odd_only(Verdict::safe);
  odd_only.seeds = std::pair<std::uint64_t, std::uint64_t>{3, 3};
  EXPECT_TRUE(judge_expectation(odd_only, 1, fake).met);

  Expectation never(Verdict::unsafe);
  never.seeds = std::pair<std::uint64_t, std::uint64_t>{1, 1};
  o = judge_expectation(never, 1, fake);
  EXPECT_FALSE(o.met);
  EXPECT_NE(o.why.find("no seed in 1..1"), std::string::npos) << o.why;
}
