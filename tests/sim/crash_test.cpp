// Crash and restart: volatile state is lost, storage survives according to the crash kind and fsync policy,
// messages to a dead incarnation are dropped; ending a fiber unwinds its stack.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "locksim/sim/world.hpp"
#include "test_util.hpp"

using namespace locksim;
using locksim::test::count_of;
using locksim::test::events_of;

TEST(Crash, VolatileStateIsLostAndTheBodyStartsAgain) {
  World w;
  std::vector<std::pair<std::uint32_t, int>> seen;  // (incarnation, counter)
  ProcId p = w.spawn("p", [&](Context& c) {
    int counter = 0;
    for (int i = 0; i < 3; ++i) {
      ++counter;
      seen.emplace_back(c.incarnation(), counter);
      c.sleep(10ms);
    }
  });
  w.add_fault(
      Fault{.kind = Fault::Kind::crash, .when = Trigger::at_time(15ms), .target = p, .duration = 5ms});
  EXPECT_EQ(w.run().reason, StopReason::done);
  EXPECT_EQ(seen, (std::vector<std::pair<std::uint32_t, int>>{{0, 1}, {0, 2}, {1, 1}, {1, 2}, {1, 3}}));
  EXPECT_EQ(w.state(p), ProcState::exited);
  auto starts = events_of(w, TraceKind::start, p);
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[1].time, 20ms);
  EXPECT_EQ(starts[1].detail, "incarnation=1");
  EXPECT_EQ(count_of(w, TraceKind::crash, p), 1u);
  EXPECT_EQ(count_of(w, TraceKind::restart, p), 1u);
}

TEST(Crash, CrashWithoutRestartLeavesTheProcessDown) {
  World w;
  int steps = 0;
  ProcId p = w.spawn("p", [&](Context& c) {
    for (;;) {
      ++steps;
      c.sleep(10ms);
    }
  });
  w.spawn("other", [](Context& c) { c.sleep(1s); });
  w.add_fault(Fault{.kind = Fault::Kind::crash, .when = Trigger::at_time(25ms), .target = p});
  EXPECT_EQ(w.run().reason, StopReason::done);
  EXPECT_EQ(steps, 3);
  EXPECT_EQ(w.state(p), ProcState::crashed);
  // A later explicit restart brings it back.
  w.schedule(w.now() + 1ms, [&] { w.restart(p); });
  w.run_until(w.now() + 25ms);
  EXPECT_EQ(steps, 6);
}

namespace {

/// One process writes keys over time; a crash (process or power loss) hits it at `crash_at`, it restarts 1 ms
/// later and reports which keys it sees.
std::map<std::string, std::string> survivors(FsyncPolicy policy, bool power_loss, Time crash_at,
                                             bool explicit_fsync = false) {
  World w;
  std::map<std::string, std::string> seen;
  ProcId p = w.spawn("db",
                     [&](Context& c) {
                       if (c.incarnation() > 0) {
                         seen = c.storage().snapshot();
                         return;
                       }
                       c.storage().put("a", "1");
                       if (explicit_fsync) c.storage().fsync();
                       c.sleep(150ms);
                       c.storage().put("b", "2");
                       c.sleep(150ms);
                       c.storage().put("c", "3");
                       c.sleep(1s);
                     },
                     {.fsync = policy, .fsync_period = 200ms});
  w.add_fault(Fault{.kind = Fault::Kind::crash,
                    .when = Trigger::at_time(crash_at),
                    .target = p,
                    .duration = 1ms,
                    .power_loss = power_loss});
  EXPECT_EQ(w.run().reason, StopReason::done);
  EXPECT_EQ(w.state(p), ProcState::exited);
  return seen;
}

using KV = std::map<std::string, std::string>;

}  // namespace

TEST(Crash, ProcessCrashKeepsUnsyncedWrites) {
  for (auto policy : {FsyncPolicy::never, FsyncPolicy::periodic, FsyncPolicy::always})
    EXPECT_EQ(survivors(policy, false, 320ms), (KV{{"a", "1"}, {"b", "2"}, {"c", "3"}}))
        << static_cast<int>(policy);
}

