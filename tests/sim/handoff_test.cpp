// Hand-off: inside run_until a blocking fiber runs the next deliveries and wakes itself and switches straight
// to the fiber they resume. It must change nothing observable: the same events in the same order as when the
// scheduler runs every event itself (step(), which never hands off), whatever the mix of messages, filters,
// timeouts, self-sends, sleeps, pauses, crashes and restarts.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "locksim/sim/world.hpp"

using namespace locksim;

namespace {

struct Plan {
  std::uint64_t seed;
  int processes;
  int daemons = 0;  ///< daemons passing messages forever: a run is "done" only when the others have ended
  bool shuffle_ties;
  std::vector<Fault> faults;
};

/// A world of `processes` processes, each doing 40 random actions drawn from its own stream; `ended` counts
/// the bodies that ran to their end.
void build(World& w, const Plan& plan, int& ended) {
  const auto n = static_cast<std::uint64_t>(plan.processes);
  for (int i = 0; i < plan.processes; ++i) {
    w.spawn("p" + std::to_string(i), [n, &ended](Context& c) {
      for (int step = 0; step < 40; ++step) {
        const ProcId to{static_cast<std::uint32_t>(c.rng().below(n))};
        switch (c.rng().below(7)) {
          case 0:  // every wait is bounded, so every body ends
            c.send(to, Message{.type = "m"});
            c.receive(3ms);
            break;
          case 1:
            c.send(to, Message{.type = "m"});
            c.receive(Duration{c.rng().below(3'000'000)});
            break;
          case 2: {  // request/response to a peer (or to itself: its own delivery resumes it)
            auto r = c.call(to, Message{.type = "req"}, 2ms);
            if (r) c.note("reply");
            break;
          }
          case 3:
            c.sleep(Duration{c.rng().below(2'000'000)});
            break;
          case 4: {  // answer whatever request is waiting, if any
            auto m = c.receive(0ns, [](const Message& m) { return m.type == "req"; });
            if (m) c.reply(*m, Message{.type = "rep"});
            break;
          }
          case 5:
            c.send(c.self(), Message{.type = "self"});
            c.receive(1ms, [](const Message& m) { return m.type == "self"; });
            break;
          default:
            c.note("tick");
            break;
        }
      }
      ++ended;
    });
  }
  // Daemons after the others (whose random peers are among themselves): each sends to the next daemon and
  // waits for a message, forever, so the queue never runs dry.
  for (int i = 0; i < plan.daemons; ++i) {
    const ProcId next{static_cast<std::uint32_t>(plan.processes + (i + 1) % plan.daemons)};
    w.spawn("d" + std::to_string(i),
            [next](Context& c) {
              for (;;) {
                c.send(next, Message{.type = "ping"});
                c.receive();
              }
            },
            {.daemon = true});
  }
  for (const Fault& f : plan.faults) w.add_fault(f);
}

/// Processes 0 and 1: daemons passing a ball back and forth forever (every event a hand-off), each sending a
/// copy of every ball it returns to process 2, which the caller spawns next.
void spawn_ball_players(World& w) {
  for (std::uint32_t i = 0; i < 2; ++i) {
    w.spawn("d" + std::to_string(i),
            [i](Context& c) {
              if (i == 0) c.send(ProcId{1}, Message{.type = "ball"});
              for (;;) {
                auto m = c.receive();
                c.send(m->from, Message{.type = "ball"});
                c.send(ProcId{2}, Message{.type = "copy"});
              }
            },
            {.daemon = true});
  }
}

WorldOptions options(const Plan& plan) {
  WorldOptions o;
  o.seed = plan.seed;
  o.shuffle_ties = plan.shuffle_ties;
  o.network.defaults.delay = DelayDist::uniform_of(0ns, 1500us);
  return o;
}

}  // namespace

