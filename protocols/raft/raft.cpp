#include "locksim/protocols/raft/raft.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>

namespace locksim::raft {

// ---------------------------------------------------------------- encoding

std::string encode(const Entry& e) {
  return fmt::format("{} {} {} {} {} {}", e.term, static_cast<int>(e.cmd.op), e.cmd.lease, e.cmd.ttl.count(),
                     e.cmd.expired ? 1 : 0, e.cmd.name);
}

std::optional<Entry> decode(std::string_view s) {
  std::uint64_t nums[5] = {};
  std::int64_t ttl = 0;
  const char* p = s.data();
  const char* end = s.data() + s.size();
  for (int i = 0; i < 5; ++i) {
    std::from_chars_result r{};
    if (i == 3)
      r = std::from_chars(p, end, ttl);
    else
      r = std::from_chars(p, end, nums[i]);
    if (r.ec != std::errc{} || r.ptr == end || *r.ptr != ' ') return std::nullopt;
    p = r.ptr + 1;
  }
  if (nums[1] > static_cast<std::uint64_t>(Op::unlock)) return std::nullopt;
  Entry e;
  e.term = nums[0];
  e.cmd.op = static_cast<Op>(nums[1]);
  e.cmd.lease = nums[2];
  e.cmd.ttl = Duration{ttl};
  e.cmd.expired = nums[4] != 0;
  e.cmd.name.assign(p, end);
  return e;
}

// ---------------------------------------------------------------- messages between members

namespace {

struct VoteRequest {
  std::uint64_t term = 0;
  std::uint64_t last_index = 0;
  std::uint64_t last_term = 0;
};
struct VoteReply {
  std::uint64_t term = 0;
  bool granted = false;
};
struct AppendRequest {
  std::uint64_t term = 0;
  std::uint64_t prev_index = 0;
  std::uint64_t prev_term = 0;
  std::vector<Entry> entries;
  std::uint64_t commit = 0;
  Time sent{};  ///< the leader's monotonic clock when it sent this request
};
struct AppendReply {
  std::uint64_t term = 0;
  bool success = false;
  std::uint64_t match =
      0;  ///< success: last index known to match; failure: where the leader should retry from - 1
  /// The `sent` of the request this answers: check-quorum counts the reply as a sign of life from that
  /// moment, not from when the leader got round to reading it (a reply read after a pause is old news).
  Time sent{};
};

constexpr const char* kVote = "raft.vote";
constexpr const char* kVoteReply = "raft.vote.reply";
constexpr const char* kAppend = "raft.append";
constexpr const char* kAppendReply = "raft.append.reply";

constexpr const char* kHardKey = "raft/hard";
constexpr const char* kLastKey = "raft/last";
std::string log_key(std::uint64_t i) {
  return fmt::format("raft/log/{:012}", i);
}

enum class Role : std::uint8_t { follower, candidate, leader };

/// A client request waiting for its entry to be applied (or, for a lock, for its key to become the holder).
struct Pending {
  ProcId client;
  std::uint64_t msg = 0;  // request message id (reply_to)
  std::uint64_t req = 0;
  Time appended{};
};

struct Shared {
  RaftOptions opts;
  std::vector<std::string> names;
  std::shared_ptr<const Observer> observer;
};

/// One member: an event loop over its mailbox and its timers.
class Node {
 public:
  Node(Context& ctx, const Shared& shared) : ctx_(ctx), sh_(shared), obs_(shared.observer.get()) {}

  void run() {
    for (const auto& n : sh_.names) {
      ProcId p = ctx_.lookup(n);
      if (p != ctx_.self()) peers_.push_back(p);
    }
    load();
    if (obs_ && obs_->on_start) obs_->on_start(ctx_.name(), term_);
    reset_election_timer();
    for (;;) {
      const Time now = ctx_.now();
      const Time wake = next_timer();
      auto m = ctx_.receive(wake > now ? wake - now : 0ns);
      if (m) handle(*m);
      timers();
    }
  }

