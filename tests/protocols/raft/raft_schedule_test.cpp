// Raft under scripted fault schedules: each test drives the group into one classic bug's situation (pauses,
// crashes with restart, partitions, duplicated and reordered messages) and checks the safety property that
// bug breaks: election safety, state machine safety, a leader that knows it is no longer one, a commit index
// that never moves back, one lease per grant.
#include <gtest/gtest.h>

#include <charconv>
#include <functional>

#include "locksim/protocols/raft/lease_group.hpp"
#include "raft_test_util.hpp"

using namespace locksim;
using namespace locksim::raft;
using locksim::raft::testing::Recorder;

namespace {

WorldOptions quiet(std::uint64_t seed) {
  WorldOptions o;
  o.seed = seed;
  o.keep_trace = false;
  o.network.defaults.delay = DelayDist::uniform_of(1ms, 5ms);
  return o;
}

/// A member's persisted term and vote (the ProcId value + 1 it voted for; 0: none), read from its storage.
struct Hard {
  std::uint64_t term = 0, vote = 0;
};
Hard hard(World& w, ProcId p) {
  Hard h;
  auto s = w.storage(p).get("raft/hard");
  if (!s) return h;
  auto r = std::from_chars(s->data(), s->data() + s->size(), h.term);
  if (r.ptr != s->data() + s->size()) std::from_chars(r.ptr + 1, s->data() + s->size(), h.vote);
  return h;
}
std::uint64_t log_length(World& w, ProcId p) {
  std::uint64_t n = 0;
  if (auto s = w.storage(p).get("raft/last")) std::from_chars(s->data(), s->data() + s->size(), n);
  return n;
}

/// A member's persistent state before it first starts: term, vote, log.
void preload(World& w, ProcId p, std::uint64_t term, std::optional<ProcId> vote,
             const std::vector<Entry>& log) {
  Storage& st = w.storage(p);
  st.put("raft/hard", fmt::format("{} {}", term, vote ? vote->value + 1 : 0));
  for (std::size_t i = 0; i < log.size(); ++i) st.put(fmt::format("raft/log/{:012}", i + 1), encode(log[i]));
  st.put("raft/last", std::to_string(log.size()));
}

/// Runs the world in small steps until `cond` holds (true) or `limit` of true time passed (false).
bool run_until_true(World& w, const std::function<bool()>& cond, Duration limit, Duration step = 100us) {
  const Time end = w.now() + limit;
  while (!cond()) {
    if (w.now() >= end) return false;
    w.run_until(w.now() + step);
  }
  return true;
}

std::string leader_of(const Recorder& r, std::uint64_t term) {
  auto it = r.leaders.find(term);
  return it == r.leaders.end() ? "" : it->second;
}

/// The first time `node` stepped down at or after `since`, if it did.
std::optional<Time> step_down_after(const Recorder& r, const std::string& node, Time since) {
  for (const auto& s : r.step_downs)
    if (s.node == node && s.time >= since) return s.time;
  return std::nullopt;
}

Command grant(Duration ttl, std::uint64_t key = 0) {
  return Command{Op::grant, key, ttl, {}, false};
}

}  // namespace

// Figure 8 of the Raft paper. S1 led term 2 and put entry 2 on S2 only; S5 led term 3 and put its own entry 2
// on itself only. S1 comes back as leader of term 4 and copies its entry 2 to S3, one entry per message:
// entry 2 is then on a majority (S1, S2, S3) while S1's term-4 entry is not (S1 → S3 is cut just then). A
// leader that committed entry 2 by counting replicas would apply it; S1 and S2 then crash, S5 wins term 5
// with S3 and S4 and overwrites entry 2 with its own. Only entries of the leader's current term commit by
// counting, so entry 2 is committed, if ever, as S5's.
TEST(RaftSchedule, Figure8AnEntryOfAnEarlierTermIsNotCommittedByCountingReplicas) {
  World w(quiet(8));
  Recorder rec(w);
  RaftOptions o;
  o.nodes = 5;
  o.max_batch = 1;
  auto s = spawn_raft_group(w, o, rec.observer());
  const Entry e1{1, Command{}};
  const Entry s1_entry{2, grant(60s)};
  const Entry s5_entry{3, Command{}};
  preload(w, s[0], 2, s[0], {e1, s1_entry});
  preload(w, s[1], 2, s[0], {e1, s1_entry});
  preload(w, s[2], 3, s[4], {e1});
  preload(w, s[3], 3, s[4], {e1});
  preload(w, s[4], 3, s[4], {e1, s5_entry});
  w.crash(s[3], false);
  w.crash(s[4], false);

  // S1 or S2 (the same log) wins a term with S3's vote and copies entry 2 to S3.
  ASSERT_TRUE(run_until_true(
      w, [&] { return !rec.leaders.empty(); }, 3s));
  const std::string first = rec.leaders.begin()->second;
  EXPECT_TRUE(first == "raft1" || first == "raft2") << first;
  ASSERT_TRUE(run_until_true(
      w, [&] { return log_length(w, s[2]) >= 2; }, 1s, 50us));
  ASSERT_EQ(log_length(w, s[2]), 2u) << "S3 must have entry 2 but not the new leader's entry 3";
  w.partition({s[0], s[1]}, {s[2]}, true);
  w.run_until(w.now() + 50ms);
  w.crash(s[0], false);
  w.crash(s[1], false);
  w.heal();
  w.restart(s[3]);
  w.restart(s[4]);
  w.run_until(w.now() + 3s);

  EXPECT_TRUE(rec.errors.empty()) << rec.report();
  // S5 led, and entry 2 was committed as its term-3 entry on S3, S4, S5.
  ASSERT_TRUE(rec.agreed.count(2));
  EXPECT_EQ(rec.agreed.at(2), s5_entry);
  EXPECT_GE(rec.applied["raft3"], 3u);
}

