#include "protocols/redis/redis_node.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <deque>

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
    case Op::sync:
      return "SYNC";
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

/// One incarnation of a node: volatile state lives here and dies with the fiber on a crash.
class Node {
 public:
  Node(Context& ctx, World& world, History& history, const NodeOptions& opts)
      : ctx_(ctx), world_(world), history_(history), opts_(opts), master_(!opts.replica), peer_(opts.peer) {}

  void run() {
    if (opts_.aof) load();
    if (!master_ && !peer_.empty()) request_sync();
    for (;;) {
      Duration timeout = kForever;
      if (!backlog_.empty()) timeout = std::max(Duration{0}, backlog_.front().first - ctx_.now());
      auto m = ctx_.receive(timeout);
      flush_backlog();
      if (!m) continue;
      if (const auto* c = m->as<Command>()) {
        handle(*m, *c);
      } else if (const auto* r = m->as<ReplicationOp>()) {
        if (!master_) apply_replicated(*r);
      } else if (const auto* s = m->as<Snapshot>()) {
        if (!master_) install(*s);
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

  void request_sync() {
    const ProcId p = ctx_.lookup(peer_);
    if (p.valid()) ctx_.send(p, command_message(Command{.op = Op::sync, .peer = ctx_.name()}));
  }

  /// The live entry for key, expiring it lazily by the wall clock (and propagating the DEL, as Redis does).
  Entry* live(const std::string& key) {
    auto it = data_.find(key);
    if (it == data_.end()) return nullptr;
    if (it->second.expire_wall <= ctx_.wall()) {
      write(key, std::nullopt, false);
      return nullptr;
    }
    return &it->second;
  }

  /// Apply a write: memory, AOF, and the replication backlog when this node is a master with a replica.
  void write(const std::string& key, std::optional<Entry> e, bool lock_set) {
    persist(key, e);
    if (master_ && !peer_.empty()) {
      backlog_.emplace_back(ctx_.now() + opts_.replication_delay, ReplicationOp{key, e, lock_set});
    }
    if (e)
      data_[key] = std::move(*e);
    else
      data_.erase(key);
  }

  void persist(const std::string& key, const std::optional<Entry>& e) {
    if (!opts_.aof) return;
    const std::string k = std::string(kAofPrefix) + key;
    if (e)
      ctx_.storage().put(k, encode(*e));
    else
      ctx_.storage().erase(k);
  }

  void flush_backlog() {
    while (!backlog_.empty() && backlog_.front().first <= ctx_.now()) {
      ReplicationOp op = std::move(backlog_.front().second);
      backlog_.pop_front();
      const ProcId p = ctx_.lookup(peer_);
      if (!p.valid()) continue;
      std::string detail = op.key + (op.entry ? " " + op.entry->value : " (deleted)");
      ctx_.send(p, Message::of("REPL", std::move(op), std::move(detail)));
    }
  }

  void apply_replicated(const ReplicationOp& r) {
    if (r.entry) {
      persist(r.key, r.entry);
      data_[r.key] = *r.entry;
      if (r.lock_set) history_.service_set(world_.now(), ctx_.name(), r.key, r.entry->value);
    } else {
      persist(r.key, std::nullopt);
      data_.erase(r.key);
    }
  }

  void install(const Snapshot& s) {
    for (const auto& [k, e] : data_) persist(k, std::nullopt);
    data_ = s.data;
    for (const auto& [k, e] : data_) persist(k, e);
  }

  std::int64_t incr(const std::string& key) {
    const Entry* cur = live(key);
    const std::int64_t v = (cur ? parse_int(cur->value) : 0) + 1;
    write(key, Entry{std::to_string(v), cur ? cur->expire_wall : kTimeMax}, false);
    return v;
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
          history_.service_set(world_.now(), ctx_.name(), c.key, c.value);
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
        if (!master_) ctx_.note("promoted", ctx_.name());
        master_ = true;
        rep.ok = true;
        type = "OK";
        break;
      case Op::replicaof:
        if (master_) ctx_.note("demoted", fmt::format("{} replica of {}", ctx_.name(), c.peer));
        master_ = false;
        peer_ = c.peer;
        backlog_.clear();
        request_sync();
        rep.ok = true;
        type = "OK";
        break;
      case Op::sync: {
        if (!master_) return;
        Snapshot s;
        for (const auto& [k, e] : data_)
          if (e.expire_wall > ctx_.wall()) s.data.emplace(k, e);
        peer_ = c.peer;  // forward further writes to the replica that asked
        ctx_.reply(m, Message::of("SNAPSHOT", std::move(s)));
        return;
      }
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
  std::string peer_;
  std::map<std::string, Entry> data_;
  std::deque<std::pair<Time, ReplicationOp>> backlog_;  // (due on the monotonic clock, write)
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

ProcId spawn_sentinel(World& world, const SentinelOptions& opts) {
  return world.spawn(
      opts.name,
      [opts](Context& ctx) {
        const std::size_t n = opts.nodes.size();
        std::vector<ProcId> ids;
        for (const auto& name : opts.nodes) ids.push_back(ctx.lookup(name));
        std::size_t master = 0;
        std::vector<Time> last_ok(n, ctx.now());  // every node is presumed up when the sentinel starts
        std::map<std::uint64_t, std::size_t> pings;
        const Duration interval = std::max(opts.ping_interval, Duration{1ms});
        Time next_tick = ctx.now();
        for (;;) {
          if (ctx.now() >= next_tick) {
            const Time now = ctx.now();
            if (n > 1 && now - last_ok[master] >= opts.failover_after) {
              // The master has been silent for down-after-milliseconds: promote a node that answers.
              for (std::size_t j = 0; j < n; ++j) {
                if (j == master || now - last_ok[j] >= opts.failover_after) continue;
                ctx.note("failover", fmt::format("{} -> {}", opts.nodes[master], opts.nodes[j]));
                master = j;
                ctx.send(ids[j], command_message(Command{.op = Op::promote}));
                break;
              }
            }
            pings.clear();  // a ping unanswered for a whole interval is lost
            for (std::size_t i = 0; i < n; ++i) {
              pings[ctx.send(ids[i], command_message(Command{.op = Op::ping}))] = i;
            }
            next_tick = now + interval;
          }
          auto m = ctx.receive(std::max(Duration{0}, next_tick - ctx.now()));
          if (!m) continue;
          if (auto it = pings.find(m->reply_to); it != pings.end()) {
            const std::size_t i = it->second;
            pings.erase(it);
            const auto* r = m->as<Reply>();
            if (r == nullptr) continue;
            last_ok[i] = ctx.now();
            // Reconcile roles with what the sentinel decided (a restarted old master comes back as a master).
            if (i == master && r->role != "master") {
              ctx.send(ids[i], command_message(Command{.op = Op::promote}));
            } else if (i != master && r->role == "master") {
              ctx.send(ids[i], command_message(Command{.op = Op::replicaof, .peer = opts.nodes[master]}));
            }
          } else if (const auto* c = m->as<Command>(); c != nullptr && c->op == Op::get_master) {
            Reply rep;
            rep.ok = true;
            rep.value = opts.nodes[master];
            ctx.reply(*m, Message::of("master", rep, opts.nodes[master]));
          }
        }
      },
      ProcessOptions{.daemon = true});
}

}  // namespace locksim::redis
