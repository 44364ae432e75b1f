#pragma once
/// A master (redis1) and its replica (replica1) built directly from spawn_node, with an observer that
/// records the master's stream (every propagated command by offset) and everything the replica applied, and
/// a writer process that sends a script of commands to the master.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "locksim/protocols/redis/redis_node.hpp"

namespace locksim::redis::test {

struct ReplWorld {
  /// One change of the replica's dataset, in order.
  struct Applied {
    ReplicationEvent::Kind kind;
    std::uint64_t offset;
    ReplicationOp op;  ///< applied only
  };

  explicit ReplWorld(WorldOptions wo = {}, ReplicationOptions ro = {}, Duration lag = 50ms) : world(wo) {
    auto obs = [this](const ReplicationEvent& e) { observe(e); };
    master = spawn_node(
        world,
        {.name = "redis1", .peer = "replica1", .replication_delay = lag, .replication = ro, .observer = obs},
        history);
    replica = spawn_node(
        world, {.name = "replica1", .replica = true, .peer = "redis1", .replication = ro, .observer = obs},
        history);
  }

  /// The master → replica link (an override: the default link stays as it is).
  LinkOptions& down() { return world.network().link(master, replica); }
  LinkOptions& up() { return world.network().link(replica, master); }

  /// A writer that sends each command to `to` (the master if invalid) at its true time (1 s timeout per
  /// call).
  void writes(std::vector<std::pair<Time, Command>> script, ProcId to = {}) {
    const ProcId node = to.valid() ? to : master;
    world.spawn(fmt::format("writer{}", ++writers), [node, script = std::move(script)](Context& ctx) {
      for (const auto& [at, c] : script) {
        if (at > ctx.now()) ctx.sleep(at - ctx.now());
        ctx.call(node, command_message(c), 1s);
      }
    });
  }
  int writers = 0;

  /// A GET from `node` at true time `at`: the value (if any) goes to `out`.
  void get(ProcId node, const std::string& key, Time at, std::optional<std::string>& out) {
    auto* o = &out;
    world.spawn(fmt::format("get-{}", at.count()), [=](Context& ctx) {
      ctx.sleep(at - ctx.now());
      auto m = ctx.call(node, command_message({.op = Op::get, .key = key}), 1s);
      if (m) *o = m->as<Reply>()->value;
    });
  }

  /// Every replica apply continued the prefix (the offset after the last, and the master's command at that
  /// offset); a full sync restarts the count at its offset. Returns the replica's last offset.
  std::uint64_t expect_prefix() const {
    std::uint64_t last = 0;
    for (const Applied& a : applied) {
      if (a.kind == ReplicationEvent::Kind::full_sync) {
        EXPECT_LE(a.offset, stream.size());
        last = a.offset;
        continue;
      }
      EXPECT_EQ(a.offset, last + 1) << "applied out of order";
      if (a.offset >= 1 && a.offset <= stream.size()) {
        EXPECT_EQ(a.op, stream[a.offset - 1]) << "not the master's command at offset " << a.offset;
      }
      last = a.offset;
    }
    return last;
  }

  /// Trace events of `kind` labelled `label` by `proc` (any if invalid) at true times >= `from`.
  std::size_t count(TraceKind kind, std::string_view label, ProcId proc = {}, Time from = Time{0}) const {
    std::size_t n = 0;
    for (const auto& e : world.trace().events())
      if (e.kind == kind && e.label == label && (!proc.valid() || e.proc == proc) && e.time >= from) ++n;
    return n;
  }

  World world;
  History history;
  ProcId master, replica;
  std::vector<ReplicationOp> stream;  ///< the master's commands; offset i at index i - 1
  std::vector<Applied> applied;       ///< the replica's applies and full syncs, in order
  Dataset master_data, replica_data;  ///< redis1's and replica1's
  bool promoted = false;              ///< replica1 has written as a master

 private:
  /// redis1's stream while it is the master, replica1's applies while it is the replica; each node's dataset
  /// whatever its role (a failover swaps them).
  void observe(const ReplicationEvent& e) {
    using K = ReplicationEvent::Kind;
    const bool mastering = e.kind == K::propagated || e.kind == K::unstreamed;
    if (e.node == "redis1") {
      master_data = *e.data;
      if (e.kind != K::propagated || promoted) return;
      EXPECT_EQ(e.offset, stream.size() + 1) << "the master's offsets count its commands";
      stream.push_back(*e.op);
    } else {
      replica_data = *e.data;
      if (mastering) promoted = true;
      if (!promoted) applied.push_back({e.kind, e.offset, e.op ? *e.op : ReplicationOp{}});
    }
  }
};

inline Command set_cmd(std::string key, std::string v, Duration ttl = std::chrono::hours(1)) {
  return {.op = Op::set_nx, .key = std::move(key), .value = std::move(v), .ttl = ttl};
}
inline Command del_cmd(std::string key) {
  return {.op = Op::del_if_value, .key = std::move(key), .blind = true};
}
inline Command incr_cmd(std::string key) {
  return {.op = Op::incr, .key = std::move(key)};
}

}  // namespace locksim::redis::test
