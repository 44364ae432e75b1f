// Network: partitions (two-way and one-way) drop messages and heal, delay spikes, per-link overrides, loss,
// duplication.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "locksim/sim/network.hpp"
#include "locksim/sim/world.hpp"
#include "test_util.hpp"

using namespace locksim;
using locksim::test::count_of;
using locksim::test::events_of;

namespace {

/// a and b each send one numbered message to the other every 10 ms, `n` times, and record what arrives.
struct PingWorld {
  explicit PingWorld(WorldOptions o = {}, int n = 10) : w(o) {
    a = w.spawn("a", [this, n](Context& c) { run(c, b, got_a, n); });
    b = w.spawn("b", [this, n](Context& c) { run(c, a, got_b, n); });
  }
  static void run(Context& c, ProcId peer, std::vector<std::pair<int, Time>>& got, int n) {
    for (int i = 0; i < n; ++i) {
      c.send(peer, Message::of("n", i));
      // Collect whatever arrives during the next 10 ms.
      const Time until = c.now() + 10ms;
      while (c.now() < until) {
        auto m = c.receive(until - c.now());
        if (m) got.emplace_back(*m->as<int>(), c.now());
      }
    }
    while (auto m = c.receive(1s)) got.emplace_back(*m->as<int>(), c.now());
  }
  std::vector<int> numbers(const std::vector<std::pair<int, Time>>& got) const {
    std::vector<int> out;
    for (auto& [i, t] : got) out.push_back(i);
    return out;
  }
  World w;
  ProcId a, b;
  std::vector<std::pair<int, Time>> got_a, got_b;
};

}  // namespace

TEST(Network, TwoWayPartitionDropsBothDirectionsAndHeals) {
  PingWorld pw;
  // Messages are sent at 0, 10, ..., 90 ms. Cut at 25 ms for 30 ms: 30, 40, 50 ms sends are lost.
  pw.w.add_fault(Fault{.kind = Fault::Kind::partition,
                       .when = Trigger::at_time(25ms),
                       .duration = 30ms,
                       .side_a = {pw.a},
                       .side_b = {pw.b}});
  EXPECT_EQ(pw.w.run().reason, StopReason::done);
  const std::vector<int> expected{0, 1, 2, 6, 7, 8, 9};
  EXPECT_EQ(pw.numbers(pw.got_a), expected);
  EXPECT_EQ(pw.numbers(pw.got_b), expected);
  auto drops = events_of(pw.w, TraceKind::drop);
  ASSERT_EQ(drops.size(), 6u);
  for (const auto& d : drops) EXPECT_EQ(d.detail, "partition");
  auto net = events_of(pw.w, TraceKind::network);
  ASSERT_EQ(net.size(), 2u);
  EXPECT_EQ(net[0].label, "partition");
  EXPECT_EQ(net[0].detail, "#1 a | b");
  EXPECT_EQ(net[1].label, "heal");
  EXPECT_EQ(net[1].detail, "#1 a | b");
  EXPECT_EQ(net[1].time, 55ms);
}

