// Distributions of durations: golden first values per kind (any change to the math shows up here), the
// network's older kinds drawing exactly what they always drew, statistical sanity over 100,000 draws, bounds
// and caps, and a constant drawing nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <vector>

#include "locksim/sim/distribution.hpp"
#include "locksim/sim/network.hpp"

using namespace locksim;

namespace {

std::vector<std::int64_t> first8(const Dist& d, std::uint64_t seed = 42) {
  Rng r(seed);
  std::vector<std::int64_t> out;
  for (int i = 0; i < 8; ++i) out.push_back(d.sample(r).count());
  return out;
}

/// Whether two generators are in the same state (their next 4 outputs agree).
bool same_state(Rng a, Rng b) {
  for (int i = 0; i < 4; ++i)
    if (a.next() != b.next()) return false;
  return true;
}

struct Stats {
  std::vector<std::int64_t> v;  // sorted
  double mean = 0;
  std::int64_t median() const { return v[v.size() / 2]; }
  double fraction_at(std::int64_t x) const {
    return static_cast<double>(std::count(v.begin(), v.end(), x)) / static_cast<double>(v.size());
  }
};

Stats draw(const Dist& d, int n = 100'000, std::uint64_t seed = 7) {
  Rng r(seed);
  Stats s;
  long double sum = 0;
  for (int i = 0; i < n; ++i) {
    const Duration x = d.sample(r);
    EXPECT_GE(x, d.lower_bound()) << d.describe();
    EXPECT_LE(x, d.upper_bound()) << d.describe();
    s.v.push_back(x.count());
    sum += x.count();
  }
  std::sort(s.v.begin(), s.v.end());
  s.mean = static_cast<double>(sum / n);
  return s;
}

double ms(std::int64_t ns) {
  return static_cast<double>(ns) / 1e6;
}

const Dist kUniform = Dist::uniform_of(1ms, 5ms);
const Dist kExponential = Dist::exponential_of(200ms, 5s);
const Dist kLognormal = Dist::lognormal_of(50ms, 1.2, 10s);
const Dist kPareto = Dist::pareto_of(10ms, 1.5, 30s);
const Dist kEmpirical = Dist::empirical_of({340ms, 12ms, 80ms, 12ms, 2100ms});

}  // namespace

// ------------------------------------------------------------------------------------------ golden values

TEST(Distribution, GoldenOpenUnit) {
  Rng r(42);
  std::vector<std::uint64_t> got;  // u * 2^53: exact odd integers
  for (int i = 0; i < 4; ++i) got.push_back(static_cast<std::uint64_t>(r.open_unit() * 0x1p53));
  EXPECT_EQ(got, (std::vector<std::uint64_t>{7334608696282829, 2871684634439143, 8862130818352285,
                                             6315268036991751}));
}

