// Messages held by cut links (NetworkOptions::cut_messages = held): a stream's semantics, as TCP gives them.
// They arrive after the heal, in the order they were sent; a one-way cut holds only its direction; one that
// meets the cut on arrival is held too; a crash or restart of either end drops them with a connection reset;
// the default (lost) is unchanged.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "locksim/sim/world.hpp"
#include "test_util.hpp"

using namespace locksim;
using locksim::test::count_of;
using locksim::test::events_of;

namespace {

WorldOptions with_cut(CutMessages cut, Duration delay = 1ms) {
  WorldOptions o;
  o.network.cut_messages = cut;
  o.network.defaults.delay = DelayDist::constant_of(delay);
  return o;
}

/// `s` sends a numbered message to `r` every 10 ms (at 0, 10, ..., 10 * (n - 1) ms); `r` records each number
/// and when it arrived. Links take `delay`.
struct Stream {
  explicit Stream(CutMessages cut, int n = 10, Duration delay = 1ms) : w(with_cut(cut, delay)) {
    r = w.spawn("r", [this](Context& c) {
      while (auto m = c.receive(200ms)) {
        got.push_back(*m->as<int>());
        at.push_back(w.now());
      }
    });
    s = w.spawn("s", [this, n](Context& c) {
      for (int i = 0; i < n; ++i) {
        if (c.incarnation() == 0) c.send(r, Message::of("n", i));
        c.sleep(10ms);
      }
    });
  }
  void partition_at(Time at, Duration d, bool one_way = false) {
    w.add_fault(Fault{.kind = Fault::Kind::partition,
                      .when = Trigger::at_time(at),
                      .duration = d,
                      .one_way = one_way,
                      .side_a = {s},
                      .side_b = {r}});
  }
  World w;
  ProcId r, s;
  std::vector<int> got;
  std::vector<Time> at;
};

std::vector<std::string> details(const World& w, TraceKind k) {
  std::vector<std::string> out;
  for (const TraceEvent& e : events_of(w, k)) out.push_back(e.detail);
  return out;
}

}  // namespace