 private:
  // ------------------------------------------------ persistence
  void load() {
    log_.assign(1, Entry{});  // log_[0]: sentinel with term 0
    Storage& st = ctx_.storage();
    if (auto h = st.get(kHardKey)) {
      std::uint64_t vote = 0;
      const char* p = h->data();
      const char* e = h->data() + h->size();
      auto r = std::from_chars(p, e, term_);
      if (r.ptr != e) std::from_chars(r.ptr + 1, e, vote);
      voted_for_ =
          vote == 0 ? std::nullopt : std::optional<std::uint32_t>(static_cast<std::uint32_t>(vote - 1));
    }
    std::uint64_t last = 0;
    if (auto l = st.get(kLastKey)) std::from_chars(l->data(), l->data() + l->size(), last);
    for (std::uint64_t i = 1; i <= last; ++i) {
      auto s = st.get(log_key(i));
      auto e = s ? decode(*s) : std::nullopt;
      if (!e) break;  // a torn tail after a power loss: keep the prefix that survived
      log_.push_back(std::move(*e));
    }
  }
  void save_hard() {
    ctx_.storage().put(kHardKey, fmt::format("{} {}", term_, voted_for_ ? *voted_for_ + 1 : 0));
  }
  void append_local(Entry e) {
    log_.push_back(std::move(e));
    ctx_.storage().put(log_key(last_index()), encode(log_.back()));
    ctx_.storage().put(kLastKey, std::to_string(last_index()));
  }
  void truncate_after(std::uint64_t n) {
    const std::uint64_t old = last_index();
    if (obs_ && obs_->on_truncate)
      for (std::uint64_t i = n + 1; i <= old; ++i) obs_->on_truncate(ctx_.name(), i, log_[i]);
    log_.resize(n + 1);
    ctx_.storage().put(kLastKey, std::to_string(n));
    for (std::uint64_t i = n + 1; i <= old; ++i) ctx_.storage().erase(log_key(i));
  }

  std::uint64_t last_index() const { return log_.size() - 1; }
  std::uint64_t last_term() const { return log_.back().term; }
  std::size_t majority() const { return (peers_.size() + 1) / 2 + 1; }

  // ------------------------------------------------ timers
  void reset_election_timer() {
    election_deadline_ =
        ctx_.now() + ctx_.rng().uniform(sh_.opts.election_timeout_min, sh_.opts.election_timeout_max);
  }

  Time next_timer() const {
    if (role_ != Role::leader) return election_deadline_;
    // Without check-quorum the quorum deadline is never moved on: waking for it would spin at one instant.
    Time t = sh_.opts.check_quorum ? std::min(heartbeat_deadline_, quorum_deadline_) : heartbeat_deadline_;
    for (const auto& [lease, d] : deadlines_)
      if (!pending_revoke_.count(lease))
        t = std::min(t, expiry_seen_at(d) - (lease_clock() - ctx_.now()));  // on ctx_.now()
    return t;
  }

  void timers() {
    const Time now = ctx_.now();
    if (role_ != Role::leader) {
      if (now >= election_deadline_) start_election();
      return;
    }
    if (now >= quorum_deadline_ && sh_.opts.check_quorum) {
      std::size_t heard = 1;
      for (ProcId p : peers_)
        if (last_ack_[p] + sh_.opts.election_timeout_max >= now) ++heard;
      if (heard < majority()) {
        become_follower(term_, std::nullopt);
        return;
      }
      quorum_deadline_ = now + sh_.opts.election_timeout_max;
    }
    // Lease expiry, decided here on this leader's monotonic clock and committed through the log.
    std::vector<std::uint64_t> expired;
    for (const auto& [lease, d] : deadlines_)
      if (expiry_seen_at(d) <= lease_clock() && !pending_revoke_.count(lease)) expired.push_back(lease);
    for (std::uint64_t lease : expired) {
      pending_revoke_.insert(lease);
      propose(Command{Op::revoke, lease, 0ns, {}, true}, nullptr);
    }
    if (now >= heartbeat_deadline_) {
      for (ProcId p : peers_) send_append(p);
      heartbeat_deadline_ = now + sh_.opts.heartbeat;
    }
  }

  // ------------------------------------------------ roles
  void become_follower(std::uint64_t term, std::optional<ProcId> leader) {
    const bool was_leader = role_ == Role::leader;
    if (term > term_) {
      term_ = term;
      voted_for_.reset();
      save_hard();
    }
    role_ = Role::follower;
    leader_ = leader;
    if (was_leader) {
      ctx_.note("raft-step-down", fmt::format("term={}", term_));
      if (obs_ && obs_->on_step_down) obs_->on_step_down(ctx_.name(), term_);
      reset_election_timer();
      fail_all_pending();
      deadlines_.clear();
      pending_revoke_.clear();
    }
  }