TEST(Distribution, GoldenFirstValuesPerKind) {
  EXPECT_EQ(first8(Dist::constant_of(15s)), (std::vector<std::int64_t>(8, 15'000'000'000)));
  EXPECT_EQ(first8(kUniform), (std::vector<std::int64_t>{4257221, 2275284, 4935577, 3804543, 4174018, 3352394,
                                                         1501409, 3420490}));
  EXPECT_EQ(first8(kExponential), (std::vector<std::int64_t>{336730103, 76786043, 825714769, 241553062,
                                                             315495321, 177394190, 26786852, 185835911}));
  EXPECT_EQ(first8(kLognormal), (std::vector<std::int64_t>{146155468, 28412388, 653375456, 94181738,
                                                           133538886, 65314266, 12599488, 68853246}));
  EXPECT_EQ(first8(Dist::lognormal_of(50ms, 1.2, 10s, 3ms)),
            (std::vector<std::int64_t>{149155468, 31412388, 656375456, 97181738, 136538886, 68314266,
                                       15599488, 71853246}));
  EXPECT_EQ(first8(kPareto), (std::vector<std::int64_t>{30723221, 12916926, 156799459, 22370921, 28623732,
                                                        18063603, 10933971, 18579115}));
  EXPECT_EQ(first8(kEmpirical), (std::vector<std::int64_t>{2100000000, 12000000, 2100000000, 340000000,
                                                           340000000, 80000000, 12000000, 340000000}));
}

TEST(Distribution, NormalQuantileKnownValues) {
  // Reference quantiles of the standard normal (Python's statistics.NormalDist.inv_cdf, Wichura's AS241, good
  // to 1e-16); Acklam's relative error is below 1.15e-9 in every region.
  const std::pair<double, double> known[] = {
      {0x1p-53, -8.209536151601386},  // the smallest Rng::open_unit()
      {1e-10, -6.361340902404056},   {1e-3, -3.090232306167813},
      {0.01, -2.3263478740408408},   {0.02425, -1.9729610513118845},  // the edge of the lower tail region
      {0.3, -0.5244005127080407},    {0.5, 0.0},
      {0.975, 1.9599639845400536},   {0.99, 2.3263478740408408},
      {0.999, 3.090232306167813}};
  for (const auto& [p, z] : known)
    EXPECT_NEAR(normal_quantile(p), z, 1.15e-9 * std::max(1.0, std::fabs(z))) << p;
  // Exactly antisymmetric where 1 - p is exact (every Rng::open_unit() value), and increasing across the
  // regions.
  Rng r(11);
  for (int i = 0; i < 10'000; ++i) {
    const double u = r.open_unit();
    ASSERT_GT(u, 0.0);
    ASSERT_LT(u, 1.0);
    ASSERT_EQ(normal_quantile(1 - u), -normal_quantile(u)) << u;
  }
  double prev = -HUGE_VAL;
  for (int i = 1; i < 10'000; ++i) {
    const double z = normal_quantile(i / 10'000.0);
    ASSERT_GT(z, prev) << i;
    prev = z;
  }
  EXPECT_EQ(normal_quantile(0), -HUGE_VAL);
  EXPECT_EQ(normal_quantile(1), HUGE_VAL);
}

// -------------------------------------------------------------------- the network's kinds, bit for bit

TEST(Distribution, NetworkKindsDrawExactlyWhatTheyAlwaysDrew) {
  // DelayDist is Dist: its older kinds are the Rng primitives they always were, in the same order.
  static_assert(std::is_same_v<DelayDist, Dist>);
  static_assert(DelayDist::Kind::long_tail == Dist::Kind::pareto);
  const DelayDist u = DelayDist::uniform_of(2ms, 5ms);
  const DelayDist e{DelayDist::Kind::exponential, 1ms, 20ms, 2ms, 1.5};
  const DelayDist lt{DelayDist::Kind::long_tail, 1ms, 1s, 1ms, 1.2};
  // Tight caps, so the cap (max - min: the cap is on the whole value) is hit often.
  const DelayDist e_capped{DelayDist::Kind::exponential, 5ms, 8ms, 2ms, 1.5};
  const DelayDist lt_capped{DelayDist::Kind::long_tail, 1ms, 3ms, 1ms, 1.2};
  Rng a(99), b(99);
  for (int i = 0; i < 2'000; ++i) {
    ASSERT_EQ(u.sample(a), b.uniform(2ms, 5ms));
    ASSERT_EQ(e.sample(a), 1ms + b.exponential(2ms, 19ms));
    ASSERT_EQ(lt.sample(a), 1ms + b.pareto(1ms, 1.2, 999ms));
    ASSERT_EQ(e_capped.sample(a), 5ms + b.exponential(2ms, 3ms));
    ASSERT_EQ(lt_capped.sample(a), 1ms + b.pareto(1ms, 1.2, 2ms));
  }
  EXPECT_TRUE(same_state(a, b));
}

// ------------------------------------------------------------------------------- a constant draws nothing

TEST(Distribution, ConstantsDrawNothing) {
  const Dist constants[] = {Dist::constant_of(3ms), Dist::uniform_of(4ms, 4ms), Dist::empirical_of({9ms}),
                            Dist::empirical_of({9ms, 9ms, 9ms})};
  for (const Dist& d : constants) {
    SCOPED_TRACE(d.describe());
    EXPECT_TRUE(d.is_constant());
    Rng r(5);
    const Rng before = r;
    const Duration first = d.sample(r);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(d.sample(r), first);
    EXPECT_TRUE(same_state(r, before));
  }
  // Everything else draws, even when it can produce one value only (the network's exponential always did).
  for (const Dist& d :
       {kUniform, kExponential, kLognormal, kPareto, kEmpirical, Dist::exponential_of(1ms, 0ns)}) {
    SCOPED_TRACE(d.describe());
    EXPECT_FALSE(d.is_constant());
    Rng r(5);
    const Rng before = r;
    d.sample(r);
    EXPECT_FALSE(same_state(r, before));
  }
}

// ------------------------------------------------------------------------------- statistics over 100k draws

TEST(Distribution, UniformMeanAndBothEnds) {
  const Stats s = draw(kUniform);
  EXPECT_NEAR(ms(static_cast<std::int64_t>(s.mean)), 3.0, 0.02);  // sd 1.15 ms: stderr 0.004 ms
  EXPECT_EQ(kUniform.mean_estimate(), 3ms);
  // 100k draws over 4M values: both ends come within 400 ns (a miss has probability e^-10)
  EXPECT_LT(s.v.front(), 1'000'400);
  EXPECT_GT(s.v.back(), 4'999'600);
}

TEST(Distribution, ExponentialMeanMedianAndCap) {
  const Stats s = draw(kExponential);
  EXPECT_NEAR(s.mean / 1e6, ms(kExponential.mean_estimate().count()), 0.015 * 200);  // stderr 0.3%
  EXPECT_NEAR(ms(s.median()), 200 * std::log(2.0), 0.02 * 139);
  // A cap at 2x the mean: P(X >= 400ms) = e^-2 = 13.5% of the values sit exactly at the cap.
  const Dist capped = Dist::exponential_of(200ms, 400ms, 0ns);
  const Stats c = draw(capped);
  EXPECT_NEAR(c.fraction_at(400'000'000), std::exp(-2.0), 0.005);
  EXPECT_NEAR(c.mean / 1e6, ms(capped.mean_estimate().count()), 0.01 * 173);
  // With an offset the cap is still on the whole value: min + X, at most max.
  const Stats o = draw(Dist::exponential_of(200ms, 600ms, 200ms));
  EXPECT_EQ(o.v.front() >= 200'000'000 && o.v.back() == 600'000'000, true);
  EXPECT_NEAR(o.fraction_at(600'000'000), std::exp(-2.0), 0.005);
}

TEST(Distribution, LognormalMedianSigmaAndMean) {
  const Stats s = draw(kLognormal);
  EXPECT_NEAR(ms(s.median()), 50, 0.02 * 50);
  double sum = 0, sum2 = 0;
  for (std::int64_t x : s.v) {
    const double l = std::log(static_cast<double>(x) / 50e6);
    sum += l;
    sum2 += l * l;
  }
  const double n = static_cast<double>(s.v.size());
  EXPECT_NEAR(sum / n, 0, 0.02);                                         // mu: stderr 1.2/316
  EXPECT_NEAR(std::sqrt(sum2 / n - (sum / n) * (sum / n)), 1.2, 0.012);  // sigma within 1%
  // The mean is median * e^(sigma^2/2) = 102.7 ms (the 10 s cap takes 0.03% of it).
  EXPECT_NEAR(ms(kLognormal.mean_estimate().count()), 50 * std::exp(0.72), 0.1);
  EXPECT_NEAR(s.mean / 1e6, 102.7, 0.03 * 102.7);  // sd 192 ms: stderr 0.6%
  // An offset moves every value by exactly min.
  const Stats o = draw(Dist::lognormal_of(50ms, 1.2, 10s, 3ms));
  for (std::size_t i = 0; i < o.v.size(); i += 997) ASSERT_EQ(o.v[i], s.v[i] + 3'000'000);
}

TEST(Distribution, ParetoMedianTailAndCap) {
  const Stats s = draw(kPareto);
  EXPECT_EQ(kPareto.lower_bound(), 10ms);
  EXPECT_GE(s.v.front(), 10'000'000);
  EXPECT_NEAR(ms(s.median()), 10 * std::pow(2.0, 1 / 1.5), 0.02 * 15.87);  // median = scale * 2^(1/alpha)
  // P(X > 100 ms) = (10/100)^1.5 = 3.16%
  const auto above = std::count_if(s.v.begin(), s.v.end(), [](std::int64_t x) { return x > 100'000'000; });
  EXPECT_NEAR(static_cast<double>(above) / 1e5, 0.0316, 0.0025);
  EXPECT_NEAR(s.mean / 1e6, ms(kPareto.mean_estimate().count()), 0.05 * 29.6);  // capped mean 29.6 ms, sd 148
  // alpha 0.5 has no mean: the cap is what keeps it finite, and P(X >= 1s) = (10ms/1s)^0.5 = 10%.
  const Dist wild = Dist::pareto_of(10ms, 0.5, 1s);
  const Stats w = draw(wild);
  EXPECT_NEAR(w.fraction_at(1'000'000'000), 0.1, 0.005);
  EXPECT_NEAR(w.mean / 1e6, ms(wild.mean_estimate().count()), 0.02 * 190);
}

TEST(Distribution, EmpiricalDrawsEachObservedValueEquallyOften) {
  const Stats s = draw(kEmpirical);
  std::map<std::int64_t, int> seen;
  for (std::int64_t x : s.v) ++seen[x];
  ASSERT_EQ(seen.size(), 4u);  // 12ms twice, so four distinct values
  EXPECT_NEAR(seen[12'000'000], 40'000, 800);
  for (std::int64_t v : {80'000'000, 340'000'000, 2'100'000'000}) EXPECT_NEAR(seen[v], 20'000, 700) << v;
  EXPECT_EQ(kEmpirical.mean_estimate(), 508800us);  // (12+12+80+340+2100)/5 ms
  EXPECT_EQ(kEmpirical.lower_bound(), 12ms);
  EXPECT_EQ(kEmpirical.upper_bound(), 2100ms);
}

// ----------------------------------------------------------------------------- bounds, caps, text, errors

TEST(Distribution, BoundsOfEachKind) {
  EXPECT_EQ(Dist::constant_of(7ms).lower_bound(), 7ms);
  EXPECT_EQ(Dist::constant_of(7ms).upper_bound(), 7ms);
  EXPECT_EQ(kUniform.lower_bound(), 1ms);
  EXPECT_EQ(kUniform.upper_bound(), 5ms);
  EXPECT_EQ(Dist::exponential_of(2ms, 20ms, 1ms).lower_bound(), 1ms);
  EXPECT_EQ(kExponential.upper_bound(), 5s);
  EXPECT_EQ(kLognormal.lower_bound(), 0ns);
  EXPECT_EQ(kLognormal.upper_bound(), 10s);
  EXPECT_EQ(Dist::pareto_of(10ms, 1.5, 30s, 2ms).lower_bound(), 12ms);
  EXPECT_EQ(Dist::pareto_of(10ms, 1.5, 5ms).lower_bound(), 5ms);  // a cap below the scale: always the cap
  // The caps hold on the heaviest tails.
  for (const Dist& d : {Dist::lognormal_of(1s, 10, 2s), Dist::pareto_of(1ms, 0.01, 3s, 1ms)}) {
    const Stats s = draw(d, 10'000);
    EXPECT_EQ(s.v.back(), d.upper_bound().count()) << d.describe();
  }
}

TEST(Distribution, Describe) {
  EXPECT_EQ(Dist::constant_of(15s).describe(), "15s");
  EXPECT_EQ(Dist::uniform_of(1s, 2s).describe(), "uniform(min=1s, max=2s)");
  EXPECT_EQ(kExponential.describe(), "exponential(mean=200ms, max=5s)");
  EXPECT_EQ(Dist::exponential_of(2ms, 20ms, 1ms).describe(), "exponential(min=1ms, mean=2ms, max=20ms)");
  EXPECT_EQ(kLognormal.describe(), "lognormal(median=50ms, sigma=1.2, max=10s)");
  EXPECT_EQ(Dist::pareto_of(10ms, 1.5, 2s).describe(), "pareto(scale=10ms, alpha=1.5, max=2s)");
  EXPECT_EQ(kEmpirical.describe(), "empirical(5 values, min=12ms, median=80ms, max=2.1s)");
  EXPECT_EQ(Dist::empirical_of({9ms}).describe(), "empirical(1 value: 9ms)");
}

TEST(Distribution, DurationText) {
  EXPECT_EQ(duration_text(0ns), "0");
  EXPECT_EQ(duration_text(7ns), "7ns");
  EXPECT_EQ(duration_text(12500ns), "12.5us");
  EXPECT_EQ(duration_text(250ms), "250ms");
  EXPECT_EQ(duration_text(1500ms), "1.5s");
  EXPECT_EQ(duration_text(1234567ns), "1.234567ms");
  EXPECT_EQ(duration_text(90s), "90s");
  EXPECT_EQ(duration_text(-2ms), "-2ms");
  EXPECT_EQ(duration_text(1000000001ns), "1.000000001s");
}

TEST(Distribution, MeanEstimateClosedForms) {
  EXPECT_EQ(Dist::exponential_of(200ms, kTimeMax / 2).mean_estimate(), 200ms);
  EXPECT_EQ(Dist::exponential_of(200ms, 5s, 1ms).mean_estimate(), 201ms);
  // Pareto with alpha 2, scale 1s, cap 4s: 1 + (1 - 1/4) = 1.75 s.
  EXPECT_EQ(Dist::pareto_of(1s, 2, 4s).mean_estimate(), 1750ms);
  // alpha 1: 1 + ln 4 s.
  EXPECT_NEAR(static_cast<double>(Dist::pareto_of(1s, 1, 4s).mean_estimate().count()),
              1e9 * (1 + std::log(4.0)), 1);
}

TEST(Distribution, NamedConstructorsRefuseNonsense) {
  EXPECT_THROW(Dist::exponential_of(0ns, 1s), std::invalid_argument);
  EXPECT_THROW(Dist::exponential_of(1ms, 1s, 2s), std::invalid_argument);
  EXPECT_THROW(Dist::lognormal_of(1ms, 0, 1s), std::invalid_argument);
  EXPECT_THROW(Dist::lognormal_of(1ms, 10.5, 1s), std::invalid_argument);
  EXPECT_THROW(Dist::lognormal_of(0ns, 1, 1s), std::invalid_argument);
  EXPECT_THROW(Dist::pareto_of(1ms, 0, 1s), std::invalid_argument);
  EXPECT_THROW(Dist::pareto_of(1ms, std::nan(""), 1s), std::invalid_argument);
  EXPECT_THROW(Dist::pareto_of(-1ms, 1, 1s), std::invalid_argument);
  EXPECT_THROW(Dist::empirical_of({}), std::invalid_argument);
  EXPECT_THROW(Dist::empirical_of({1ms, -1ms}), std::invalid_argument);
}

TEST(Distribution, CopiesShareTheObservedValues) {
  const Dist copy = kEmpirical;
  EXPECT_EQ(copy.values.get(), kEmpirical.values.get());
  EXPECT_EQ(first8(copy, 3), first8(kEmpirical, 3));
}
