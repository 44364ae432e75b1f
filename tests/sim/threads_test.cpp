// Threads of a process: fibers that share the process's fate as OS threads do (pause, crash, restart,
// clock, links, triggers), each with its own mailbox and trace name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "locksim/sim/world.hpp"
#include "test_util.hpp"

using namespace locksim;
using locksim::test::count_of;
using locksim::test::events_of;

namespace {

/// A server answering every message with "pong" at once.
ProcId spawn_echo(World& w, const std::string& name = "echo") {
  ProcessOptions o;
  o.daemon = true;
  return w.spawn(
      name,
      [](Context& c) {
        for (;;) {
          auto m = c.receive();
          c.reply(*m, Message::of("pong", 0));
        }
      },
      o);
}

/// Times (true time) at which a fiber woke from sleeps of `period`, `n` of them.
struct Ticks {
  std::vector<Time> at;
};

Body ticker(World& w, Ticks& t, Duration period, int n) {
  return [&w, &t, period, n](Context& c) {
    for (int i = 0; i < n; ++i) {
      c.sleep(period);
      t.at.push_back(w.now());
    }
  };
}

}  // namespace

TEST(Threads, ThreadHasItsOwnNameAndIdAndSharesTheProcess) {
  World w;
  ProcId thread{}, seen_process{}, main_process{};
  std::string thread_name;
  ProcId main = w.spawn("client1", [&](Context& c) {
    main_process = c.process();
    thread = c.spawn_thread("renew", [&](Context& t) {
      thread_name = t.name();
      seen_process = t.process();
    });
    c.sleep(10ms);
  });
  EXPECT_EQ(w.run().reason, StopReason::done);
  ASSERT_TRUE(thread.valid());
  EXPECT_NE(thread, main);
  EXPECT_EQ(thread_name, "client1/renew");
  EXPECT_EQ(w.name(thread), "client1/renew");
  EXPECT_EQ(w.find("client1/renew"), thread);
  EXPECT_EQ(seen_process, main);
  EXPECT_EQ(main_process, main);
  EXPECT_EQ(w.process_of(thread), main);
  EXPECT_EQ(w.process_of(main), main);
  EXPECT_EQ(w.threads_of(main), std::vector<ProcId>{thread});
  EXPECT_EQ(count_of(w, TraceKind::start, thread), 1u);
}

TEST(Threads, ThreadsMessagesAreItsOwnAndNamedInTheTrace) {
  World w;
  ProcId echo = spawn_echo(w);
  ProcId thread{};
  bool main_saw_pong = false, thread_got_pong = false;
  ProcId main = w.spawn("client1", [&](Context& c) {
    thread = c.spawn_thread("renew", [&](Context& t) {
      auto r = t.call(echo, Message::of("ping", 1), 1s);
      thread_got_pong = r.has_value();
    });
    // The thread's reply goes to the thread's mailbox, never to this one.
    main_saw_pong = c.receive(100ms).has_value();
  });
  w.run();
  EXPECT_TRUE(thread_got_pong);
  EXPECT_FALSE(main_saw_pong);
  auto sends = events_of(w, TraceKind::send, thread);
  ASSERT_EQ(sends.size(), 1u);
  EXPECT_EQ(sends[0].label, "ping");
  EXPECT_EQ(count_of(w, TraceKind::send, main), 0u);
  EXPECT_EQ(count_of(w, TraceKind::receive, thread), 1u);
}

TEST(Threads, PauseOfTheProcessStopsEveryThread) {
  World w;
  Ticks main_ticks, thread_ticks;
  ProcId thread{};
  ProcId main = w.spawn("client1", [&](Context& c) {
    thread = c.spawn_thread("renew", ticker(w, thread_ticks, 10ms, 3));
    ticker(w, main_ticks, 10ms, 3)(c);
    c.sleep(1ms);  // returning ends the threads: let the thread's last tick come first
  });
  // Both sleep 10 ms at a time from 0: the pause from 15 ms to 115 ms holds both their wakes until 115 ms.
  w.schedule(15ms, [&] { w.pause(main, 100ms); });
  EXPECT_EQ(w.run().reason, StopReason::done);
  const std::vector<Time> expected = {10ms, 115ms, 125ms};
  EXPECT_EQ(main_ticks.at, expected);
  EXPECT_EQ(thread_ticks.at, expected);
  // Each fiber's lane shows the pause.
  EXPECT_EQ(count_of(w, TraceKind::pause, main), 1u);
  EXPECT_EQ(count_of(w, TraceKind::pause, thread), 1u);
  EXPECT_EQ(count_of(w, TraceKind::resume, thread), 1u);
}