TEST(Crash, PowerLossKeepsOnlyWhatWasFsynced) {
  EXPECT_EQ(survivors(FsyncPolicy::always, true, 320ms), (KV{{"a", "1"}, {"b", "2"}, {"c", "3"}}));
  // periodic every 200 ms: the 200 ms fsync saved a and b; c (300 ms) was not synced yet at 320 ms.
  EXPECT_EQ(survivors(FsyncPolicy::periodic, true, 320ms), (KV{{"a", "1"}, {"b", "2"}}));
  // ...and before the first period nothing was synced.
  EXPECT_EQ(survivors(FsyncPolicy::periodic, true, 180ms), KV{});
  // ...and after the 400 ms fsync everything is.
  EXPECT_EQ(survivors(FsyncPolicy::periodic, true, 420ms), (KV{{"a", "1"}, {"b", "2"}, {"c", "3"}}));
  EXPECT_EQ(survivors(FsyncPolicy::never, true, 320ms), KV{});
  EXPECT_EQ(survivors(FsyncPolicy::never, true, 320ms, /*explicit_fsync=*/true), (KV{{"a", "1"}}));
}

TEST(Crash, PowerLossBringsBackAnUnsyncedErase) {
  Storage s;
  s.put("k", "old");
  s.fsync();
  s.erase("k");
  EXPECT_FALSE(s.get("k"));
  EXPECT_TRUE(s.has_unsynced());
  s.lose_unsynced();
  EXPECT_EQ(s.get("k"), "old");
  s.put("k", "new");
  s.put("j", "x");
  EXPECT_EQ(s.snapshot(), (KV{{"j", "x"}, {"k", "new"}}));
  s.clear();
  EXPECT_EQ(s.snapshot(), KV{});
}

/// A world for messages across a restart: p receives ints until 100 ms of silence, q runs `sender` against it
/// (every message takes 10 ms), and p crashes at 5 ms and is back at 7 ms.
struct AcrossARestart {
  World w{[] {
    WorldOptions o;
    o.network.defaults.delay = DelayDist::constant_of(10ms);
    return o;
  }()};
  std::vector<int> got;
  ProcId p;
  explicit AcrossARestart(std::function<void(Context&, ProcId)> sender) {
    p = w.spawn("p", [this](Context& c) {
      for (;;) {
        auto m = c.receive(100ms);
        if (!m) return;
        got.push_back(*m->as<int>());
      }
    });
    w.spawn("q", [this, sender = std::move(sender)](Context& c) { sender(c, p); });
    w.add_fault(
        Fault{.kind = Fault::Kind::crash, .when = Trigger::at_time(5ms), .target = p, .duration = 2ms});
    EXPECT_EQ(w.run().reason, StopReason::done);
  }
};

TEST(Crash, MessagesInFlightToTheCrashedIncarnationAreDropped) {
  AcrossARestart t([](Context& c, ProcId p) {
    c.send(p, Message::of("n", 1));  // arrives at 10 ms: p crashed at 5 ms, restarted at 7 ms -> dropped
    c.sleep(8ms);
    c.send(p, Message::of("n", 2));  // sent to the new incarnation: delivered
  });
  EXPECT_EQ(t.got, std::vector<int>{2});
  auto drops = events_of(t.w, TraceKind::drop, t.p);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].time, 10ms);
  EXPECT_EQ(drops[0].detail, "receiver crashed");
}

TEST(Crash, AMessageSentWhileTheReceiverIsDownIsForTheDeadIncarnation) {
  // The receiver's incarnation is the one it had when the message was sent: a message sent while it is down
  // is dropped when it arrives after the restart; one sent after the restart, in the same instant, is
  // delivered.
  AcrossARestart t([](Context& c, ProcId p) {
    c.sleep(6ms);
    c.send(p, Message::of("n", 1));  // p is down: arrives at 16 ms, to the new incarnation -> dropped
    c.sleep(1ms);
    c.send(p, Message::of("n", 2));  // 7 ms, after the restart (planned earlier, so it ran first): delivered
  });
  EXPECT_EQ(t.got, std::vector<int>{2});
  auto drops = events_of(t.w, TraceKind::drop, t.p);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].time, 16ms);
  EXPECT_EQ(drops[0].detail, "receiver crashed");
  auto restarts = events_of(t.w, TraceKind::restart, t.p);
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_EQ(restarts[0].time, 7ms);
}

