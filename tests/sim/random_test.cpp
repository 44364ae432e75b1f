// Random: golden values (any change to a generator or distribution shows up here), reference vectors for the
// underlying algorithms, distribution sanity and stream independence.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "locksim/sim/random.hpp"
#include "locksim/sim/world.hpp"

using namespace locksim;

namespace {

template <class F>
auto first8(F&& draw) {
  std::vector<decltype(draw())> out;
  for (int i = 0; i < 8; ++i) out.push_back(draw());
  return out;
}

std::uint64_t rotl(std::uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

/// An independent textbook xoshiro256++ step, to prove Rng is exactly that generator.
std::uint64_t xoshiro_next(std::array<std::uint64_t, 4>& s) {
  const std::uint64_t result = rotl(s[0] + s[3], 23) + s[0];
  const std::uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

}  // namespace

TEST(Random, SplitMix64MatchesReferenceVector) {
  // Reference outputs of SplitMix64 for seed 1234567 (Steele et al.; Vigna's splitmix64.c).
  SplitMix64 sm(1234567);
  EXPECT_EQ(sm.next(), 6457827717110365317ULL);
  EXPECT_EQ(sm.next(), 3203168211198807973ULL);
  EXPECT_EQ(sm.next(), 9817491932198370423ULL);
  EXPECT_EQ(sm.next(), 4593380528125082431ULL);
  EXPECT_EQ(sm.next(), 16408922859458223821ULL);
}

TEST(Random, XoshiroReferenceVectorAndSeeding) {
  // xoshiro256++ from state {1,2,3,4}: published reference outputs.
  std::array<std::uint64_t, 4> s{1, 2, 3, 4};
  const std::uint64_t expected[] = {
      41943041ULL,           58720359ULL, 3588806011781223ULL, 3591011842654386ULL, 9228616714210784205ULL,
      9973669472204895162ULL};
  for (std::uint64_t e : expected) EXPECT_EQ(xoshiro_next(s), e);
  // Rng(seed) is xoshiro256++ whose state is four SplitMix64(seed) outputs.
  SplitMix64 sm(42);
  std::array<std::uint64_t, 4> st{sm.next(), sm.next(), sm.next(), sm.next()};
  Rng r(42);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(r.next(), xoshiro_next(st)) << "draw " << i;
}

TEST(Random, GoldenNext) {
  Rng r(42);
  EXPECT_EQ(
      first8([&] { return r.next(); }),
      (std::vector<std::uint64_t>{15021278609987233951ULL, 5881210131331364753ULL, 18149643915985481100ULL,
                                  12933668939759105464ULL, 14637574242682825331ULL, 10848501901068131965ULL,
                                  2312344417745909078ULL, 11162538943635311430ULL}));
}

TEST(Random, GoldenBelow) {
  Rng r(42);
  EXPECT_EQ(first8([&] { return r.below(1000); }),
            (std::vector<std::uint64_t>{814, 318, 983, 701, 793, 588, 125, 605}));
}

TEST(Random, GoldenBetween) {
  Rng r(42);
  EXPECT_EQ(first8([&] { return r.between(-50, 50); }),
            (std::vector<std::int64_t>{32, -18, 49, 20, 30, 9, -38, 11}));
}

TEST(Random, GoldenUniform) {
  Rng r(42);
  EXPECT_EQ(
      first8([&] { return r.uniform(1ms, 2ms).count(); }),
      (std::vector<std::int64_t>{1814305, 1318821, 1983895, 1701136, 1793505, 1588099, 1125352, 1605123}));
}

TEST(Random, GoldenChance) {
  Rng r(42);
  EXPECT_EQ(first8([&] { return r.chance(1, 3); }),
            (std::vector<bool>{false, true, false, false, false, false, true, false}));
}

TEST(Random, GoldenExponential) {
  Rng r(42);
  EXPECT_EQ(first8([&] { return r.exponential(10ms).count(); }),
            (std::vector<std::int64_t>{16836505, 3839302, 41285738, 12077653, 15774766, 8869709, 1339342,
                                       9291795}));
}

TEST(Random, GoldenPareto) {
  Rng r(42);
  EXPECT_EQ(
      first8([&] { return r.pareto(1ms, 1.5, 1s).count(); }),
      (std::vector<std::int64_t>{3072322, 1291692, 15679945, 2237092, 2862373, 1806360, 1093397, 1857911}));
}

TEST(Random, GoldenNetworkStream) {
  Rng r(42);
  Rng s = r.stream("network");
  EXPECT_EQ(
      first8([&] { return s.next(); }),
      (std::vector<std::uint64_t>{12563963840841570581ULL, 15510798645288839902ULL, 3516350900430009821ULL,
                                  2569053917989907222ULL, 297400590963761240ULL, 190812100998560362ULL,
                                  14493855663793418692ULL, 4549287816064258255ULL}));
}

TEST(Random, StableHashIsFnv1a) {
  EXPECT_EQ(stable_hash(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(stable_hash("a"), 0xaf63dc4c8601ec8cULL);  // FNV-1a 64 reference
  static_assert(stable_hash("network") == stable_hash("network"));
}

TEST(Random, BelowIsUnbiasedAcrossBuckets) {
  Rng r(7);
  std::array<int, 3> buckets{};
  for (int i = 0; i < 30'000; ++i) {
    const auto v = r.below(3);
    ASSERT_LT(v, 3u);
    ++buckets[v];
  }
  // Expected 10,000 each, standard deviation ~82: 500 is six sigma.
  for (int b : buckets) EXPECT_NEAR(b, 10'000, 500);
}

TEST(Random, BelowEdgeCases) {
  Rng r(1);
  EXPECT_EQ(r.below(0), 0u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(r.below(1), 0u);
  // A bound just above 2^63 rejects about half the draws: still in range, upper half reachable.
  const std::uint64_t big = (std::uint64_t{1} << 63) + 1;
  bool upper = false;
  for (int i = 0; i < 200; ++i) {
    const auto v = r.below(big);
    ASSERT_LT(v, big);
    upper |= v >= (std::uint64_t{1} << 62) * 3 / 2;
  }
  EXPECT_TRUE(upper);
}

TEST(Random, BetweenAndUniformAreInclusive) {
  Rng r(3);
  EXPECT_EQ(r.between(5, 5), 5);
  EXPECT_EQ(r.between(5, 3), 5);  // lo > hi is lo
  std::array<int, 4> seen{};
  for (int i = 0; i < 4000; ++i) {
    const auto v = r.between(-2, 1);
    ASSERT_GE(v, -2);
    ASSERT_LE(v, 1);
    ++seen[v + 2];
  }
  for (int s : seen) EXPECT_GT(s, 800);
  bool lo = false, hi = false;
  for (int i = 0; i < 1000; ++i) {
    const Duration d = r.uniform(10ns, 13ns);
    ASSERT_GE(d, 10ns);
    ASSERT_LE(d, 13ns);
    lo |= d == 10ns;
    hi |= d == 13ns;
  }
  EXPECT_TRUE(lo && hi);
  // The full int64 range does not overflow.
  constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  bool neg = false, pos = false;
  for (int i = 0; i < 100; ++i) {
    const auto v = r.between(kMin, kMax);
    neg |= v < 0;
    pos |= v > 0;
  }
  EXPECT_TRUE(neg && pos);
}

TEST(Random, ChanceIsExactAtTheEdgesAndFairInBetween) {
  Rng r(5);
  int hits = 0;
  for (int i = 0; i < 1000; ++i) {
    EXPECT_FALSE(r.chance(0, 10));
    EXPECT_TRUE(r.chance(10, 10));
    EXPECT_TRUE(r.chance(11, 10));
    EXPECT_FALSE(r.chance(1, 0));
  }
  for (int i = 0; i < 40'000; ++i) hits += r.chance(1, 4);
  EXPECT_NEAR(hits, 10'000, 600);  // sd ~87
}

TEST(Random, UnitExponentialAndParetoRanges) {
  Rng r(9);
  long double sum = 0;
  constexpr int n = 20'000;
  for (int i = 0; i < n; ++i) {
    const double u = r.unit();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    const Duration e = r.exponential(1ms, 50ms);
    ASSERT_GE(e, 0ns);
    ASSERT_LE(e, 50ms);
    sum += e.count();
    const Duration p = r.pareto(1ms, 1.5, 20ms);
    ASSERT_GE(p, 1ms);
    ASSERT_LE(p, 20ms);
  }
  EXPECT_NEAR(static_cast<double>(sum / n), 1e6, 0.05e6);  // mean 1 ms, sd of the mean ~7 µs
  Rng c(11);
  for (int i = 0; i < 1000; ++i) ASSERT_LE(c.exponential(1s, 1us), 1us);  // cap dominates
}

TEST(Random, StreamsAreIndependentAndDeriveWithoutAdvancing) {
  Rng parent(42);
  Rng net1 = parent.stream("network");
  Rng other = parent.stream("process/a");  // deriving another stream...
  (void)other;
  Rng net2 = parent.stream("network");  // ...does not change this one
  for (int i = 0; i < 16; ++i) ASSERT_EQ(net1.next(), net2.next());
  // Deriving does not advance the parent.
  Rng fresh(42);
  EXPECT_EQ(parent.next(), fresh.next());
  // Drawing from the parent does not change a stream derived afterwards either (streams hang off the seed).
  Rng net3 = parent.stream("network");
  Rng net4 = Rng(42).stream("network");
  for (int i = 0; i < 16; ++i) ASSERT_EQ(net3.next(), net4.next());
  // Different names, ids and seeds give different streams.
  EXPECT_NE(Rng(42).stream("a").next(), Rng(42).stream("b").next());
  EXPECT_NE(Rng(42).stream(1).next(), Rng(42).stream(2).next());
  EXPECT_NE(Rng(42).stream("a").next(), Rng(43).stream("a").next());
  EXPECT_NE(Rng(42).stream("network").next(), Rng(42).next());
}

TEST(Random, AddingAProcessDoesNotChangeTheNetworkStream) {
  // Two worlds with the same seed; the second has an extra idle process. a's messages to b get random delays
  // from the network stream: their arrival times must be identical in both worlds.
  auto arrivals = [](bool extra) {
    WorldOptions o;
    o.seed = 99;
    o.network.defaults.delay = DelayDist::uniform_of(1ms, 50ms);
    World w(o);
    std::vector<Time> got;
    ProcId b = w.spawn("b", [&](Context& c) {
      for (int i = 0; i < 20; ++i) got.push_back(c.receive()->id == 0 ? -1ns : c.now());
    });
    if (extra) w.spawn("zzz", [](Context& c) { c.sleep(1s); });
    w.spawn("a", [&](Context& c) {
      for (int i = 0; i < 20; ++i) {
        c.send(b, Message{.type = "m"});
        c.sleep(5ms);
      }
    });
    EXPECT_EQ(w.run().reason, StopReason::done);
    return got;
  };
  const auto base = arrivals(false);
  ASSERT_EQ(base.size(), 20u);
  EXPECT_EQ(base, arrivals(true));
}