TEST(Threads, PauseNamingTheThreadStopsTheWholeProcess) {
  World w;
  Ticks main_ticks;
  ProcId thread{};
  w.spawn("client1", [&](Context& c) {
    thread = c.spawn_thread("renew", [](Context& t) { t.sleep(1s); });
    ticker(w, main_ticks, 10ms, 2)(c);
  });
  w.schedule(15ms, [&] { w.pause(thread, 100ms); });
  w.run();
  EXPECT_EQ(main_ticks.at, (std::vector<Time>{10ms, 115ms}));
}

TEST(Threads, PauseTriggeredByAThreadsNoteStopsItBeforeItsNextStatement) {
  World w;
  Ticks main_ticks;
  Time thread_after{-1};
  ProcId main = w.spawn("client1", [&](Context& c) {
    c.spawn_thread("renew", [&](Context& t) {
      t.sleep(5ms);
      t.note("renewing");
      thread_after = w.now();
    });
    ticker(w, main_ticks, 10ms, 2)(c);
  });
  Fault f;
  f.kind = Fault::Kind::pause;
  f.target = main;  // the trigger names the process; the thread's note is the process's
  f.duration = 50ms;
  f.when = Trigger::on_note(main, "renewing");
  w.add_fault(f);
  w.run();
  EXPECT_EQ(thread_after, 55ms);
  EXPECT_EQ(main_ticks.at, (std::vector<Time>{55ms, 65ms}));
}

TEST(Threads, CrashKillsEveryThreadAndRestartRunsOnlyTheMainBody) {
  World w;
  int main_runs = 0, thread_runs = 0, thread_finished = 0;
  ProcId thread{};
  ProcId main = w.spawn("client1", [&](Context& c) {
    ++main_runs;
    if (c.incarnation() == 0) {
      thread = c.spawn_thread("renew", [&](Context& t) {
        ++thread_runs;
        t.sleep(1s);
        ++thread_finished;
      });
    }
    c.sleep(200ms);
  });
  Fault crash;
  crash.kind = Fault::Kind::crash;
  crash.target = main;
  crash.duration = 50ms;  // restart after 50 ms
  crash.when = Trigger::at_time(100ms);
  w.add_fault(crash);
  EXPECT_EQ(w.run().reason, StopReason::done);
  EXPECT_EQ(main_runs, 2);
  EXPECT_EQ(thread_runs, 1);
  EXPECT_EQ(thread_finished, 0);
  EXPECT_EQ(w.state(thread), ProcState::crashed);
  EXPECT_EQ(count_of(w, TraceKind::crash, main), 1u);
  EXPECT_EQ(count_of(w, TraceKind::crash, thread), 1u);
  EXPECT_EQ(count_of(w, TraceKind::start, thread), 1u);  // the restart started the main body only
  EXPECT_EQ(count_of(w, TraceKind::start, main), 2u);
}

TEST(Threads, AThreadStartedAgainAfterARestartKeepsItsNameAndDropsOldReplies) {
  World w;
  ProcId echo = spawn_echo(w);
  w.network().options().defaults.delay = DelayDist::constant_of(30ms);
  std::vector<ProcId> ids;
  std::vector<bool> got;
  ProcId main = w.spawn("client1", [&](Context& c) {
    ids.push_back(c.spawn_thread("renew", [&](Context& t) {
      got.push_back(t.call(echo, Message::of("ping", 0), 200ms).has_value());
    }));
    c.sleep(1s);
  });
  Fault crash;
  crash.kind = Fault::Kind::crash;
  crash.target = main;
  crash.duration = 10ms;
  crash.when = Trigger::at_time(40ms);  // the first ping's reply is in flight (sent 0, answered 30, lands 60)
  w.add_fault(crash);
  w.run();
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], ids[1]);
  EXPECT_EQ(w.name(ids[1]), "client1/renew");
  EXPECT_EQ(got, std::vector<bool>{true});  // only the second run finished its call
  // The reply to the first run reached a crashed thread and was dropped.
  auto drops = events_of(w, TraceKind::drop, ids[0]);
  ASSERT_FALSE(drops.empty());
  EXPECT_EQ(drops[0].detail, "receiver crashed");
}