TEST(Crash, MailboxIsVolatile) {
  World w;
  int received = 0;
  ProcId p = w.spawn("p", [&](Context& c) {
    if (c.incarnation() == 0) c.sleep(1s);  // message waits in the mailbox, then the crash loses it
    while (c.receive(100ms)) ++received;
  });
  w.spawn("q", [&](Context& c) { c.send(p, Message{.type = "m"}); });
  w.add_fault(Fault{.kind = Fault::Kind::crash, .when = Trigger::at_time(5ms), .target = p, .duration = 1ms});
  w.run();
  EXPECT_EQ(count_of(w, TraceKind::deliver, p), 1u);
  EXPECT_EQ(received, 0);
}

TEST(Crash, MessagesToAnExitedProcessAreDropped) {
  World w;
  ProcId p = w.spawn("p", [](Context&) {});
  w.spawn("q", [&](Context& c) {
    c.sleep(1ms);
    c.send(p, Message{.type = "late"});
    c.sleep(5ms);
  });
  w.run();
  auto drops = events_of(w, TraceKind::drop, p);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].detail, "receiver exited");
}

TEST(Crash, CrashOfAPausedProcessAndRestartRunsNormally) {
  World w;
  std::vector<std::pair<std::uint32_t, Time>> seen;
  ProcId p = w.spawn("p", [&](Context& c) {
    c.sleep(10ms);
    seen.emplace_back(c.incarnation(), c.now());
  });
  w.schedule(5ms, [&] { w.pause(p, 1s); });
  w.add_fault(
      Fault{.kind = Fault::Kind::crash, .when = Trigger::at_time(20ms), .target = p, .duration = 5ms});
  EXPECT_EQ(w.run().reason, StopReason::done);
  EXPECT_EQ(seen, (std::vector<std::pair<std::uint32_t, Time>>{{1, 35ms}}));
  EXPECT_FALSE(w.paused(p));
  EXPECT_EQ(count_of(w, TraceKind::resume, p), 0u);  // the stale 1 s resume does nothing
}

TEST(Crash, CrashAndRestartBeforeAPendingStartStartsTheBodyOnce) {
  // p is paused before it ever ran; at 10 ms the resume queues its first start, and a crash and a restart at
  // the same instant (planned earlier, so they run first) start the new incarnation. The queued first start
  // must not start the body a second time.
  World w;
  int runs = 0;
  std::vector<std::uint32_t> incarnations;
  ProcId p = w.spawn("p", [&](Context& c) {
    ++runs;
    incarnations.push_back(c.incarnation());
    c.sleep(5ms);
  });
  w.spawn("keeper", [](Context& c) { c.sleep(1s); });  // keeps the run going while p is down
  w.pause(p, 10ms);
  w.add_fault(Fault{.kind = Fault::Kind::crash, .when = Trigger::at_time(10ms), .target = p});
  w.add_fault(Fault{.kind = Fault::Kind::restart, .when = Trigger::at_time(10ms), .target = p});
  EXPECT_EQ(w.run().reason, StopReason::done);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(incarnations, std::vector<std::uint32_t>{1});
  EXPECT_EQ(count_of(w, TraceKind::start, p), 1u);
  EXPECT_EQ(w.state(p), ProcState::exited);
}

