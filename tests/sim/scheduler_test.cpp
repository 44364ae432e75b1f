// Scheduler: event order, tie shuffling, stepping, limits, exceptions, scale.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "locksim/sim/world.hpp"
#include "test_util.hpp"

using namespace locksim;
using locksim::test::count_of;
using locksim::test::events_of;

namespace {

/// Schedules `n` callbacks at each of three times, interleaving the times, and returns the run order.
std::vector<int> run_order(WorldOptions o, int n) {
  World w(o);
  std::vector<int> order;
  const Time times[] = {20ms, 10ms, 30ms};
  for (int i = 0; i < n; ++i)
    for (int t = 0; t < 3; ++t) {
      const int tag = t * 1000 + i;
      w.schedule(times[t], [&order, &w, tag, at = times[t]] {
        EXPECT_EQ(w.now(), at);
        order.push_back(tag);
      });
    }
  EXPECT_EQ(w.run().reason, StopReason::idle);
  return order;
}

}  // namespace

TEST(Scheduler, EqualTimesRunInInsertionOrder) {
  const auto order = run_order({}, 50);
  ASSERT_EQ(order.size(), 150u);
  std::vector<int> expected;
  for (int t : {1, 0, 2})  // 10 ms, 20 ms, 30 ms
    for (int i = 0; i < 50; ++i) expected.push_back(t * 1000 + i);
  EXPECT_EQ(order, expected);
}

TEST(Scheduler, ProcessesStartInSpawnOrder) {
  World w;
  std::vector<std::string> order;
  for (int i = 0; i < 20; ++i) {
    w.spawn("p" + std::to_string(i), [&](Context& c) { order.push_back(c.name()); });
  }
  EXPECT_EQ(w.run().reason, StopReason::done);
  ASSERT_EQ(order.size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(order[i], "p" + std::to_string(i));
}

TEST(Scheduler, ShuffledTiesDifferAcrossSeedsButAreDeterministicPerSeed) {
  WorldOptions o;
  o.shuffle_ties = true;
  std::vector<std::vector<int>> orders;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    o.seed = seed;
    auto a = run_order(o, 20);
    auto b = run_order(o, 20);
    EXPECT_EQ(a, b) << "seed " << seed;
    // Time order still holds: all 10 ms events before 20 ms before 30 ms.
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i] / 1000, (std::vector<int>{1, 0, 2}[i / 20]));
    orders.push_back(std::move(a));
  }
  for (std::size_t i = 0; i < orders.size(); ++i)
    for (std::size_t j = i + 1; j < orders.size(); ++j) EXPECT_NE(orders[i], orders[j]) << i << " vs " << j;
  // Without shuffling the order is FIFO, so a shuffled order is not simply the FIFO one.
  EXPECT_NE(orders[0], run_order({}, 20));
}

RC_GTEST_PROP(SchedulerProperty, EventsRunInTimeThenInsertionOrder, ()) {
  // Random times, some equal; each callback may schedule a child (possibly at the current instant).
  const auto times = *rc::gen::container<std::vector<int>>(rc::gen::inRange(0, 20));
  const auto children = *rc::gen::container<std::vector<int>>(times.size(), rc::gen::inRange(-1, 5));
  World w;
  struct Ran {
    Time at;
    std::uint64_t order_key;  // insertion order: (insert counter)
  };
  std::vector<Ran> ran;
  std::uint64_t inserted = 0;
  std::function<void(Time, int)> add = [&](Time at, int child) {
    const std::uint64_t key = inserted++;
    w.schedule(at, [&, at, key, child] {
      RC_ASSERT(w.now() == at);
      ran.push_back({at, key});
      if (child >= 0) add(w.now() + Duration{child * 1'000'000}, -1);
    });
  };
  for (std::size_t i = 0; i < times.size(); ++i) add(Duration{times[i] * 1'000'000}, children[i]);
  w.run();
  RC_ASSERT(ran.size() == inserted);
  for (std::size_t i = 1; i < ran.size(); ++i) {
    RC_ASSERT(ran[i - 1].at <= ran[i].at);
    if (ran[i - 1].at == ran[i].at) RC_ASSERT(ran[i - 1].order_key < ran[i].order_key);
  }
}

