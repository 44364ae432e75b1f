// Connection refused (NetworkOptions::refuse_when_down): the host of a process that is not running answers a
// message for it at once; a host that lost power, a paused process and a cut link do not.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "locksim/sim/world.hpp"
#include "test_util.hpp"

using namespace locksim;
using locksim::test::count_of;
using locksim::test::events_of;

namespace {

WorldOptions refusing(bool on) {
  WorldOptions o;
  o.network.refuse_when_down = on;  // default link: 1 ms each way
  return o;
}

/// A server that answers every "ping" with a "pong".
void serve(Context& c) {
  for (;;) {
    auto m = c.receive();
    if (m && m->type == "ping") c.reply(*m, Message::of("pong", 0));
  }
}

/// What one call from the client saw: when it returned and with what.
struct Answer {
  Time at{0};
  std::string type;  ///< "pong", "conn-refused", or "" (no answer: timeout)
  bool refusal_names_the_request = false;
  bool refusal_from_the_server = false;
};

/// A client that calls the server once at `at` (true time, its clock has no offset) with a 1 s timeout.
ProcId caller(World& w, ProcId server, Time at, std::optional<Answer>& out) {
  return w.spawn("client", [&w, server, at, &out](Context& c) {
    c.sleep(at - c.now());
    auto m = c.call(server, Message::of("ping", 0), 1s);
    Answer a;
    a.at = w.now();
    if (m) {
      a.type = std::string(m->type.view());
      if (is_refusal(*m)) {
        a.refusal_from_the_server = m->from == server;
        a.refusal_names_the_request = m->reply_to != 0 && m->as<ConnectionRefused>()->refused_type == "ping";
      }
    }
    out = a;
  });
}

}  // namespace

TEST(Refused, OffACrashedServerIsSilenceUntilTheTimeout) {
  World w(refusing(false));
  ProcId s = w.spawn("server", serve, ProcessOptions{.daemon = true});
  std::optional<Answer> got;
  caller(w, s, 10ms, got);
  w.add_fault(Fault{.kind = Fault::Kind::crash, .when = Trigger::at_time(5ms), .target = s});
  w.run();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->type, "");
  EXPECT_EQ(got->at, 1010ms);
}

TEST(Refused, OnACrashedServersHostRefusesAtOnceOverTheNetwork) {
  World w(refusing(true));
  ProcId s = w.spawn("server", serve, ProcessOptions{.daemon = true});
  std::optional<Answer> got;
  ProcId c = caller(w, s, 10ms, got);
  w.add_fault(Fault{.kind = Fault::Kind::crash, .when = Trigger::at_time(5ms), .target = s});
  w.run();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->type, "conn-refused");
  EXPECT_EQ(got->at, 12ms);  // 1 ms there, 1 ms back
  EXPECT_TRUE(got->refusal_names_the_request);
  EXPECT_TRUE(got->refusal_from_the_server);
  // The trace says what happened: the drop names the refusal, the host's send is marked as the host's.
  auto drops = events_of(w, TraceKind::drop, s);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].detail, "receiver crashed: connection refused");
  auto sends = events_of(w, TraceKind::send, s);
  ASSERT_EQ(sends.size(), 1u);
  EXPECT_EQ(sends[0].detail, "by the host");
  EXPECT_EQ(sends[0].peer, c);
}

TEST(Refused, AServerThatRunsAnswersItself) {
  World w(refusing(true));
  ProcId s = w.spawn("server", serve, ProcessOptions{.daemon = true});
  std::optional<Answer> got;
  caller(w, s, 10ms, got);
  w.run();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->type, "pong");
  EXPECT_EQ(got->at, 12ms);
}

TEST(Refused, AHostThatLostPowerAnswersNothing) {
  World w(refusing(true));
  ProcId s = w.spawn("server", serve, ProcessOptions{.daemon = true});
  std::optional<Answer> got;
  caller(w, s, 10ms, got);
  w.add_fault(
      Fault{.kind = Fault::Kind::crash, .when = Trigger::at_time(5ms), .target = s, .power_loss = true});
  w.run();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->type, "");
  EXPECT_EQ(got->at, 1010ms);
  auto drops = events_of(w, TraceKind::drop, s);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].detail, "receiver's host down");
}