RC_GTEST_PROP(HandoffProperty, RunGivesTheSameTraceAsStepByStep, ()) {
  Plan plan;
  plan.seed = *rc::gen::arbitrary<std::uint64_t>();
  plan.processes = *rc::gen::inRange(1, 12);
  plan.daemons = *rc::gen::inRange(0, 3);
  plan.shuffle_ties = *rc::gen::arbitrary<bool>();
  const int faults = *rc::gen::inRange(0, 4);
  for (int i = 0; i < faults; ++i) {
    Fault f;
    f.target = ProcId{static_cast<std::uint32_t>(*rc::gen::inRange(0, plan.processes))};
    f.when = Trigger::at_time(Time{*rc::gen::inRange<std::int64_t>(0, 30'000'000)});
    // Pauses, and crashes with a restart (a body that never ends would keep the step-by-step run going).
    f.duration = Duration{*rc::gen::inRange<std::int64_t>(1, 5'000'000)};
    f.kind = *rc::gen::element(Fault::Kind::pause, Fault::Kind::crash);
    plan.faults.push_back(f);
  }

  int ended_run = 0, ended_step = 0;
  World by_run(options(plan));
  build(by_run, plan, ended_run);
  const RunResult r = by_run.run();  // until every process but the daemons has ended ("done")
  RC_ASSERT(r.reason == StopReason::done);
  RC_ASSERT(ended_run == plan.processes);

  World by_step(options(plan));
  build(by_step, plan, ended_step);
  while (ended_step < plan.processes && by_step.step()) {
  }

  RC_ASSERT(by_run.trace().count() == by_step.trace().count());
  RC_ASSERT(by_run.trace().hash() == by_step.trace().hash());
  RC_ASSERT(r.events == by_step.events_processed());
}

TEST(Handoff, RunUntilStopsInsideAChainOfHandOffs) {
  // Ten processes passing a token around with a 1 ms delay: every event is a hand-off. run_until must still
  // stop exactly at its time, and the next run_until go on from there.
  auto make = [](World& w) {
    for (std::uint32_t i = 0; i < 10; ++i) {
      w.spawn("p" + std::to_string(i),
              [i](Context& c) {
                if (i == 0) c.send(ProcId{1}, Message{.type = "token"});
                for (;;) {
                  c.receive();
                  c.send(ProcId{(i + 1) % 10}, Message{.type = "token"});
                }
              },
              {.daemon = true});
    }
  };
  WorldOptions o;
  o.network.defaults.delay = DelayDist::constant_of(1ms);
  World a(o), b(o);
  make(a);
  make(b);
  const RunResult r1 = a.run_until(Time{55ms});
  EXPECT_EQ(r1.reason, StopReason::until);
  EXPECT_EQ(a.now(), 55ms);
  EXPECT_EQ(a.messages_delivered(), 55u);
  a.run_until(Time{100ms});
  b.run_until(Time{100ms});
  EXPECT_EQ(a.messages_delivered(), 100u);
  EXPECT_EQ(a.trace().hash(), b.trace().hash());
}

TEST(Handoff, EventLimitStopsInsideAChainOfHandOffs) {
  WorldOptions o;
  o.network.defaults.delay = DelayDist::constant_of(1ms);
  o.limits.max_events = 25;
  World w(o);
  for (std::uint32_t i = 0; i < 2; ++i) {
    w.spawn("p" + std::to_string(i), [i](Context& c) {
      if (i == 0) c.send(ProcId{1}, Message{.type = "ball"});
      for (;;) {
        auto m = c.receive();
        c.send(m->from, Message{.type = "ball"});
      }
    });
  }
  const RunResult r = w.run();
  EXPECT_EQ(r.reason, StopReason::event_limit);
  EXPECT_EQ(w.events_processed(), 25u);
}

