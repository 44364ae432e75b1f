#include "locksim/protocols/redis/redis_node.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace locksim::redis {

std::string_view op_name(Op op) {
  switch (op) {
    case Op::set_nx:
      return "SET";
    case Op::del_if_value:
      return "DEL-IF";
    case Op::pexpire_if_value:
      return "PEXPIRE-IF";
    case Op::get:
      return "GET";
    case Op::incr:
      return "INCR";
    case Op::ping:
      return "PING";
    case Op::get_master:
      return "GET-MASTER";
    case Op::promote:
      return "PROMOTE";
    case Op::replicaof:
      return "REPLICAOF";
  }
  return "?";
}

Message command_message(const Command& c) {
  std::string detail;
  switch (c.op) {
    case Op::set_nx:
      detail = fmt::format("{} {} NX PX {}", c.key, c.value, format_time(c.ttl));
      break;
    case Op::pexpire_if_value:
      detail = fmt::format("{} {} {}", c.key, c.value, format_time(c.ttl));
      break;
    case Op::del_if_value:
      detail = fmt::format("{} {}", c.key, c.value);
      break;
    case Op::replicaof:
      detail = c.peer;
      break;
    default:
      detail = c.key;
      break;
  }
  return Message::of(std::string(op_name(c.op)), c, std::move(detail));
}

namespace {

constexpr std::string_view kAofPrefix = "aof/";

/// AOF record: "<expire_wall_ns> <value>" (absolute expiry, as Redis writes PXAT into its AOF).
std::string encode(const Entry& e) {
  return fmt::format("{} {}", e.expire_wall.count(), e.value);
}

std::optional<Entry> decode(const std::string& s) {
  const auto space = s.find(' ');
  if (space == std::string::npos) return std::nullopt;
  std::int64_t ns = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + space, ns);
  if (ec != std::errc{} || p != s.data() + space) return std::nullopt;
  return Entry{s.substr(space + 1), Time{ns}};
}

