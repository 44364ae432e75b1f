// World basics: processes, send/receive/call, filters, names, trace content.
#include <gtest/gtest.h>

#include <limits>

#include <stdexcept>
#include <string>
#include <vector>

#include "locksim/sim/world.hpp"
#include "test_util.hpp"

using namespace locksim;
using locksim::test::count_of;
using locksim::test::events_of;

TEST(World, PingPong) {
  World w;
  ProcId b;
  ProcId a = w.spawn("a", [&](Context& c) {
    auto r = c.call(b, Message{.type = "ping"}, 1s);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->type, "pong");
    EXPECT_EQ(r->from, b);
    EXPECT_EQ(c.now(), 2ms);
  });
  b = w.spawn("b",
              [&](Context& c) {
                auto m = c.receive();
                c.reply(*m, Message{.type = "pong"});
              },
              {.daemon = true});
  auto r = w.run();
  EXPECT_EQ(r.reason, StopReason::done);
  EXPECT_EQ(w.state(a), ProcState::exited);
  EXPECT_EQ(w.messages_delivered(), 2u);
}

TEST(World, CallTimesOutAndALateReplyStaysInTheMailbox) {
  WorldOptions o;
  o.network.defaults.delay = DelayDist::constant_of(10ms);
  World w(o);
  ProcId srv = w.spawn("srv",
                       [](Context& c) {
                         for (;;) {
                           auto m = c.receive();
                           c.reply(*m, Message{.type = "late"});
                         }
                       },
                       {.daemon = true});
  w.spawn("cli", [&](Context& c) {
    auto r = c.call(srv, Message{.type = "req"}, 5ms);
    EXPECT_FALSE(r);
    EXPECT_EQ(c.now(), 5ms);
    auto late = c.receive(100ms);  // the reply arrives at 20 ms
    ASSERT_TRUE(late);
    EXPECT_EQ(late->type, "late");
    EXPECT_EQ(c.now(), 20ms);
  });
  EXPECT_EQ(w.run().reason, StopReason::done);
  EXPECT_EQ(count_of(w, TraceKind::timeout), 1u);
}

TEST(World, ReceiveFilterSkipsButKeepsOtherMessagesInArrivalOrder) {
  World w;
  std::vector<std::string> order;
  ProcId p = w.spawn("p", [&](Context& c) {
    c.sleep(10ms);  // let everything arrive first
    auto want = c.receive(0ns, [](const Message& m) { return m.type == "b"; });
    order.push_back(want->detail.str());
    while (auto m = c.receive(0ns)) order.push_back(m->detail.str());
  });
  w.spawn("q", [&](Context& c) {
    c.send(p, Message{.type = "a", .detail = "a1"});
    c.send(p, Message{.type = "b", .detail = "b1"});
    c.send(p, Message{.type = "a", .detail = "a2"});
    c.send(p, Message{.type = "b", .detail = "b2"});
  });
  w.run();
  EXPECT_EQ(order, (std::vector<std::string>{"b1", "a1", "a2", "b2"}));
}

TEST(World, LongMailboxesKeepArrivalOrderThroughFilteredAndPlainReceives) {
  // 300 messages waiting: take every third by filter from the middle, then the rest in order (exercises the
  // mailbox's removal from the front, from the middle, and its compaction).
  World w;
  std::vector<int> order;
  ProcId p = w.spawn("p", [&](Context& c) {
    c.sleep(10ms);
    for (int i = 0; i < 40; ++i) order.push_back(std::stoi(c.receive(0ns)->detail.str()));  // the front
    for (int k = 299; k >= 40; k -= 3) {
      const std::string want = std::to_string(k);
      order.push_back(
          std::stoi(c.receive(0ns, [&](const Message& m) { return m.detail == want; })->detail.str()));
    }
    while (auto m = c.receive(0ns)) order.push_back(std::stoi(m->detail.str()));
  });
  w.spawn("q", [&](Context& c) {
    for (int i = 0; i < 300; ++i) c.send(p, Message{.type = "n", .detail = std::to_string(i)});
  });
  w.run();
  std::vector<int> expected;
  for (int i = 0; i < 40; ++i) expected.push_back(i);
  for (int k = 299; k >= 40; k -= 3) expected.push_back(k);
  for (int i = 40; i < 300; ++i)
    if ((299 - i) % 3 != 0) expected.push_back(i);
  EXPECT_EQ(order, expected);
}

TEST(World, ReceiveWakesOnlyForAWantedMessage) {
  World w;
  Time got{-1};
  ProcId p = w.spawn("p", [&](Context& c) {
    auto m = c.receive(1s, [](const Message& m) { return m.type == "want"; });
    ASSERT_TRUE(m);
    got = c.now();
  });
  w.spawn("q", [&](Context& c) {
    c.send(p, Message{.type = "noise"});
    c.sleep(5ms);
    c.send(p, Message{.type = "want"});
  });
  w.run();
  EXPECT_EQ(got, 6ms);
}

