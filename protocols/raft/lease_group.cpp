#include "locksim/protocols/raft/lease_group.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

namespace locksim::raft {

std::string encode(const Entry& e) {
  return encode_entry(LogEntry{e.term, encode_command(e.cmd)});
}

std::optional<Entry> to_entry(const LogEntry& e) {
  auto c = decode_command(e.cmd);
  if (!c) return std::nullopt;
  return Entry{e.term, std::move(*c)};
}

std::optional<Entry> decode(std::string_view s) {
  auto e = decode_entry(s);
  return e ? to_entry(*e) : std::nullopt;
}

namespace {

/// The lock service of one member: the state machine every member applies, and what its leader does with
/// it (lease deadlines and their expiry, promises, lock waiters).
class LeaseService final : public Service {
 public:
  LeaseService(Member& m, const RaftOptions& opts, const Observer* obs) : m_(m), opts_(opts), obs_(obs) {}

  std::string noop() const override { return encode_command(Command{}); }

  void apply(std::uint64_t index, const LogEntry& e) override {
    changes_.clear();
    cmd_ = decode_command(e.cmd).value_or(Command{});
    res_ = sm_.apply(index, cmd_, changes_);
  }

  void on_leader() override {
    // etcd's lessor Promote: every lease gets a full TTL from now on this leader's clock.
    deadlines_.clear();
    pending_revoke_.clear();
    for (const auto& [lease, l] : sm_.leases()) deadlines_[lease] = lease_clock() + l.ttl;
  }

  void on_step_down() override {
    for (const auto& [k, ps] : waiters_)
      for (const Pending& p : ps) m_.send_reply(p, ClientReply{p.req, false, 0, "leader-changed", {}});
    waiters_.clear();
    deadlines_.clear();
    pending_revoke_.clear();
  }

  Time next_timer() const override {
    Time t = kTimeMax;
    const Time now = m_.ctx().now();
    for (const auto& [lease, d] : deadlines_)
      if (!pending_revoke_.count(lease))
        t = std::min(t, expiry_seen_at(d) - (lease_clock() - now));  // on ctx.now()
    return t;
  }

  /// Lease expiry, decided here on this leader's monotonic clock and committed through the log.
  void on_timer() override {
    std::vector<std::uint64_t> expired;
    for (const auto& [lease, d] : deadlines_)
      if (expiry_seen_at(d) <= lease_clock() && !pending_revoke_.count(lease)) expired.push_back(lease);
    for (std::uint64_t lease : expired) {
      pending_revoke_.insert(lease);
      m_.propose(encode_command(Command{Op::revoke, lease, 0ns, {}, true}));
    }
  }

  void leader_applied(std::uint64_t index, const LogEntry&) override {
    Context& ctx = m_.ctx();
    const Time now = ctx.now();
    const Command& c = cmd_;
    const LockService::Result& res = res_;
    bool promise = false;
    // A revoke this leader already appended after this entry wins: answering ok would promise a lease that is
    // about to be deleted. (A retried grant names an existing lease, which may be that close to its expiry.)
    auto revoked_later = [&](std::uint64_t lease) {
      for (std::uint64_t i = index + 1; i <= m_.last_index(); ++i) {
        auto later = decode_command(m_.entry(i).cmd);
        if (later && later->op == Op::revoke && later->lease == lease) return true;
      }
      return false;
    };
    if (c.op == Op::grant && res.ok) {  // a new lease, or (a retried grant) the one its key names
      if (revoked_later(res.value)) {
        reply_pending(index, ClientReply{0, false, res.value, "lease-not-found", {}});
        return;
      }
      deadlines_[res.value] = std::max(deadlines_[res.value], lease_clock() + c.ttl);
      promise = true;
    } else if (c.op == Op::keepalive && res.ok) {
      if (revoked_later(c.lease)) {
        reply_pending(index, ClientReply{0, false, c.lease, "lease-not-found", {}});
        return;
      }
      auto l = sm_.leases().find(c.lease);
      deadlines_[c.lease] = std::max(deadlines_[c.lease], lease_clock() + l->second.ttl);
      promise = true;
    } else if (c.op == Op::revoke && res.ok) {
      deadlines_.erase(c.lease);
      pending_revoke_.erase(c.lease);
    }
    if (c.op == Op::revoke || c.op == Op::unlock) fail_deleted_waiters(c);
    for (const auto& ch : changes_) {
      ctx.note("raft-holder", fmt::format("{} lease={} rev={}", ch.lock, ch.lease, ch.rev));
      if (obs_ && obs_->on_holder) obs_->on_holder(ctx.name(), ch.lock, ch.lease, ch.rev);
      auto w = waiters_.find({ch.lock, ch.lease});
      if (w == waiters_.end()) continue;
      for (const Pending& p : w->second)
        m_.send_reply(p, ClientReply{p.req, true, lock_token(ch.rev), {}, {}});
      waiters_.erase(w);
    }
    // The entry at a pending index is the one this leader appended for it: a leader's log only grows while
    // it leads, and pending requests are answered and cleared when it stops.
    auto pending = m_.take_pending(index);
    if (!pending) return;
    const Pending p = *pending;
    if (promise && obs_ && obs_->on_promise) {
      auto l = sm_.leases().find(res.value);
      obs_->on_promise(ctx.name(), l->first, l->second.ttl, now - p.appended);
    }
    if (c.op == Op::lock && res.ok) {
      auto h = sm_.holder(c.name);
      if (!h || h->first != c.lease) {  // not the holder yet: answer when it is
        waiters_[{c.name, c.lease}].push_back(p);
        return;
      }
    }
    m_.send_reply(
        p, ClientReply{
               p.req, res.ok, c.op == Op::lock && res.ok ? lock_token(res.value) : res.value, res.error, {}});
  }

