// Same-instant events and partitions in time: a fault at an instant takes effect before the process steps of
// that instant, and whether a packet crosses a cut is decided when it is sent and again when it arrives.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "locksim/sim/world.hpp"
#include "test_util.hpp"

using namespace locksim;
using locksim::test::count_of;
using locksim::test::events_of;

TEST(PartitionInTime, AMessageInFlightWhenAPartitionStartsIsLost) {
  WorldOptions o;
  o.network.defaults.delay = DelayDist::constant_of(10ms);
  World w(o);
  bool got = false;
  ProcId b = w.spawn("b", [&](Context& c) { got = c.receive(1s).has_value(); });
  ProcId a = w.spawn("a", [&](Context& c) { c.send(b, Message{.type = "m"}); });  // sent at 0, due at 10 ms
  w.schedule(5ms, [&] { w.partition({a}, {b}, false); });
  w.run();
  EXPECT_FALSE(got);
  auto drops = events_of(w, TraceKind::drop);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].time, 10ms);
  EXPECT_EQ(drops[0].detail, "partition in flight");
  EXPECT_EQ(drops[0].proc, b);
  EXPECT_EQ(drops[0].peer, a);
  EXPECT_EQ(count_of(w, TraceKind::deliver), 0u);
}

TEST(PartitionInTime, AMessageArrivingAtTheInstantAPartitionStartsIsLost) {
  WorldOptions o;
  o.network.defaults.delay = DelayDist::constant_of(10ms);
  World w(o);
  bool got = false;
  ProcId b = w.spawn("b", [&](Context& c) { got = c.receive(1s).has_value(); });
  ProcId a = w.spawn("a", [&](Context& c) { c.send(b, Message{.type = "m"}); });
  w.run_until(1ms);  // the delivery at 10 ms is queued before the fault is
  w.add_fault(
      Fault{.kind = Fault::Kind::partition, .when = Trigger::at_time(10ms), .side_a = {a}, .side_b = {b}});
  w.run();
  EXPECT_FALSE(got);
  EXPECT_EQ(count_of(w, TraceKind::drop), 1u);
}

TEST(PartitionInTime, AMessageInFlightAcrossAPartitionThatHealedBeforeItArrivedIsDelivered) {
  WorldOptions o;
  o.network.defaults.delay = DelayDist::constant_of(10ms);
  World w(o);
  bool got = false;
  ProcId b = w.spawn("b", [&](Context& c) { got = c.receive(1s).has_value(); });
  ProcId a = w.spawn("a", [&](Context& c) { c.send(b, Message{.type = "m"}); });
  w.add_fault(Fault{.kind = Fault::Kind::partition,
                    .when = Trigger::at_time(2ms),
                    .duration = 8ms,  // heals at 10 ms, the instant the message arrives: before it does
                    .side_a = {a},
                    .side_b = {b}});
  w.run();
  EXPECT_TRUE(got);
  EXPECT_EQ(count_of(w, TraceKind::drop), 0u);
}

TEST(PartitionInTime, APartitionAtZeroDropsAMessageSentAtZero) {
  World w;
  std::vector<int> got;
  ProcId b = w.spawn("b", [&](Context& c) {
    while (auto m = c.receive(1s)) got.push_back(*m->as<int>());
  });
  ProcId a = w.spawn("a", [&](Context& c) {  // its first step is queued before the fault is added
    for (int i = 0; i < 4; ++i) {
      c.send(b, Message::of("n", i));
      c.sleep(10ms);
    }
  });
  w.add_fault(Fault{.kind = Fault::Kind::partition,
                    .when = Trigger::at_time(0ms),
                    .duration = 15ms,
                    .side_a = {a},
                    .side_b = {b}});
  w.run();
  EXPECT_EQ(got, (std::vector<int>{2, 3}));
  auto drops = events_of(w, TraceKind::drop);
  ASSERT_EQ(drops.size(), 2u);
  EXPECT_EQ(drops[0].time, 0ms);
  EXPECT_EQ(drops[0].detail, "partition");
}

TEST(PartitionInTime, MessagesOnAHealedLinkFlowAgain) {
  World w;
  std::vector<int> got;
  ProcId b = w.spawn("b", [&](Context& c) {
    while (auto m = c.receive(1s)) got.push_back(*m->as<int>());
  });
  ProcId a = w.spawn("a", [&](Context& c) {
    for (int i = 0; i < 6; ++i) {
      c.send(b, Message::of("n", i));
      c.sleep(10ms);
    }
  });
  w.schedule(5ms, [&] { w.partition({a}, {b}, false); });
  w.schedule(25ms, [&] { w.heal(); });
  w.schedule(35ms, [&] { w.partition({a}, {b}, true); });
  w.run();
  EXPECT_EQ(got, (std::vector<int>{0, 3}));  // cut at 10 and 20 ms, open at 30, cut one way from 35
  EXPECT_TRUE(w.network().blocked(a, b));
  EXPECT_FALSE(w.network().blocked(b, a));
}

// ---------------------------------------------------------------- same-instant events

TEST(SameInstant, APauseAtTStopsAProcessScheduledToRunAtT) {
  World w;
  Time woke{-1};
  ProcId p = w.spawn("p", [&](Context& c) {
    c.sleep(10ms);
    woke = w.now();
  });
  w.run_until(1ms);  // p's wake at 10 ms is queued before the fault is
  w.add_fault(
      Fault{.kind = Fault::Kind::pause, .when = Trigger::at_time(10ms), .target = p, .duration = 5ms});
  w.run();
  EXPECT_EQ(woke, 15ms);
}

TEST(SameInstant, APauseAtZeroStopsAProcessBeforeItsFirstStatement) {
  World w;
  Time first{-1};
  ProcId p = w.spawn("p", [&](Context&) { first = w.now(); });
  w.add_fault(Fault{.kind = Fault::Kind::pause, .when = Trigger::at_time(0ms), .target = p, .duration = 7ms});
  w.run();
  EXPECT_EQ(first, 7ms);
}

TEST(SameInstant, AWorldCallbackAtTRunsBeforeTheProcessStepsAtT) {
  World w;
  std::vector<std::string> order;
  w.spawn("p", [&](Context& c) {
    order.push_back("p0");
    c.sleep(10ms);
    order.push_back("p10");
  });
  w.run_until(1ms);
  w.schedule(10ms, [&] { order.push_back("cb10"); });
  w.run();
  EXPECT_EQ(order, (std::vector<std::string>{"p0", "cb10", "p10"}));
}

TEST(SameInstant, FaultsAtOneInstantKeepThePlansOrderAmongThemselves) {
  World w;
  ProcId p = w.spawn("p", [](Context& c) { c.sleep(1s); });
  w.add_fault(Fault{.kind = Fault::Kind::clock_drift, .when = Trigger::at_time(5ms), .target = p, .ppm = 10});
  w.add_fault(Fault{.kind = Fault::Kind::clock_drift, .when = Trigger::at_time(5ms), .target = p, .ppm = 20});
  w.run();
  EXPECT_EQ(w.clock(p).drift_ppm(), 20);
}

TEST(SameInstant, WithShuffledTiesFaultsStillComeFirst) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    World w({.seed = seed, .shuffle_ties = true});
    Time woke{-1};
    ProcId p = w.spawn("p", [&](Context& c) {
      c.sleep(10ms);
      woke = w.now();
    });
    w.run_until(1ms);
    w.add_fault(
        Fault{.kind = Fault::Kind::pause, .when = Trigger::at_time(10ms), .target = p, .duration = 5ms});
    w.run();
    EXPECT_EQ(woke, 15ms) << "seed " << seed;
  }
}
