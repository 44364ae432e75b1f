// Redis replication as a PSYNC stream: offsets, the backlog, partial and full resyncs, acks, expiry.
#include <gtest/gtest.h>

#include "locksim/protocols/redis/replication.hpp"
#include "replication_harness.hpp"

using namespace locksim;
using namespace locksim::redis;
using namespace locksim::redis::test;

TEST(ReplicationBacklog, KeepsTheLastCommandsWithTheirOffsets) {
  Backlog b(3);
  EXPECT_TRUE(b.empty());
  EXPECT_TRUE(b.covers(1));
  for (std::uint64_t o = 1; o <= 5; ++o) b.push(o, ReplicationOp{.key = std::to_string(o)}, Time{0});
  EXPECT_EQ(b.first(), 3u);
  EXPECT_EQ(b.last(), 5u);
  EXPECT_FALSE(b.covers(2));
  EXPECT_TRUE(b.covers(3));
  EXPECT_TRUE(b.covers(6)) << "nothing missing";
  EXPECT_FALSE(b.covers(7));
  const auto s = b.suffix(4);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].key, "4");
  EXPECT_EQ(s[1].key, "5");
  b.reset();
  b.push(40, ReplicationOp{.key = "x"}, Time{0});  // after a full sync the count goes on from its offset
  EXPECT_EQ(b.first(), 40u);
}

TEST(Replication, InitialFullSyncThenTheStreamInOrder) {
  ReplWorld rw;
  rw.writes({{100ms, set_cmd("k", "a")}, {200ms, incr_cmd("n")}, {300ms, del_cmd("k")}});
  rw.world.run_until(Time{2s});
  EXPECT_EQ(rw.count(TraceKind::send, "repl.fullsync"), 1u);
  EXPECT_EQ(rw.count(TraceKind::send, "repl.cmd"), 3u);
  EXPECT_EQ(rw.count(TraceKind::send, "repl.psync"), 1u) << "no resync on a clean link";
  EXPECT_EQ(rw.count(TraceKind::send, "repl.ack", rw.replica), 2u) << "REPLCONF ACK every second";
  EXPECT_EQ(rw.expect_prefix(), 3u);
  EXPECT_EQ(rw.replica_data, rw.master_data);
  EXPECT_EQ(rw.replica_data.at("n").value, "1");
}

