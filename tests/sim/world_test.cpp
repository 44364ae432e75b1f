#include <gtest/gtest.h>
#include "sim/world.hpp"
using namespace locksim;
TEST(World, PingPong) {
  World w;
  ProcId b;
  ProcId a = w.spawn("a", [&](Context& c) {
    auto r = c.call(b, Message{.type = "ping"}, 1s);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->type, "pong");
    EXPECT_EQ(c.now(), 2ms);
  });
  b = w.spawn("b", [&](Context& c) {
    auto m = c.receive();
    c.reply(*m, Message{.type = "pong"});
  }, {.daemon = true});
  (void)a;
  auto r = w.run();
  EXPECT_EQ(r.reason, StopReason::done);
}