std::int64_t parse_int(const std::string& s) {
  std::int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

/// One incarnation of a node: volatile state lives here and dies with the fiber on a crash (the replication
/// ID, offset and backlog too: a restarted node comes back under a new ID and resyncs in full, as a Redis
/// that persisted no replication info does).
class Node {
 public:
  Node(Context& ctx, World& world, History& history, const NodeOptions& opts)
      : ctx_(ctx),
        world_(world),
        history_(history),
        opts_(opts),
        master_(!opts.replica),
        peer_(opts.peer),
        backlog_(opts.replication.backlog_size) {}

  void run() {
    if (opts_.aof) load();
    record_role(0);
    if (!master_ && !peer_.empty()) {
      heard_at_ = ctx_.now();
      next_cron_ = ctx_.now() + opts_.replication.ack_period;
      psync();
    }
    for (;;) {
      auto m = ctx_.receive(timeout());
      tick();
      if (!m) continue;
      if (const auto* c = m->as<Command>()) {
        handle(*m, *c);
      } else if (const auto* r = m->as<ReplCommand>()) {
        on_stream(*m, *r);
      } else if (const auto* p = m->as<Psync>()) {
        on_psync(*m, *p);
      } else if (const auto* a = m->as<ReplAck>()) {
        on_ack(*m, *a);
      } else if (const auto* g = m->as<ReplPing>()) {
        on_ping(*m, *g);
      } else if (const auto* pr = m->as<PartialResync>()) {
        on_partial(*m, *pr);
      } else if (const auto* f = m->as<FullResync>()) {
        on_full(*m, *f);
      }
    }
  }

 private:
  void load() {
    for (const auto& [k, v] : ctx_.storage().snapshot()) {
      if (k.compare(0, kAofPrefix.size(), kAofPrefix) != 0) continue;
      if (auto e = decode(v)) data_[k.substr(kAofPrefix.size())] = std::move(*e);
    }
  }

  /// The role this node has now, in the history (NodeOptions::record_role). `term`: 0 for the role it starts
  /// in, 1 for a change the sentinel made (ServiceRole::term).
  void record_role(std::uint64_t term) {
    if (!opts_.record_role) return;
    const ServiceRecorder r = history_.recorder(world_, ctx_.name());
    if (master_)
      r.leader(term);
    else
      r.follower(term);
  }

  std::string new_replid() { return fmt::format("{}-{}-{}", ctx_.name(), ctx_.incarnation(), ++replids_); }

  // ---- time ----

  /// How long the next receive may wait: until the next command is due to be streamed, the next ping or
  /// repl-timeout check (master), or the next replication cron (replica).
  Duration timeout() const {
    Time next = kTimeMax;
    if (master_ && replica_.valid()) {
      if (streamed_ < offset_ && backlog_.covers(streamed_ + 1) && !backlog_.empty())
        next = std::min(next, backlog_.at(streamed_ + 1).due);
      else if (streamed_ < offset_)
        next = ctx_.now();  // the replica needs what the backlog no longer holds: tick() skips ahead
      next = std::min({next, next_ping_, replica_ack_at_ + opts_.replication.timeout});
    } else if (!master_ && !peer_.empty()) {
      next = next_cron_;
    }
    if (next == kTimeMax) return kForever;
    return std::max(Duration{0}, next - ctx_.now());
  }

  void tick() {
    if (master_) {
      if (replica_.valid()) master_tick();
    } else if (!peer_.empty() && ctx_.now() >= next_cron_) {
      replica_cron();
    }
  }

  // ---- master side ----

  /// Stream what is due to the replica, ping it, and drop it when it has not acked for repl-timeout.
  void master_tick() {
    const Time now = ctx_.now();
    if (now - replica_ack_at_ >= opts_.replication.timeout) {
      ctx_.note("repl-timeout", fmt::format("{}: no ack from {} for {}; replica dropped", ctx_.name(),
                                            world_.name(replica_), format_time(opts_.replication.timeout)));
      replica_ = ProcId{};
      return;
    }
    while (streamed_ < offset_) {
      const std::uint64_t o = streamed_ + 1;
      if (backlog_.empty() || o < backlog_.first()) {
        // Fell out of the backlog before it was streamed: the replica will see the gap and resync in full.
        streamed_ = backlog_.empty() ? offset_ : backlog_.first() - 1;
        continue;
      }
      const Backlog::Item& item = backlog_.at(o);
      if (item.due > now) break;
      ctx_.send(replica_, repl_cmd_message(ReplCommand{replid_, o, item.op}));
      streamed_ = o;
    }
    if (now >= next_ping_) {
      ctx_.send(replica_, ping_message(ReplPing{replid_, streamed_, true}));
      next_ping_ = now + opts_.replication.ping_period;
    }
  }

  /// PSYNC: continue from the backlog when the ID matches (ours, or the one we replicated before our
  /// promotion, up to where we left it) and the backlog still holds everything from the offset asked for;
  /// otherwise a full resync.
  void on_psync(const Message& m, const Psync& p) {
    if (!master_) return;                        // chained replication is not modelled
    if (replid_ == "?") replid_ = new_replid();  // a master takes its ID when the first replica attaches
    backlog_on_ = true;
    replica_ = m.from;
    replica_ack_at_ = ctx_.now();
    next_ping_ = ctx_.now() + opts_.replication.ping_period;
    const bool same_history =
        p.replid != "?" && (p.replid == replid_ || (p.replid == replid2_ && p.offset <= replid2_offset_ + 1));
    const bool held = p.offset == offset_ + 1 ||
                      (!backlog_.empty() && backlog_.last() == offset_ && backlog_.covers(p.offset));
    if (same_history && held && p.offset >= 1 && p.offset <= offset_ + 1) {
      ctx_.reply(m, partial_resync_message(PartialResync{replid_, p.offset, backlog_.suffix(p.offset)}));
    } else {
      ctx_.reply(m, full_resync_message(FullResync{replid_, offset_, data_}));
    }
    streamed_ = offset_;  // everything up to here went with the answer
  }

  /// REPLCONF ACK: the replica is alive. One that is behind what we streamed, follows another ID or is not
  /// the replica we stream to hears our ID and offset (and then PSYNCs).
  void on_ack(const Message& m, const ReplAck& a) {
    if (!master_) return;
    if (replid_ == "?") replid_ = new_replid();
    const bool ours = replica_.valid() && m.from == replica_;
    if (ours) replica_ack_at_ = ctx_.now();
    if (!ours || a.replid != replid_ || a.offset < streamed_)
      ctx_.send(m.from, ping_message(ReplPing{replid_, ours ? streamed_ : offset_, ours}));
  }

  // ---- replica side ----

  /// The replication cron, every ack_period: re-send an unanswered PSYNC, PSYNC again after repl-timeout
  /// of silence, else REPLCONF ACK.
  void replica_cron() {
    const Time now = ctx_.now();
    next_cron_ = now + opts_.replication.ack_period;
    if (syncing_) {
      if (now - psync_at_ >= opts_.replication.psync_retry) psync();
    } else if (now - heard_at_ >= opts_.replication.timeout) {
      ctx_.note("repl-timeout", fmt::format("{}: nothing from {} for {}", ctx_.name(), peer_,
                                            format_time(opts_.replication.timeout)));
      psync();
    } else if (const ProcId p = ctx_.lookup(peer_); p.valid()) {
      ctx_.send(p, ack_message(ReplAck{replid_, offset_}));
    }
  }

  void psync() {
    syncing_ = true;
    psync_at_ = ctx_.now();
    const ProcId p = ctx_.lookup(peer_);
    psync_id_ = p.valid() ? ctx_.send(p, psync_message(Psync{replid_, offset_ + 1})) : 0;
  }

  /// Ask for a resync unless one was asked for less than psync_retry ago.
  void resync() {
    if (syncing_ && ctx_.now() - psync_at_ < opts_.replication.psync_retry) return;
    psync();
  }

  bool from_master(const Message& m) const {
    return !master_ && !peer_.empty() && m.from == ctx_.lookup(peer_);
  }

  void on_stream(const Message& m, const ReplCommand& c) {
    if (!from_master(m)) return;
    heard_at_ = ctx_.now();
    if (c.replid != replid_) return resync();
    if (c.offset <= offset_) return;  // a duplicate, or already had with a resync
    if (c.offset > offset_ + 1) {
      if (!syncing_)
        ctx_.note("repl-gap",
                  fmt::format("{}: expected offset {}, got {}", ctx_.name(), offset_ + 1, c.offset));
      return resync();
    }
    apply(c.offset, c.op);
  }

  void on_ping(const Message& m, const ReplPing& p) {
    if (!from_master(m)) return;
    heard_at_ = ctx_.now();
    if (!p.connected || p.replid != replid_ || p.offset > offset_) resync();
  }

  void on_partial(const Message& m, const PartialResync& p) {
    if (!from_master(m) || !syncing_ || m.reply_to != psync_id_) return;  // a stale or duplicated answer
    syncing_ = false;
    heard_at_ = ctx_.now();
    replid_ = p.replid;
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      const std::uint64_t o = p.first + i;
      if (o <= offset_) continue;
      if (o != offset_ + 1) break;
      apply(o, p.ops[i]);
    }
  }

  void on_full(const Message& m, const FullResync& f) {
    if (!from_master(m) || !syncing_ || m.reply_to != psync_id_) return;
    syncing_ = false;
    heard_at_ = ctx_.now();
    for (const auto& [k, e] : data_) persist(k, std::nullopt);
    data_ = f.data;
    for (const auto& [k, e] : data_) persist(k, e);
    replid_ = f.replid;
    offset_ = f.offset;
    backlog_.reset();
    observe(ReplicationEvent::Kind::full_sync, offset_, nullptr);
  }

  /// Apply the stream's next command (offset == offset_ + 1), keeping it in our backlog for a promotion.
  void apply(std::uint64_t offset, const ReplicationOp& r) {
    persist(r.key, r.entry);
    if (r.entry) {
      data_[r.key] = *r.entry;
      if (r.lock_set) history_.recorder(world_, ctx_.name()).grant(r.key, r.entry->value);
    } else {
      data_.erase(r.key);
    }
    offset_ = offset;
    backlog_.push(offset, r, ctx_.now());
    observe(ReplicationEvent::Kind::applied, offset, &backlog_.at(offset).op);
  }

  void observe(ReplicationEvent::Kind k, std::uint64_t offset, const ReplicationOp* op) {
    if (opts_.observer)
      opts_.observer({.kind = k, .node = ctx_.name(), .offset = offset, .op = op, .data = &data_});
  }

  // ---- the dataset ----

  /// The live entry for key. A master expires it lazily by its wall clock and propagates the DEL, as Redis
  /// does; a replica only hides it (its dataset changes by the stream alone).
  const Entry* live(const std::string& key) {
    auto it = data_.find(key);
    if (it == data_.end()) return nullptr;
    if (it->second.expire_wall <= ctx_.wall()) {
      if (master_) write(key, std::nullopt, false);
      return nullptr;
    }
    return &it->second;
  }

  /// Apply a write: memory, AOF, and the replication backlog once a replica has attached (Redis creates the
  /// backlog then; until then the offset does not move).
  void write(const std::string& key, std::optional<Entry> e, bool lock_set) {
    persist(key, e);
    const bool propagate = master_ && backlog_on_;
    if (propagate)
      backlog_.push(++offset_, ReplicationOp{key, e, lock_set}, ctx_.now() + opts_.replication_delay);
    if (e)
      data_[key] = std::move(*e);
    else
      data_.erase(key);
    if (propagate)
      observe(ReplicationEvent::Kind::propagated, offset_, &backlog_.at(offset_).op);
    else if (master_)
      observe(ReplicationEvent::Kind::unstreamed, offset_, nullptr);
  }

  void persist(const std::string& key, const std::optional<Entry>& e) {
    if (!opts_.aof) return;
    const std::string k = std::string(kAofPrefix) + key;
    if (e)
      ctx_.storage().put(k, encode(*e));
    else
      ctx_.storage().erase(k);
  }

  std::int64_t incr(const std::string& key) {
    const Entry* cur = live(key);
    const std::int64_t v = (cur ? parse_int(cur->value) : opts_.counter_start) + 1;
    write(key, Entry{std::to_string(v), cur ? cur->expire_wall : kTimeMax}, false);
    return v;
  }

  /// REPLICAOF NO ONE: keep the dataset and offset, continue under a new ID, remember the old one (Redis's
  /// shiftReplicationId) so that a replica of the old master can still resync partially.
  void promote() {
    ctx_.note("promoted", fmt::format("{} at offset {}", ctx_.name(), offset_));
    master_ = true;
    record_role(1);
    replid2_ = replid_;
    replid2_offset_ = offset_;
    replid_ = new_replid();
    backlog_on_ = true;
    syncing_ = false;
    replica_ = ProcId{};
    streamed_ = offset_;
  }

  /// REPLICAOF peer: keep the dataset and PSYNC the new master with our own ID and offset (Redis caches
  /// itself as the master to continue from); a master that cannot continue it answers with a full resync.
  void demote(const std::string& peer) {
    const bool was_master = master_;
    if (master_) ctx_.note("demoted", fmt::format("{} replica of {}", ctx_.name(), peer));
    master_ = false;
    if (was_master) record_role(1);
    peer_ = peer;
    replica_ = ProcId{};
    heard_at_ = ctx_.now();
    next_cron_ = ctx_.now() + opts_.replication.ack_period;
    psync();
  }

  void handle(const Message& m, const Command& c) {
    Reply rep;
    const bool is_write =
        c.op == Op::set_nx || c.op == Op::del_if_value || c.op == Op::pexpire_if_value || c.op == Op::incr;
    if (is_write && !master_) {
      rep.error = "READONLY";
      ctx_.reply(m, Message::of("-READONLY", rep));
      return;
    }
    std::string type;
    switch (c.op) {
      case Op::set_nx:
        if (live(c.key) == nullptr) {
          write(c.key, Entry{c.value, ctx_.wall() + c.ttl}, true);
          history_.recorder(world_, ctx_.name()).grant(c.key, c.value);
          rep.ok = true;
          if (!c.fence_counter.empty()) rep.integer = incr(c.fence_counter);
        }
        type = rep.ok ? "OK" : "nil";
        break;
      case Op::del_if_value:
        if (const Entry* e = live(c.key); e != nullptr && (c.blind || e->value == c.value)) {
          write(c.key, std::nullopt, false);
          rep.ok = true;
        }
        type = rep.ok ? "1" : "0";
        break;
      case Op::pexpire_if_value:
        if (const Entry* e = live(c.key); e != nullptr && e->value == c.value) {
          write(c.key, Entry{e->value, ctx_.wall() + c.ttl}, false);
          rep.ok = true;
        }
        type = rep.ok ? "1" : "0";
        break;
      case Op::get:
        if (const Entry* e = live(c.key)) rep.value = e->value;
        rep.ok = rep.value.has_value();
        type = rep.ok ? "value" : "nil";
        break;
      case Op::incr:
        rep.integer = incr(c.key);
        rep.ok = true;
        type = "integer";
        break;
      case Op::ping:
        rep.ok = true;
        rep.role = master_ ? "master" : "replica";
        type = "PONG";
        break;
      case Op::promote:
        if (!master_) promote();
        rep.ok = true;
        type = "OK";
        break;
      case Op::replicaof:
        demote(c.peer);
        rep.ok = true;
        type = "OK";
        break;
      case Op::get_master:
        return;  // a sentinel command: nodes ignore it
    }
    ctx_.reply(m, Message::of(type, rep));
  }

  Context& ctx_;
  World& world_;
  History& history_;
  NodeOptions opts_;
  bool master_;
  std::string peer_;  ///< a replica's master
  Dataset data_;

  // Replication (both roles). A master's offset is master_repl_offset; a replica's, the last it applied.
  std::string replid_ = "?";  ///< a master's own ID; a replica's: its master's ("?": never synced)
  std::string replid2_ =
      "?";  ///< a promoted master: the ID it replicated before, valid up to replid2_offset_
  std::uint64_t replid2_offset_ = 0;
  std::uint64_t offset_ = 0;
  std::uint32_t replids_ = 0;  ///< IDs this incarnation has taken
  Backlog backlog_;
  bool backlog_on_ = false;  ///< a master: a replica has attached (the backlog exists)

  // A master's stream to its replica.
  ProcId replica_{};            ///< invalid: none (never attached, or dropped after repl-timeout)
  std::uint64_t streamed_ = 0;  ///< the last offset streamed to it
  Time replica_ack_at_{};
  Time next_ping_{};

  // A replica's link to its master.
  bool syncing_ = false;  ///< a PSYNC is outstanding (commands that continue the prefix still apply)
  std::uint64_t psync_id_ = 0;
  Time psync_at_{};
  Time heard_at_{};  ///< last message from the master (repl-timeout)
  Time next_cron_{};
};

}  // namespace

ProcId spawn_node(World& world, const NodeOptions& opts, History& history) {
  World* w = &world;
  History* h = &history;
  ProcessOptions po;
  po.daemon = true;
  po.fsync = opts.fsync;
  po.fsync_period = opts.fsync_period;
  return world.spawn(
      opts.name,
      [w, h, opts](Context& ctx) {
        Node node(ctx, *w, *h, opts);
        node.run();
      },
      po);
}

}  // namespace locksim::redis