TEST(Replication, ReorderingNeverAppliesADelBeforeTheSetItFollows) {
  ReplWorld rw(WorldOptions{.seed = 3});
  rw.down() = LinkOptions{.reorder_ppm = 500'000, .reorder_extra = 30ms};
  std::vector<std::pair<Time, Command>> script;
  for (int i = 0; i < 30; ++i) {
    script.push_back({Time{100ms + i * 20ms}, set_cmd("k", fmt::format("v{}", i))});
    script.push_back({Time{110ms + i * 20ms}, del_cmd("k")});
  }
  rw.writes(script);
  rw.world.run_until(Time{5s});
  EXPECT_GT(rw.count(TraceKind::note, "repl-gap"), 0u) << "the link did overtake commands";
  EXPECT_GT(rw.count(TraceKind::send, "repl.continue"), 0u);
  EXPECT_EQ(rw.count(TraceKind::send, "repl.fullsync"), 1u) << "only the initial sync";
  EXPECT_EQ(rw.expect_prefix(), 60u);
  // In the replica's applied order every DEL of k follows a SET of k.
  bool present = false;
  for (const auto& a : rw.applied) {
    if (a.kind != ReplicationEvent::Kind::applied) continue;
    EXPECT_NE(a.op.entry.has_value(), present) << "offset " << a.offset;
    present = a.op.entry.has_value();
  }
  EXPECT_EQ(rw.replica_data, rw.master_data);
  EXPECT_TRUE(rw.replica_data.empty());
}

TEST(Replication, ALostCommandIsRecoveredByTheNextOneWithAPartialResync) {
  ReplWorld rw;
  rw.world.schedule(Time{100ms}, [&] { rw.down().loss_ppm = 1'000'000; });
  rw.world.schedule(Time{250ms}, [&] { rw.down().loss_ppm = 0; });
  rw.writes({{150ms, set_cmd("a", "1")}, {500ms, set_cmd("b", "2")}});
  std::optional<std::string> a_at_600;
  rw.get(rw.replica, "a", Time{600ms}, a_at_600);
  rw.world.run_until(Time{700ms});
  EXPECT_EQ(rw.count(TraceKind::note, "repl-gap"), 1u);
  EXPECT_EQ(rw.count(TraceKind::send, "repl.continue"), 1u);
  EXPECT_EQ(rw.count(TraceKind::send, "repl.fullsync"), 1u) << "only the initial sync";
  EXPECT_EQ(a_at_600, "1");
  EXPECT_EQ(rw.expect_prefix(), 2u);
  EXPECT_EQ(rw.replica_data, rw.master_data);
}

TEST(Replication, ALostLastCommandIsRecoveredByTheAckRound) {
  ReplWorld rw;
  rw.world.schedule(Time{100ms}, [&] { rw.down().loss_ppm = 1'000'000; });
  rw.world.schedule(Time{250ms}, [&] { rw.down().loss_ppm = 0; });
  rw.writes({{150ms, set_cmd("a", "1")}});
  rw.world.run_until(Time{900ms});
  EXPECT_TRUE(rw.replica_data.empty()) << "nothing after the lost command shows the gap yet";
  rw.world.run_until(Time{1100ms});
  // The replica acks offset 0 at 1 s; the master, having streamed offset 1, pings; the replica PSYNCs.
  EXPECT_EQ(rw.count(TraceKind::send, "repl.ping", rw.master), 1u);
  EXPECT_EQ(rw.count(TraceKind::send, "repl.continue"), 1u);
  EXPECT_EQ(rw.expect_prefix(), 1u);
  EXPECT_EQ(rw.replica_data, rw.master_data);
}

TEST(Replication, DuplicatesAreIgnored) {
  ReplWorld rw;
  rw.down() = LinkOptions{.duplicate_ppm = 1'000'000};
  std::vector<std::pair<Time, Command>> script;
  for (int i = 0; i < 5; ++i) {
    script.push_back({Time{100ms + i * 50ms}, set_cmd("lock", fmt::format("v{}", i))});
    script.push_back({Time{120ms + i * 50ms}, del_cmd("lock")});
  }
  rw.writes(script);
  rw.world.run_until(Time{3s});
  EXPECT_GE(rw.count(TraceKind::duplicate, "repl.cmd"), 10u);
  EXPECT_EQ(rw.count(TraceKind::send, "repl.psync"), 1u) << "a duplicate is no gap";
  EXPECT_EQ(rw.applied.size(), 1u + 10u) << "the initial full sync, then each command once";
  EXPECT_EQ(rw.expect_prefix(), 10u);
  std::size_t replica_sets = 0;
  for (const auto& s : rw.history.service_sets) replica_sets += s.node == "replica1";
  EXPECT_EQ(replica_sets, 5u) << "one service set per applied lock SET";
}

TEST(Replication, AShortPartitionHealsWithAPartialResync) {
  ReplWorld rw;
  rw.world.schedule(Time{1s}, [&] { rw.world.partition({rw.master}, {rw.replica}, false); });
  rw.world.schedule(Time{6s}, [&] { rw.world.heal(); });
  std::vector<std::pair<Time, Command>> script;
  for (int i = 0; i < 10; ++i) script.push_back({Time{2s + i * 200ms}, incr_cmd("n")});
  rw.writes(script);
  rw.world.run_until(Time{8s});
  EXPECT_EQ(rw.count(TraceKind::send, "repl.fullsync"), 1u);
  EXPECT_GE(rw.count(TraceKind::send, "repl.continue", rw.master, Time{6s}), 1u);
  EXPECT_EQ(rw.expect_prefix(), 10u);
  EXPECT_EQ(rw.replica_data, rw.master_data);
}

TEST(Replication, BacklogOverflowDuringALongPartitionForcesAFullResync) {
  ReplWorld rw(WorldOptions{}, ReplicationOptions{.backlog_size = 4});
  rw.world.schedule(Time{1s}, [&] { rw.world.partition({rw.master}, {rw.replica}, false); });
  rw.world.schedule(Time{100s}, [&] { rw.world.heal(); });
  std::vector<std::pair<Time, Command>> script;
  for (int i = 0; i < 10; ++i) script.push_back({Time{2s + i * 1s}, incr_cmd(fmt::format("n{}", i % 3))});
  rw.writes(script);
  rw.world.run_until(Time{105s});
  // Both sides give up on the silent link after repl-timeout.
  EXPECT_EQ(rw.count(TraceKind::note, "repl-timeout", rw.master), 1u);
  EXPECT_EQ(rw.count(TraceKind::note, "repl-timeout", rw.replica), 1u);
  EXPECT_EQ(rw.count(TraceKind::send, "repl.fullsync", rw.master, Time{100s}), 1u);
  EXPECT_EQ(rw.count(TraceKind::send, "repl.continue"), 0u);
  EXPECT_EQ(rw.expect_prefix(), 10u);
  EXPECT_EQ(rw.replica_data, rw.master_data);
  ASSERT_EQ(rw.replica_data.size(), 3u);
  EXPECT_EQ(rw.replica_data.at("n0").value, "4");
}

TEST(Replication, TheReplicaHidesAnExpiredKeyAndWaitsForTheMastersDel) {
  ReplWorld rw;
  rw.writes({{100ms, set_cmd("k", "a", 1s)}});
  std::optional<std::string> replica_get, master_get;
  rw.get(rw.replica, "k", Time{2s}, replica_get);
  rw.get(rw.master, "k", Time{3s}, master_get);
  rw.world.run_until(Time{2500ms});
  EXPECT_FALSE(replica_get.has_value()) << "logically expired: hidden from reads";
  EXPECT_EQ(rw.replica_data.count("k"), 1u) << "but still in the replica's dataset";
  rw.world.run_until(Time{3500ms});
  EXPECT_FALSE(master_get.has_value());
  EXPECT_EQ(rw.replica_data.count("k"), 0u) << "the master expired it and streamed the DEL";
  ASSERT_EQ(rw.stream.size(), 2u);
  EXPECT_FALSE(rw.stream[1].entry.has_value());
  EXPECT_EQ(rw.expect_prefix(), 2u);
}

TEST(Replication, AMasterRestartedWithoutPersistenceWipesItsReplica) {
  // The Redis documentation's warning ("Safety of replication when master has persistence turned off"): the
  // restarted master comes back empty under a new replication ID, and the replica's full resync copies that.
  ReplWorld rw;
  rw.writes({{100ms, set_cmd("k", "a")}});
  rw.world.schedule(Time{2s}, [&] { rw.world.crash(rw.master, true); });
  rw.world.schedule(Time{2500ms}, [&] { rw.world.restart(rw.master); });
  rw.world.run_until(Time{1s});
  EXPECT_EQ(rw.replica_data.count("k"), 1u);
  rw.world.run_until(Time{5s});
  EXPECT_EQ(rw.count(TraceKind::send, "repl.fullsync", rw.master, Time{2500ms}), 1u);
  EXPECT_TRUE(rw.replica_data.empty());
  ASSERT_FALSE(rw.applied.empty());
  EXPECT_EQ(rw.applied.back().kind, ReplicationEvent::Kind::full_sync);
}

TEST(Replication, SameSeedSameTrace) {
  auto run = [](std::uint64_t seed) {
    ReplWorld rw(WorldOptions{.seed = seed});
    rw.down() = LinkOptions{
        .loss_ppm = 200'000, .duplicate_ppm = 200'000, .reorder_ppm = 300'000, .reorder_extra = 20ms};
    std::vector<std::pair<Time, Command>> script;
    for (int i = 0; i < 20; ++i) script.push_back({Time{100ms + i * 10ms}, incr_cmd("n")});
    rw.writes(script);
    rw.world.run_until(Time{5s});
    return rw.world.trace().hash();
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

namespace {

/// The sentinel fails over from a master cut off from it and from the replica; the master had `writes`
/// commands the replica never got. Back in contact, the old master is demoted and PSYNCs the new one.
struct PartitionFailover {
  std::size_t continues = 0, fullsyncs = 0;
  std::optional<std::string> old_master_lock;
  std::optional<Reply> role;
  std::vector<ServiceSet> sets;
};

PartitionFailover failover_by_partition(bool write_before_the_cut) {
  ReplWorld rw(WorldOptions{}, ReplicationOptions{}, 2s);  // nothing reaches the replica within 2 s
  const ProcId sentinel = spawn_sentinel(
      rw.world, {.nodes = {"redis1", "replica1"}, .failover_after = 1s, .ping_interval = 100ms});
  if (write_before_the_cut) rw.writes({{100ms, set_cmd("lock", "a")}});
  rw.world.schedule(Time{200ms}, [&] { rw.world.partition({rw.master}, {rw.replica, sentinel}, false); });
  rw.world.schedule(Time{3s}, [&] { rw.world.heal(); });
  rw.writes({{2s, set_cmd("lock", "b")}}, rw.replica);  // on the promoted replica
  PartitionFailover out;
  rw.get(rw.master, "lock", Time{6s}, out.old_master_lock);
  rw.world.spawn("probe", [&](Context& ctx) {
    ctx.sleep(6s);
    if (auto m = ctx.call(rw.master, command_message({.op = Op::ping}), 1s)) out.role = *m->as<Reply>();
  });
  rw.world.run_until(Time{7s});
  out.continues = rw.count(TraceKind::send, "repl.continue", rw.replica);
  out.fullsyncs = rw.count(TraceKind::send, "repl.fullsync", rw.replica);
  out.sets = rw.history.service_sets;
  EXPECT_TRUE(rw.promoted);
  EXPECT_EQ(rw.master_data, rw.replica_data) << "the demoted master follows the new one";
  return out;
}

}  // namespace

TEST(Replication, FailoverLosesTheUnreplicatedLockAndTheDemotedMasterResyncsInFull) {
  const PartitionFailover r = failover_by_partition(true);
  ASSERT_TRUE(r.role);
  EXPECT_EQ(r.role->role, "replica");
  EXPECT_EQ(r.old_master_lock, "b") << "the acknowledged SET of a was lost with the failover";
  EXPECT_EQ(r.fullsyncs, 1u) << "its offset runs past where the new master left the old history";
  EXPECT_EQ(r.continues, 0u);
  // Both holders' SETs are service sets, each on the node that granted it; the lock never reached replica1.
  ASSERT_EQ(r.sets.size(), 2u);
  EXPECT_EQ(r.sets[0].node, "redis1");
  EXPECT_EQ(r.sets[0].value, "a");
  EXPECT_EQ(r.sets[1].node, "replica1");
  EXPECT_EQ(r.sets[1].value, "b");
}

TEST(Replication, ADemotedMasterWithNothingUnreplicatedContinuesPartially) {
  const PartitionFailover r = failover_by_partition(false);
  EXPECT_EQ(r.old_master_lock, "b");
  EXPECT_EQ(r.continues, 1u) << "same history up to the promotion (replid2): the backlog suffix suffices";
  EXPECT_EQ(r.fullsyncs, 0u);
}
