// Pauses: a paused process is not resumed; its timers and messages queue and are seen when it resumes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "locksim/sim/world.hpp"
#include "test_util.hpp"

using namespace locksim;
using locksim::test::count_of;
using locksim::test::events_of;
using locksim::test::index_of;

TEST(Pause, TimerDueDuringAPauseFiresAtResume) {
  World w;
  Time woke{-1};
  ProcId p = w.spawn("p", [&](Context& c) {
    c.sleep(10ms);
    woke = c.now();
  });
  w.schedule(5ms, [&] { w.pause(p, 50ms); });
  EXPECT_EQ(w.run().reason, StopReason::done);
  EXPECT_EQ(woke, 55ms);
  auto pauses = events_of(w, TraceKind::pause, p);
  auto resumes = events_of(w, TraceKind::resume, p);
  ASSERT_EQ(pauses.size(), 1u);
  ASSERT_EQ(resumes.size(), 1u);
  EXPECT_EQ(pauses[0].time, 5ms);
  EXPECT_EQ(resumes[0].time, 55ms);
}

TEST(Pause, TimerDueAfterThePauseIsNotDelayed) {
  World w;
  Time woke{-1};
  ProcId p = w.spawn("p", [&](Context& c) {
    c.sleep(100ms);
    woke = c.now();
  });
  w.schedule(5ms, [&] { w.pause(p, 50ms); });
  w.run();
  EXPECT_EQ(woke, 100ms);
}

TEST(Pause, MessagesToAPausedProcessAreReceivedAfterItInOrder) {
  World w;
  std::vector<std::pair<int, Time>> got;
  ProcId p = w.spawn("p", [&](Context& c) {
    for (int i = 0; i < 3; ++i) {
      auto m = c.receive();
      got.emplace_back(*m->as<int>(), c.now());
    }
  });
  w.spawn("q", [&](Context& c) {
    c.sleep(10ms);
    for (int i = 0; i < 3; ++i) {
      c.send(p, Message::of("n", i));
      c.sleep(1ms);
    }
  });
  w.schedule(5ms, [&] { w.pause(p, 100ms); });
  EXPECT_EQ(w.run().reason, StopReason::done);
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].first, i);
    EXPECT_EQ(got[i].second, 105ms);
  }
  // Delivered into the mailbox while paused (11, 12, 13 ms), received only after the resume.
  auto delivers = events_of(w, TraceKind::deliver, p);
  ASSERT_EQ(delivers.size(), 3u);
  EXPECT_EQ(delivers[0].time, 11ms);
  for (const auto& r : events_of(w, TraceKind::receive, p)) EXPECT_EQ(r.time, 105ms);
}

TEST(Pause, ReceiveTimeoutDuringAPauseIsSeenAtResume) {
  World w;
  Time gave_up{-1};
  ProcId p = w.spawn("p", [&](Context& c) {
    auto m = c.receive(20ms);
    EXPECT_FALSE(m);
    gave_up = c.now();
  });
  w.schedule(5ms, [&] { w.pause(p, 100ms); });
  w.run();
  EXPECT_EQ(gave_up, 105ms);
  auto t = events_of(w, TraceKind::timeout, p);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].time, 105ms);
}

TEST(Pause, PauseTriggeredByANoteTakesEffectBeforeTheNextStatement) {
  World w;
  Time arrived{-1};
  Time after_note{-1};
  ProcId q;
  ProcId p = w.spawn("client", [&](Context& c) {
    c.sleep(1ms);
    c.note("acquired");
    after_note = c.now();
    c.send(q, Message{.type = "write"});
  });
  q = w.spawn("store", [&](Context& c) {
    c.receive();
    arrived = c.now();
  });
  w.add_fault(Fault{
      .kind = Fault::Kind::pause, .when = Trigger::on_note(p, "acquired"), .target = p, .duration = 15s});
  EXPECT_EQ(w.run().reason, StopReason::done);
  EXPECT_EQ(after_note, 15s + 1ms);
  EXPECT_EQ(arrived, 15s + 2ms);  // the send went out only after the pause, then 1 ms network delay
  // Trace order: note, fault, pause, ... resume, send.
  const auto note = index_of(w, TraceKind::note, p, "acquired");
  const auto fault = index_of(w, TraceKind::fault, p, "pause");
  const auto pause = index_of(w, TraceKind::pause, p);
  const auto resume = index_of(w, TraceKind::resume, p);
  const auto send = index_of(w, TraceKind::send, p);
  ASSERT_NE(send, static_cast<std::size_t>(-1));
  EXPECT_LT(note, fault);
  EXPECT_LT(fault, pause);
  EXPECT_LT(pause, resume);
  EXPECT_LT(resume, send);
  EXPECT_EQ(w.trace().events()[send].time, 15s + 1ms);
}