  void start_election() {
    ++term_;
    voted_for_ = ctx_.self().value;
    save_hard();
    role_ = Role::candidate;
    leader_.reset();
    votes_.clear();
    votes_.insert(ctx_.self());
    reset_election_timer();
    ctx_.note("raft-election", fmt::format("term={}", term_));
    if (votes_.size() >= majority()) {
      become_leader();
      return;
    }
    for (ProcId p : peers_)
      ctx_.send(p, Message::of(kVote, VoteRequest{term_, last_index(), last_term()},
                               fmt::format("term={}", term_)));
  }

  void become_leader() {
    role_ = Role::leader;
    leader_ = ctx_.self();
    const Time now = ctx_.now();
    for (ProcId p : peers_) {
      next_[p] = last_index() + 1;
      match_[p] = 0;
      last_ack_[p] = now;
    }
    ctx_.note("raft-leader", fmt::format("term={}", term_));
    if (obs_ && obs_->on_leader) obs_->on_leader(ctx_.name(), term_);
    // etcd's lessor Promote: every lease gets a full TTL from now on this leader's clock.
    deadlines_.clear();
    pending_revoke_.clear();
    for (const auto& [lease, l] : sm_.leases()) deadlines_[lease] = lease_clock() + l.ttl;
    quorum_deadline_ = now + sh_.opts.election_timeout_max;
    heartbeat_deadline_ = now + sh_.opts.heartbeat;
    propose(Command{}, nullptr);  // a no-op of this term commits everything before it
  }

  // ------------------------------------------------ leader: log and replication
  void propose(Command c, const Message* request) {
    append_local(Entry{term_, std::move(c)});
    if (request) {
      const auto* rq = request->as<ClientRequest>();
      pending_[last_index()] = Pending{request->from, request->id, rq->req, ctx_.now()};
    }
    advance_commit();  // a group of one commits alone
    for (ProcId p : peers_)
      if (next_[p] == last_index()) send_append(p);  // peers already up to date get it at once
  }

  void send_append(ProcId p) {
    AppendRequest r;
    r.term = term_;
    const std::uint64_t next = std::max<std::uint64_t>(1, std::min(next_[p], last_index() + 1));
    r.prev_index = next - 1;
    r.prev_term = log_[r.prev_index].term;
    const std::uint64_t end = std::min<std::uint64_t>(last_index(), next - 1 + sh_.opts.max_batch);
    for (std::uint64_t i = next; i <= end; ++i) r.entries.push_back(log_[i]);
    r.commit = commit_;
    r.sent = ctx_.now();
    std::string detail =
        fmt::format("term={} prev={} n={} commit={}", term_, r.prev_index, r.entries.size(), commit_);
    ctx_.send(p, Message::of(kAppend, std::move(r), std::move(detail)));
  }

  void advance_commit() {
    for (std::uint64_t n = last_index(); n > commit_; --n) {
      if (log_[n].term != term_) break;  // only entries of the current term commit by counting
      std::size_t count = 1;
      for (ProcId p : peers_)
        if (match_[p] >= n) ++count;
      if (count >= majority()) {
        set_commit(n);
        return;
      }
    }
  }

  // ------------------------------------------------ applying
  void set_commit(std::uint64_t c) {
    if (c == commit_) return;
    if (obs_ && obs_->on_commit) obs_->on_commit(ctx_.name(), commit_, c);
    commit_ = c;
    apply_committed();
  }

  void apply_committed() {
    while (applied_ < commit_) {
      const std::uint64_t index = ++applied_;
      const Entry& e = log_[index];
      std::vector<LockService::HolderChange> changes;
      const LockService::Result res = sm_.apply(index, e.cmd, changes);
      if (obs_ && obs_->on_apply) obs_->on_apply(ctx_.name(), index, e);
      if (role_ == Role::leader) leader_applied(index, e, res, changes);
    }
  }

