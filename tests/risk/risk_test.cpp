// The risk estimator: its fixed-point sums and intervals on fixed inputs, the likelihood ratio of a tilted
// draw, and the estimate itself against plain Monte Carlo and against the closed form of one Redis with a
// Pareto pause.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "locksim/scenarios/envelope.hpp"
#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/risk.hpp"
#include "locksim/scenarios/runner.hpp"

namespace locksim {
namespace {

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kRedis = std::string(LOCKSIM_SOURCE_DIR) + "/tests/risk/data/redis-pareto-pause.toml";

RiskSpec redis_spec(std::vector<std::string> sets = {}) {
  RiskSpec s;
  s.scenario = kRedis;
  s.file = kRedis;
  s.toml = set_fields(slurp(kRedis), kRedis, sets);
  s.protocol = "redis";
  s.pilot = 200;
  return s;
}

TEST(RiskFixed, ConvertsExactlyAndSumsInAnyOrder) {
  EXPECT_EQ(Fixed::of(1.0).to_hex(), "0000000000000000000000000000000100000000000000000000000000000000");
  EXPECT_EQ(Fixed::of(0.5).to_hex(), "0000000000000000000000000000000080000000000000000000000000000000");
  EXPECT_EQ(Fixed::of(0x1p-128).to_hex(), "0000000000000000000000000000000000000000000000000000000000000001");
  EXPECT_TRUE(Fixed::of(0x1p-129).is_zero());  // below the resolution
  EXPECT_EQ(Fixed::of(3.0).times(5), Fixed::of(15.0));
  EXPECT_THROW(Fixed::of(-1.0), std::invalid_argument);
  EXPECT_THROW(Fixed::of(std::nan("")), std::invalid_argument);
  // Doubles do not add associatively; their fixed-point images do.
  const double v[] = {1e-20, 1.0, 3.7e-7, 123456.789, 2.5e-13};
  Fixed a, b;
  for (double x : v) a += Fixed::of(x);
  for (int i = 4; i >= 0; --i) b += Fixed::of(v[i]);
  EXPECT_EQ(a, b);
  Fixed back;
  ASSERT_TRUE(Fixed::parse_hex(a.to_hex(), back));
  EXPECT_EQ(back, a);
  EXPECT_NEAR(static_cast<double>(a.value()), 123457.789000370, 1e-6);
}

TEST(RiskEstimate, WilsonOnACount) {
  const Interval iv = wilson(5, 1000);
  EXPECT_NEAR(iv.lo, 0.0021375355, 1e-9);
  EXPECT_NEAR(iv.hi, 0.0116509554, 1e-9);
  EXPECT_NEAR(wilson(0, 100).hi, 0.0369934982, 1e-9);
  RiskSums s;
  for (int i = 0; i < 1000; ++i) {
    RiskRun r;
    r.seed = static_cast<std::uint64_t>(i);
    r.unsafe = i % 200 == 7;
    r.grants = 2;
    r.simulated = 36s;
    r.story = "stale-write-accepted";
    s.add(r);
  }
  const RiskEstimate e = estimate(s, false);
  EXPECT_DOUBLE_EQ(e.p_run, 0.005);
  EXPECT_NEAR(e.run.hi, 0.0116509554, 1e-9);
  EXPECT_DOUBLE_EQ(e.grants_per_run, 2.0);
  EXPECT_DOUBLE_EQ(e.p_acquisition, 0.0025);
  EXPECT_DOUBLE_EQ(e.hours_per_run, 0.01);
  EXPECT_DOUBLE_EQ(e.per_hour, 0.5);
  EXPECT_EQ(s.stories.at("stale-write-accepted").seed, 7u);
  EXPECT_EQ(s.stories.at("stale-write-accepted").runs, 5u);
}

TEST(RiskEstimate, WeightedMeanAndItsNormalInterval) {
  RiskSums s;
  const double w[] = {0.5, 0.25, 1, 1};
  for (int i = 0; i < 4; ++i) {
    RiskRun r;
    r.weight = w[i];
    r.unsafe = i < 2;
    r.grants = 1;
    r.simulated = 1s;
    s.add(r);
  }
  const RiskEstimate e = estimate(s, true);
  EXPECT_DOUBLE_EQ(e.p_run, 0.1875);  // (0.5 + 0.25) / 4
  // sample variance of w·u: (0.25 + 0.0625 - 4 · 0.1875²) / 3; se = sqrt(var / 4)
  const double se = std::sqrt((0.3125 - 4 * 0.1875 * 0.1875) / 3 / 4);
  EXPECT_NEAR(e.run.hi, 0.1875 + 1.959963984540054 * se, 1e-12);
  EXPECT_EQ(e.run.lo, 0.0);
  EXPECT_NEAR(e.ess_unsafe, 0.5625 / 0.3125, 1e-12);
  EXPECT_NEAR(e.ess, 2.75 * 2.75 / 2.3125, 1e-12);
}

TEST(RiskWeight, ParetoTiltIsUnbiased) {
  // Draw from the heavier proposal with the world's own sampler; the weighted tail frequency must be the
  // scenario's closed form, and the weights must average 1.
  const Dist f = Dist::pareto_of(10ms, 2.0, 60s), g = Dist::pareto_of(10ms, 0.25, 60s);
  EXPECT_NEAR(likelihood_ratio(f, g, 40ms), 8.0 * std::pow(0.25, 1.75), 1e-6);
  EXPECT_NEAR(likelihood_ratio(f, g, 60s), std::pow(10e-3 / 60, 1.75), 1e-12);  // the cap's masses
  Rng rng(42);
  double sum = 0, tail = 0;
  const int n = 200'000;
  for (int i = 0; i < n; ++i) {
    const Duration x = g.sample(rng);
    const double w = likelihood_ratio(f, g, x);
    sum += w;
    if (x >= 5s) tail += w;
  }
  EXPECT_NEAR(sum / n, 1.0, 0.02);
  const double exact = std::pow(10e-3 / 5, 2.0);  // 4e-6
  EXPECT_NEAR(tail / n / exact, 1.0, 0.05);
}

TEST(RiskWeight, ExponentialAndLognormalTiltsAreUnbiased) {
  const Dist fe = Dist::exponential_of(100ms, 60s), ge = Dist::exponential_of(2s, 60s);
  const Dist fl = Dist::lognormal_of(20ms, 1.0, 60s), gl = Dist::lognormal_of(3s, 1.0, 60s);
  Rng rng(7);
  double te = 0, tl = 0;
  const int n = 100'000;
  for (int i = 0; i < n; ++i) {
    const Duration xe = ge.sample(rng), xl = gl.sample(rng);
    if (xe >= 2s) te += likelihood_ratio(fe, ge, xe);
    if (xl >= 2s) tl += likelihood_ratio(fl, gl, xl);
  }
  EXPECT_NEAR(te / n / std::exp(-20.0), 1.0, 0.05);
  const double zl = std::log(2.0 / 0.02);  // P(lognormal(20ms, 1) >= 2s) = Q(ln 100)
  EXPECT_NEAR(tl / n / (0.5 * std::erfc(zl / std::sqrt(2.0))), 1.0, 0.05);
}

TEST(RiskRuns, SameBytesWhateverJobsAndShards) {
  RiskSpec spec = redis_spec();
  spec.budget.runs = 300;
  const RiskResult one = run_risk(spec, 1);
  const RiskResult two = run_risk(spec, 2);
  EXPECT_EQ(risk_jsonl(one), risk_jsonl(two));
  EXPECT_GT(one.sums.unsafe, 0u);
  RiskSums merged;
  spec.shards = 3;
  for (std::uint32_t k : {2u, 0u, 1u}) {
    spec.shard = k;
    merged.add(run_risk(spec, 2).sums);
  }
  EXPECT_EQ(merged.runs, one.sums.runs);
  EXPECT_EQ(merged.wu.to_hex(), one.sums.wu.to_hex());
  EXPECT_EQ(merged.w2u.to_hex(), one.sums.w2u.to_hex());
  EXPECT_EQ(merged.wt.to_hex(), one.sums.wt.to_hex());
  ASSERT_EQ(merged.stories.size(), one.sums.stories.size());
  EXPECT_EQ(merged.stories.begin()->second.seed, one.sums.stories.begin()->second.seed);
}

TEST(RiskClosedForm, TheRunsOwnThresholdIsTheTtl) {
  // The derivation in the scenario's `teaches`: unsafe exactly when the pause reaches TTL - eps, eps = 0.
  for (const auto& [pause, unsafe] : {std::pair{"9.999999999s", false}, std::pair{"10s", true}}) {
    // scale = max: every draw is exactly the pause (scale * U^(-1/alpha) >= scale, capped at max).
    const std::string text = set_fields(
        slurp(kRedis), kRedis,
        {std::string("fault[0].duration.scale=") + pause, std::string("fault[0].duration.max=") + pause});
    const RunOutput r = run_scenario(load_scenario_text(text, kRedis), "redis");
    EXPECT_EQ(!r.check.safe, unsafe) << pause;
    EXPECT_EQ(r.history.grants.size(), 2u);
  }
}

TEST(RiskAgainst, PlainMonteCarloIntervalsOverlap) {
  // P(pause >= 10 s) = 100 ms / 10 s = 1e-2 per run: both methods can measure it.
  RiskSpec plain = redis_spec();
  plain.mode = TiltMode::none;
  plain.budget.runs = 3000;
  const RiskResult mc = run_risk(plain, 2);
  RiskSpec is = redis_spec();
  is.budget.runs = 600;
  const RiskResult ir = run_risk(is, 2);
  ASSERT_TRUE(ir.tilted());
  ASSERT_FALSE(mc.tilted());
  const RiskEstimate a = estimate(mc.sums, false), b = estimate(ir.sums, true);
  EXPECT_EQ(a.run.method, "Wilson score");
  EXPECT_LE(a.run.lo, b.run.hi);
  EXPECT_LE(b.run.lo, a.run.hi);
  EXPECT_LT(b.run.lo, 1e-2);
  EXPECT_GT(b.run.hi, 1e-2);
  // The weighted interval is the narrower one, from a fifth of the runs.
  EXPECT_LT(b.run.hi - b.run.lo, a.run.hi - a.run.lo);
}

TEST(RiskClosedForm, OneRedisParetoPauseLiesInTheInterval) {
  // scale 10 ms, alpha 2: (10 ms / 10 s)^2 = 1e-6 per run, 5e-7 per acquisition (two grants a run).
  RiskSpec spec = redis_spec({"fault[0].duration.scale=10ms", "fault[0].duration.alpha=2"});
  spec.budget.runs = 1000;
  const RiskResult r = run_risk(spec, 2);
  const RiskEstimate e = estimate(r.sums, true);
  const double exact = std::pow(0.01 / 10, 2.0);
  EXPECT_LT(e.run.lo, exact);
  EXPECT_GT(e.run.hi, exact);
  EXPECT_GT(e.run.lo, e.p_run / 2);
  EXPECT_LT(e.run.hi, e.p_run * 2);
  EXPECT_DOUBLE_EQ(e.grants_per_run, 2.0);
  EXPECT_LT(e.acquisition.lo, exact / 2);
  EXPECT_GT(e.acquisition.hi, exact / 2);
}

}  // namespace
}  // namespace locksim