TEST(Held, MessagesSentDuringTheCutArriveAfterTheHealInSendOrder) {
  Stream st(CutMessages::held);
  st.partition_at(15ms, 40ms);  // cut over [15 ms, 55 ms): the sends at 20, 30, 40 and 50 ms meet it
  EXPECT_EQ(st.w.run().reason, StopReason::done);
  EXPECT_EQ(st.got, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // 2..5 arrive after the heal at 55 ms (1 ms delay), each after the one before it, before 6 (sent at 60 ms).
  ASSERT_EQ(st.at.size(), 10u);
  EXPECT_EQ(st.at[2], 56ms);
  for (std::size_t i = 3; i <= 5; ++i) EXPECT_GT(st.at[i], st.at[i - 1]);
  EXPECT_LT(st.at[5], 57ms);
  EXPECT_EQ(st.at[6], 61ms);
  EXPECT_EQ(count_of(st.w, TraceKind::drop), 0u);
  const std::vector<std::string> holds = details(st.w, TraceKind::hold);
  ASSERT_EQ(holds.size(), 8u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(holds[i], "sent while the link was cut");
  EXPECT_EQ(holds[4], "released by the heal: arrives in 0.001s");
  EXPECT_EQ(events_of(st.w, TraceKind::hold)[4].time, 55ms);
}

TEST(Held, LostIsTheDefaultAndUnchanged) {
  Stream st(WorldOptions{}.network.cut_messages);
  EXPECT_EQ(WorldOptions{}.network.cut_messages, CutMessages::lost);
  st.partition_at(15ms, 40ms);
  st.w.run();
  EXPECT_EQ(st.got, (std::vector<int>{0, 1, 6, 7, 8, 9}));
  EXPECT_EQ(count_of(st.w, TraceKind::hold), 0u);
  EXPECT_EQ(details(st.w, TraceKind::drop), std::vector<std::string>(4, "partition"));
}

TEST(Held, WithoutACutHeldAndLostRunTheSameTrace) {
  Stream lost(CutMessages::lost), held(CutMessages::held);
  lost.w.run();
  held.w.run();
  EXPECT_EQ(lost.w.trace().hash(), held.w.trace().hash());
}

TEST(Held, AOneWayCutHoldsOnlyItsDirection) {
  // s -> r is cut over [15 ms, 55 ms). s sends 0..5 every 10 ms; r sleeps until 30 ms, sends s a tick (r -> s
  // is open), then answers every request at once.
  World w(with_cut(CutMessages::held));
  ProcId s;
  const ProcId r = w.spawn("r", [&](Context& c) {
    c.sleep(30ms);
    c.send(s, Message::of("tick", -1));
    while (auto m = c.receive(200ms)) c.reply(*m, Message::of("ack", *m->as<int>()));
  });
  s = w.spawn("s", [&](Context& c) {
    for (int i = 0; i < 6; ++i) {
      c.send(r, Message::of("n", i));
      c.sleep(10ms);
    }
    while (c.receive(100ms)) {
    }
  });
  w.add_fault(Fault{.kind = Fault::Kind::partition,
                    .when = Trigger::at_time(15ms),
                    .duration = 40ms,
                    .one_way = true,
                    .side_a = {s},
                    .side_b = {r}});
  w.run();
  const std::vector<TraceEvent> at_r = events_of(w, TraceKind::deliver, r);
  ASSERT_EQ(at_r.size(), 6u);
  EXPECT_EQ(at_r[1].time, 11ms);
  EXPECT_EQ(at_r[2].time, 56ms);  // sent at 20 ms: held until the heal at 55 ms
  for (std::size_t i = 3; i < 6; ++i) EXPECT_GT(at_r[i].time, at_r[i - 1].time);
  // r -> s is open: the tick and the answers to 0 and 1 arrive during the cut, at 31 ms.
  const std::vector<TraceEvent> at_s = events_of(w, TraceKind::deliver, s);
  ASSERT_EQ(at_s.size(), 7u);
  EXPECT_EQ(at_s[0].label, "tick");
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(at_s[i].time, 31ms);
  // Every hold is of s -> r: 2..5 held, then released.
  for (const TraceEvent& e : events_of(w, TraceKind::hold)) {
    EXPECT_EQ(e.proc, r);
    EXPECT_EQ(e.peer, s);
  }
  EXPECT_EQ(count_of(w, TraceKind::hold), 8u);
  EXPECT_EQ(count_of(w, TraceKind::drop), 0u);
}

TEST(Held, AMessageInFlightWhenTheLinkIsCutIsHeldAndKeepsItsPlaceInSendOrder) {
  // 25 ms links. 0 is sent at 0 and would arrive at 25 ms; the cut comes at 5 ms. 1 and 2, sent at 10 and
  // 20 ms, are held at their send; 0 is held when it arrives, after them. The heal at 35 ms releases them in
  // the order they were sent: 0, 1, 2.
  Stream st(CutMessages::held, 3, 25ms);
  st.partition_at(5ms, 30ms);
  st.w.run();
  EXPECT_EQ(st.got, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(st.at, (std::vector<Time>{60ms, 60ms + 1ns, 60ms + 2ns}));
  const std::vector<TraceEvent> holds = events_of(st.w, TraceKind::hold);
  ASSERT_EQ(holds.size(), 6u);
  EXPECT_EQ(holds[0].detail, "sent while the link was cut");  // 1, at 10 ms
  EXPECT_EQ(holds[1].detail, "sent while the link was cut");  // 2, at 20 ms
  EXPECT_EQ(holds[2].detail, "in flight when the link was cut");
  EXPECT_EQ(holds[2].time, 25ms);
  EXPECT_EQ(holds[3].msg, holds[2].msg);  // released first
  EXPECT_EQ(holds[4].msg, holds[0].msg);
  EXPECT_EQ(holds[5].msg, holds[1].msg);
}

TEST(Held, HeldUntilTheLastPartitionCuttingTheLinkHeals) {
  Stream st(CutMessages::held);
  st.partition_at(15ms, 20ms);  // #1 over [15 ms, 35 ms)
  st.partition_at(25ms, 30ms);  // #2 over [25 ms, 55 ms)
  st.w.run();
  EXPECT_EQ(st.got, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(st.at[2], 56ms);  // not at #1's heal
}

TEST(Held, AHealOfAllReleasesThem) {
  Stream st(CutMessages::held);
  st.partition_at(15ms, 0ns);  // no end of its own
  st.w.add_fault(Fault{.kind = Fault::Kind::heal, .when = Trigger::at_time(45ms)});
  st.w.run();
  EXPECT_EQ(st.got, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(st.at[2], 46ms);
}

TEST(Held, TheLinksLossAndDuplicationDoNotApplyToHeldMessages) {
  {
    Stream st(CutMessages::held, 4);
    st.w.network().link(st.s, st.r).duplicate_ppm = 1'000'000;  // every message on the open link twice
    st.partition_at(5ms, 30ms);
    st.w.run();
    EXPECT_EQ(st.got, (std::vector<int>{0, 0, 1, 2, 3}));  // 0 sent before the cut; 1..3 held, once each
  }
  {
    Stream st(CutMessages::held, 4);
    st.w.network().link(st.s, st.r).loss_ppm = 1'000'000;  // every message on the open link lost
    st.partition_at(5ms, 30ms);
    st.w.run();
    EXPECT_EQ(st.got, (std::vector<int>{1, 2, 3}));
  }
}

TEST(Held, ARestartOfTheSenderResetsTheConnection) {
  Stream st(CutMessages::held, 6);
  st.partition_at(15ms, 40ms);
  st.w.schedule(Time{32ms}, [&] {
    st.w.crash(st.s, false);
    st.w.restart(st.s);  // its body sends nothing in incarnation 1
  });
  st.w.run();
  EXPECT_EQ(st.got, (std::vector<int>{0, 1}));
  EXPECT_EQ(details(st.w, TraceKind::drop),
            std::vector<std::string>(2, "connection reset: sender restarted"));  // 2 and 3
  for (const TraceEvent& e : events_of(st.w, TraceKind::drop)) EXPECT_EQ(e.time, 55ms);
}

TEST(Held, ACrashOrRestartOfTheReceiverResetsTheConnection) {
  {
    Stream st(CutMessages::held, 8);  // s goes on sending until 70 ms: the run lasts past the heal
    st.partition_at(15ms, 40ms);
    st.w.schedule(Time{25ms}, [&] { st.w.crash(st.r, false); });
    st.w.run();
    std::vector<std::string> drops = details(st.w, TraceKind::drop);
    ASSERT_EQ(drops.size(), 6u);
    drops.resize(4);  // 2..5 at the heal; then 6 and 7 ("receiver crashed") as any message for r
    EXPECT_EQ(drops, std::vector<std::string>(4, "connection reset: receiver crashed"));
    EXPECT_EQ(events_of(st.w, TraceKind::drop)[0].time, 55ms);
  }
  {
    Stream st(CutMessages::held, 4);
    st.partition_at(15ms, 40ms);
    st.w.schedule(Time{25ms}, [&] {
      st.w.crash(st.r, false);
      st.w.restart(st.r);
    });
    st.w.run();
    // 2 was sent to r's first incarnation; 3, sent at 30 ms, to its second, which takes it.
    EXPECT_EQ(details(st.w, TraceKind::drop),
              std::vector<std::string>{"connection reset: receiver restarted"});
    EXPECT_EQ(st.got, (std::vector<int>{0, 1, 3}));
  }
}

TEST(Held, WithConnectionRefusedTheCrashedReceiversHostAnswersTheSender) {
  // r | s over [10 ms, 40 ms); s sends at 20 ms (held); r crashes at 30 ms. At the heal the message is
  // dropped (its connection is gone) and r's host answers s with a refusal, as it answers any message for r.
  WorldOptions o = with_cut(CutMessages::held);
  o.network.refuse_when_down = true;
  World w(o);
  std::vector<std::pair<std::string, Time>> seen;
  const ProcId r = w.spawn("r", [](Context& c) {
    while (c.receive(200ms)) {
    }
  });
  const ProcId s = w.spawn("s", [&](Context& c) {
    c.sleep(20ms);
    c.send(r, Message::of("n", 1));
    if (auto m = c.receive(100ms)) seen.emplace_back(std::string(m->type.view()), w.now());
  });
  w.add_fault(Fault{.kind = Fault::Kind::partition,
                    .when = Trigger::at_time(10ms),
                    .duration = 30ms,
                    .side_a = {r},
                    .side_b = {s}});
  w.schedule(Time{30ms}, [&] { w.crash(r, false); });
  w.run();
  EXPECT_EQ(details(w, TraceKind::drop), std::vector<std::string>{"connection reset: receiver crashed"});
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].first, "conn-refused");
  EXPECT_EQ(seen[0].second, 41ms);
}