  void leader_applied(std::uint64_t index, const Entry& e, const LockService::Result& res,
                      const std::vector<LockService::HolderChange>& changes) {
    const Time now = ctx_.now();
    const Command& c = e.cmd;
    bool promise = false;
    // A revoke this leader already appended after this entry wins: answering ok would promise a lease that is
    // about to be deleted. (A retried grant names an existing lease, which may be that close to its expiry.)
    auto revoked_later = [&](std::uint64_t lease) {
      for (std::uint64_t i = index + 1; i <= last_index(); ++i)
        if (log_[i].cmd.op == Op::revoke && log_[i].cmd.lease == lease) return true;
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
    for (const auto& ch : changes) {
      ctx_.note("raft-holder", fmt::format("{} lease={} rev={}", ch.lock, ch.lease, ch.rev));
      if (obs_ && obs_->on_holder) obs_->on_holder(ctx_.name(), ch.lock, ch.lease, ch.rev);
      auto w = waiters_.find({ch.lock, ch.lease});
      if (w == waiters_.end()) continue;
      for (const Pending& p : w->second) send_reply(p, ClientReply{p.req, true, lock_token(ch.rev), {}, {}});
      waiters_.erase(w);
    }
    auto pit = pending_.find(index);
    if (pit == pending_.end()) return;
    // The entry at a pending index is the one this leader appended for it: a leader's log only grows while
    // it leads, and pending_ is answered and cleared when it stops.
    Pending p = pit->second;
    pending_.erase(pit);
    if (promise && obs_ && obs_->on_promise) {
      auto l = sm_.leases().find(res.value);
      obs_->on_promise(ctx_.name(), l->first, l->second.ttl, now - p.appended);
    }
    if (c.op == Op::lock && res.ok) {
      auto h = sm_.holder(c.name);
      if (!h || h->first != c.lease) {  // not the holder yet: answer when it is
        waiters_[{c.name, c.lease}].push_back(p);
        return;
      }
    }
    send_reply(
        p, ClientReply{
               p.req, res.ok, c.op == Op::lock && res.ok ? lock_token(res.value) : res.value, res.error, {}});
  }

  /// The clock leases are timed on: monotonic, or the wall clock in the "wall-expiry" variant.
  Time lease_clock() const { return sh_.opts.wall_expiry ? ctx_.wall() : ctx_.now(); }
  /// A lock reply's token: the replicated revision, or this node's own counter in the "node-counter" variant.
  std::uint64_t lock_token(std::uint64_t rev) {
    return sh_.opts.token_base + (sh_.opts.node_counter ? ++node_counter_ : rev);
  }
  /// When the leader's lessor next looks at lease deadline `d` (on the lease clock): at once without a check
  /// interval, else at the first tick at or after it.
  Time expiry_seen_at(Time d) const {
    const std::int64_t i = sh_.opts.expiry_check_interval.count();
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
      for (const Pending& p : it->second) send_reply(p, ClientReply{p.req, false, 0, "deleted", {}});
      it = waiters_.erase(it);
    }
  }

  void reply_pending(std::uint64_t index, ClientReply r) {
    auto it = pending_.find(index);
    if (it == pending_.end()) return;
    r.req = it->second.req;
    send_reply(it->second, r);
    pending_.erase(it);
  }

  void send_reply(const Pending& p, ClientReply r) {
    Message m = Message::of(kClientReplyType, r, fmt::format("req={} ok={} {}", r.req, r.ok, r.error));
    m.reply_to = p.msg;
    ctx_.send(p.client, std::move(m));
  }

  /// Stepping down: every request this leader still owes an answer has its entry in the log (appended, or
  /// for a lock waiter committed), and a later leader may commit and apply it. Its outcome is unknown:
  /// "leader-changed", never "not-leader" (which says nothing was done, and invites a retry that could do it
  /// twice).
  void fail_all_pending() {
    for (const auto& [i, p] : pending_) send_reply(p, ClientReply{p.req, false, 0, "leader-changed", {}});
    for (const auto& [k, ps] : waiters_)
      for (const Pending& p : ps) send_reply(p, ClientReply{p.req, false, 0, "leader-changed", {}});
    pending_.clear();
    waiters_.clear();
  }

  // ------------------------------------------------ messages
  void handle(const Message& m) {
    if (m.type == kClientRequestType) return on_client(m);
    if (const auto* r = m.as<VoteRequest>()) return on_vote(m, *r);
    if (const auto* r = m.as<VoteReply>()) return on_vote_reply(m, *r);
    if (const auto* r = m.as<AppendRequest>()) return on_append(m, *r);
    if (const auto* r = m.as<AppendReply>()) return on_append_reply(m, *r);
  }

  void on_client(const Message& m) {
    const auto* rq = m.as<ClientRequest>();
    if (!rq) return;
    if (role_ != Role::leader) {
      Message r =
          Message::of(kClientReplyType, ClientReply{rq->req, false, 0, "not-leader", leader_}, "not-leader");
      r.reply_to = m.id;
      ctx_.send(m.from, std::move(r));
      return;
    }
    propose(rq->cmd, &m);
  }

