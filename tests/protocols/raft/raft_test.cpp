// Raft unit tests: election, replication and commit, leader crash, minority partition, restart from storage,
// and the lock service state machine on its own.
#include <gtest/gtest.h>

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

Command grant(Duration ttl) {
  return Command{Op::grant, 0, ttl, {}, false};
}

/// The leader of the highest term so far.
std::string current_leader(const Recorder& r) {
  return r.leaders.empty() ? "" : r.leaders.rbegin()->second;
}

}  // namespace

TEST(RaftEncoding, RoundTrips) {
  Entry e{7, Command{Op::lock, 42, 1500ms, "jobs/a b", false}};
  auto d = decode(encode(e));
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, e);
  Entry r{3, Command{Op::revoke, 9, 0ns, {}, true}};
  EXPECT_EQ(*decode(encode(r)), r);
  EXPECT_FALSE(decode("garbage"));
  EXPECT_FALSE(decode("1 99 0 0 0 x"));
}

TEST(LockService, LowestRevisionHoldsAndWaitersAdvance) {
  LockService sm;
  std::vector<LockService::HolderChange> ch;
  EXPECT_EQ(sm.apply(1, grant(1s), ch).value, 1u);
  EXPECT_EQ(sm.apply(2, grant(1s), ch).value, 2u);
  EXPECT_FALSE(sm.apply(3, Command{Op::lock, 99, 0ns, "L", false}, ch).ok);  // no such lease
  auto r = sm.apply(4, Command{Op::lock, 1, 0ns, "L", false}, ch);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.value, 4u);
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].lease, 1u);
  ch.clear();
  EXPECT_EQ(sm.apply(5, Command{Op::lock, 2, 0ns, "L", false}, ch).value, 5u);
  EXPECT_TRUE(ch.empty());  // lease 2 waits behind revision 4
  EXPECT_EQ(sm.apply(6, Command{Op::lock, 2, 0ns, "L", false}, ch).value, 5u);  // idempotent retry
  EXPECT_EQ(sm.holder("L")->first, 1u);
  // Expiry of lease 1 deletes its key: lease 2 (revision 5) holds.
  EXPECT_TRUE(sm.apply(7, Command{Op::revoke, 1, 0ns, {}, true}, ch).ok);
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].lease, 2u);
  EXPECT_EQ(ch[0].rev, 5u);
  EXPECT_FALSE(sm.apply(8, Command{Op::keepalive, 1, 0ns, {}, false}, ch).ok);
  EXPECT_TRUE(sm.apply(9, Command{Op::keepalive, 2, 0ns, {}, false}, ch).ok);
  ch.clear();
  EXPECT_TRUE(sm.apply(10, Command{Op::unlock, 2, 0ns, "L", false}, ch).ok);
  EXPECT_TRUE(ch.empty());
  EXPECT_FALSE(sm.holder("L"));
  EXPECT_FALSE(sm.apply(11, Command{Op::unlock, 2, 0ns, "L", false}, ch).ok);
}

class RaftElection : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(RaftElection, ElectsExactlyOneLeader) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    World w(quiet(seed));
    Recorder rec(w);
    RaftOptions o;
    o.nodes = GetParam();
    spawn_raft_group(w, o, rec.observer());
    w.run_until(Time{3s});
    EXPECT_TRUE(rec.errors.empty()) << rec.report();
    ASSERT_GE(rec.leaders.size(), 1u) << "seed " << seed;
    // A quiet network settles: at most a split vote or two, then one leader that keeps its term.
    EXPECT_LE(rec.leaders.rbegin()->first, 4u) << "seed " << seed;
    EXPECT_LE(rec.leaders.size(), 2u) << "seed " << seed;
    // Every member applied the leader's no-op: they all know the same leader's log.
    for (std::uint32_t i = 1; i <= o.nodes; ++i) EXPECT_GE(rec.applied[fmt::format("raft{}", i)], 1u);
  }
}

INSTANTIATE_TEST_SUITE_P(GroupSizes, RaftElection, ::testing::Values(3u, 5u));

