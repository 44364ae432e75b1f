// Faults that fire more than once (Fault::repeat) and faults whose targets a callback computes at each firing
// (Fault::targets_at_fire).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "locksim/sim/world.hpp"
#include "test_util.hpp"

using namespace locksim;
using locksim::test::events_of;

namespace {

/// A process that sleeps in 1 ms steps until `end`: a fault always has something to hit.
ProcId sleeper(World& w, const std::string& name, Time end = 60s) {
  return w.spawn(name, [end](Context& c) {
    while (c.now() < end) c.sleep(1ms);
  });
}

std::vector<Time> fault_times(const World& w, ProcId p = {}) {
  std::vector<Time> out;
  for (const auto& e : events_of(w, TraceKind::fault, p)) out.push_back(e.time);
  return out;
}

Fault pause_of(ProcId p, Time at, Duration d) {
  return Fault{.kind = Fault::Kind::pause, .when = Trigger::at_time(at), .target = p, .duration = d};
}

}  // namespace

TEST(FaultRepeat, FiresEveryPeriodTheGivenNumberOfTimes) {
  World w;
  ProcId p = sleeper(w, "p", 30s);
  Fault f = pause_of(p, 5s, 1s);
  f.repeat = {.every = 5s, .times = 3};
  w.add_fault(f);
  w.run();
  EXPECT_EQ(fault_times(w, p), (std::vector<Time>{5s, 10s, 15s}));
  EXPECT_EQ(events_of(w, TraceKind::pause, p).size(), 3u);
  EXPECT_EQ(events_of(w, TraceKind::resume, p).size(), 3u);
}

TEST(FaultRepeat, UntilEndsTheRepetition) {
  World w;
  ProcId p = sleeper(w, "p", 30s);
  Fault f = pause_of(p, 1s, 100ms);
  f.repeat = {.every = 1s, .until = 3500ms};
  w.add_fault(f);
  w.run();
  EXPECT_EQ(fault_times(w, p), (std::vector<Time>{1s, 2s, 3s}));
}

TEST(FaultRepeat, UntilAndTimesTheFirstToEndWins) {
  World w;
  ProcId p = sleeper(w, "p", 30s);
  Fault f = pause_of(p, 0s, 10ms);
  f.repeat = {.every = 1s, .times = 2, .until = 10s};
  w.add_fault(f);
  w.run();
  EXPECT_EQ(fault_times(w, p), (std::vector<Time>{0s, 1s}));
}

TEST(FaultRepeat, JitterDelaysEachFiringWithinItsBoundAndKeepsTheNominalTimes) {
  World w(WorldOptions{.seed = 7});
  ProcId p = sleeper(w, "p", 60s);
  Fault f = pause_of(p, 5s, 100ms);
  f.repeat = {.every = 5s, .times = 10, .jitter = 1s};
  w.add_fault(f);
  w.run();
  const auto ts = fault_times(w, p);
  ASSERT_EQ(ts.size(), 10u);
  std::size_t late = 0;
  for (std::size_t k = 0; k < ts.size(); ++k) {
    const Time nominal = 5s + 5s * static_cast<std::int64_t>(k);
    EXPECT_GE(ts[k], nominal);
    EXPECT_LE(ts[k], nominal + 1s);
    late += ts[k] > nominal;
  }
  EXPECT_GE(late, 8u);  // ten uniform draws in [0, 1 s]: nearly all of them above 0
}

TEST(FaultRepeat, JitterIsSeededAndDrawsFromItsOwnStream) {
  auto run = [](std::uint64_t seed, bool jitter) {
    World w(WorldOptions{.seed = seed});
    std::vector<std::uint64_t> draws;
    ProcId p = w.spawn("p", [&](Context& c) {
      for (int i = 0; i < 20; ++i) {
        draws.push_back(c.rng().next());
        c.sleep(1s);
      }
    });
    Fault f = pause_of(p, 1s, 10ms);
    f.repeat = {.every = 2s, .times = 5, .jitter = jitter ? 500ms : 0ns};
    w.add_fault(f);
    w.run();
    return std::make_pair(fault_times(w, p), draws);
  };
  const auto a = run(3, true), b = run(3, true), c = run(4, true), none = run(3, false);
  EXPECT_EQ(a.first, b.first);       // same seed: same firings
  EXPECT_NE(a.first, c.first);       // another seed: other jitters
  EXPECT_EQ(a.second, none.second);  // the process's own stream does not see the jitter draws
}