  void on_vote(const Message& m, const VoteRequest& r) {
    if (r.term > term_) become_follower(r.term, std::nullopt);
    const bool up_to_date =
        r.last_term > last_term() || (r.last_term == last_term() && r.last_index >= last_index());
    const bool granted = r.term == term_ && (!voted_for_ || *voted_for_ == m.from.value) && up_to_date &&
                         role_ == Role::follower;
    if (granted) {
      voted_for_ = m.from.value;
      save_hard();
      reset_election_timer();
    }
    ctx_.send(m.from, Message::of(kVoteReply, VoteReply{term_, granted}, granted ? "granted" : "refused"));
  }

  void on_vote_reply(const Message& m, const VoteReply& r) {
    if (r.term > term_) return become_follower(r.term, std::nullopt);
    if (role_ != Role::candidate || r.term != term_ || !r.granted) return;
    votes_.insert(m.from);
    if (votes_.size() >= majority()) become_leader();
  }

  void on_append(const Message& m, const AppendRequest& r) {
    if (r.term < term_) {
      ctx_.send(m.from, Message::of(kAppendReply, AppendReply{term_, false, 0, r.sent}, "stale term"));
      return;
    }
    if (r.term > term_ || role_ != Role::follower) become_follower(r.term, m.from);
    leader_ = m.from;
    reset_election_timer();
    if (r.prev_index > last_index()) {
      ctx_.send(m.from, Message::of(kAppendReply, AppendReply{term_, false, last_index(), r.sent}, "gap"));
      return;
    }
    if (log_[r.prev_index].term != r.prev_term) {
      // Skip the whole conflicting term in one round trip.
      const std::uint64_t bad = log_[r.prev_index].term;
      std::uint64_t first = r.prev_index;
      while (first > 1 && log_[first - 1].term == bad) --first;
      ctx_.send(m.from, Message::of(kAppendReply, AppendReply{term_, false, first - 1, r.sent}, "mismatch"));
      return;
    }
    std::uint64_t idx = r.prev_index;
    for (const Entry& e : r.entries) {
      ++idx;
      if (idx <= last_index()) {
        if (log_[idx].term == e.term) continue;
        truncate_after(idx - 1);  // a conflict: drop this entry and all that follow it
      }
      append_local(e);
    }
    // Known to match the leader's log: up to the last entry of this request (a stale request, reordered or
    // duplicated, may cover less than this member already has). The commit index never moves back.
    const std::uint64_t match = r.prev_index + r.entries.size();
    set_commit(std::max(commit_, std::min(r.commit, match)));
    ctx_.send(m.from, Message::of(kAppendReply, AppendReply{term_, true, match, r.sent},
                                  fmt::format("match={}", match)));
  }

  void on_append_reply(const Message& m, const AppendReply& r) {
    if (r.term > term_) return become_follower(r.term, std::nullopt);
    if (role_ != Role::leader || r.term != term_) return;
    const ProcId p = m.from;
    last_ack_[p] = std::max(last_ack_[p], r.sent);
    // The next request goes out only when this answer moved something: a duplicated or stale answer must
    // not send one more request (whose answers, duplicated too, would each send more). A lost one is made
    // good by the next heartbeat.
    if (r.success) {
      const bool progress = r.match > match_[p];
      match_[p] = std::max(match_[p], r.match);
      next_[p] = std::max(next_[p], match_[p] + 1);
      if (!progress) return;
      advance_commit();
      if (next_[p] <= last_index()) send_append(p);
    } else {
      const std::uint64_t before = next_[p];
      next_[p] = std::max(match_[p] + 1, std::min(next_[p] > 1 ? next_[p] - 1 : 1, r.match + 1));
      if (next_[p] != before) send_append(p);
    }
  }

  Context& ctx_;
  const Shared& sh_;
  const Observer* obs_;
  std::vector<ProcId> peers_;

  // Persistent (mirrored in Storage).
  std::uint64_t term_ = 0;
  std::optional<std::uint32_t> voted_for_;
  std::vector<Entry> log_;

  // Volatile.
  Role role_ = Role::follower;
  std::optional<ProcId> leader_;
  std::uint64_t commit_ = 0;
  std::uint64_t applied_ = 0;
  LockService sm_;
  Time election_deadline_{};
  std::set<ProcId> votes_;