TEST(Scheduler, StepAndRunUntil) {
  World w;
  std::vector<Time> seen;
  w.schedule(5ms, [&] { seen.push_back(w.now()); });
  w.schedule(15ms, [&] { seen.push_back(w.now()); });
  auto r = w.run_until(10ms);
  EXPECT_EQ(r.reason, StopReason::until);
  EXPECT_EQ(r.end, 10ms);
  EXPECT_EQ(w.now(), 10ms);
  EXPECT_EQ(seen, std::vector<Time>{5ms});
  EXPECT_TRUE(w.step());
  EXPECT_EQ(w.now(), 15ms);
  EXPECT_FALSE(w.step());
  EXPECT_EQ(w.events_processed(), 2u);
  // Scheduling in the past runs "now", never back in time.
  w.schedule(1ms, [&] { seen.push_back(w.now()); });
  EXPECT_EQ(w.run().reason, StopReason::idle);
  EXPECT_EQ(seen, (std::vector<Time>{5ms, 15ms, 15ms}));
}

TEST(Scheduler, StopFromACallback) {
  World w;
  int after = 0;
  w.spawn("loop", [](Context& c) {
    for (;;) c.sleep(1ms);
  });
  w.schedule(10ms, [&] { w.stop(); });
  w.schedule(20ms, [&] { ++after; });
  auto r = w.run();
  EXPECT_EQ(r.reason, StopReason::stopped);
  EXPECT_EQ(r.end, 10ms);
  EXPECT_EQ(after, 0);
  // The run can continue afterwards.
  r = w.run_until(25ms);
  EXPECT_EQ(r.reason, StopReason::until);
  EXPECT_EQ(after, 1);
}

TEST(Scheduler, DaemonsDoNotKeepTheWorldRunning) {
  World w;
  w.spawn("server",
          [](Context& c) {
            for (;;) c.receive();
          },
          {.daemon = true});
  w.spawn("client", [](Context& c) { c.sleep(3ms); });
  auto r = w.run();
  EXPECT_EQ(r.reason, StopReason::done);
  EXPECT_EQ(r.end, 3ms);
}

TEST(Scheduler, OnlyDaemonsBlockedForeverIsIdle) {
  World w;
  w.spawn("server", [](Context& c) { c.receive(); }, {.daemon = true});
  w.spawn("client", [](Context& c) { c.receive(); });  // waits forever: no event will ever come
  auto r = w.run();
  EXPECT_EQ(r.reason, StopReason::idle);
  EXPECT_EQ(w.state(w.find("client")), ProcState::blocked);
}

TEST(Limits, MaxEventsStopsARunawayWorld) {
  WorldOptions o;
  o.limits.max_events = 1000;
  World w(o);
  w.spawn("runaway", [](Context& c) {
    for (;;) c.sleep(1ms);
  });
  auto r = w.run();
  EXPECT_EQ(r.reason, StopReason::event_limit);
  EXPECT_TRUE(r.limit_hit());
  EXPECT_EQ(r.events, 1000u);
  EXPECT_EQ(w.events_processed(), 1000u);
  ASSERT_FALSE(w.trace().events().empty());
  EXPECT_EQ(w.trace().events().back().kind, TraceKind::limit);
  EXPECT_EQ(w.trace().events().back().label, "events");
  EXPECT_EQ(to_string(r.reason), "event limit");
}

TEST(Limits, MaxTimeStopsARunawayWorld) {
  WorldOptions o;
  o.limits.max_time = 1s;
  World w(o);
  w.spawn("runaway", [](Context& c) {
    for (;;) c.sleep(7ms);
  });
  auto r = w.run();
  EXPECT_EQ(r.reason, StopReason::time_limit);
  EXPECT_TRUE(r.limit_hit());
  EXPECT_EQ(r.end, 1s);
  EXPECT_EQ(w.now(), 1s);
  EXPECT_EQ(count_of(w, TraceKind::limit), 1u);
  // Every event that ran was at or before the limit.
  for (const auto& e : w.trace().events()) EXPECT_LE(e.time, 1s);
  EXPECT_EQ(to_string(r.reason), "time limit");
}