TEST(Threads, ThreadsEndWhenTheMainBodyReturns) {
  World w;
  bool thread_finished = false;
  ProcId thread{};
  w.spawn("client1", [&](Context& c) {
    thread = c.spawn_thread("renew", [&](Context& t) {
      t.sleep(1s);
      thread_finished = true;
    });
    c.sleep(10ms);
  });
  // Another live process keeps the world running past the main body's end.
  w.spawn("other", [](Context& c) { c.sleep(2s); });
  EXPECT_EQ(w.run().reason, StopReason::done);
  EXPECT_FALSE(thread_finished);
  EXPECT_EQ(w.state(thread), ProcState::exited);
  auto exits = events_of(w, TraceKind::exit, thread);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].time, 10ms);
}

TEST(Threads, AThreadDoesNotKeepTheWorldRunning) {
  World w;
  w.spawn("client1", [&](Context& c) {
    c.spawn_thread("renew", [](Context& t) { t.wait_notified(kForever); });
    c.sleep(10ms);
  });
  const RunResult r = w.run();
  EXPECT_EQ(r.reason, StopReason::done);
  EXPECT_EQ(r.end, 10ms);
}

TEST(Threads, PartitionNamingTheProcessCutsItsThreadsMessages) {
  World w;
  ProcId echo = spawn_echo(w);
  bool before = false, during = true, main_during = true;
  ProcId main = w.spawn("client1", [&](Context& c) {
    c.spawn_thread("renew", [&](Context& t) {
      before = t.call(echo, Message::of("ping", 0), 50ms).has_value();
      t.sleep(100ms);  // now at about 102 ms: the partition is in force
      during = t.call(echo, Message::of("ping", 1), 50ms).has_value();
    });
    c.sleep(110ms);
    main_during = c.call(echo, Message::of("ping", 2), 50ms).has_value();
  });
  Fault p;
  p.kind = Fault::Kind::partition;
  p.side_a = {main};
  p.side_b = {echo};
  p.when = Trigger::at_time(50ms);
  w.add_fault(p);
  w.run();
  EXPECT_TRUE(before);
  EXPECT_FALSE(during);
  EXPECT_FALSE(main_during);
  auto drops = events_of(w, TraceKind::drop, echo);
  ASSERT_FALSE(drops.empty());
  EXPECT_EQ(w.name(drops[0].peer), "client1/renew");
  EXPECT_EQ(drops[0].detail, "partition");
}

TEST(Threads, LinkSettingNamingTheProcessAppliesToItsThreads) {
  World w;
  ProcId echo = spawn_echo(w);
  ProcId main = w.spawn("client1", [&](Context& c) {
    c.spawn_thread("renew", [&](Context& t) { t.call(echo, Message::of("ping", 0), 1s); });
    c.sleep(1s);
  });
  w.network().link(main, echo).delay = DelayDist::constant_of(40ms);
  w.run();
  auto delivers = events_of(w, TraceKind::deliver, echo);
  ASSERT_EQ(delivers.size(), 1u);
  EXPECT_EQ(delivers[0].time, 40ms);
}