TEST(FaultRepeat, TriggeredFirstFiringThenEveryPeriod) {
  World w;
  ProcId p = w.spawn("p", [](Context& c) {
    c.sleep(2s);
    c.note("go");
    while (c.now() < 20s) c.sleep(1ms);
  });
  Fault f{
      .kind = Fault::Kind::pause, .when = Trigger::on_note(p, "go", 1, 500ms), .target = p, .duration = 10ms};
  f.repeat = {.every = 3s, .times = 3};
  w.add_fault(f);
  w.run();
  EXPECT_EQ(fault_times(w, p), (std::vector<Time>{2500ms, 5500ms, 8500ms}));
}

TEST(FaultRepeat, EachFiringKeepsItsOwnDuration) {
  World w;
  ProcId p = sleeper(w, "p", 30s);
  Fault f = pause_of(p, 1s, 2s);
  f.repeat = {.every = 5s, .times = 2};
  w.add_fault(f);
  w.run();
  const auto resumes = events_of(w, TraceKind::resume, p);
  ASSERT_EQ(resumes.size(), 2u);
  EXPECT_EQ(resumes[0].time, 3s);
  EXPECT_EQ(resumes[1].time, 8s);
}

TEST(FaultRepeat, UnboundedOrTooManyFiringsAreRefused) {
  World w;
  ProcId p = sleeper(w, "p", 1s);
  Fault f = pause_of(p, 0s, 1ns);
  f.repeat = {.every = 1ns, .until = Time{std::chrono::hours(24 * 365)}};
  try {
    w.add_fault(f);
    FAIL() << "a fault every 1 ns for a year was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("10000"), std::string::npos) << e.what();
  }
  f.repeat = {.every = 1s};
  EXPECT_THROW(w.add_fault(f), std::invalid_argument);  // no end at all
  f.repeat = {.every = 1ms, .times = Repeat::kMaxFirings + 1};
  EXPECT_THROW(w.add_fault(f), std::invalid_argument);
  f.repeat = {.every = 1ms, .times = Repeat::kMaxFirings};
  EXPECT_NO_THROW(w.add_fault(f));
  f.repeat = {.every = -1s, .times = 2};
  EXPECT_THROW(w.add_fault(f), std::invalid_argument);
}

TEST(FaultRepeat, AFaultWithoutRepetitionFiresOnce) {
  World w;
  ProcId p = sleeper(w, "p", 10s);
  Fault f = pause_of(p, 1s, 10ms);
  f.repeat = {.every = 0ns, .times = 5};  // times applies to a repetition only
  w.add_fault(f);
  w.run();
  EXPECT_EQ(fault_times(w, p), (std::vector<Time>{1s}));
}

TEST(FaultTargets, TheCallbackChoosesTheTargetAtEachFiring) {
  World w;
  std::vector<ProcId> ps = {sleeper(w, "a", 20s), sleeper(w, "b", 20s), sleeper(w, "c", 20s)};
  std::vector<Time> called;
  Fault f = pause_of({}, 1s, 100ms);
  f.repeat = {.every = 1s, .times = 4};
  f.targets_at_fire = [&](Fault& g, Rng&) {
    called.push_back(w.now());
    g.target = ps[(called.size() - 1) % ps.size()];
    return Resolution{true, "role=next"};
  };
  w.add_fault(f);
  w.run();
  EXPECT_EQ(called, (std::vector<Time>{1s, 2s, 3s, 4s}));  // at the firing, not when the plan was made
  const auto faults = events_of(w, TraceKind::fault);
  ASSERT_EQ(faults.size(), 4u);
  for (std::size_t k = 0; k < faults.size(); ++k) {
    EXPECT_EQ(faults[k].proc, ps[k % 3]);
    EXPECT_EQ(faults[k].detail, "duration=0.1s role=next");
  }
  EXPECT_EQ(events_of(w, TraceKind::pause, ps[0]).size(), 2u);
}