TEST(Handoff, DoneStopsInsideAChainOfHandOffs) {
  // Two daemons play ball forever (every event a hand-off); a third process ends after its tenth message.
  // The run is done at exactly that event: the end of the last live process must stop it even though the
  // blocking fibers, not the scheduler, run the events.
  auto make = [](World& w, int& got) {
    spawn_ball_players(w);
    w.spawn("counter", [&got](Context& c) {
      while (got < 10) {
        c.receive();
        ++got;
      }
    });
  };
  WorldOptions o;
  o.network.defaults.delay = DelayDist::uniform_of(500us, 1500us);
  World a(o), b(o);
  int got_a = 0, got_b = 0;
  make(a, got_a);
  make(b, got_b);
  const RunResult r = a.run();
  EXPECT_EQ(r.reason, StopReason::done);
  EXPECT_EQ(got_a, 10);
  while (got_b < 10 && b.step()) {
  }
  EXPECT_EQ(a.events_processed(), b.events_processed());
  EXPECT_EQ(a.trace().hash(), b.trace().hash());
}

TEST(Handoff, StopFromAnObserverStopsInsideAChainOfHandOffs) {
  // stop() from inside a fiber (a note observer) in the middle of a chain of hand-offs: the run stops after
  // that event, and the next run goes on from there as if it had never stopped.
  auto make = [](World& w) {
    for (std::uint32_t i = 0; i < 4; ++i) {
      w.spawn("p" + std::to_string(i),
              [i](Context& c) {
                if (i == 0) c.send(ProcId{1}, Message{.type = "token"});
                for (;;) {
                  c.receive();
                  c.note("got");
                  c.send(ProcId{(i + 1) % 4}, Message{.type = "token"});
                }
              },
              {.daemon = true});
    }
  };
  WorldOptions o;
  o.network.defaults.delay = DelayDist::constant_of(1ms);
  World a(o), b(o);
  make(a);
  make(b);
  int notes = 0;
  a.on_note([&](ProcId, std::string_view, std::string_view) {
    if (++notes == 37) a.stop();
  });
  const RunResult r1 = a.run_until(Time{100ms});
  EXPECT_EQ(r1.reason, StopReason::stopped);
  EXPECT_EQ(a.messages_delivered(), 37u);
  EXPECT_EQ(a.now(), 37ms);
  const RunResult r2 = a.run_until(Time{100ms});
  EXPECT_EQ(r2.reason, StopReason::until);
  b.run_until(Time{100ms});
  EXPECT_EQ(a.messages_delivered(), 100u);
  EXPECT_EQ(a.trace().hash(), b.trace().hash());
}

TEST(Handoff, MailboxOverflowStopsInsideAChainOfHandOffs) {
  // A process that never receives gets a copy of every ball two daemons pass: the run stops at the delivery
  // that puts its mailbox over the limit, not later.
  WorldOptions o;
  o.network.defaults.delay = DelayDist::constant_of(1ms);
  o.limits.max_mailbox = 10;
  World w(o);
  spawn_ball_players(w);
  w.spawn("deaf", [](Context& c) { c.sleep(1h); });  // live: the run goes on
  const RunResult r = w.run();
  EXPECT_EQ(r.reason, StopReason::mailbox_limit);
  // Deliveries at 1, 2, 3, ... ms: a ball at each, and from 2 ms on a copy for the deaf process too; its
  // eleventh copy arrives at 12 ms, with the twelfth ball.
  EXPECT_EQ(w.now(), 12ms);
  EXPECT_EQ(w.messages_delivered(), 12u + 11u);
}

TEST(Handoff, AFilterThatThrowsComesOutOfRunNotOutOfTheBlockingProcess) {
  World w;
  const ProcId a = w.spawn("a", [](Context& c) {
    c.receive(kForever, [](const Message&) -> bool { throw std::runtime_error("filter says no"); });
  });
  const ProcId b = w.spawn("b", [a](Context& c) {
    c.send(a, Message{.type = "x"});
    c.receive();  // blocks: the delivery to a runs here, in b's fiber, and its filter throws
  });
  EXPECT_THROW(w.run(), std::runtime_error);
  EXPECT_EQ(w.state(b), ProcState::blocked);  // not ended by an exception that was not its own
  EXPECT_EQ(w.state(a), ProcState::blocked);
}