TEST(Refused, AfterARestartFromPowerLossTheHostAnswersAgain) {
  // Down from 5 ms to 20 ms; a call at 30 ms reaches the new incarnation, which answers it.
  World w(refusing(true));
  ProcId s = w.spawn("server", serve, ProcessOptions{.daemon = true});
  std::optional<Answer> got;
  caller(w, s, 30ms, got);
  w.add_fault(Fault{.kind = Fault::Kind::crash,
                    .when = Trigger::at_time(5ms),
                    .target = s,
                    .duration = 15ms,
                    .power_loss = true});
  w.run();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->type, "pong");
}

TEST(Refused, AMessageForAnEarlierIncarnationIsRefused) {
  // The server crashes at 10.5 ms and restarts at once: the ping in flight (sent at 10 ms, due at 11 ms) was
  // meant for the incarnation that died, and the new one's host resets it as TCP resets an old connection.
  World w(refusing(true));
  ProcId s = w.spawn("server", serve, ProcessOptions{.daemon = true});
  std::optional<Answer> got;
  caller(w, s, 10ms, got);
  w.add_fault(Fault{.kind = Fault::Kind::crash,
                    .when = Trigger::at_time(Time{10ms} + 500us),
                    .target = s,
                    .duration = 100us});
  w.run();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->type, "conn-refused");
  EXPECT_EQ(got->at, 12ms);
}

TEST(Refused, APausedProcessBuffersAndAnswersWhenItResumes) {
  World w(refusing(true));
  ProcId s = w.spawn("server", serve, ProcessOptions{.daemon = true});
  std::optional<Answer> got;
  caller(w, s, 10ms, got);
  w.add_fault(
      Fault{.kind = Fault::Kind::pause, .when = Trigger::at_time(5ms), .target = s, .duration = 100ms});
  w.run();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->type, "pong");
  EXPECT_EQ(got->at, 106ms);  // answered as the pause ends at 105 ms, 1 ms back
  EXPECT_EQ(count_of(w, TraceKind::drop), 0u);
}

TEST(Refused, AnEndedProcessIsRefused) {
  World w(refusing(true));
  ProcId s = w.spawn("server", [](Context& c) { c.sleep(1ms); });
  std::optional<Answer> got;
  caller(w, s, 10ms, got);
  w.run();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->type, "conn-refused");
  EXPECT_EQ(events_of(w, TraceKind::drop, s).at(0).detail, "receiver exited: connection refused");
}

TEST(Refused, ACutLinkLosesTheMessageBeforeTheHostCanRefuseIt) {
  World w(refusing(true));
  ProcId s = w.spawn("server", serve, ProcessOptions{.daemon = true});
  std::optional<Answer> got;
  ProcId c = caller(w, s, 10ms, got);
  w.add_fault(Fault{.kind = Fault::Kind::crash, .when = Trigger::at_time(5ms), .target = s});
  // Cut while the ping is in flight (sent at 10 ms, due at 11 ms).
  w.add_fault(Fault{.kind = Fault::Kind::partition,
                    .when = Trigger::at_time(Time{10ms} + 500us),
                    .side_a = {c},
                    .side_b = {s}});
  w.run();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->type, "");
  EXPECT_EQ(events_of(w, TraceKind::drop, s).at(0).detail, "partition in flight");
  EXPECT_EQ(count_of(w, TraceKind::send, s), 0u);
}

TEST(Refused, ARefusalIsNeverRefused) {
  // The client crashes right after its ping leaves: the server's host refuses the ping, and the refusal
  // reaches a crashed client, whose host drops it without answering (no ping-pong of refusals).
  World w(refusing(true));
  ProcId s = w.spawn("server", serve, ProcessOptions{.daemon = true});
  std::optional<Answer> got;
  ProcId c = caller(w, s, 10ms, got);
  w.spawn("observer", [](Context& x) { x.sleep(100ms); });  // keeps the run going past the crashes
  w.add_fault(Fault{.kind = Fault::Kind::crash, .when = Trigger::at_time(5ms), .target = s});
  w.add_fault(Fault{.kind = Fault::Kind::crash, .when = Trigger::at_time(Time{10ms} + 500us), .target = c});
  w.run();
  EXPECT_FALSE(got);
  EXPECT_EQ(count_of(w, TraceKind::send, s), 1u);
  auto client_drops = events_of(w, TraceKind::drop, c);
  ASSERT_EQ(client_drops.size(), 1u);
  EXPECT_EQ(client_drops[0].detail, "receiver crashed");
  EXPECT_EQ(count_of(w, TraceKind::send, c), 1u);  // only its ping
}