TEST(World, ZeroTimeoutReceivePollsAndNegativeSleepIsZero) {
  World w;
  w.spawn("p", [&](Context& c) {
    EXPECT_FALSE(c.receive(0ns));
    c.sleep(-5ms);
    EXPECT_EQ(c.now(), 0ns);
  });
  EXPECT_EQ(w.run().reason, StopReason::done);
}

TEST(World, NamesLookupAndDuplicates) {
  World w;
  ProcId a = w.spawn("alpha", [&](Context& c) { EXPECT_EQ(c.lookup("beta"), ProcId{1}); });
  ProcId b = w.spawn("beta", [](Context&) {});
  EXPECT_EQ(a, ProcId{0});
  EXPECT_EQ(b, ProcId{1});
  EXPECT_EQ(w.find("beta"), b);
  EXPECT_FALSE(w.find("gamma").valid());
  EXPECT_EQ(w.name(a), "alpha");
  EXPECT_EQ(w.name(ProcId{}), "-");
  EXPECT_THROW(w.spawn("alpha", [](Context&) {}), std::invalid_argument);
  EXPECT_EQ(w.process_count(), 2u);
  w.run();
}

TEST(World, MaxProcessesIsEnforced) {
  WorldOptions o;
  o.limits.max_processes = 3;
  World w(o);
  for (int i = 0; i < 3; ++i) w.spawn("p" + std::to_string(i), [](Context&) {});
  EXPECT_THROW(w.spawn("p3", [](Context&) {}), std::length_error);
}

TEST(World, SpawnFromInsideAProcess) {
  World w;
  std::vector<std::string> log;
  w.spawn("parent", [&](Context& c) {
    c.sleep(1ms);
    w.spawn("child", [&](Context& cc) { log.push_back(cc.name() + "@" + format_time(cc.now())); });
    log.push_back("parent");
    c.sleep(1ms);
  });
  EXPECT_EQ(w.run().reason, StopReason::done);
  EXPECT_EQ(log, (std::vector<std::string>{"parent", "child@0.001s"}));
}

TEST(World, TraceRecordsSendDeliverReceiveWithClocks) {
  World w;
  ProcId b;
  ProcId a = w.spawn("a", [&](Context& c) { c.send(b, Message{.type = "hello", .detail = "x=1"}); },
                     {.clock = {.offset = 50s}});
  b = w.spawn("b", [&](Context& c) { c.receive(); }, {.clock = {.drift_ppm = 1000}});
  w.run();
  auto sends = events_of(w, TraceKind::send);
  ASSERT_EQ(sends.size(), 1u);
  EXPECT_EQ(sends[0].proc, a);
  EXPECT_EQ(sends[0].peer, b);
  EXPECT_EQ(sends[0].label, "hello");
  EXPECT_EQ(sends[0].detail, "x=1");
  EXPECT_EQ(sends[0].wall_time, 50s);
  auto rec = events_of(w, TraceKind::receive, b);
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec[0].msg, sends[0].msg);
  EXPECT_EQ(rec[0].time, 1ms);
  EXPECT_EQ(rec[0].node_time, 1001us);  // b's clock runs 1000 ppm fast
  const std::string line = Trace::format(rec[0], w.name(b), w.name(a));
  EXPECT_NE(line.find("receive"), std::string::npos);
  EXPECT_NE(line.find("peer=a"), std::string::npos);
  EXPECT_NE(line.find("mono=0.001001s"), std::string::npos);
}

TEST(World, NoteObserversSeeNotesSynchronously) {
  World w;
  std::vector<std::string> seen;
  w.on_note([&](ProcId p, std::string_view label, std::string_view detail) {
    seen.push_back(w.name(p) + ":" + std::string(label) + ":" + std::string(detail) + "@" +
                   format_time(w.now()));
  });
  w.spawn("p", [&](Context& c) {
    c.note("acquired", "token=3");
    seen.push_back("after");
  });
  w.run();
  EXPECT_EQ(seen, (std::vector<std::string>{"p:acquired:token=3@0s", "after"}));
}

TEST(World, ProcessRandomStreamsDependOnNameAndSeed) {
  auto draw = [](std::uint64_t seed, const std::string& name) {
    WorldOptions o;
    o.seed = seed;
    World w(o);
    std::uint64_t v = 0;
    w.spawn(name, [&](Context& c) { v = c.rng().next(); });
    w.run();
    return v;
  };
  EXPECT_EQ(draw(1, "a"), draw(1, "a"));
  EXPECT_NE(draw(1, "a"), draw(2, "a"));
  EXPECT_NE(draw(1, "a"), draw(1, "b"));
}

