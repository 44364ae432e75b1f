// A repeated fault whose period (Repeat::every_dist) or jitter (Repeat::jitter_dist) is a distribution: each
// drawn per firing from the fault's own seeded stream.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "locksim/sim/world.hpp"
#include "test_util.hpp"

using namespace locksim;
using locksim::test::events_of;

namespace {

ProcId sleeper(World& w, const std::string& name, Time end) {
  return w.spawn(name, [end](Context& c) {
    while (c.now() < end) c.sleep(1ms);
  });
}

std::vector<Time> fault_times(const World& w, ProcId p) {
  std::vector<Time> out;
  for (const auto& e : events_of(w, TraceKind::fault, p)) out.push_back(e.time);
  return out;
}

Fault pause_of(ProcId p, Time at) {
  return Fault{.kind = Fault::Kind::pause, .when = Trigger::at_time(at), .target = p, .duration = 10ms};
}

const Dist kExp = Dist::exponential_of(2s, 20s, 100ms);  // 100 ms + Exp(2 s), capped at 20 s

}  // namespace

TEST(FaultPeriod, FiringTimesAreTheRunningSumOfTheDraws) {
  constexpr std::uint64_t seed = 11;
  World w(WorldOptions{.seed = seed});
  ProcId p = sleeper(w, "p", 120s);
  Fault f = pause_of(p, 1s);
  f.repeat = {.every = kExp.lower_bound(), .times = 8, .every_dist = kExp};
  w.add_fault(f);
  w.run();
  // The same draws from the fault's own stream (fault 0): firing k = firing k-1 + draw k.
  Rng rng = Rng(seed).stream("fault-period").stream(std::uint64_t{0});
  std::vector<Time> want{1s};
  for (int k = 1; k < 8; ++k) want.push_back(want.back() + kExp.sample(rng));
  EXPECT_EQ(fault_times(w, p), want);
  // Not a grid: the periods differ.
  EXPECT_NE(want[2] - want[1], want[1] - want[0]);
}

TEST(FaultPeriod, SeededAndApartFromEveryOtherStream) {
  auto run = [](std::uint64_t seed, bool random_period) {
    World w(WorldOptions{.seed = seed});
    std::vector<std::uint64_t> draws;
    ProcId p = w.spawn("p", [&](Context& c) {
      for (int i = 0; i < 40; ++i) {
        draws.push_back(c.rng().next());
        c.sleep(1s);
      }
    });
    Fault f = pause_of(p, 1s);
    f.repeat = {.every = random_period ? kExp.lower_bound() : 2s, .times = 6};
    if (random_period) f.repeat.every_dist = kExp;
    w.add_fault(f);
    w.run();
    return std::make_pair(fault_times(w, p), draws);
  };
  const auto a = run(5, true), b = run(5, true), c = run(6, true), fixed = run(5, false);
  EXPECT_EQ(a.first, b.first);        // same seed, same times
  EXPECT_NE(a.first, c.first);        // another seed, other times
  EXPECT_EQ(a.second, fixed.second);  // the process's own stream does not see the period draws
  EXPECT_EQ(fixed.first, (std::vector<Time>{1s, 3s, 5s, 7s, 9s, 11s}));
}

TEST(FaultPeriod, UntilEndsARandomRepetition) {
  World w(WorldOptions{.seed = 3});
  ProcId p = sleeper(w, "p", 120s);
  Fault f = pause_of(p, 0s);
  f.repeat = {.every = kExp.lower_bound(), .until = 30s, .every_dist = kExp};
  w.add_fault(f);
  w.run();
  const auto ts = fault_times(w, p);
  ASSERT_GE(ts.size(), 3u);
  EXPECT_LE(ts.back(), 30s);
  for (std::size_t k = 1; k < ts.size(); ++k) EXPECT_GE(ts[k] - ts[k - 1], Duration{100ms});
}

TEST(FaultPeriod, APeriodThatCanBeZeroOrFireTooOftenIsRefused) {
  World w;
  ProcId p = sleeper(w, "p", 1s);
  Fault f = pause_of(p, 0s);
  const Dist from_zero = Dist::exponential_of(1s, 10s);  // can draw 0
  f.repeat = {.every = from_zero.lower_bound(), .times = 5, .every_dist = from_zero};
  EXPECT_THROW(w.add_fault(f), std::invalid_argument);
  // every must be the distribution's shortest value: a larger one would undercount the firings.
  f.repeat = {.every = 1s, .until = 10s, .every_dist = kExp};
  EXPECT_THROW(w.add_fault(f), std::invalid_argument);
  // 100 ms at the shortest over a day: more than 10,000 firings could come.
  f.repeat = {.every = kExp.lower_bound(), .until = Time{std::chrono::hours(24)}, .every_dist = kExp};
  try {
    w.add_fault(f);
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("10000"), std::string::npos) << e.what();
  }
  f.repeat = {.every = kExp.lower_bound(), .times = Repeat::kMaxFirings, .every_dist = kExp};
  EXPECT_NO_THROW(w.add_fault(f));
}

TEST(FaultPeriod, AJitterDistributionDelaysEachFiringByItsDraw) {
  constexpr std::uint64_t seed = 9;
  World w(WorldOptions{.seed = seed});
  ProcId p = sleeper(w, "p", 60s);
  const Dist j = Dist::exponential_of(300ms, 2s);
  Fault f = pause_of(p, 5s);
  f.repeat = {.every = 5s, .times = 6, .jitter = j.upper_bound(), .jitter_dist = j};
  w.add_fault(f);
  w.run();
  Rng rng = Rng(seed).stream("fault-jitter").stream(std::uint64_t{0});
  std::vector<Time> want;
  for (int k = 0; k < 6; ++k) want.push_back(5s + 5s * k + j.sample(rng));
  EXPECT_EQ(fault_times(w, p), want);
}