 private:
  /// The clock leases are timed on: monotonic, or the wall clock in the "wall-expiry" variant.
  Time lease_clock() const { return opts_.wall_expiry ? m_.ctx().wall() : m_.ctx().now(); }
  /// A lock reply's token: the replicated revision, or this node's own counter in the "node-counter" variant.
  std::uint64_t lock_token(std::uint64_t rev) {
    return opts_.token_base + (opts_.node_counter ? ++node_counter_ : rev);
  }
  /// When the leader's lessor next looks at lease deadline `d` (on the lease clock): at once without a check
  /// interval, else at the first tick at or after it.
  Time expiry_seen_at(Time d) const {
    const std::int64_t i = opts_.expiry_check_interval.count();
    if (i <= 0 || d.count() <= 0) return d;
    const std::int64_t ticks = d.count() / i + (d.count() % i != 0);
    return Time{ticks > std::numeric_limits<std::int64_t>::max() / i ? kTimeMax.count() : ticks * i};
  }

  void fail_deleted_waiters(const Command& c) {
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      const auto& [lock, lease] = it->first;
      const bool gone =
          lease == c.lease && (c.op == Op::revoke || lock == c.name) && !sm_.key_rev(lock, lease);
      if (!gone) {
        ++it;
        continue;
      }
      for (const Pending& p : it->second) m_.send_reply(p, ClientReply{p.req, false, 0, "deleted", {}});
      it = waiters_.erase(it);
    }
  }

  void reply_pending(std::uint64_t index, ClientReply r) {
    auto p = m_.take_pending(index);
    if (!p) return;
    r.req = p->req;
    m_.send_reply(*p, r);
  }

  Member& m_;
  const RaftOptions& opts_;
  const Observer* obs_;
  LockService sm_;
  // The entry applied last, for leader_applied.
  Command cmd_;
  LockService::Result res_;
  std::vector<LockService::HolderChange> changes_;
  // Leader only.
  std::map<std::uint64_t, Time> deadlines_;  // lease → expiry on this leader's monotonic clock
  std::set<std::uint64_t> pending_revoke_;
  std::uint64_t node_counter_ = 0;  // "node-counter" variant only: volatile, per node
  std::map<std::pair<std::string, std::uint64_t>, std::vector<Pending>>
      waiters_;  // (lock, lease) → lock calls
};

}  // namespace

std::vector<ProcId> spawn_raft_group(World& world, const RaftOptions& opts,
                                     std::shared_ptr<const Observer> observer) {
  auto shared_opts = std::make_shared<const RaftOptions>(opts);
  std::shared_ptr<GroupObserver> group;
  if (observer) {
    group = std::make_shared<GroupObserver>();
    group->on_start = observer->on_start;
    group->on_leader = observer->on_leader;
    group->on_step_down = observer->on_step_down;
    group->on_commit = observer->on_commit;
    if (observer->on_truncate)
      group->on_truncate = [observer](const std::string& node, std::uint64_t index, const LogEntry& e) {
        if (auto d = to_entry(e)) observer->on_truncate(node, index, *d);
      };
    if (observer->on_apply)
      group->on_apply = [observer](const std::string& node, std::uint64_t index, const LogEntry& e) {
        if (auto d = to_entry(e)) observer->on_apply(node, index, *d);
      };
  }
  return spawn_group(
      world, opts,
      [shared_opts, observer](Member& m) {
        return std::make_unique<LeaseService>(m, *shared_opts, observer.get());
      },
      std::move(group));
}

std::uint64_t RaftClient::send(Context& ctx, const Command& cmd) {
  return Client::send(ctx, encode_command(cmd),
                      fmt::format("{} lease={} {}", to_string(cmd.op), cmd.lease, cmd.name));
}

std::optional<ClientReply> RaftClient::submit(Context& ctx, const Command& cmd, Time deadline) {
  return Client::submit(ctx, encode_command(cmd),
                        fmt::format("{} lease={} {}", to_string(cmd.op), cmd.lease, cmd.name), deadline);
}

}  // namespace locksim::raft