TEST(Time, Formatting) {
  EXPECT_EQ(format_time(0ns), "0s");
  EXPECT_EQ(format_time(10s), "10s");
  EXPECT_EQ(format_time(10ms), "0.01s");
  EXPECT_EQ(format_time(1ns), "0.000000001s");
  EXPECT_EQ(format_time(-1ns), "-0.000000001s");
  EXPECT_EQ(format_time(Duration{std::numeric_limits<std::int64_t>::max()}), "9223372036.854775807s");
  EXPECT_EQ(format_time(Duration{std::numeric_limits<std::int64_t>::min()}), "-9223372036.854775808s");
  EXPECT_EQ(format_time(1500ms), "1.5s");
  EXPECT_EQ(format_time(-2s - 1ns), "-2.000000001s");
  EXPECT_EQ(format_seconds(15020ms), "15.020");
  EXPECT_EQ(format_seconds(1999999999ns, 3), "2.000");
  EXPECT_EQ(format_seconds(-1500ms, 0), "-2");
  EXPECT_EQ(to_string(StopReason::mailbox_limit), "mailbox limit");
  EXPECT_EQ(to_string(Fault::Kind::delay_spike), "delay_spike");
  EXPECT_EQ(to_string(TraceKind::duplicate), "duplicate");
}

// A runaway world keeps at most max_kept_events in memory; the hash still covers every event.
TEST(TraceMemory, KeptEventsAreBoundedAndTheHashCoversAll) {
  auto make = [](std::uint64_t max_kept) {
    WorldOptions o;
    o.max_kept_events = max_kept;
    auto w = std::make_unique<World>(o);
    w->spawn("ticker", [](Context& c) {
      for (int i = 0; i < 500; ++i) {
        c.sleep(1ms);
        c.note("tick");
      }
    });
    w->run();
    return w;
  };
  auto bounded = make(100);
  auto full = make(1'000'000);
  EXPECT_EQ(bounded->trace().events().size(), 100u);
  EXPECT_TRUE(bounded->trace().truncated());
  EXPECT_FALSE(full->trace().truncated());
  EXPECT_GT(full->trace().events().size(), 500u);
  EXPECT_EQ(bounded->trace().count(), full->trace().count());
  EXPECT_EQ(bounded->trace().hash(), full->trace().hash());
}

TEST(World, HugePageStacksAreDisjointAndReusedAfterARestart) {
  // 1,100 processes with the default 64 KiB stacks fill more than one 64 MiB chunk of the arena. Each
  // fills 8 KiB of its own stack with its id, sleeps while all the others do the same, and checks its bytes:
  // stacks that overlapped would overwrite each other. Some crash while asleep and restart: a restart's stack
  // comes from the arena's free blocks. (The default size: under AddressSanitizer its own bookkeeping
  // overflows a 16 KiB stack.)
  WorldOptions o;
  o.huge_page_stacks = true;
  World w(o);
  constexpr int kProcs = 1'100;
  static_assert(kProcs * (64 * 1024 + 1024) > 64 * 1024 * 1024);
  int intact = 0, starts = 0;
  for (int i = 0; i < kProcs; ++i) {
    w.spawn("p" + std::to_string(i), [i, &intact, &starts](Context& c) {
      ++starts;
      volatile unsigned char mine[8192];
      for (auto& b : mine) b = static_cast<unsigned char>(i);
      c.sleep(10ms);
      bool ok = true;
      for (auto& b : mine) ok = ok && b == static_cast<unsigned char>(i);
      if (ok) ++intact;
    });
  }
  for (int i = 0; i < kProcs; i += 25) {
    Fault f;
    f.kind = Fault::Kind::crash;
    f.when = Trigger::at_time(Time{5ms});
    f.target = ProcId{static_cast<std::uint32_t>(i)};
    f.duration = 1ms;  // restart 1 ms later
    w.add_fault(f);
  }
  const RunResult r = w.run();
  EXPECT_EQ(r.reason, StopReason::done);
  EXPECT_EQ(starts, kProcs + kProcs / 25);
  EXPECT_EQ(intact, kProcs);
}

TEST(World, TenThousandMessagesInFlightMoveWithTheSlabToHugePages) {
  // 10,000 messages sent before any is received: the message slab grows past 512 KiB, where it moves to a
  // huge-page mapping of its own (sim/memory.hpp), and on through more of them as it doubles. Every message
  // must come out intact and in order.
  World w;
  constexpr int kMessages = 10'000;
  const ProcId sink = w.spawn("sink", [](Context& c) {
    c.sleep(1s);  // let them all arrive first
    for (int i = 0; i < kMessages; ++i) {
      auto m = c.receive();
      ASSERT_TRUE(m.has_value());
      ASSERT_EQ(m->type, "n");
      ASSERT_NE(m->as<std::uint64_t>(), nullptr);
      ASSERT_EQ(*m->as<std::uint64_t>(),
                std::uint64_t{0x9e3779b97f4a7c15ULL} * static_cast<std::uint64_t>(i));
    }
    c.note("done");
  });
  w.spawn("source", [sink](Context& c) {
    for (int i = 0; i < kMessages; ++i)
      c.send(sink, Message::of("n", std::uint64_t{0x9e3779b97f4a7c15ULL} * static_cast<std::uint64_t>(i)));
  });
  const RunResult r = w.run();
  EXPECT_EQ(r.reason, StopReason::done);
  int done = 0;
  for (const auto& e : w.trace().events()) done += e.kind == TraceKind::note && e.label == "done";
  EXPECT_EQ(done, 1);
}