TEST(Raft, ReplicatesAndCommitsOnEveryMember) {
  World w(quiet(7));
  Recorder rec(w);
  auto ids = spawn_raft_group(w, RaftOptions{}, rec.observer());
  std::vector<std::uint64_t> leases;
  w.spawn("client", [&](Context& ctx) {
    RaftClient rc(ids, 300ms);
    ctx.sleep(500ms);
    for (int i = 0; i < 10; ++i) {
      auto r = rc.submit(ctx, grant(Duration{std::chrono::seconds(60 + i)}), ctx.now() + 2s);
      ASSERT_TRUE(r);
      ASSERT_TRUE(r->ok) << r->error;
      leases.push_back(r->value);
    }
  });
  w.run_until(Time{3s});
  ASSERT_EQ(leases.size(), 10u);
  EXPECT_TRUE(std::is_sorted(leases.begin(), leases.end()));
  EXPECT_TRUE(rec.errors.empty()) << rec.report();
  // All three members applied every grant, each at the index that became its lease id.
  for (const auto& [node, last] : rec.applied) EXPECT_GE(last, leases.back()) << node;
  for (std::size_t i = 0; i < leases.size(); ++i) {
    const Entry& e = rec.agreed.at(leases[i]);
    EXPECT_EQ(e.cmd.op, Op::grant);
    EXPECT_EQ(e.cmd.ttl, Duration{std::chrono::seconds(60 + i)});
  }
}

TEST(Raft, LeaderCrashElectsNewLeaderAndKeepsCommittedEntries) {
  World w(quiet(11));
  Recorder rec(w);
  auto ids = spawn_raft_group(w, RaftOptions{}, rec.observer());
  std::vector<std::uint64_t> before, after;
  std::string crashed;
  std::uint64_t crashed_term = 0;
  w.spawn("client", [&](Context& ctx) {
    RaftClient rc(ids, 300ms);
    ctx.sleep(500ms);
    for (int i = 0; i < 5; ++i) before.push_back(rc.submit(ctx, grant(60s), ctx.now() + 2s)->value);
    crashed = current_leader(rec);
    crashed_term = rec.leaders.rbegin()->first;
    w.crash(w.find(crashed), false);
    for (int i = 0; i < 5; ++i) {
      auto r = rc.submit(ctx, grant(60s), ctx.now() + 3s);
      ASSERT_TRUE(r);
      after.push_back(r->value);
    }
  });
  w.run_until(Time{5s});
  ASSERT_EQ(after.size(), 5u);
  EXPECT_NE(current_leader(rec), crashed);
  EXPECT_GT(rec.leaders.rbegin()->first, crashed_term);
  EXPECT_GT(after.front(), before.back());
  for (auto id : before) EXPECT_EQ(rec.agreed.at(id).cmd.op, Op::grant);
  // The old leader comes back, reloads its log and catches up with the new one.
  w.restart(w.find(crashed));
  w.run_until(Time{7s});
  EXPECT_GE(rec.applied[crashed], after.back());
  EXPECT_TRUE(rec.errors.empty()) << rec.report();
}

TEST(Raft, MinorityPartitionCannotCommit) {
  World w(quiet(5));
  Recorder rec(w);
  auto ids = spawn_raft_group(w, RaftOptions{}, rec.observer());
  std::optional<ClientReply> isolated_reply;
  bool gave_up = false;
  std::string old_leader;
  ProcId client = w.spawn("client", [&](Context& ctx) {
    ctx.sleep(1s);
    old_leader = current_leader(rec);
    // Cut the leader (and this client, so it can only talk to the old leader) off from the majority.
    std::vector<ProcId> minority{w.find(old_leader), ctx.self()}, majority;
    for (ProcId p : ids)
      if (w.name(p) != old_leader) majority.push_back(p);
    w.partition(minority, majority, false);
    RaftClient rc({w.find(old_leader)}, 300ms);
    isolated_reply = rc.submit(ctx, grant(777ms), ctx.now() + 1500ms);
    gave_up = true;
  });
  (void)client;
  w.run_until(Time{3s});
  EXPECT_TRUE(gave_up);
  EXPECT_FALSE(isolated_reply);  // never committed, never answered
  // The majority elected a leader of its own.
  EXPECT_NE(current_leader(rec), old_leader);
  w.heal();
  w.run_until(Time{5s});
  for (const auto& [i, e] : rec.agreed)
    EXPECT_NE(e.cmd.ttl, 777ms) << "the minority's entry was committed at " << i;
  // The old leader rejoined, dropped its uncommitted entry and follows the new log.
  EXPECT_EQ(rec.applied[old_leader], rec.agreed.rbegin()->first);
  EXPECT_TRUE(rec.errors.empty()) << rec.report();
}

