#include "locksim/protocols/consul/server.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace locksim::consul {

std::string describe(const KCommand& c) {
  return fmt::format("{} session={} {}", to_string(c.op), c.session, c.key);
}

std::string key_data(const KvStore::Entry* e) {
  return e ? fmt::format("{} {}", e->session, e->lock_index) : std::string("0 0");
}

Duration invalidation_after(Duration ttl, std::int64_t multiplier_ppm) {
  const std::int64_t whole = ttl.count() / 1'000'000 * multiplier_ppm;
  const std::int64_t part = ttl.count() % 1'000'000 * multiplier_ppm / 1'000'000;
  return Duration{whole + part};
}

namespace {

class ConsulServer final : public raft::Service {
 public:
  ConsulServer(raft::Member& m, const ServerOptions& opts, const ServerObserver* obs)
      : m_(m), opts_(opts), obs_(obs) {}

  std::string noop() const override { return encode(KCommand{}); }

  void apply(std::uint64_t index, const raft::LogEntry& e) override {
    applied_ = index;
    changes_.clear();
    cmd_ = decode(e.cmd).value_or(KCommand{});
    Duration delay{0};
    if (cmd_.op == KOp::session_destroy)
      if (auto s = kv_.sessions().find(cmd_.session); s != kv_.sessions().end()) delay = s->second.lock_delay;
    res_ = kv_.apply(index, cmd_, changes_);
    // state/session.go: each key the destroyed session held is in lock-delay on this server's clock.
    if (cmd_.op == KOp::session_destroy && delay > 0ns)
      for (const auto& ch : changes_)
        if (ch.released_by == cmd_.session) {
          Time& until = lock_delay_[ch.key];
          until = std::max(until, now() + delay);
        }
  }

  /// kvs_endpoint.go Apply: an acquire of a key in lock-delay is answered false before it reaches Raft.
  std::optional<raft::ClientReply> screen(const std::string& cmd) override {
    auto c = decode(cmd);
    if (!c || c->op != KOp::acquire) return std::nullopt;
    auto d = lock_delay_.find(c->key);
    if (d != lock_delay_.end() && d->second > now()) return refuse(*c, "lock-delay");
    if (destroy_in_log(c->key)) return refuse(*c, "lock-delay");
    return std::nullopt;
  }

  /// leader.go establishLeadership → initializeSessionTimers: every session's timer starts afresh.
  void on_leader() override {
    timers_.clear();
    closing_.clear();
    for (const auto& [id, s] : kv_.sessions()) timers_[id] = now() + after(s.ttl);
  }

  void on_step_down() override {
    for (const auto& [key, ps] : watchers_)
      for (const raft::Pending& p : ps)
        m_.send_reply(p, raft::ClientReply{p.req, false, 0, "leader-changed"});
    watchers_.clear();
    timers_.clear();
    closing_.clear();
  }

  Time next_timer() const override {
    Time t = kTimeMax;
    for (const auto& [id, at] : timers_)
      if (!closing_.count(id)) t = std::min(t, at);
    return t;
  }

  /// session_ttl.go: the timer fired: invalidateSession commits the destroy.
  void on_timer() override {
    std::vector<std::uint64_t> due;
    for (const auto& [id, at] : timers_)
      if (at <= now() && !closing_.count(id)) due.push_back(id);
    for (std::uint64_t id : due) {
      closing_.insert(id);
      m_.ctx().note("consul-session-invalidated", fmt::format("session={}", id));
      if (obs_ && obs_->on_invalidate) obs_->on_invalidate(m_.ctx().name(), id);
      KCommand c;
      c.op = KOp::session_destroy;
      c.session = id;
      c.invalidated = true;
      m_.propose(encode(c));
    }
  }

