#include "locksim/protocols/zookeeper/ensemble.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace locksim::zk {

std::string describe(const ZCommand& c) {
  return fmt::format("{} session={} {}", to_string(c.op), c.session, c.path);
}

namespace {

/// One ensemble member's ZooKeeper: the tree every member applies, and its leader's session tracker,
/// watches and container manager.
class ZkService final : public raft::Service {
 public:
  ZkService(raft::Member& m, const EnsembleOptions& opts, const EnsembleObserver* obs)
      : m_(m), opts_(opts), obs_(obs) {
    tree_.set_tick(opts.tick_time);
  }

  std::string noop() const override { return encode(ZCommand{}); }

  void apply(std::uint64_t index, const raft::LogEntry& e) override {
    holders_.clear();
    deleted_.clear();
    cmd_ = decode(e.cmd).value_or(ZCommand{});
    res_ = tree_.apply(e.term, index, cmd_, holders_, deleted_);
  }

  /// A new leader's tracker: every open session gets its full timeout from now (ZooKeeper's leader rebuilds
  /// its SessionTracker from the tree, each session touched at once).
  void on_leader() override {
    expiry_.clear();
    closing_.clear();
    watches_.clear();
    removing_.clear();
    for (const auto& [id, s] : tree_.sessions()) expiry_[id] = round_up(now() + s.timeout);
    next_container_check_ = round_to(now() + opts_.container_check_interval, opts_.container_check_interval);
  }

  void on_step_down() override {
    expiry_.clear();
    closing_.clear();
    watches_.clear();
    removing_.clear();
  }

  Time next_timer() const override {
    Time t = kTimeMax;
    for (const auto& [id, at] : expiry_)
      if (!closing_.count(id)) t = std::min(t, at);
    if (has_empty_container()) t = std::min(t, next_container_check_);
    return t;
  }

  void on_timer() override {
    const Time n = now();
    std::vector<std::uint64_t> expired;
    for (const auto& [id, at] : expiry_)
      if (at <= n && !closing_.count(id)) expired.push_back(id);
    for (std::uint64_t id : expired) {
      closing_.insert(id);
      m_.ctx().note("zk-session-expired", fmt::format("session={}", id));
      if (obs_ && obs_->on_expire) obs_->on_expire(m_.ctx().name(), id);
      m_.propose(encode(ZCommand{ZOp::close_session, id, 0, 0ns, true, {}}));
    }
    if (n >= next_container_check_) {
      for (const auto& [path, p] : tree_.parents())
        if (p.children.empty() && !removing_.count(path)) {
          removing_.insert(path);
          m_.propose(encode(ZCommand{ZOp::remove_container, 0, 0, 0ns, false, path}));
        }
      while (next_container_check_ <= n) next_container_check_ += opts_.container_check_interval;
    }
  }

  void leader_applied(std::uint64_t index, const raft::LogEntry&) override {
    const ZCommand& c = cmd_;
    const ZnodeTree::Result& r = res_;
    if (c.op == ZOp::create_session && r.ok) {
      if (!expiry_.count(r.value)) expiry_[r.value] = round_up(now() + tree_.sessions().at(r.value).timeout);
    } else if (c.op == ZOp::ping && r.ok) {
      // SessionTrackerImpl.touchSession: the expiry only moves on. A session this leader already decided to
      // close is answered expired: its close entry is in the log after this ping.
      if (closing_.count(c.session)) {
        reply(index, raft::ClientReply{0, false, c.session, "session-expired", {}, {}});
        return;
      }
      auto& at = expiry_[c.session];
      at = std::max(at, round_up(now() + tree_.sessions().at(c.session).timeout));
    } else if (c.op == ZOp::close_session) {
      expiry_.erase(c.session);
      closing_.erase(c.session);
    } else if (c.op == ZOp::remove_container) {
      removing_.erase(c.path);
    }
    for (const auto& h : holders_) {
      m_.ctx().note("zk-holder", fmt::format("{} session={} czxid={:#x}", h.node, h.session, h.czxid));
      if (obs_ && obs_->on_holder) obs_->on_holder(m_.ctx().name(), h);
    }
    for (const auto& d : deleted_) fire_watches(d.node);
    auto p = m_.take_pending(index);
    if (!p) return;
    if (c.op == ZOp::check && r.ok && r.value == 0) watches_[r.data].push_back(p->client);
    m_.send_reply(*p, raft::ClientReply{p->req, r.ok, r.value, r.error, {}, r.data});
  }

 private:
  Time now() const { return m_.ctx().now(); }
  /// The next multiple of tickTime at or after `t` (the session tracker's expiry buckets).
  Time round_up(Time t) const { return round_to(t, opts_.tick_time); }
  static Time round_to(Time t, Duration interval) {
    const std::int64_t i = interval.count();
    if (i <= 0) return t;
    const std::int64_t k = t.count() / i + (t.count() % i != 0);
    return Time{k * i};
  }
  bool has_empty_container() const {
    for (const auto& [path, p] : tree_.parents())
      if (p.children.empty() && !removing_.count(path)) return true;
    return false;
  }
  void fire_watches(const std::string& node) {
    auto w = watches_.find(node);
    if (w == watches_.end()) return;
    for (ProcId client : w->second)
      m_.ctx().send(client, Message::of(kWatchType, WatchEvent{node}, fmt::format("NodeDeleted {}", node)));
    watches_.erase(w);
  }
  void reply(std::uint64_t index, raft::ClientReply r) {
    auto p = m_.take_pending(index);
    if (!p) return;
    r.req = p->req;
    m_.send_reply(*p, r);
  }

  raft::Member& m_;
  const EnsembleOptions& opts_;
  const EnsembleObserver* obs_;
  ZnodeTree tree_;
  // The entry applied last, for leader_applied.
  ZCommand cmd_;
  ZnodeTree::Result res_;
  std::vector<ZnodeTree::Change> holders_, deleted_;
  // Leader only.
  std::map<std::uint64_t, Time> expiry_;                // session → expiry on this leader's clock
  std::set<std::uint64_t> closing_;                     // sessions whose close this leader proposed
  std::map<std::string, std::vector<ProcId>> watches_;  // node → clients watching its deletion
  std::set<std::string> removing_;                      // containers whose removal this leader proposed
  Time next_container_check_ = kTimeMax;
};

}  // namespace

std::vector<ProcId> spawn_ensemble(World& world, const EnsembleOptions& opts,
                                   std::shared_ptr<const EnsembleObserver> observer) {
  auto shared_opts = std::make_shared<const EnsembleOptions>(opts);
  std::shared_ptr<const raft::GroupObserver> group;
  if (observer) group = std::shared_ptr<const raft::GroupObserver>(observer, &observer->group);
  return raft::spawn_group(
      world, opts.group,
      [shared_opts, observer](raft::Member& m) {
        return std::make_unique<ZkService>(m, *shared_opts, observer.get());
      },
      std::move(group));
}

}  // namespace locksim::zk