TEST(Crash, CrashRequestedFromInsideAFiberActsAfterTheCurrentStep) {
  World w;
  int victim_steps = 0;
  ProcId v = w.spawn("victim",
                     [&](Context& c) {
                       for (;;) {
                         ++victim_steps;
                         c.sleep(1ms);
                       }
                     },
                     {.daemon = true});
  w.spawn("killer", [&](Context& c) {
    c.sleep(3500us);
    w.crash(v, false);
    c.note("killed");  // still running: the crash is an event at this instant
    c.sleep(10ms);
    w.restart(v);  // also deferred to an event at this instant
    c.sleep(1ms);
  });
  EXPECT_EQ(w.run().reason, StopReason::done);
  EXPECT_EQ(count_of(w, TraceKind::crash, v), 1u);
  auto crash = events_of(w, TraceKind::crash, v);
  EXPECT_EQ(crash[0].time, 3500us);
  EXPECT_EQ(victim_steps, 4 + 1);  // 0,1,2,3 ms, then the restarted body's first step
  EXPECT_EQ(w.state(v), ProcState::blocked);
}

// Ending a fiber (a crash, or the world's end while it waits) unwinds its stack: what it holds is destroyed,
// a catch (...) that rethrows sees it pass, and nothing typed catches it.
namespace {
struct Counted {
  int* destroyed;
  explicit Counted(int* d) : destroyed(d) {}
  Counted(const Counted&) = delete;
  Counted& operator=(const Counted&) = delete;
  ~Counted() { ++*destroyed; }
};
}  // namespace

TEST(Crash, EndingAFiberDestroysWhatItsStackHolds) {
  int destroyed = 0, caught_typed = 0, caught_any = 0;
  {
    World w;
    const ProcId crashed = w.spawn("crashed", [&](Context& c) {
      Counted outer(&destroyed);
      auto text = std::make_unique<std::string>(100, 'x');  // heap memory: the leak check sees it freed
      try {
        Counted inner(&destroyed);
        for (;;) c.sleep(1ms);
      } catch (const std::exception&) {
        ++caught_typed;
      }
    });
    w.spawn("waiting", [&](Context& c) {  // still waiting when the world ends
      Counted held(&destroyed);
      try {
        (void)c.receive();
      } catch (...) {
        ++caught_any;
        throw;
      }
    });
    w.schedule(5ms, [&] { w.crash(crashed, false); });
    (void)w.run_until(10ms);
    EXPECT_EQ(w.state(crashed), ProcState::crashed);
    EXPECT_EQ(destroyed, 2);  // outer and inner: the crash
  }
  EXPECT_EQ(destroyed, 3);  // and held: the world's end
  EXPECT_EQ(caught_typed, 0);
  EXPECT_EQ(caught_any, 1);
}

TEST(CrashDeathTest, AProcessThatGoesOnAfterItsEndStopsTheProgramWithAMessage) {
  // A catch (...) that does not rethrow lets the body run on while its fiber is taken down: before this
  // message, a segmentation fault at its next wait.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        World w;
        const ProcId p = w.spawn("stubborn", [](Context& c) {
          for (;;) {
            try {
              c.sleep(1ms);
            } catch (...) {
            }
          }
        });
        w.schedule(5ms, [&] { w.crash(p, false); });
        (void)w.run_until(10ms);
      },
      "process 'stubborn' went on after its end");
}

// ---------------------------------------------------------------- a killed process sends nothing

namespace {

/// An RAII guard that says goodbye when it goes out of scope: by a send, a reply to `request` or a call, as
/// `how` says.
struct Goodbye {
  Context& c;
  ProcId peer;
  int how = 0;  // 0 send, 1 reply, 2 call
  std::optional<Message> request;
  std::optional<Message>* call_result = nullptr;
  ~Goodbye() {
    if (how == 0) {
      c.send(peer, Message{.type = "bye"});
    } else if (how == 1) {
      c.reply(*request, Message{.type = "bye"});
    } else {
      *call_result = c.call(peer, Message{.type = "bye"}, 1s);
    }
  }
};

/// p holds a Goodbye to q while it sleeps 100 ms (or, `crash`, is crashed at 50 ms in that sleep); `got`:
/// the message types q received. Before the guard, p asks q once (so it has a request to reply to).
struct GoodbyeRun {
  GoodbyeRun(bool crash, int how) {
    q = w.spawn("q", [this](Context& c) {
      while (auto m = c.receive(1s)) {
        got.push_back(std::string(m->type));
        if (m->type == "ask") c.reply(*m, Message{.type = "ok"});
      }
    });
    p = w.spawn("p", [this, how](Context& c) {
      std::optional<Message> request;
      if (how == 1) {
        c.send(q, Message{.type = "ask"});
        request = c.receive(1s);  // q's "ok": replying to it sends to q
      }
      Goodbye g{c, q, how, request, &call_result};
      c.sleep(100ms);
    });
    if (crash) w.add_fault(Fault{.kind = Fault::Kind::crash, .when = Trigger::at_time(50ms), .target = p});
    w.run();
  }
  World w;
  ProcId p, q;
  std::vector<std::string> got;
  std::optional<Message> call_result{Message{.type = "unset"}};
};

}  // namespace

