// Node clocks: monotonic never goes back, wall clock jumps both ways, true_time_at inverts monotonic exactly;
// format_time writes the canonical text of a duration.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sim/clock.hpp"
#include "sim/world.hpp"
#include "test_util.hpp"

using namespace locksim;

namespace {

/// One step of a random clock plan: advance true time, then maybe change drift or jump the wall clock.
struct ClockStep {
  std::int64_t advance_ns;
  int what;  // 0 nothing, 1 drift change, 2 jump
  std::int64_t ppm;
  std::int64_t jump_ns;
};

rc::Gen<ClockStep> gen_step() {
  return rc::gen::build<ClockStep>(
      rc::gen::set(&ClockStep::advance_ns, rc::gen::oneOf(rc::gen::inRange<std::int64_t>(0, 10),
                                                          rc::gen::inRange<std::int64_t>(0, 1'000'000),
                                                          rc::gen::inRange<std::int64_t>(0, 10'000'000'000))),
      rc::gen::set(&ClockStep::what, rc::gen::inRange(0, 3)),
      rc::gen::set(&ClockStep::ppm, rc::gen::oneOf(rc::gen::inRange<std::int64_t>(-600'000, 600'001),
                                                   rc::gen::inRange<std::int64_t>(-200, 201))),
      rc::gen::set(&ClockStep::jump_ns, rc::gen::inRange<std::int64_t>(-100'000'000'000, 100'000'000'000)));
}

}  // namespace

TEST(Clock, DriftMakesALocalSecondShorterOrLonger) {
  NodeClock fast({.drift_ppm = 100'000});  // 10% fast
  EXPECT_EQ(fast.monotonic(1s), 1100ms);
  // Smallest true time at which the fast clock reads >= 1 s: t + floor(t/10) >= 1e9 -> t = 909090910.
  EXPECT_EQ(fast.true_time_at(1s), 909'090'910ns);
  NodeClock slow({.drift_ppm = -100'000});
  EXPECT_EQ(slow.monotonic(1s), 900ms);
  // monotonic(t) = t + trunc(t * ppm / 1e6): a slow clock already reads 900 ms one nanosecond before 1 s.
  EXPECT_EQ(slow.monotonic(999'999'999ns), 900ms);
  EXPECT_EQ(slow.true_time_at(900ms), 999'999'999ns);
  NodeClock clamped({.drift_ppm = 10'000'000});
  EXPECT_EQ(clamped.drift_ppm(), NodeClock::kMaxDriftPpm);
}

TEST(Clock, WallClockJumpsBackAndForwardMonotonicDoesNot) {
  World w;
  std::vector<std::pair<Time, Time>> reads;  // (monotonic, wall)
  ProcId p = w.spawn("p",
                     [&](Context& c) {
                       for (int i = 0; i < 4; ++i) {
                         reads.emplace_back(c.now(), c.wall());
                         c.sleep(1s);
                       }
                     },
                     {.clock = {.offset = 100s}});
  w.add_fault(Fault{
      .kind = Fault::Kind::clock_jump, .when = Trigger::at_time(1500ms), .target = p, .duration = -10s});
  w.add_fault(
      Fault{.kind = Fault::Kind::clock_jump, .when = Trigger::at_time(2500ms), .target = p, .duration = 30s});
  w.run();
  ASSERT_EQ(reads.size(), 4u);
  EXPECT_EQ(reads[0], std::make_pair(Time{0s}, Time{100s}));
  EXPECT_EQ(reads[1], std::make_pair(Time{1s}, Time{101s}));
  EXPECT_EQ(reads[2], std::make_pair(Time{2s}, Time{92s}));   // went back
  EXPECT_EQ(reads[3], std::make_pair(Time{3s}, Time{123s}));  // jumped forward
  auto clk = test::events_of(w, TraceKind::clock, p);
  ASSERT_EQ(clk.size(), 2u);
  EXPECT_EQ(clk[0].label, "jump");
  EXPECT_EQ(clk[0].detail, "by=-10s");
  EXPECT_EQ(w.now(), 4s);  // the body's last sleep
  EXPECT_EQ(w.wall(p), 124s);
  EXPECT_EQ(w.monotonic(p), 4s);
}

TEST(Clock, SleepUsesTheNodesMonotonicClockAcrossADriftChange) {
  World w;
  Time true_wake{-1}, local_wake{-1};
  ProcId p = w.spawn("p",
                     [&](Context& c) {
                       c.sleep(2s);
                       true_wake = w.now();
                       local_wake = c.now();
                     },
                     {.clock = {.drift_ppm = 500'000}});
  // Sleep armed at 0 for 2 local seconds at 1.5x = 1.333... true seconds. A drift change does not re-arm it.
  w.add_fault(Fault{.kind = Fault::Kind::clock_drift, .when = Trigger::at_time(1s), .target = p, .ppm = 0});
  w.run();
  EXPECT_EQ(true_wake, 1'333'333'334ns);
  EXPECT_EQ(local_wake, Time{1'500'000'000 + 333'333'334});
  EXPECT_EQ(w.clock(p).drift_ppm(), 0);
}

RC_GTEST_PROP(ClockProperty, MonotonicNeverGoesBackAndWallFollowsJumps, ()) {
  const auto init_ppm = *rc::gen::inRange<std::int64_t>(-500'000, 500'001);
  const auto offset = *rc::gen::inRange<std::int64_t>(-1'000'000'000'000, 1'000'000'000'000);
  const auto steps = *rc::gen::container<std::vector<ClockStep>>(gen_step());
  NodeClock c({.offset = Duration{offset}, .drift_ppm = init_ppm});
  Time t{0};
  Time last_mono = c.monotonic(t);
  RC_ASSERT(last_mono == Time{0});
  Duration jumps{offset};
  for (const auto& s : steps) {
    // Sample a few points inside the interval too.
    for (std::int64_t k = 1; k <= 3; ++k) {
      const Time mid = t + Duration{s.advance_ns * k / 3};
      const Time m = c.monotonic(mid);
      RC_ASSERT(m >= last_mono);
      last_mono = m;
    }
    t += Duration{s.advance_ns};
    const Time before = c.monotonic(t);
    if (s.what == 1) {
      c.set_drift(t, s.ppm);
      RC_ASSERT(c.monotonic(t) == before);  // continuous across a drift change
      RC_ASSERT(c.drift_ppm() >= -NodeClock::kMaxDriftPpm);
      RC_ASSERT(c.drift_ppm() <= NodeClock::kMaxDriftPpm);
    } else if (s.what == 2) {
      c.jump(t, Duration{s.jump_ns});
      jumps += Duration{s.jump_ns};
      RC_ASSERT(c.monotonic(t) == before);  // a jump moves only the wall clock
    }
    RC_ASSERT(c.wall(t) == c.monotonic(t) + jumps);
  }
}

RC_GTEST_PROP(ClockProperty, TrueTimeAtInvertsMonotonicExactly, ()) {
  const auto steps = *rc::gen::container<std::vector<ClockStep>>(gen_step());
  NodeClock c({.drift_ppm = *rc::gen::inRange<std::int64_t>(-500'000, 500'001)});
  Time t{0};
  Time last_change{0};
  for (const auto& s : steps) {
    t += Duration{s.advance_ns};
    if (s.what == 1) {
      c.set_drift(t, s.ppm);
      last_change = t;
    }
  }
  // From now on the clock is fixed; check the inverse at random local readings ahead of now.
  const Time now_local = c.monotonic(t);
  const auto ahead = *rc::gen::container<std::vector<std::int64_t>>(rc::gen::oneOf(
      rc::gen::inRange<std::int64_t>(0, 100), rc::gen::inRange<std::int64_t>(0, 1'000'000'000'000)));
  for (std::int64_t a : ahead) {
    const Time local = now_local + Duration{a};
    const Time tt = c.true_time_at(local);
    RC_ASSERT(tt >= last_change);
    if (a > 0)
      RC_ASSERT(tt > t);  // a reading ahead of now is reached only in the future
    else
      RC_ASSERT(tt <= t);
    RC_ASSERT(c.monotonic(tt) >= local);                             // the clock has reached `local` at tt...
    if (tt > last_change) RC_ASSERT(c.monotonic(tt - 1ns) < local);  // ...and not one nanosecond earlier
  }
  // And monotonic then true_time_at gives back the earliest true time with the same reading.
  const auto fwd = *rc::gen::inRange<std::int64_t>(0, 1'000'000'000'000);
  const Time t2 = t + Duration{fwd};
  const Time back = c.true_time_at(c.monotonic(t2));
  RC_ASSERT(back <= t2);
  RC_ASSERT(c.monotonic(back) == c.monotonic(t2));
}

TEST(Clock, TrueTimeAtForAReadingInThePastIsTheLastChange) {
  NodeClock c({.drift_ppm = 1000});
  c.set_drift(10s, -1000);
  EXPECT_EQ(c.true_time_at(1s), 10s);
}

/// format_time against its earlier form (two fmt::format calls), which every golden trace hash was made with:
/// the details in the trace hash depend on these bytes.
RC_GTEST_PROP(TimeProperty, FormatTimeIsTheCanonicalText, ()) {
  const auto reference = [](Duration d) {
    const std::int64_t ns = d.count();
    const bool neg = ns < 0;
    const std::uint64_t a = neg ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
    const std::uint64_t sec = a / 1'000'000'000ULL, frac = a % 1'000'000'000ULL;
    std::string s = fmt::format("{}{}", neg ? "-" : "", sec);
    if (frac != 0) {
      std::string f = fmt::format("{:09}", frac);
      while (!f.empty() && f.back() == '0') f.pop_back();
      s += "." + f;
    }
    return s + "s";
  };
  const auto ns = *rc::gen::oneOf(rc::gen::arbitrary<std::int64_t>(),
                                  rc::gen::inRange<std::int64_t>(-3'000'000'000, 3'000'000'000),
                                  rc::gen::map(rc::gen::inRange<std::int64_t>(-1000, 1000),
                                               [](std::int64_t ms) { return ms * 1'000'000; }));
  RC_ASSERT(format_time(Duration{ns}) == reference(Duration{ns}));
}
