// Message's two pieces of text: MsgType (a short name stored inline) and Detail (optional text stored out of
// line, copied deeply).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "locksim/sim/message.hpp"
#include "locksim/sim/world.hpp"

namespace locksim {
namespace {

TEST(MsgType, HoldsUpTo23CharactersAndComparesAsText) {
  const std::string longest(23, 'x');
  const MsgType t(longest);
  EXPECT_EQ(t.view(), longest);
  EXPECT_EQ(t.size(), 23u);
  EXPECT_EQ(t, longest);
  EXPECT_EQ(MsgType("raft.client.reply"), "raft.client.reply");
  EXPECT_EQ(MsgType("a"), std::string_view("a"));
  EXPECT_FALSE(MsgType("a") == "ab");
  EXPECT_FALSE(MsgType("ab") == MsgType("a"));
  EXPECT_TRUE(MsgType().empty());
  EXPECT_EQ(MsgType("").view(), "");
  EXPECT_EQ(MsgType("SET").str(), "SET");
  EXPECT_EQ(fmt::format("[{}] [{:>5}]", MsgType("SET"), MsgType("ab")), "[SET] [   ab]");
}

TEST(MsgType, ItsBytesAreTheNameThenZerosThenTheSize) {
  // The trace copies and hashes all 24 bytes: every length (one, two or three words, the last of them read
  // in overlapping pieces), and bytes above 0x7f. The name is read from a heap block of exactly its length
  // (under AddressSanitizer a read past its end fails), and from one followed by 8 bytes of 0xee (a read past
  // its end shows in the bytes, in every build).
  for (std::size_t n = 0; n <= MsgType::kMax; ++n) {
    std::string name;
    for (std::size_t i = 0; i < n; ++i) name.push_back(static_cast<char>(i % 2 ? 0xff - i : 'a' + i));
    unsigned char want[sizeof(MsgType)] = {};
    std::memcpy(want, name.data(), n);
    want[sizeof(MsgType) - 1] = static_cast<unsigned char>(n);
    const auto exact = std::make_unique<char[]>(n);
    std::memcpy(exact.get(), name.data(), n);
    std::string padded = name + std::string(8, '\xee');
    for (const MsgType& t :
         {MsgType(std::string_view(exact.get(), n)), MsgType(std::string_view(padded.data(), n))}) {
      EXPECT_EQ(std::memcmp(t.bytes(), want, sizeof want), 0) << "length " << n;
      EXPECT_EQ(t.view(), name);
      EXPECT_EQ(t.size(), n);
    }
  }
}

TEST(MsgType, ALongerNameThrowsNamingIt) {
  try {
    MsgType t(std::string(24, 'y'));
    FAIL() << "no exception for a 24-character type";
  } catch (const std::length_error& e) {
    EXPECT_NE(std::string(e.what()).find(std::string(24, 'y')), std::string::npos) << e.what();
  }
}

TEST(MsgType, ATooLongTypeSentInsideAProcessEndsTheRunWithTheError) {
  World w;
  w.spawn("p", [](Context& c) { c.send(c.self(), Message{.type = "a-message-type-name-too-long"}); });
  EXPECT_THROW(w.run(), std::length_error);
}

TEST(Detail, EmptyByDefaultAndFromEmptyText) {
  EXPECT_TRUE(Detail().empty());
  EXPECT_TRUE(Detail("").empty());
  EXPECT_TRUE(Detail(std::string()).empty());
  EXPECT_EQ(Detail().view(), "");
  EXPECT_EQ(fmt::format("[{}] [{}]", Detail("x=1"), Detail()), "[x=1] []");
}

TEST(Detail, CopiesAreIndependentAndMovesLeaveTheSourceEmpty) {
  Detail a(std::string(100, 'd'));
  Detail b = a;
  EXPECT_EQ(a, b);
  EXPECT_NE(a.view().data(), b.view().data());  // a deep copy, not a shared pointer
  b = Detail("other");
  EXPECT_EQ(a.view(), std::string(100, 'd'));
  EXPECT_EQ(b, "other");
  Detail c = std::move(a);
  EXPECT_EQ(c.view(), std::string(100, 'd'));
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from state is specified here
  const Detail& same = c;
  c = same;  // self-assignment keeps the text
  EXPECT_EQ(c.view(), std::string(100, 'd'));
}

TEST(Message, IsTwoCacheLinesAndKeepsTypeBodyAndDetailThroughTheWorld) {
  static_assert(sizeof(Message) == 96 && alignof(Message) == 8);
  World w;
  std::vector<std::string> got;
  ProcId r = w.spawn("r", [&](Context& c) {
    for (int i = 0; i < 2; ++i) {
      auto m = c.receive();
      got.push_back(fmt::format("{}/{}/{}", m->type, *m->as<int>(), m->detail));
    }
  });
  w.spawn("s", [&](Context& c) {
    Message m = Message::of("ping", 7, std::string(40, 'z'));
    c.send(r, m);  // a copy: m stays intact
    m.body = 8;
    c.send(r, std::move(m));
  });
  w.run();
  EXPECT_EQ(got,
            (std::vector<std::string>{"ping/7/" + std::string(40, 'z'), "ping/8/" + std::string(40, 'z')}));
}

}  // namespace
}  // namespace locksim