TEST(Threads, ClockFaultsAndDriftApplyToEveryThread) {
  World w;
  Time thread_wall{-1}, main_wall{-1}, thread_mono{-1}, main_mono{-1};
  Time thread_woke{-1}, main_woke{-1};
  ProcId main = w.spawn("client1", [&](Context& c) {
    c.spawn_thread("renew", [&](Context& t) {
      t.sleep(100ms);  // on the process's clock, which runs at half speed from 10 ms on
      thread_woke = w.now();
      thread_wall = t.wall();
      thread_mono = t.now();
    });
    c.sleep(100ms);
    main_woke = w.now();
    main_wall = c.wall();
    main_mono = c.now();
    c.sleep(1ms);  // returning ends the threads: let the thread read its clock first
  });
  w.schedule(10ms, [&] {
    w.clock_jump(main, 5s);
    w.clock_drift(main, -500'000);
  });
  w.run();
  // 10 ms, then 90 ms of local time at half speed (the clock rounds to the nanosecond)
  EXPECT_NEAR(static_cast<double>(thread_woke.count()), 190e6, 1.0);
  EXPECT_EQ(thread_woke, main_woke);
  EXPECT_EQ(thread_mono, main_mono);
  EXPECT_EQ(thread_wall, main_wall);
  EXPECT_EQ(thread_wall, thread_mono + 5s);
}

TEST(Threads, NotifyEndsAWaitEarlyAndOnlyAWaitNotified) {
  World w;
  std::vector<std::pair<bool, Time>> waits;
  Time slept_until{-1};
  ProcId thread{};
  w.spawn("client1", [&](Context& c) {
    thread = c.spawn_thread("renew", [&](Context& t) {
      const bool first = t.wait_notified(kForever);
      waits.emplace_back(first, w.now());
      const bool second = t.wait_notified(30ms);
      waits.emplace_back(second, w.now());
      t.sleep(50ms);  // a plain sleep: a notify does not cut it short
      slept_until = w.now();
    });
    c.sleep(20ms);
    c.notify(thread);  // ends the forever wait at 20 ms; the 30 ms wait then times out at 50 ms
    c.sleep(50ms);
    c.notify(thread);  // at 70 ms, inside the thread's plain sleep (50..100 ms): no effect
    c.sleep(100ms);
  });
  w.run();
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_EQ(waits[0], std::make_pair(true, Time{20ms}));
  EXPECT_EQ(waits[1], std::make_pair(false, Time{50ms}));
  EXPECT_EQ(slept_until, 100ms);
}

TEST(Threads, NotifyWhilePausedWakesAtTheResume) {
  World w;
  Time woke{-1};
  ProcId main{}, thread{};
  main = w.spawn("client1", [&](Context& c) {
    thread = c.spawn_thread("renew", [&](Context& t) {
      t.wait_notified(kForever);
      woke = w.now();
    });
    c.sleep(10ms);
    c.note("notify");
    c.notify(thread);  // the note paused the process: this runs at 60 ms, the wake after it
    c.sleep(1ms);
  });
  Fault f;
  f.kind = Fault::Kind::pause;
  f.target = main;
  f.duration = 50ms;
  f.when = Trigger::on_note(main, "notify");
  w.add_fault(f);
  w.run();
  EXPECT_EQ(woke, 60ms);
}

TEST(Threads, NotifyOfAnotherProcessIsRefused) {
  World w;
  ProcId other = w.spawn("other", [](Context& c) { c.wait_notified(50ms); });
  bool refused = false;
  w.spawn("client1", [&](Context& c) {
    try {
      c.notify(other);
    } catch (const std::logic_error&) {
      refused = true;
    }
  });
  w.run();
  EXPECT_TRUE(refused);
}

TEST(Threads, StartingARunningThreadAgainIsRefused) {
  World w;
  bool refused = false;
  w.spawn("client1", [&](Context& c) {
    c.spawn_thread("renew", [](Context& t) { t.sleep(1s); });
    try {
      c.spawn_thread("renew", [](Context&) {});
    } catch (const std::logic_error&) {
      refused = true;
    }
  });
  w.run();
  EXPECT_TRUE(refused);
}

TEST(Threads, SameSeedSameTraceWithThreads) {
  auto run = [] {
    World w(WorldOptions{.seed = 7});
    w.network().options().defaults.delay = DelayDist::uniform_of(1ms, 9ms);
    ProcId echo = spawn_echo(w);
    ProcId main = w.spawn("client1", [&](Context& c) {
      c.spawn_thread("renew", [&](Context& t) {
        for (int i = 0; i < 20; ++i) t.call(echo, Message::of("ping", i), 50ms);
      });
      for (int i = 0; i < 20; ++i) c.call(echo, Message::of("write", i), 50ms);
    });
    w.schedule(30ms, [&] { w.pause(main, 20ms); });
    w.run();
    return w.trace().hash();
  };
  EXPECT_EQ(run(), run());
}

TEST(Threads, AfterAPauseWhatCameDueFirstRunsFirst) {
  World w;
  std::vector<std::string> order;
  w.spawn("client1", [&](Context& c) {
    c.spawn_thread("renew", [&](Context& t) {
      t.sleep(20ms);  // due at 20 ms, during the pause
      order.push_back("thread");
    });
    c.sleep(50ms);  // due at 50 ms, during the pause too
    order.push_back("main");
    c.sleep(1ms);
  });
  w.schedule(10ms, [&] { w.pause(ProcId{0}, 90ms); });
  w.run();
  EXPECT_EQ(order, (std::vector<std::string>{"thread", "main"}));
}