TEST(Network, OneWayPartitionDropsOnlyOneDirection) {
  PingWorld pw;
  pw.w.add_fault(Fault{.kind = Fault::Kind::partition,
                       .when = Trigger::at_time(25ms),
                       .duration = 30ms,
                       .one_way = true,
                       .side_a = {pw.a},
                       .side_b = {pw.b}});
  pw.w.run();
  EXPECT_EQ(pw.numbers(pw.got_b), (std::vector<int>{0, 1, 2, 6, 7, 8, 9}));  // a -> b cut
  EXPECT_EQ(pw.numbers(pw.got_a), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(events_of(pw.w, TraceKind::network)[0].detail, "#1 a -> b");
}

TEST(Network, PartitionWithoutDurationLastsUntilAnExplicitHeal) {
  PingWorld pw;
  pw.w.schedule(25ms, [&] { pw.w.partition({pw.a}, {pw.b}, false); });
  pw.w.schedule(75ms, [&] { pw.w.heal(); });
  pw.w.run();
  EXPECT_EQ(pw.numbers(pw.got_a), (std::vector<int>{0, 1, 2, 8, 9}));
  EXPECT_FALSE(pw.w.network().blocked(pw.a, pw.b));
}

TEST(Network, PartitionDoesNotCutAProcessFromItself) {
  World w;
  int got = 0;
  ProcId a = w.spawn("a", [&](Context& c) {
    c.send(c.self(), Message{.type = "self"});
    if (c.receive(10ms)) ++got;
  });
  w.partition({a}, {a}, false);
  w.run();
  EXPECT_EQ(got, 1);
}

TEST(Network, DelaySpikeDelaysMatchingMessagesForItsDuration) {
  PingWorld pw;
  // a -> b messages sent in [25 ms, 55 ms) get 100 ms more: 30, 40, 50.
  pw.w.add_fault(Fault{.kind = Fault::Kind::delay_spike,
                       .when = Trigger::at_time(25ms),
                       .target = pw.a,
                       .peer = pw.b,
                       .duration = 30ms,
                       .extra = 100ms});
  pw.w.run();
  std::vector<std::pair<int, Time>> late;
  for (auto& [i, t] : pw.got_b)
    if (i >= 3 && i <= 5) late.emplace_back(i, t);
  EXPECT_EQ(late, (std::vector<std::pair<int, Time>>{{3, 131ms}, {4, 141ms}, {5, 151ms}}));
  EXPECT_EQ(pw.got_b[3], std::make_pair(6, Time{61ms}));  // overtaken by later, undelayed messages
  for (auto& [i, t] : pw.got_a) EXPECT_EQ(t, Duration{i * 10ms + 1ms});  // b -> a unaffected
}

TEST(Network, CountedDelaySpikeHitsOnlyTheFirstMessages) {
  PingWorld pw;
  pw.w.add_fault(Fault{.kind = Fault::Kind::delay_spike,
                       .when = Trigger::at_time(5ms),
                       .extra = 50ms,
                       .count = 2});  // any link
  pw.w.run();
  // The first two sends after 5 ms (a's and b's at 10 ms) are delayed; everything else takes 1 ms.
  int delayed = 0;
  for (auto* got : {&pw.got_a, &pw.got_b})
    for (auto& [i, t] : *got) delayed += t != Duration{i * 10ms + 1ms};
  EXPECT_EQ(delayed, 2);
}

TEST(Network, PerLinkOverrides) {
  WorldOptions o;
  o.network.defaults.delay = DelayDist::constant_of(1ms);
  PingWorld pw(o, 3);
  pw.w.network().link(pw.a, pw.b).delay = DelayDist::constant_of(7ms);
  pw.w.run();
  EXPECT_EQ(pw.got_b, (std::vector<std::pair<int, Time>>{{0, 7ms}, {1, 17ms}, {2, 27ms}}));
  EXPECT_EQ(pw.got_a, (std::vector<std::pair<int, Time>>{{0, 1ms}, {1, 11ms}, {2, 21ms}}));
}

TEST(Network, PerLinkTotalLossAndDuplication) {
  PingWorld pw({}, 5);
  pw.w.network().link(pw.a, pw.b).loss_ppm = 1'000'000;
  pw.w.network().link(pw.b, pw.a).duplicate_ppm = 1'000'000;
  pw.w.run();
  EXPECT_TRUE(pw.got_b.empty());
  EXPECT_EQ(pw.numbers(pw.got_a), (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_EQ(count_of(pw.w, TraceKind::duplicate), 5u);
  auto drops = events_of(pw.w, TraceKind::drop);
  ASSERT_EQ(drops.size(), 5u);
  EXPECT_EQ(drops[0].detail, "loss");
  // Both copies of a duplicated message carry the same id.
  auto delivers = events_of(pw.w, TraceKind::deliver, pw.a);
  ASSERT_EQ(delivers.size(), 10u);
  EXPECT_EQ(delivers[0].msg, delivers[1].msg);
}

TEST(Network, LossRateMatchesItsProbability) {
  NetworkOptions no;
  no.defaults.loss_ppm = 250'000;
  Network net(no, Rng(17));
  int lost = 0;
  for (int i = 0; i < 4000; ++i) lost += net.decide(ProcId{0}, ProcId{1}, Time{i}).lost;
  EXPECT_NEAR(lost, 1000, 165);  // sd ~27
}

TEST(Network, DelayDistributionsStayInTheirBounds) {
  Rng r(3);
  const DelayDist u = DelayDist::uniform_of(2ms, 5ms);
  const DelayDist e{DelayDist::Kind::exponential, 1ms, 20ms, 2ms, 1.5};
  const DelayDist lt{DelayDist::Kind::long_tail, 1ms, 1s, 1ms, 1.2};
  bool spike = false;
  for (int i = 0; i < 5000; ++i) {
    const Duration du = u.sample(r), de = e.sample(r), dl = lt.sample(r);
    ASSERT_GE(du, 2ms);
    ASSERT_LE(du, 5ms);
    ASSERT_GE(de, 1ms);
    ASSERT_LE(de, 20ms);
    ASSERT_GE(dl, 2ms);  // min + a Pareto draw >= scale
    ASSERT_LE(dl, 1s);
    spike |= dl > 100ms;
  }
  EXPECT_TRUE(spike);  // the long tail is long
  EXPECT_EQ(DelayDist::constant_of(3ms).sample(r), 3ms);
}

TEST(Network, ReorderingCanDeliverOutOfSendOrder) {
  WorldOptions o;
  o.network.defaults.reorder_ppm = 500'000;
  o.network.defaults.reorder_extra = 20ms;
  World w(o);
  std::vector<int> got;
  ProcId b = w.spawn("b", [&](Context& c) {
    while (auto m = c.receive(100ms)) got.push_back(*m->as<int>());
  });
  w.spawn("a", [&](Context& c) {
    for (int i = 0; i < 50; ++i) {
      c.send(b, Message::of("n", i));
      c.sleep(1ms);
    }
  });
  w.run();
  ASSERT_EQ(got.size(), 50u);
  EXPECT_FALSE(std::is_sorted(got.begin(), got.end()));
}
