#include "locksim/protocols/raft/raft.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>

namespace locksim::raft {

// ---------------------------------------------------------------- encoding

std::string encode_entry(const LogEntry& e) {
  return fmt::format("{} {}", e.term, e.cmd);
}

std::optional<LogEntry> decode_entry(std::string_view s) {
  LogEntry e;
  const char* end = s.data() + s.size();
  auto r = std::from_chars(s.data(), end, e.term);
  if (r.ec != std::errc{} || r.ptr == end || *r.ptr != ' ') return std::nullopt;
  e.cmd.assign(r.ptr + 1, end);
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
  std::vector<LogEntry> entries;
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

struct Shared {
  GroupOptions opts;
  std::vector<std::string> names;
  ServiceFactory make;
  std::shared_ptr<const GroupObserver> observer;
};

/// One member: an event loop over its mailbox and its timers.
class Node final : public Member {
 public:
  Node(Context& ctx, const Shared& shared) : ctx_(ctx), sh_(shared), obs_(shared.observer.get()) {
    svc_ = sh_.make(*this);
  }

  // ------------------------------------------------ what the service sees
  Context& ctx() override { return ctx_; }
  bool leading() const override { return role_ == Role::leader; }
  std::uint64_t term() const override { return term_; }
  std::uint64_t last_index() const override { return log_.size() - 1; }
  std::uint64_t commit_index() const override { return commit_; }
  const LogEntry& entry(std::uint64_t index) const override { return log_[index]; }
  std::uint64_t propose(std::string cmd) override {
    propose(std::move(cmd), nullptr);
    return last_index();
  }
  std::optional<Pending> take_pending(std::uint64_t index) override {
    auto pit = pending_.find(index);
    if (pit == pending_.end()) return std::nullopt;
    Pending p = pit->second;
    pending_.erase(pit);
    return p;
  }

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
    log_.assign(1, LogEntry{});  // log_[0]: sentinel with term 0
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
      auto e = s ? decode_entry(*s) : std::nullopt;
      if (!e) break;  // a torn tail after a power loss: keep the prefix that survived
      log_.push_back(std::move(*e));
    }
  }
  void save_hard() {
    ctx_.storage().put(kHardKey, fmt::format("{} {}", term_, voted_for_ ? *voted_for_ + 1 : 0));
  }
  void append_local(LogEntry e) {
    log_.push_back(std::move(e));
    ctx_.storage().put(log_key(last_index()), encode_entry(log_.back()));
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
    const Time t =
        sh_.opts.check_quorum ? std::min(heartbeat_deadline_, quorum_deadline_) : heartbeat_deadline_;
    return std::min(t, svc_->next_timer());
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
    svc_->on_timer();  // what the service's leader decides on its clock (expiry), through the log
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
      svc_->on_step_down();
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
    svc_->on_leader();  // e.g. etcd's lessor Promote
    quorum_deadline_ = now + sh_.opts.election_timeout_max;
    heartbeat_deadline_ = now + sh_.opts.heartbeat;
    propose(svc_->noop(), nullptr);  // a no-op of this term commits everything before it
  }

  // ------------------------------------------------ leader: log and replication
  void propose(std::string c, const Message* request) {
    append_local(LogEntry{term_, std::move(c)});
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
      const LogEntry& e = log_[index];
      svc_->apply(index, e);
      if (obs_ && obs_->on_apply) obs_->on_apply(ctx_.name(), index, e);
      if (role_ == Role::leader) svc_->leader_applied(index, e);
    }
  }

  void send_reply(const Pending& p, ClientReply r) override {
    Message m = Message::of(kClientReplyType, r, fmt::format("req={} ok={} {}", r.req, r.ok, r.error));
    m.reply_to = p.msg;
    ctx_.send(p.client, std::move(m));
  }

  /// Stepping down: every request this leader still owes an answer has its entry in the log, and a later
  /// leader may commit and apply it. Its outcome is unknown: "leader-changed", never "not-leader" (which says
  /// nothing was done, and invites a retry that could do it twice). The service answers the requests it
  /// kept (lock waiters) the same way.
  void fail_all_pending() {
    for (const auto& [i, p] : pending_) send_reply(p, ClientReply{p.req, false, 0, "leader-changed", {}});
    pending_.clear();
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
    if (auto answer = svc_->screen(rq->cmd)) {
      answer->req = rq->req;
      const std::string detail = fmt::format("req={} ok={} {}", answer->req, answer->ok, answer->error);
      Message r = Message::of(kClientReplyType, std::move(*answer), detail);
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
    for (const LogEntry& e : r.entries) {
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
  const GroupObserver* obs_;
  std::vector<ProcId> peers_;

  // Persistent (mirrored in Storage).
  std::uint64_t term_ = 0;
  std::optional<std::uint32_t> voted_for_;
  std::vector<LogEntry> log_;

  // Volatile.
  Role role_ = Role::follower;
  std::optional<ProcId> leader_;
  std::uint64_t commit_ = 0;
  std::uint64_t applied_ = 0;
  std::unique_ptr<Service> svc_;
  Time election_deadline_{};
  std::set<ProcId> votes_;

  // Leader only.
  std::map<ProcId, std::uint64_t> next_, match_;
  std::map<ProcId, Time> last_ack_;
  Time heartbeat_deadline_{};
  Time quorum_deadline_{};
  std::map<std::uint64_t, Pending> pending_;  // log index → client waiting for it
};

}  // namespace

std::vector<ProcId> spawn_group(World& world, const GroupOptions& opts, ServiceFactory make,
                                std::shared_ptr<const GroupObserver> observer) {
  auto shared = std::make_shared<Shared>();
  shared->opts = opts;
  shared->make = std::move(make);
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

Client::Client(std::vector<ProcId> servers, Duration rpc_timeout, Duration retry_pause)
    : servers_(std::move(servers)), rpc_timeout_(rpc_timeout), retry_pause_(retry_pause) {}

std::uint64_t Client::send(Context& ctx, const std::string& cmd, std::string detail) {
  if (next_req_ == 1) next_req_ = (ctx.rng().next() >> 16) + 1;  // distinct from any earlier client's ids
  const std::uint64_t req = next_req_++;
  last_msg_ = ctx.send(target(), Message::of(kClientRequestType, ClientRequest{req, cmd}, std::move(detail)));
  last_req_ = req;
  return req;
}

bool Client::nothing_done(const ClientReply& r) {
  return r.error == "not-leader" || r.error == kConnectionRefusedType;
}

std::optional<ClientReply> Client::wait(Context& ctx, const std::set<std::uint64_t>& reqs, Time until) {
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
        return ClientReply{last_req_, false, 0, std::string(kConnectionRefusedType), std::nullopt, {}};
      continue;
    }
    const auto* r = m->as<ClientReply>();
    if (r && reqs.count(r->req)) return *r;
  }
}

void Client::redirect(const ClientReply* reply) {
  if (reply && reply->leader) {
    for (std::size_t i = 0; i < servers_.size(); ++i)
      if (servers_[i] == *reply->leader && i != target_) {
        target_ = i;
        return;
      }
  }
  target_ = (target_ + 1) % servers_.size();
}

std::optional<ClientReply> Client::submit(Context& ctx, const std::string& cmd, const std::string& detail,
                                          Time deadline) {
  while (ctx.now() < deadline) {
    const std::uint64_t req = send(ctx, cmd, detail);
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