// A voter that crashes right after granting its vote and restarts must remember it: raft2 votes for raft1 in
// term T+1, crashes and restarts; raft3 (the old leader, back from a crash with the same log) asks for
// raft2's vote in the same term T+1. Granting it would make two leaders of one term.
TEST(RaftSchedule, AVoterThatRestartsRemembersItsVoteInThatTerm) {
  World w(quiet(21));
  Recorder rec(w);
  auto ids = spawn_raft_group(w, RaftOptions{}, rec.observer());
  w.run_until(Time{1s});
  ASSERT_FALSE(rec.leaders.empty());
  const std::uint64_t t = rec.leaders.rbegin()->first;
  const ProcId old = w.find(rec.leaders.rbegin()->second);
  std::vector<ProcId> rest;
  for (ProcId p : ids)
    if (p != old) rest.push_back(p);
  const ProcId x = rest[0], v = rest[1];  // x campaigns, v votes

  w.crash(old, false);
  w.pause(v, 1h);
  ASSERT_TRUE(run_until_true(
      w, [&] { return hard(w, x).term == t + 1; }, 2s));
  w.run_until(w.now() + 10ms);  // x's vote request waits in v's mailbox
  w.partition({x}, {v}, true);  // v hears nothing more from x (its answers still reach x)
  w.resume(v);
  ASSERT_TRUE(run_until_true(
      w, [&] { return leader_of(rec, t + 1) == w.name(x); }, 100ms));

  // v crashes and restarts at once; it stays paused until the old leader campaigns in term t + 1.
  w.crash(v, false);
  w.restart(v);
  w.pause(v, 1h);
  w.partition({x}, {old}, false);
  w.restart(old);
  ASSERT_TRUE(run_until_true(
      w, [&] { return hard(w, old).term == t + 1; }, 2s));
  w.run_until(w.now() + 10ms);
  w.resume(v);
  w.run_until(w.now() + 500ms);

  EXPECT_EQ(leader_of(rec, t + 1), w.name(x));
  EXPECT_TRUE(rec.errors.empty()) << rec.report();
}

// A candidate whose log lacks committed entries cannot win: raft3 is cut off while the leader commits grants
// with one follower; the leader crashes, raft3 comes back and campaigns while that follower is paused, so the
// follower reads raft3's vote request first. It must refuse (raft3's log is not up to date), or raft3 leads
// and overwrites what was committed.
TEST(RaftSchedule, AMemberWithoutCommittedEntriesCannotWin) {
  World w(quiet(31));
  Recorder rec(w);
  auto ids = spawn_raft_group(w, RaftOptions{}, rec.observer());
  w.run_until(Time{1s});
  ASSERT_FALSE(rec.leaders.empty());
  const ProcId l = w.find(rec.leaders.rbegin()->second);
  std::vector<ProcId> rest;
  for (ProcId p : ids)
    if (p != l) rest.push_back(p);
  const ProcId follower = rest[0], stale = rest[1];
  w.partition({stale}, {l, follower}, false);
  int granted = 0;
  w.spawn("client", [&](Context& ctx) {
    RaftClient rc({l}, 300ms);
    for (int i = 0; i < 5; ++i)
      if (auto r = rc.submit(ctx, grant(60s), ctx.now() + 1s); r && r->ok) ++granted;
  });
  w.run_until(Time{1500ms});
  ASSERT_EQ(granted, 5);
  const std::uint64_t committed = rec.agreed.rbegin()->first;
  w.crash(l, false);
  w.pause(follower, 1h);
  w.heal();
  const std::uint64_t cut_off_term = hard(w, stale).term;
  ASSERT_TRUE(run_until_true(
      w, [&] { return hard(w, stale).term > cut_off_term; }, 1s, 1ms));
  w.run_until(w.now() + 10ms);
  w.resume(follower);
  w.restart(l);
  w.run_until(w.now() + 2s);

  EXPECT_TRUE(rec.errors.empty()) << rec.report();
  for (ProcId p : ids) EXPECT_GE(rec.applied[w.name(p)], committed) << w.name(p);
}

