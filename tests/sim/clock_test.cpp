// Node clocks: monotonic never goes back, wall clock jumps both ways, true_time_at inverts monotonic exactly;
// format_time writes the canonical text of a duration.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "locksim/sim/clock.hpp"
#include "locksim/sim/world.hpp"
#include "test_util.hpp"

using namespace locksim;
using locksim::test::count_of;

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
  // At 1.5x, 1 true second is 1.5 local ones; after the drift change to 0 the last 0.5 local seconds take 0.5
  // true ones: the sleep is re-armed and ends when the local clock has advanced by exactly 2 s.
  w.add_fault(Fault{.kind = Fault::Kind::clock_drift, .when = Trigger::at_time(1s), .target = p, .ppm = 0});
  w.run();
  EXPECT_EQ(true_wake, 1500ms);
  EXPECT_EQ(local_wake, 2s);
  EXPECT_EQ(w.clock(p).drift_ppm(), 0);
}

namespace {

/// A process on a clock of drift `ppm0` waits 2 local seconds from true time 0 (a sleep, or a receive that
/// times out: `how`); its drift becomes `ppm1` at true time 1 s. Returns (true time, local time) at the end
/// of the wait.
std::pair<Time, Time> wait_across_drift_change(std::int64_t ppm0, std::int64_t ppm1, int how) {
  World w;
  Time true_end{-1}, local_end{-1};
  ProcId q = w.spawn("q", [](Context& c) { c.sleep(10s); });  // a peer that never answers
  ProcId p = w.spawn("p",
                     [&](Context& c) {
                       if (how == 0) {
                         c.sleep(2s);
                       } else if (how == 1) {
                         EXPECT_FALSE(c.receive(2s).has_value());
                       } else {
                         EXPECT_FALSE(c.call(q, Message{.type = "ask"}, 2s).has_value());
                       }
                       true_end = w.now();
                       local_end = c.now();
                     },
                     {.clock = {.drift_ppm = ppm0}});
  w.add_fault(
      Fault{.kind = Fault::Kind::clock_drift, .when = Trigger::at_time(1s), .target = p, .ppm = ppm1});
  w.run();
  return {true_end, local_end};
}

}  // namespace

TEST(Clock, ASleepOrTimeoutEndsWhenTheLocalClockAdvancedByItsDurationWhateverTheDrift) {
  for (int how = 0; how < 3; ++how) {
    SCOPED_TRACE(how == 0 ? "sleep" : how == 1 ? "receive" : "call");
    // Faster: the local clock reads 1 s at true 1 s, then runs 1.5x: the last local second takes 2/3 of a
    // true one (t + floor(t / 2) >= 1e9 from t = 666,666,667 ns). Earlier than the wait was armed for.
    EXPECT_EQ(wait_across_drift_change(0, 500'000, how), std::make_pair(Time{1'666'666'667ns}, Time{2s}));
    // Slower: the last local second takes 2 true ones less a nanosecond (the reading truncates toward zero:
    // dt - trunc(dt / 2) reaches 1e9 at dt = 1,999,999,999 ns).
    EXPECT_EQ(wait_across_drift_change(0, -500'000, how), std::make_pair(Time{2'999'999'999ns}, Time{2s}));
    // Fast, then back to none: 1.5 local seconds by true 1 s, the last 0.5 in 0.5 true seconds.
    EXPECT_EQ(wait_across_drift_change(500'000, 0, how), std::make_pair(Time{1500ms}, Time{2s}));
    // Slow, then fast: 0.5 local seconds by true 1 s, the last 1.5 at 1.5x in 1 true second.
    EXPECT_EQ(wait_across_drift_change(-500'000, 500'000, how), std::make_pair(Time{2s}, Time{2s}));
  }
}