TEST(FaultTargets, AFiringWithNobodyToHitIsSkippedAndTraced) {
  World w;
  ProcId p = sleeper(w, "p", 5s);
  Fault f = pause_of({}, 1s, 100ms);
  f.repeat = {.every = 1s, .times = 3};
  int k = 0;
  f.targets_at_fire = [&](Fault& g, Rng&) {
    if (++k == 2) return Resolution{false, "nobody leads"};
    g.target = p;
    return Resolution{true, {}};
  };
  w.add_fault(f);
  w.run();
  const auto faults = events_of(w, TraceKind::fault);
  ASSERT_EQ(faults.size(), 3u);
  EXPECT_FALSE(faults[1].proc.valid());
  EXPECT_EQ(faults[1].detail, "skipped: nobody leads");
  EXPECT_EQ(events_of(w, TraceKind::pause, p).size(), 2u);
}

TEST(FaultTargets, ACallbackThatNamesNoProcessSkipsTheFiring) {
  World w;
  ProcId p = sleeper(w, "p", 5s);
  Fault f = pause_of({}, 1s, 100ms);
  f.targets_at_fire = [](Fault&, Rng&) { return Resolution{true, "role=x"}; };
  w.add_fault(f);
  EXPECT_NO_THROW(w.run());
  const auto faults = events_of(w, TraceKind::fault);
  ASSERT_EQ(faults.size(), 1u);
  EXPECT_EQ(faults[0].detail, "skipped: role=x: no process to hit");
  EXPECT_TRUE(events_of(w, TraceKind::pause, p).empty());
}

TEST(FaultTargets, MoreTargetsAreEachHitWithTheirOwnRecord) {
  World w;
  ProcId a = sleeper(w, "a", 5s), b = sleeper(w, "b", 5s);
  Fault f = pause_of(a, 1s, 100ms);
  f.more_targets = {b};
  w.add_fault(f);
  w.run();
  EXPECT_EQ(fault_times(w, a), (std::vector<Time>{1s}));
  EXPECT_EQ(fault_times(w, b), (std::vector<Time>{1s}));
  EXPECT_EQ(events_of(w, TraceKind::pause, a).size(), 1u);
  EXPECT_EQ(events_of(w, TraceKind::pause, b).size(), 1u);
}

TEST(FaultTargets, ACallbackPauseOfTheTriggeringProcessActsBeforeItsNextStatement) {
  World w;
  Time after_note{-1};
  ProcId p = w.spawn("p", [&](Context& c) {
    c.sleep(1s);
    c.note("acquired");
    after_note = c.now();
  });
  Fault f{.kind = Fault::Kind::pause, .when = Trigger::on_note({}, "acquired"), .duration = 2s};
  f.targets_at_fire = [&](Fault& g, Rng&) {
    g.target = p;
    return Resolution{true, "holder=p"};
  };
  w.add_fault(f);
  w.run();
  EXPECT_EQ(after_note, 3s);  // paused right at the note, as a fixed target would be
}

TEST(FaultTargets, PicksComeFromTheFaultsOwnStream) {
  auto run = [](bool with_fault) {
    World w(WorldOptions{.seed = 11});
    std::vector<std::uint64_t> draws;
    ProcId p = w.spawn("p", [&](Context& c) {
      for (int i = 0; i < 10; ++i) {
        draws.push_back(c.rng().next());
        c.sleep(1s);
      }
    });
    std::vector<std::uint64_t> picks;
    if (with_fault) {
      Fault f = pause_of({}, 1s, 10ms);
      f.repeat = {.every = 1s, .times = 5};
      f.targets_at_fire = [&, p](Fault& g, Rng& rng) {
        picks.push_back(rng.next());
        g.target = p;
        return Resolution{};
      };
      w.add_fault(f);
    }
    w.run();
    return std::make_pair(draws, picks);
  };
  const auto with = run(true), again = run(true), without = run(false);
  EXPECT_EQ(with.first, without.first);  // the process's stream is untouched
  EXPECT_EQ(with.second, again.second);  // the picks are seeded
  ASSERT_EQ(with.second.size(), 5u);
  EXPECT_NE(with.second[0], with.second[1]);  // one stream, advancing
}