TEST(Raft, RestartReloadsTermVoteAndLogFromStorage) {
  World w(quiet(3));
  Recorder rec(w);
  auto ids = spawn_raft_group(w, RaftOptions{}, rec.observer());
  std::vector<std::uint64_t> leases;
  w.spawn("client", [&](Context& ctx) {
    RaftClient rc(ids, 300ms);
    ctx.sleep(500ms);
    for (int i = 0; i < 5; ++i) leases.push_back(rc.submit(ctx, grant(60s), ctx.now() + 2s)->value);
  });
  w.run_until(Time{2s});
  ASSERT_EQ(leases.size(), 5u);
  const std::uint64_t term_before = rec.leaders.rbegin()->first;
  // The hard state is on disk.
  auto hard = w.storage(ids[0]).get("raft/hard");
  ASSERT_TRUE(hard);
  EXPECT_EQ(hard->substr(0, hard->find(' ')), std::to_string(term_before));
  // Power loss on every member at once: with fsync always nothing acknowledged is lost.
  for (ProcId p : ids) w.crash(p, true);
  w.run_until(Time{2500ms});
  for (ProcId p : ids) w.restart(p);
  w.run_until(Time{5s});
  EXPECT_GT(rec.leaders.rbegin()->first, term_before);  // terms were reloaded, not restarted from 0
  for (ProcId p : ids) EXPECT_GE(rec.applied[w.name(p)], leases.back()) << w.name(p);
  for (auto id : leases) EXPECT_EQ(rec.agreed.at(id).cmd.op, Op::grant);
  EXPECT_TRUE(rec.errors.empty()) << rec.report();
}

TEST(Raft, WithoutFsyncAPowerLossOfEveryMemberLosesTheLog) {
  World w(quiet(3));
  Recorder rec(w);
  RaftOptions o;
  o.fsync = FsyncPolicy::never;
  auto ids = spawn_raft_group(w, o, rec.observer());
  w.spawn("client", [&](Context& ctx) {
    RaftClient rc(ids, 300ms);
    ctx.sleep(500ms);
    for (int i = 0; i < 5; ++i) rc.submit(ctx, grant(60s), ctx.now() + 2s);
  });
  w.run_until(Time{2s});
  const std::uint64_t committed = rec.agreed.rbegin()->first;
  ASSERT_GE(committed, 6u);
  for (ProcId p : ids) w.crash(p, true);
  for (ProcId p : ids) EXPECT_FALSE(w.storage(p).get("raft/last")) << "nothing reached the disk";
  // A process crash (not a power loss) keeps what reached the OS, so the same run with kill -9 keeps the log.
  World w2(quiet(3));
  auto ids2 = spawn_raft_group(w2, o, nullptr);
  w2.run_until(Time{1s});
  for (ProcId p : ids2) w2.crash(p, false);
  for (ProcId p : ids2) EXPECT_TRUE(w2.storage(p).get("raft/last"));
}

TEST(Raft, FollowersRedirectClientsToTheLeader) {
  World w(quiet(9));
  Recorder rec(w);
  auto ids = spawn_raft_group(w, RaftOptions{}, rec.observer());
  int redirects = 0;
  w.spawn("client", [&](Context& ctx) {
    ctx.sleep(1s);
    const ProcId leader = w.find(current_leader(rec));
    for (ProcId p : ids) {
      if (p == leader) continue;
      auto r =
          ctx.call(p, Message::of(kClientRequestType, ClientRequest{1, encode_command(grant(1s))}), 500ms);
      ASSERT_TRUE(r);
      const auto* rep = r->as<ClientReply>();
      ASSERT_TRUE(rep);
      EXPECT_FALSE(rep->ok);
      EXPECT_EQ(rep->error, "not-leader");
      ASSERT_TRUE(rep->leader);
      EXPECT_EQ(*rep->leader, leader);
      ++redirects;
    }
  });
  w.run_until(Time{2s});
  EXPECT_EQ(redirects, 2);
}

TEST(LockService, ARetriedGrantNamesTheLeaseItsKeyCreated) {
  LockService sm;
  std::vector<LockService::HolderChange> ch;
  EXPECT_EQ(sm.apply(1, grant(1s), ch).value, 1u);
  const Command keyed{Op::grant, 0xabc, 1s, {}, false};
  EXPECT_EQ(sm.apply(2, keyed, ch).value, 2u);
  auto again = sm.apply(3, keyed, ch);  // the same grant, committed twice (a retry after a failover)
  EXPECT_TRUE(again.ok);
  EXPECT_EQ(again.value, 2u);
  EXPECT_EQ(sm.leases().size(), 2u);
  EXPECT_EQ(sm.apply(4, grant(1s), ch).value, 4u);  // no key: every grant is a lease of its own
  EXPECT_TRUE(sm.apply(5, Command{Op::revoke, 2, 0ns, {}, true}, ch).ok);
  auto late = sm.apply(6, keyed, ch);  // a retry after the lease it created expired: not a new lease
  EXPECT_FALSE(late.ok);
  EXPECT_EQ(late.error, "lease-not-found");
  EXPECT_EQ(sm.leases().size(), 2u);
}