TEST(Clock, ADriftChangeDuringAPauseReArmsTheSleepAndThePauseStillHoldsIt) {
  World w;
  Time true_wake{-1}, local_wake{-1};
  ProcId p = w.spawn("p", [&](Context& c) {
    c.sleep(2s);
    true_wake = w.now();
    local_wake = c.now();
  });
  w.add_fault(
      Fault{.kind = Fault::Kind::pause, .when = Trigger::at_time(500ms), .target = p, .duration = 1s});
  w.add_fault(
      Fault{.kind = Fault::Kind::clock_drift, .when = Trigger::at_time(1s), .target = p, .ppm = 500'000});
  // Local 1 s at true 1 s; the last local second at 1.5x ends at 1,666,666,667 ns, after the pause (1.5 s).
  w.run();
  EXPECT_EQ(true_wake, 1'666'666'667ns);
  EXPECT_EQ(local_wake, 2s);
}

TEST(Clock, ADriftChangeAfterASleepCameDueDuringAPauseDoesNotMoveIt) {
  World w;
  Time true_wake{-1};
  ProcId p = w.spawn("p", [&](Context& c) {
    c.sleep(1s);
    true_wake = w.now();
  });
  w.add_fault(
      Fault{.kind = Fault::Kind::pause, .when = Trigger::at_time(500ms), .target = p, .duration = 1s});
  w.add_fault(Fault{
      .kind = Fault::Kind::clock_drift, .when = Trigger::at_time(1200ms), .target = p, .ppm = -500'000});
  w.run();
  EXPECT_EQ(true_wake, 1500ms);  // due at 1 s, seen when the pause ends
}

TEST(Clock, AWallClockJumpDuringASleepDoesNotMoveIt) {
  World w;
  Time true_wake{-1};
  ProcId p = w.spawn("p", [&](Context& c) {
    c.sleep(2s);
    true_wake = w.now();
  });
  w.add_fault(
      Fault{.kind = Fault::Kind::clock_jump, .when = Trigger::at_time(1s), .target = p, .duration = -30s});
  w.add_fault(
      Fault{.kind = Fault::Kind::clock_jump, .when = Trigger::at_time(1500ms), .target = p, .duration = 60s});
  w.run();
  EXPECT_EQ(true_wake, 2s);
}

TEST(Clock, AMessageBeforeTheReArmedTimeoutIsReceived) {
  World w;
  std::optional<Message> got;
  Time local_got{-1};
  ProcId p = w.spawn("p", [&](Context& c) {
    got = c.receive(2s);
    local_got = c.now();
  });
  w.spawn("q", [&](Context& c) {
    c.sleep(1500ms);
    c.send(p, Message{.type = "late"});  // arrives at 1.501 s
  });
  // At 1.5x from true 1 s the timeout ends at 1.666... s: the message comes first.
  w.add_fault(
      Fault{.kind = Fault::Kind::clock_drift, .when = Trigger::at_time(1s), .target = p, .ppm = 500'000});
  w.run();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->type, "late");
  EXPECT_EQ(local_got, 1'751'500'000ns);
  EXPECT_EQ(count_of(w, TraceKind::timeout), 0u);
}

RC_GTEST_PROP(ClockProperty, ASleepEndsWhenTheLocalClockAdvancedByItsDuration, ()) {
  // Random drift changes (at random true times) during sleeps of random lengths: every sleep ends at the
  // first true nanosecond at which the local monotonic clock has advanced by its duration (one true
  // nanosecond moves a clock of drift up to +50% by at most 2 ns).
  const auto start_ppm = *rc::gen::inRange<std::int64_t>(-500'000, 500'001);
  const auto changes = *rc::gen::container<std::vector<std::pair<std::int64_t, std::int64_t>>>(rc::gen::pair(
      rc::gen::inRange<std::int64_t>(0, 5'000'000'000), rc::gen::inRange<std::int64_t>(-500'000, 500'001)));
  const auto sleeps = *rc::gen::container<std::vector<std::int64_t>>(rc::gen::oneOf(
      rc::gen::inRange<std::int64_t>(0, 1000), rc::gen::inRange<std::int64_t>(0, 2'000'000'000)));
  World w;
  std::vector<std::pair<Time, Time>> slept;  // (local before, local after) per sleep
  ProcId p = w.spawn("p",
                     [&](Context& c) {
                       for (std::int64_t d : sleeps) {
                         const Time before = c.now();
                         c.sleep(Duration{d});
                         slept.emplace_back(before, c.now());
                       }
                     },
                     {.clock = {.drift_ppm = start_ppm}});
  for (const auto& [at, ppm] : changes)
    w.add_fault(Fault{.kind = Fault::Kind::clock_drift,
                      .when = Trigger::at_time(Time{Duration{at}}),
                      .target = p,
                      .ppm = ppm});
  w.run();
  RC_ASSERT(slept.size() == sleeps.size());
  for (std::size_t i = 0; i < sleeps.size(); ++i) {
    const Duration advanced = slept[i].second - slept[i].first;
    RC_ASSERT(advanced >= Duration{sleeps[i]});
    RC_ASSERT(advanced < Duration{sleeps[i]} + 2ns);
  }
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