// Check-quorum: a leader paused for longer than an election timeout finds, when it resumes, the answers its
// followers sent before the pause waiting in its mailbox. They are old news: it must step down at once (no
// majority heard from within an election timeout of its own clock), not count them as fresh and lead on.
TEST(RaftSchedule, ALeaderBackFromALongPauseStepsDownBeforeFreshAcks) {
  World w(quiet(4));
  Recorder rec(w);
  auto ids = spawn_raft_group(w, RaftOptions{}, rec.observer());
  w.run_until(Time{1s});
  ASSERT_FALSE(rec.leaders.empty());
  const std::string leader = rec.leaders.rbegin()->second;
  const ProcId l = w.find(leader);
  std::vector<ProcId> rest;
  for (ProcId p : ids)
    if (p != l) rest.push_back(p);
  // Pause it just after it sends a heartbeat (to its first follower): that follower's answer arrives during
  // the pause. Then cut it off, so that nothing newer (the next leader's term) reaches it.
  Fault pause;
  pause.kind = Fault::Kind::pause;
  pause.when = Trigger{Trigger::Kind::send, Time{0}, l, "raft.append", 1, 0ns};
  pause.target = l;
  pause.duration = 1s;
  w.add_fault(pause);
  ASSERT_TRUE(run_until_true(
      w, [&] { return w.paused(l); }, 200ms, 50us));
  const Time resumes = w.now() + 1s;
  w.run_until(w.now() + 20ms);
  w.partition({l}, rest, false);
  w.run_until(resumes + 1s);

  const auto down = step_down_after(rec, leader, Time{1s});
  ASSERT_TRUE(down) << leader << " never stepped down";
  EXPECT_LE(*down - resumes, 1ms) << leader << " led on for " << format_time(*down - resumes)
                                  << " on answers read after its pause";
  EXPECT_TRUE(rec.errors.empty()) << rec.report();
}

// A leader that learns of a higher term from an answer to its own AppendEntries steps down. The old leader is
// cut off while the others elect a new one; when the network heals, the new leader's messages still cannot
// reach it (one-way cut), so only the followers' answers can tell it (check-quorum off: nothing else would).
TEST(RaftSchedule, ALeaderStepsDownOnAHigherTermInAnAnswer) {
  World w(quiet(6));
  Recorder rec(w);
  RaftOptions o;
  o.check_quorum = false;
  auto ids = spawn_raft_group(w, o, rec.observer());
  w.run_until(Time{1s});
  ASSERT_FALSE(rec.leaders.empty());
  const std::string leader = rec.leaders.rbegin()->second;
  const std::uint64_t t = rec.leaders.rbegin()->first;
  const ProcId l = w.find(leader);
  std::vector<ProcId> rest;
  for (ProcId p : ids)
    if (p != l) rest.push_back(p);
  w.partition({l}, rest, false);
  ASSERT_TRUE(run_until_true(
      w, [&] { return rec.leaders.rbegin()->first > t; }, 2s, 1ms));
  const ProcId next = w.find(rec.leaders.rbegin()->second);
  w.run_until(w.now() + 100ms);
  EXPECT_FALSE(step_down_after(rec, leader, Time{1s})) << "nothing told it yet";
  w.heal();
  w.partition({next}, {l}, true);
  const Time healed = w.now();
  w.run_until(w.now() + 300ms);

  const auto down = step_down_after(rec, leader, healed);
  ASSERT_TRUE(down) << leader << " still leads term " << t;
  EXPECT_LE(*down - healed, 100ms);  // its next heartbeat's answer
  EXPECT_GT(hard(w, l).term, t);
  EXPECT_TRUE(rec.errors.empty()) << rec.report();
}

