// Partitions: each one heals only itself; whether a packet crosses a cut is decided when it is sent and again
// when it arrives; faults at an instant take effect before the process steps of that instant.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "locksim/sim/world.hpp"
#include "test_util.hpp"

using namespace locksim;
using locksim::test::count_of;
using locksim::test::events_of;

namespace {

/// `from` sends a numbered message to each of `to` every 10 ms (at 0, 10, ..., 10 * (n - 1) ms); every
/// receiver records the numbers that reach it. Links take 1 ms.
struct Sender {
  explicit Sender(int receivers = 1, int n = 10) {
    for (int r = 0; r < receivers; ++r) {
      got.emplace_back();
      to.push_back(w.spawn("r" + std::to_string(r), [this, r](Context& c) {
        while (auto m = c.receive(1s)) got[static_cast<std::size_t>(r)].push_back(*m->as<int>());
      }));
    }
    from = w.spawn("s", [this, n](Context& c) {
      for (int i = 0; i < n; ++i) {
        for (ProcId p : to) c.send(p, Message::of("n", i));
        c.sleep(10ms);
      }
    });
  }
  void partition_at(Time at, Duration d, std::vector<ProcId> b) {
    w.add_fault(Fault{.kind = Fault::Kind::partition,
                      .when = Trigger::at_time(at),
                      .duration = d,
                      .side_a = {from},
                      .side_b = std::move(b)});
  }
  World w;
  ProcId from;
  std::vector<ProcId> to;
  std::vector<std::vector<int>> got;
};

}  // namespace

TEST(Partition, TheFirstOfTwoOverlappingPartitionsEndingLeavesTheSecondInForce) {
  Sender s;
  // #1 cuts s | r0 over [10 ms, 30 ms), #2 over [20 ms, 60 ms): sends at 10..50 ms are lost, at 60 ms and
  // after they arrive (a fault at an instant takes effect before the sends of that instant).
  s.partition_at(10ms, 20ms, {s.to[0]});
  s.partition_at(20ms, 40ms, {s.to[0]});
  EXPECT_EQ(s.w.run().reason, StopReason::done);
  EXPECT_EQ(s.got[0], (std::vector<int>{0, 6, 7, 8, 9}));
  auto net = events_of(s.w, TraceKind::network);
  ASSERT_EQ(net.size(), 4u);
  EXPECT_EQ(net[0].label, "partition");
  EXPECT_EQ(net[0].detail, "#1 s | r0");
  EXPECT_EQ(net[1].label, "partition");
  EXPECT_EQ(net[1].detail, "#2 s | r0");
  EXPECT_EQ(net[2].label, "heal");
  EXPECT_EQ(net[2].detail, "#1 s | r0");
  EXPECT_EQ(net[2].time, 30ms);
  EXPECT_EQ(net[3].label, "heal");
  EXPECT_EQ(net[3].detail, "#2 s | r0");
  EXPECT_EQ(net[3].time, 60ms);
  EXPECT_EQ(count_of(s.w, TraceKind::drop), 5u);
}

TEST(Partition, HealingOnePartitionKeepsTheLinksOnlyItCutOpenAndTheSharedOnesCut) {
  Sender s(2);
  // #1 cuts s from r0 and r1 over [5 ms, 25 ms); #2 cuts s from r0 only, over [15 ms, 45 ms).
  s.partition_at(5ms, 20ms, {s.to[0], s.to[1]});
  s.partition_at(15ms, 30ms, {s.to[0]});
  s.w.run();
  EXPECT_EQ(s.got[0], (std::vector<int>{0, 5, 6, 7, 8, 9}));
  EXPECT_EQ(s.got[1], (std::vector<int>{0, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(Partition, TheHealFaultHealsEveryPartitionAndALaterTimedEndIsQuiet) {
  Sender s(2);
  s.partition_at(5ms, 50ms, {s.to[0]});
  s.partition_at(5ms, 80ms, {s.to[1]});
  s.w.add_fault(Fault{.kind = Fault::Kind::heal, .when = Trigger::at_time(30ms)});
  s.w.run();
  EXPECT_EQ(s.got[0], (std::vector<int>{0, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(s.got[1], (std::vector<int>{0, 3, 4, 5, 6, 7, 8, 9}));
  auto net = events_of(s.w, TraceKind::network);
  ASSERT_EQ(net.size(), 3u);  // the two timed ends find their partitions healed already: nothing to say
  EXPECT_EQ(net[2].label, "heal");
  EXPECT_EQ(net[2].detail, "all");
  EXPECT_FALSE(s.w.network().blocked(s.from, s.to[0]));
  EXPECT_FALSE(s.w.network().blocked(s.from, s.to[1]));
}

TEST(Partition, HealOfOnePartitionByIdentity) {
  World w;
  ProcId a = w.spawn("a", [](Context&) {});
  ProcId b = w.spawn("b", [](Context&) {});
  ProcId c = w.spawn("c", [](Context&) {});
  const PartitionId one = w.partition({a}, {b}, false);
  const PartitionId two = w.partition({a}, {b, c}, true);
  EXPECT_NE(one, two);
  EXPECT_TRUE(w.network().blocked(a, b));
  EXPECT_TRUE(w.network().blocked(b, a));
  EXPECT_TRUE(w.network().blocked(a, c));
  w.heal(one);
  EXPECT_TRUE(w.network().blocked(a, b));  // #2 cuts it too
  EXPECT_FALSE(w.network().blocked(b, a));
  EXPECT_TRUE(w.network().blocked(a, c));
  w.heal(one);  // healed already: nothing happens
  w.heal(two);
  EXPECT_FALSE(w.network().blocked(a, b));
  EXPECT_FALSE(w.network().blocked(a, c));
  EXPECT_EQ(count_of(w, TraceKind::network), 4u);
}