TEST(Pause, NoteTriggerFiresOnTheNthMatchOnlyAndForAnyProcess) {
  World w;
  std::vector<Time> after;
  ProcId p = w.spawn("p", [&](Context& c) {
    for (int i = 0; i < 4; ++i) {
      c.note("tick");
      after.push_back(c.now());
      c.sleep(1ms);
    }
  });
  // Any process (invalid proc) logging "tick" for the 3rd time pauses p for 1 s.
  w.add_fault(Fault{
      .kind = Fault::Kind::pause, .when = Trigger::on_note({}, "tick", 3), .target = p, .duration = 1s});
  w.run();
  EXPECT_EQ(after, (std::vector<Time>{0ms, 1ms, 1s + 2ms, 1s + 3ms}));
  EXPECT_EQ(count_of(w, TraceKind::pause), 1u);
}

TEST(Pause, DelayedNoteTriggerLetsTheProcessRunOnUntilTheDelay) {
  World w;
  Time sent{-1};
  Time woke{-1};
  ProcId q = w.spawn("q", [&](Context& c) {
    c.receive();
    sent = c.now() - 1ms;
  });
  ProcId p = w.spawn("p", [&](Context& c) {
    c.note("go");
    c.send(q, Message{.type = "m"});  // not paused yet
    c.sleep(10ms);                    // the pause at 5 ms holds this sleep until 5 ms + 1 s
    woke = c.now();
  });
  w.add_fault(Fault{
      .kind = Fault::Kind::pause, .when = Trigger::on_note(p, "go", 1, 5ms), .target = p, .duration = 1s});
  w.run();
  EXPECT_EQ(sent, 0ms);
  EXPECT_EQ(woke, 1s + 5ms);
}

TEST(Pause, PauseBeforeStartDelaysTheFirstStep) {
  World w;
  Time started{-1};
  ProcId p = w.spawn("p", [&](Context& c) { started = c.now(); });
  w.pause(p, 30ms);
  EXPECT_TRUE(w.paused(p));
  EXPECT_EQ(w.run().reason, StopReason::done);
  EXPECT_EQ(started, 30ms);
  EXPECT_FALSE(w.paused(p));
}

TEST(Pause, ExplicitResumeEndsThePauseEarlyAndTheOldTimerIsIgnored) {
  World w;
  std::vector<Time> ticks;
  ProcId p = w.spawn("p", [&](Context& c) {
    for (int i = 0; i < 4; ++i) {
      c.sleep(10ms);
      ticks.push_back(c.now());
    }
  });
  w.schedule(15ms, [&] { w.pause(p, 100ms); });
  w.schedule(40ms, [&] { w.resume(p); });
  w.run();
  EXPECT_EQ(ticks, (std::vector<Time>{10ms, 40ms, 50ms, 60ms}));
  EXPECT_EQ(count_of(w, TraceKind::resume, p), 1u);  // the stale 115 ms resume does nothing
}

TEST(Pause, OverlappingPausesEndWhenTheLongerEnds) {
  // A second, shorter pause inside a long one must not cut the long one short.
  World w;
  Time woke{-1};
  ProcId p = w.spawn("p", [&](Context& c) {
    c.sleep(1ms);
    woke = c.now();
  });
  w.pause(p, 10s);
  w.schedule(2s, [&] { w.pause(p, 1s); });
  w.run();
  EXPECT_EQ(woke, 10s + 1ms);
  // And a second pause that reaches further extends the first.
  World w2;
  Time woke2{-1};
  ProcId p2 = w2.spawn("p", [&](Context& c) { woke2 = c.now(); });
  w2.pause(p2, 1s);
  w2.schedule(500ms, [&] { w2.pause(p2, 2s); });
  w2.run();
  EXPECT_EQ(woke2, 2s + 500ms);
}

TEST(Pause, PausedProcessDoesNotFsyncPeriodically) {
  World w;
  ProcId p = w.spawn("p",
                     [&](Context& c) {
                       c.storage().put("k", "v");
                       c.sleep(10s);
                     },
                     {.fsync = FsyncPolicy::periodic, .fsync_period = 1s});
  w.schedule(500ms, [&] { w.pause(p, 2s); });
  w.run_until(2s);
  EXPECT_TRUE(w.storage(p).has_unsynced());  // the 1 s and 2 s fsyncs fell in the pause
  w.run_until(3s + 1ms);
  EXPECT_FALSE(w.storage(p).has_unsynced());
}