  // Leader only.
  std::map<ProcId, std::uint64_t> next_, match_;
  std::map<ProcId, Time> last_ack_;
  Time heartbeat_deadline_{};
  Time quorum_deadline_{};
  std::map<std::uint64_t, Time> deadlines_;  // lease → expiry on this leader's monotonic clock
  std::set<std::uint64_t> pending_revoke_;
  std::uint64_t node_counter_ = 0;            // "node-counter" variant only: volatile, per node
  std::map<std::uint64_t, Pending> pending_;  // log index → client waiting for it
  std::map<std::pair<std::string, std::uint64_t>, std::vector<Pending>>
      waiters_;  // (lock, lease) → lock calls
};

}  // namespace

std::vector<ProcId> spawn_raft_group(World& world, const RaftOptions& opts,
                                     std::shared_ptr<const Observer> observer) {
  auto shared = std::make_shared<Shared>();
  shared->opts = opts;
  shared->observer = std::move(observer);
  for (std::uint32_t i = 1; i <= opts.nodes; ++i)
    shared->names.push_back(fmt::format("{}{}", opts.prefix, i));
  std::vector<ProcId> ids;
  for (const auto& name : shared->names) {
    ProcessOptions po;
    po.daemon = true;
    po.fsync = opts.fsync;
    po.fsync_period = opts.fsync_period;
    if (auto it = opts.member_fsync.find(name); it != opts.member_fsync.end()) {
      po.fsync = it->second.first;
      po.fsync_period = it->second.second;
    }
    ids.push_back(world.spawn(
        name,
        [shared](Context& ctx) {
          Node node(ctx, *shared);
          node.run();
        },
        po));
  }
  return ids;
}

// ---------------------------------------------------------------- client

RaftClient::RaftClient(std::vector<ProcId> servers, Duration rpc_timeout, Duration retry_pause)
    : servers_(std::move(servers)), rpc_timeout_(rpc_timeout), retry_pause_(retry_pause) {}

std::uint64_t RaftClient::send(Context& ctx, const Command& cmd) {
  if (next_req_ == 1) next_req_ = (ctx.rng().next() >> 16) + 1;  // distinct from any earlier client's ids
  const std::uint64_t req = next_req_++;
  last_msg_ =
      ctx.send(target(), Message::of(kClientRequestType, ClientRequest{req, cmd},
                                     fmt::format("{} lease={} {}", to_string(cmd.op), cmd.lease, cmd.name)));
  last_req_ = req;
  return req;
}

bool RaftClient::nothing_done(const ClientReply& r) {
  return r.error == "not-leader" || r.error == kConnectionRefusedType;
}

std::optional<ClientReply> RaftClient::wait(Context& ctx, const std::set<std::uint64_t>& reqs, Time until) {
  for (;;) {
    const Time now = ctx.now();
    auto m = ctx.receive(until > now ? until - now : 0ns, [](const Message& msg) {
      return msg.type == kClientReplyType || msg.type == kConnectionRefusedType;
    });
    if (!m) return std::nullopt;
    // The host of a member that is not running refused the newest request: nothing was done, ask another.
    // (A refusal of an older request says nothing the newest one's answer will not.)
    if (is_refusal(*m)) {
      if (m->reply_to == last_msg_ && reqs.count(last_req_))
        return ClientReply{last_req_, false, 0, std::string(kConnectionRefusedType), std::nullopt};
      continue;
    }
    const auto* r = m->as<ClientReply>();
    if (r && reqs.count(r->req)) return *r;
  }
}

void RaftClient::redirect(const ClientReply* reply) {
  if (reply && reply->leader) {
    for (std::size_t i = 0; i < servers_.size(); ++i)
      if (servers_[i] == *reply->leader && i != target_) {
        target_ = i;
        return;
      }
  }
  target_ = (target_ + 1) % servers_.size();
}

std::optional<ClientReply> RaftClient::submit(Context& ctx, const Command& cmd, Time deadline) {
  while (ctx.now() < deadline) {
    const std::uint64_t req = send(ctx, cmd);
    auto r = wait(ctx, {req}, std::min(deadline, ctx.now() + rpc_timeout_));
    // "not-leader": nothing was done; "leader-changed": perhaps done. Both are asked again of the next leader
    // (every command is idempotent: a grant through its key), so only a definite answer is returned.
    if (r && !nothing_done(*r) && r->error != "leader-changed") return r;
    const bool hinted = r && r->leader && *r->leader != target();
    redirect(r ? &*r : nullptr);
    if (!hinted && ctx.now() < deadline) ctx.sleep(std::min(retry_pause_, deadline - ctx.now()));
  }
  return std::nullopt;
}

}  // namespace locksim::raft