  void leader_applied(std::uint64_t index, const raft::LogEntry&) override {
    const KCommand& c = cmd_;
    const KvStore::Result& r = res_;
    if (c.op == KOp::session_create && r.ok) {
      if (!timers_.count(r.value)) timers_[r.value] = now() + after(c.ttl);
    } else if (c.op == KOp::session_renew && r.ok) {
      // A session this leader already decided to invalidate: its destroy is in the log after this renew.
      if (closing_.count(c.session)) {
        answer(index, raft::ClientReply{0, false, c.session, "invalid-session"});
        return;
      }
      timers_[c.session] = now() + after(kv_.sessions().at(c.session).ttl);  // resetSessionTimer
    } else if (c.op == KOp::session_destroy) {
      timers_.erase(c.session);
      closing_.erase(c.session);
    }
    std::set<std::string> touched;
    for (const auto& ch : changes_) {
      touched.insert(ch.key);
      if (ch.session == 0) continue;
      m_.ctx().note("consul-holder",
                    fmt::format("{} session={} index={}", ch.key, ch.session, ch.modify_index));
      if (obs_ && obs_->on_holder) obs_->on_holder(m_.ctx().name(), ch);
    }
    if (c.op == KOp::acquire && r.ok) touched.insert(c.key);  // the ModifyIndex moved
    for (const std::string& key : touched) wake(key);
    auto p = m_.take_pending(index);
    if (!p) return;
    if (c.op == KOp::get) {
      const KvStore::Entry* e = kv_.find(c.key);
      if (c.wait_index != 0 && (e ? e->modify_index : 0) <= c.wait_index) {
        watchers_[c.key].push_back(*p);  // a blocking query: answered when the key changes
        return;
      }
      m_.send_reply(*p, raft::ClientReply{p->req, true, e ? e->modify_index : 0, {}, {}, key_data(e)});
      return;
    }
    m_.send_reply(*p, raft::ClientReply{p->req, r.ok, r.value, r.error, {}, {}});
  }

 private:
  Time now() const { return m_.ctx().now(); }
  Duration after(Duration ttl) const { return invalidation_after(ttl, opts_.ttl_multiplier_ppm); }

  static raft::ClientReply refuse(const KCommand&, const char* why) {
    return raft::ClientReply{0, false, 0, why};
  }
  /// A destroy of `key`'s holder (with a lock-delay) appended to this leader's log and not yet applied.
  bool destroy_in_log(const std::string& key) const {
    const KvStore::Entry* e = kv_.find(key);
    if (!e || e->session == 0) return false;
    auto s = kv_.sessions().find(e->session);
    if (s == kv_.sessions().end() || s->second.lock_delay <= 0ns) return false;
    for (std::uint64_t i = applied_ + 1; i <= m_.last_index(); ++i) {
      auto later = decode(m_.entry(i).cmd);
      if (later && later->op == KOp::session_destroy && later->session == e->session) return true;
    }
    return false;
  }
  void wake(const std::string& key) {
    auto w = watchers_.find(key);
    if (w == watchers_.end()) return;
    const KvStore::Entry* e = kv_.find(key);
    for (const raft::Pending& p : w->second)
      m_.send_reply(p, raft::ClientReply{p.req, true, e ? e->modify_index : 0, {}, {}, key_data(e)});
    watchers_.erase(w);
  }
  void answer(std::uint64_t index, raft::ClientReply r) {
    auto p = m_.take_pending(index);
    if (!p) return;
    r.req = p->req;
    m_.send_reply(*p, r);
  }

  raft::Member& m_;
  const ServerOptions& opts_;
  const ServerObserver* obs_;
  KvStore kv_;
  std::uint64_t applied_ = 0;
  // The entry applied last, for leader_applied.
  KCommand cmd_;
  KvStore::Result res_;
  std::vector<KvStore::Change> changes_;
  // This server's memory (every server, not replicated): key → end of its lock-delay, on this server's clock.
  std::map<std::string, Time> lock_delay_;
  // Leader only.
  std::map<std::uint64_t, Time> timers_;  // session → invalidation, on this leader's clock
  std::set<std::uint64_t> closing_;       // sessions whose destroy this leader proposed
  std::map<std::string, std::vector<raft::Pending>> watchers_;  // key → blocking queries
};

}  // namespace

std::vector<ProcId> spawn_servers(World& world, const ServerOptions& opts,
                                  std::shared_ptr<const ServerObserver> observer) {
  auto shared_opts = std::make_shared<const ServerOptions>(opts);
  std::shared_ptr<const raft::GroupObserver> group;
  if (observer) group = std::shared_ptr<const raft::GroupObserver>(observer, &observer->group);
  return raft::spawn_group(
      world, opts.group,
      [shared_opts, observer](raft::Member& m) {
        return std::make_unique<ConsulServer>(m, *shared_opts, observer.get());
      },
      std::move(group));
}

}  // namespace locksim::consul
