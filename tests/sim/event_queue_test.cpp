// The event queue (a radix heap with a sorted run for the floor's block) pops in exact (at, key) order,
// whatever the mix of pushes, peeks and pops.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>
#include <vector>

#include "locksim/sim/event_queue.hpp"
#include "locksim/sim/random.hpp"

namespace locksim {
namespace {

/// Drives an EventQueue and a std::set reference with the same random operations and compares every pop.
/// Pushes are at or after the time of the last event popped (the kernel's rule), sometimes before the time of
/// an event only looked at (as when run_until stops short of it and the world is given more work).
void drive(std::uint64_t seed, bool increasing_keys, int ops, std::int64_t spread) {
  Rng rng(seed);
  EventQueue q;
  std::set<std::tuple<std::int64_t, std::uint64_t, std::uint32_t>> ref;
  std::int64_t now = 0;
  std::uint64_t seq = 0;
  std::uint32_t id = 0;
  for (int i = 0; i < ops; ++i) {
    const std::uint64_t dice = rng.below(10);
    if (dice < 5 || ref.empty()) {
      // Many events share a time: a small spread, or exactly now.
      const auto room = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max() - now);
      const std::uint64_t span = std::min(static_cast<std::uint64_t>(spread), room);
      const std::int64_t at = now + (rng.chance(1, 4) ? 0 : static_cast<std::int64_t>(rng.below(span)));
      const std::uint64_t key = increasing_keys ? seq++ : rng.next();
      q.push(QueuedEvent{Time{at}, key, 0, id, 0});
      ref.emplace(at, key, id);
      ++id;
    } else if (dice < 7) {
      ASSERT_EQ(q.top().at.count(), std::get<0>(*ref.begin()));
      ASSERT_EQ(q.top().a, std::get<2>(*ref.begin()));
    } else {
      const QueuedEvent e = q.pop();
      ASSERT_EQ(e.at.count(), std::get<0>(*ref.begin())) << "op " << i;
      ASSERT_EQ(e.key, std::get<1>(*ref.begin())) << "op " << i;
      ASSERT_EQ(e.a, std::get<2>(*ref.begin())) << "op " << i;
      ref.erase(ref.begin());
      now = e.at.count();
    }
    ASSERT_EQ(q.size(), ref.size());
  }
  while (!ref.empty()) {
    const QueuedEvent e = q.pop();
    ASSERT_EQ(e.a, std::get<2>(*ref.begin()));
    ref.erase(ref.begin());
  }
  EXPECT_TRUE(q.empty());
}

TEST(EventQueue, SequenceKeysPopInTimeThenInsertionOrder) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) drive(seed, true, 5000, 1'000'000);
}

TEST(EventQueue, RandomKeysPopInTimeThenKeyOrder) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) drive(seed, false, 5000, 1'000'000);
}

TEST(EventQueue, HugeAndTinyTimeGapsMix) {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    drive(seed, true, 3000, std::int64_t{1} << 62);
    drive(seed, true, 3000, 3);
  }
}

TEST(EventQueue, SpreadsNearTheRunBlockMixTheRunTheNearHeapAndTheBuckets) {
  // The run holds the floor's 262,144 ns block: these spreads push into it, out of its order and past it.
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    for (std::int64_t spread : {64, 4'096, 262'144, 300'000, 5'000'000}) {
      drive(seed, true, 3000, spread);
      drive(seed, false, 3000, spread);
    }
  }
}

TEST(EventQueue, LargeRunsAreSortedDigitByDigit) {
  // A thousand events in one later 262,144 ns block become one run when the queue gets there: counted into
  // 2,048 groups of 128 ns (11 bits for 1,000 events), a big group into its nanoseconds, and events at one
  // time by key. 200 share a 4,096 ns span (about 6 per group), 100 a 64 ns span (one big group), 50 one
  // time (a big group, then std::sort), the rest are spread over the block; keys in push order or random.
  constexpr std::int64_t kBase = std::int64_t{1} << 20;  // a block boundary
  for (bool increasing : {true, false}) {
    Rng rng(increasing ? 7 : 8);
    EventQueue q;
    std::set<std::tuple<std::int64_t, std::uint64_t, std::uint32_t>> ref;
    std::uint64_t seq = 0;
    for (std::uint32_t id = 0; id < 1000; ++id) {
      std::int64_t at = kBase + static_cast<std::int64_t>(rng.below(262'144));
      if (id < 50) {
        at = kBase + 5'000;
      } else if (id < 150) {
        at = kBase + 8'192 + static_cast<std::int64_t>(rng.below(64));
      } else if (id < 350) {
        at = kBase + 40'960 + static_cast<std::int64_t>(rng.below(4'096));
      }
      const std::uint64_t key = increasing ? seq++ : rng.next();
      q.push(QueuedEvent{Time{at}, key, 0, id, 0});
      ref.emplace(at, key, id);
    }
    while (!ref.empty()) {
      const QueuedEvent e = q.pop();
      ASSERT_EQ(e.at.count(), std::get<0>(*ref.begin()));
      ASSERT_EQ(e.key, std::get<1>(*ref.begin()));
      ASSERT_EQ(e.a, std::get<2>(*ref.begin()));
      ref.erase(ref.begin());
    }
    EXPECT_TRUE(q.empty());
  }
}

TEST(EventQueue, PushInsideTheRunOutOfItsOrder) {
  EventQueue q;
  q.push(QueuedEvent{Time{10'000}, 0, 0, 1, 0});
  q.push(QueuedEvent{Time{10'300}, 1, 0, 2, 0});
  EXPECT_EQ(q.pop().a, 1u);                       // the floor's block is [0, 262144): 10300 is the run
  q.push(QueuedEvent{Time{10'100}, 2, 0, 3, 0});  // before the run's last event
  q.push(QueuedEvent{Time{10'300}, 3, 0, 4, 0});  // at it, later key: appended
  q.push(QueuedEvent{Time{10'050}, 4, 0, 5, 0});
  q.push(QueuedEvent{Time{300'000}, 5, 0, 6, 0});  // another block
  std::vector<std::uint32_t> order;
  while (!q.empty()) order.push_back(q.pop().a);
  EXPECT_EQ(order, (std::vector<std::uint32_t>{5, 3, 2, 4, 6}));
}

TEST(EventQueue, PushBeforeAPeekedEventIsServedFirst) {
  EventQueue q;
  q.push(QueuedEvent{Time{100}, 0, 0, 1, 0});
  EXPECT_EQ(q.top().a, 1u);                    // the floor moves to 100
  q.push(QueuedEvent{Time{50}, 1, 0, 2, 0});   // before it
  q.push(QueuedEvent{Time{100}, 2, 0, 3, 0});  // at it, later key
  q.push(QueuedEvent{Time{70}, 3, 0, 4, 0});
  std::vector<std::uint32_t> order;
  while (!q.empty()) order.push_back(q.pop().a);
  EXPECT_EQ(order, (std::vector<std::uint32_t>{2, 4, 1, 3}));
}

RC_GTEST_PROP(EventQueueProperty, MatchesAnOrderedSet, (std::uint64_t seed, bool increasing)) {
  drive(seed, increasing, 2000, *rc::gen::inRange<std::int64_t>(1, 1'000'000'000));
}

}  // namespace
}  // namespace locksim