TEST(Limits, SleepingForeverHitsTheTimeLimitNotAnOverflow) {
  WorldOptions o;
  o.limits.max_time = 10s;
  o.network.defaults.delay = DelayDist::constant_of(1ms);
  World w(o);
  w.spawn("sleeper", [](Context& c) { c.sleep(kForever); }, {.clock = {.offset = 5s, .drift_ppm = 300}});
  auto r = w.run();
  EXPECT_EQ(r.reason, StopReason::time_limit);
  EXPECT_EQ(r.end, 10s);
}

TEST(Limits, MailboxFloodHitsMaxMailbox) {
  WorldOptions o;
  o.limits.max_mailbox = 100;
  World w(o);
  ProcId sink = w.spawn("sink", [](Context& c) { c.sleep(kForever); }, {.daemon = true});
  w.spawn("flood", [&](Context& c) {
    for (int i = 0; i < 10'000; ++i) c.send(sink, Message{.type = "spam"});
    c.sleep(1s);  // stay alive so the run is not simply done
  });
  auto r = w.run();
  EXPECT_EQ(r.reason, StopReason::mailbox_limit);
  EXPECT_TRUE(r.limit_hit());
  EXPECT_EQ(count_of(w, TraceKind::deliver, sink), 101u);  // stops right after the mailbox exceeds 100
  EXPECT_EQ(w.trace().events().back().label, "mailbox");
}

TEST(Exceptions, ExceptionFromABodyPropagatesOutOfRun) {
  World w;
  w.spawn("other", [](Context& c) { c.receive(); });  // left blocked: the world must still destruct cleanly
  w.spawn("thrower", [](Context& c) {
    c.sleep(5ms);
    throw std::runtime_error("boom");
  });
  try {
    w.run();
    FAIL() << "run() returned normally";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom");
  }
  EXPECT_EQ(w.now(), 5ms);
  EXPECT_EQ(w.state(w.find("thrower")), ProcState::exited);
}

TEST(Exceptions, ExceptionAtFirstStepAndFromCallbacksPropagate) {
  {
    World w;
    w.spawn("thrower", [](Context&) { throw std::logic_error("at start"); });
    EXPECT_THROW(w.run(), std::logic_error);
  }
  {
    World w;
    w.schedule(1ms, [] { throw std::out_of_range("callback"); });
    EXPECT_THROW(w.run(), std::out_of_range);
  }
  {
    World w;  // a kernel error inside a body (send to an unknown process) reaches the caller too
    w.spawn("bad", [](Context& c) { c.send(ProcId{12345}, Message{.type = "x"}); });
    EXPECT_THROW(w.run(), std::out_of_range);
  }
}

TEST(Exceptions, ProcessKilledDoesNotEscapeRun) {
  World w;
  ProcId p = w.spawn("victim", [](Context& c) {
    for (;;) c.sleep(1ms);
  });
  w.schedule(10ms, [&] { w.crash(p, false); });
  auto r = w.run();
  EXPECT_EQ(r.reason, StopReason::done);  // the crashed process no longer counts as live
  EXPECT_EQ(w.state(p), ProcState::crashed);
}

TEST(Scale, TenThousandProcessesExchangeAMessageAndFinish) {
  constexpr int n = 10'000;
  WorldOptions o;
  o.keep_trace = false;
  o.network.defaults.delay = DelayDist::uniform_of(1ms, 5ms);
  World w(o);
  std::vector<ProcId> ids;
  int finished = 0;
  for (int i = 0; i < n; ++i) {
    ids.push_back(w.spawn("p" + std::to_string(i), [&, i](Context& c) {
      c.sleep(Duration{c.rng().below(100) * 1'000'000});
      c.send(ids[(i + 1) % n], Message::of("hello", i));
      auto m = c.receive(1s);
      ASSERT_TRUE(m);
      EXPECT_EQ(*m->as<int>(), (i + n - 1) % n);
      ++finished;
    }));
  }
  auto r = w.run();
  EXPECT_EQ(r.reason, StopReason::done);
  EXPECT_EQ(finished, n);
  EXPECT_EQ(w.messages_delivered(), static_cast<std::uint64_t>(n));
  for (ProcId id : ids) ASSERT_EQ(w.state(id), ProcState::exited);
  EXPECT_EQ(w.trace().count(), static_cast<std::uint64_t>(5 * n));  // start, send, deliver, receive, exit
  EXPECT_TRUE(w.trace().events().empty());                          // keep_trace=false keeps only the hash
}