TEST(Crash, AKilledProcessSendsNothingWhileItsStackUnwinds) {
  for (int how = 0; how < 3; ++how) {
    SCOPED_TRACE(how == 0 ? "send" : how == 1 ? "reply" : "call");
    GoodbyeRun r(true, how);
    const auto& got = r.got;
    World* w = &r.w;
    if (how == 1) {
      EXPECT_EQ(got, (std::vector<std::string>{"ask"}));
    } else {
      EXPECT_TRUE(got.empty());
    }
    const ProcId p = r.p, q = r.q;
    auto drops = events_of(*w, TraceKind::drop);
    ASSERT_EQ(drops.size(), 1u);
    EXPECT_EQ(drops[0].detail, "sender crashed");
    EXPECT_EQ(drops[0].label, "bye");
    EXPECT_EQ(drops[0].proc, q);
    EXPECT_EQ(drops[0].peer, p);
    EXPECT_EQ(drops[0].time, 50ms);
    // No send record of the discarded message: the dead process did not send it.
    for (const auto& e : events_of(*w, TraceKind::send, p)) EXPECT_NE(e.label, "bye");
    if (how == 2) {
      EXPECT_FALSE(r.call_result.has_value());  // a call of a dying process returns at once
    }
  }
}

TEST(Crash, TheSameGuardSendsAtANormalReturn) {
  for (int how = 0; how < 3; ++how) {
    SCOPED_TRACE(how == 0 ? "send" : how == 1 ? "reply" : "call");
    GoodbyeRun r(false, how);
    const auto& got = r.got;
    World* w = &r.w;
    if (how == 1) {
      EXPECT_EQ(got, (std::vector<std::string>{"ask", "bye"}));
    } else {
      EXPECT_EQ(got, (std::vector<std::string>{"bye"}));
    }
    EXPECT_EQ(count_of(*w, TraceKind::drop), 0u);
    if (how == 2) {
      EXPECT_FALSE(r.call_result.has_value());  // q does not answer a "bye": the call times out
    }
  }
}

TEST(Crash, ADyingProcessStillReachesTheOracleAndLogsNotesEvenWhilePaused) {
  // What a destructor records outside the world (a history, an observer) is no send: it still happens
  // during the unwinding, and so do its notes, even of a process crashed while paused (a note would else
  // stop it at the pause point, in the middle of its end).
  World w;
  std::vector<std::string> history;
  struct Recorder {
    Context& c;
    std::vector<std::string>& h;
    ~Recorder() {
      h.push_back("ended at " + format_time(c.now()));
      c.note("guard-ended");
    }
  };
  ProcId p = w.spawn("p", [&](Context& c) {
    Recorder r{c, history};
    c.sleep(1s);
  });
  w.schedule(10ms, [&] { w.pause(p, 1s); });
  w.add_fault(Fault{.kind = Fault::Kind::crash, .when = Trigger::at_time(20ms), .target = p});
  w.run();
  EXPECT_EQ(history, (std::vector<std::string>{"ended at 0.02s"}));
  auto notes = events_of(w, TraceKind::note, p);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].label, "guard-ended");
  EXPECT_EQ(w.state(p), ProcState::crashed);
}