// A follower catching up one entry per message, with every message duplicated and delays of 1-15 ms, sees old
// AppendEntries after newer ones: their leaderCommit is higher than its commit index but they cover fewer
// entries than it already has. Its commit index must not move back, and an old request must not cut entries
// that a newer one appended (it truncates only on a conflict).
TEST(RaftSchedule, AFollowersCommitIndexNeverMovesBackUnderDuplicatedAndReorderedMessages) {
  WorldOptions wo = quiet(12);
  wo.network.defaults.delay = DelayDist::uniform_of(1ms, 15ms);
  wo.network.defaults.duplicate_ppm = 1'000'000;
  World w(wo);
  Recorder rec(w);
  RaftOptions o;
  o.max_batch = 1;
  o.election_timeout_min = 300ms;
  o.election_timeout_max = 600ms;
  auto ids = spawn_raft_group(w, o, rec.observer());
  w.run_until(Time{1500ms});
  ASSERT_FALSE(rec.leaders.empty());
  const ProcId l = w.find(rec.leaders.rbegin()->second);
  ProcId lagging{};
  for (ProcId p : ids)
    if (p != l) lagging = p;
  std::vector<ProcId> rest;
  for (ProcId p : ids)
    if (p != lagging) rest.push_back(p);
  w.partition({lagging}, rest, false);
  int granted = 0;
  w.spawn("client", [&](Context& ctx) {
    RaftClient rc({l}, 500ms);
    for (int i = 0; i < 30; ++i)
      if (auto r = rc.submit(ctx, grant(60s), ctx.now() + 1s); r && r->ok) ++granted;
  });
  w.run_until(Time{3s});
  ASSERT_GE(granted, 20);
  w.heal();
  w.run_until(Time{6s});

  EXPECT_TRUE(rec.errors.empty()) << rec.report();
  EXPECT_GE(rec.applied[w.name(lagging)], 20u) << "the lagging follower caught up";
}

// A leader appends a client's grant and is paused before it can answer; the next leader commits the entry;
// the client, having heard nothing, asks again. The retry carries the same grant key: exactly one lease.
TEST(RaftSchedule, AGrantRetriedAfterAFailoverIsOneLease) {
  World w(quiet(15));
  Recorder rec(w);
  auto ids = spawn_raft_group(w, RaftOptions{}, rec.observer());
  w.run_until(Time{1s});
  ASSERT_FALSE(rec.leaders.empty());
  const ProcId l = w.find(rec.leaders.rbegin()->second);
  Fault pause;
  pause.kind = Fault::Kind::pause;
  pause.when = Trigger{Trigger::Kind::receive, Time{0}, l, kClientRequestType, 1, 500us};
  pause.target = l;
  pause.duration = 2s;
  w.add_fault(pause);
  std::optional<ClientReply> reply;
  w.spawn("client", [&](Context& ctx) {
    RaftClient rc(ids, 300ms);
    rc.redirect(nullptr);  // start at the member after raft1, whoever leads
    while (rc.target() != l) rc.redirect(nullptr);
    reply = rc.submit(ctx, grant(60s, 0x5eed), ctx.now() + 3s);
  });
  w.run_until(Time{4s});

  ASSERT_TRUE(reply && reply->ok) << (reply ? reply->error : "no answer");
  EXPECT_GT(rec.leaders.size(), 1u) << "a failover happened";
  // Replay what was committed: one lease, the one the client was told.
  LockService sm;
  std::vector<LockService::HolderChange> ch;
  int grants = 0;
  for (const auto& [i, e] : rec.agreed) {
    sm.apply(i, e.cmd, ch);
    grants += e.cmd.op == Op::grant;
  }
  EXPECT_GE(grants, 2) << "the retry was committed too";
  ASSERT_EQ(sm.leases().size(), 1u);
  EXPECT_EQ(sm.leases().begin()->first, reply->value);
  EXPECT_TRUE(rec.errors.empty()) << rec.report();
}

// A leader that loses its office with a client's entry appended but not committed answers "leader-changed"
// (the entry may still commit under the next leader), never "not-leader" (nothing done).
TEST(RaftSchedule, AnAppendedRequestOfADeposedLeaderIsAnsweredLeaderChanged) {
  World w(quiet(9));
  Recorder rec(w);
  auto ids = spawn_raft_group(w, RaftOptions{}, rec.observer());
  w.run_until(Time{1s});
  ASSERT_FALSE(rec.leaders.empty());
  const ProcId l = w.find(rec.leaders.rbegin()->second);
  std::vector<ProcId> rest;
  for (ProcId p : ids)
    if (p != l) rest.push_back(p);
  Fault cut;  // as the leader takes the request: its entry reaches no follower
  cut.kind = Fault::Kind::partition;
  cut.when = Trigger{Trigger::Kind::receive, Time{0}, l, kClientRequestType, 1, 0ns};
  cut.side_a = {l};
  cut.side_b = rest;
  w.add_fault(cut);
  std::optional<ClientReply> reply;
  w.spawn("client", [&](Context& ctx) {
    auto m =
        ctx.call(l, Message::of(kClientRequestType, ClientRequest{1, encode_command(grant(60s, 7))}), 2s);
    if (m && m->as<ClientReply>()) reply = *m->as<ClientReply>();
  });
  w.run_until(Time{3s});
  ASSERT_TRUE(reply);
  EXPECT_FALSE(reply->ok);
  EXPECT_EQ(reply->error, "leader-changed");
  EXPECT_TRUE(rec.errors.empty()) << rec.report();
}
