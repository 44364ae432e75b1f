// AnyValue: the message body type (a std::any with a 32-byte inline buffer).
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "locksim/sim/any.hpp"
#include "locksim/sim/world.hpp"

namespace locksim {
namespace {

struct Small {
  std::uint64_t a, b;
};
struct Big {
  std::array<std::uint64_t, 16> words{};
};
/// Counts live instances, to catch a leak or a double destruction.
struct Counted {
  static inline int live = 0;
  std::string text;
  explicit Counted(std::string t) : text(std::move(t)) { ++live; }
  Counted(const Counted& o) : text(o.text) { ++live; }
  Counted(Counted&& o) noexcept : text(std::move(o.text)) { ++live; }
  ~Counted() { --live; }
};

TEST(AnyValue, EmptyHoldsNothing) {
  AnyValue v;
  EXPECT_FALSE(v.has_value());
  EXPECT_EQ(v.get<int>(), nullptr);
}

TEST(AnyValue, GetChecksTheType) {
  AnyValue v = Small{1, 2};
  ASSERT_NE(v.get<Small>(), nullptr);
  EXPECT_EQ(v.get<Small>()->b, 2u);
  EXPECT_EQ(v.get<Big>(), nullptr);
  EXPECT_EQ(v.get<int>(), nullptr);
  const AnyValue& c = v;
  EXPECT_NE(c.get<const Small>(), nullptr);
}

TEST(AnyValue, LargeValuesGoToTheHeapAndCopyDeeply) {
  Big big;
  for (std::size_t i = 0; i < big.words.size(); ++i) big.words[i] = i * 3;
  AnyValue v = big;
  AnyValue copy = v;
  copy.get<Big>()->words[5] = 999;
  EXPECT_EQ(v.get<Big>()->words[5], 15u);
  EXPECT_EQ(copy.get<Big>()->words[5], 999u);
  AnyValue moved = std::move(v);
  EXPECT_FALSE(v.has_value());  // NOLINT(bugprone-use-after-move): a moved-from AnyValue is empty
  EXPECT_EQ(moved.get<Big>()->words[15], 45u);
}

TEST(AnyValue, OverAlignedValuesGoToTheHeapAndKeepTheirAlignment) {
  // The inline buffer is 8-aligned (so an AnyValue is 40 bytes): a 16-aligned value is stored on the heap.
  struct alignas(16) Wide {
    std::uint64_t lo, hi;
  };
  AnyValue v = Wide{1, 2};
  AnyValue copy = v;
  AnyValue moved = std::move(v);
  for (const AnyValue* a : {&copy, &moved}) {
    const Wide* w = a->get<Wide>();
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(w) % 16, 0u);
    EXPECT_EQ(w->lo + w->hi, 3u);
  }
}

TEST(AnyValue, CopiesMovesAndAssignmentsKeepInstancesBalanced) {
  Counted::live = 0;
  {
    AnyValue a = Counted("hello, a string longer than the small-string buffer");
    EXPECT_EQ(Counted::live, 1);
    AnyValue b = a;
    EXPECT_EQ(Counted::live, 2);
    AnyValue c = std::move(a);
    EXPECT_EQ(Counted::live, 2);
    b = c;
    EXPECT_EQ(Counted::live, 2);
    b = 42;  // a different type replaces the old value
    EXPECT_EQ(Counted::live, 1);
    EXPECT_EQ(*b.get<int>(), 42);
    c = std::move(b);
    EXPECT_EQ(Counted::live, 0);
    EXPECT_EQ(*c.get<int>(), 42);
    std::vector<AnyValue> many(100, AnyValue(Counted("x")));
    EXPECT_EQ(Counted::live, 100);
    many.erase(many.begin(), many.begin() + 50);
    EXPECT_EQ(Counted::live, 50);
  }
  EXPECT_EQ(Counted::live, 0);
}

/// Plain bodies of sizes that are not whole words, and of the whole buffer: a move of a trivially copyable
/// body copies whole words (AnyValue::copy_words), which must carry every byte of the value.
template <std::size_t N>
struct Bytes {
  std::array<unsigned char, N> b;
};

template <std::size_t N>
void expect_a_move_keeps_every_byte() {
  Bytes<N> v{};
  for (std::size_t i = 0; i < N; ++i) v.b[i] = static_cast<unsigned char>(0xa0 + i);
  AnyValue from(v);
  AnyValue to(std::move(from));
  EXPECT_FALSE(from.has_value()) << N;  // NOLINT(bugprone-use-after-move): a move leaves it empty
  ASSERT_NE(to.get<Bytes<N>>(), nullptr) << N;
  EXPECT_EQ(to.get<Bytes<N>>()->b, v.b) << N;
  AnyValue assigned(Small{1, 2});
  assigned = std::move(to);
  ASSERT_NE(assigned.get<Bytes<N>>(), nullptr) << N;
  EXPECT_EQ(assigned.get<Bytes<N>>()->b, v.b) << N;
}

TEST(AnyValue, AMoveOfAPlainBodyKeepsEveryByteWhateverItsSize) {
  expect_a_move_keeps_every_byte<1>();
  expect_a_move_keeps_every_byte<3>();
  expect_a_move_keeps_every_byte<8>();
  expect_a_move_keeps_every_byte<12>();
  expect_a_move_keeps_every_byte<17>();
  expect_a_move_keeps_every_byte<31>();
  expect_a_move_keeps_every_byte<32>();
  AnyValue small(Small{7, 9});
  AnyValue moved(std::move(small));
  ASSERT_NE(moved.get<Small>(), nullptr);
  EXPECT_EQ(moved.get<Small>()->a, 7u);
  EXPECT_EQ(moved.get<Small>()->b, 9u);
}

TEST(AnyValue, MessageBodiesSurviveTheNetwork) {
  World w;
  std::vector<std::string> got;
  const ProcId b = w.spawn("b", [&](Context& c) {
    for (int i = 0; i < 3; ++i) {
      auto m = c.receive();
      if (const auto* s = m->as<std::string>()) got.push_back(*s);
      if (const auto* v = m->as<std::vector<int>>()) got.push_back("vector of " + std::to_string(v->size()));
      if (const auto* sm = m->as<Small>()) got.push_back("small " + std::to_string(sm->a + sm->b));
    }
  });
  w.spawn("a", [&](Context& c) {
    c.send(b, Message::of("s", std::string("a body that does not fit in any small buffer at all")));
    c.send(b, Message::of("v", std::vector<int>{1, 2, 3}));
    c.send(b, Message::of("n", Small{20, 22}));
  });
  w.run();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], "a body that does not fit in any small buffer at all");
  EXPECT_EQ(got[1], "vector of 3");
  EXPECT_EQ(got[2], "small 42");
}

}  // namespace
}  // namespace locksim
