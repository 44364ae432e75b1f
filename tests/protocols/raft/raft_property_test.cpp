// Raft and lock-service safety under random fault plans (rapidcheck): partitions, crashes and restarts (with
// and without power loss), pauses of members and clients, delay spikes, wall-clock jumps; and faults aimed at
// the moments where Raft's classic bugs show: a leader cut off or stopped right after it appends a client's
// request, a member crashed as it answers a vote request and restarted at once, a new leader cut off as it
// wins, a leader crashed as its commit index moves, a follower cut off long enough to campaign. Some plans
// compose them into the classic situations (Figure 8 of the Raft paper, a re-vote after a restart, a long
// pause of a leader that is cut off meanwhile). Checked: the Recorder's invariants (raft_test_util.hpp),
// Raft's per-member rules on the kept trace (raft_trace_check.hpp), what the clients believed, and a probe
// client's answers ("not-leader" means nothing was done).
#include <gtest/gtest.h>

#include <algorithm>

#include "locksim/protocols/raft/lease.hpp"
#include "raft_test_util.hpp"
#include "raft_trace_check.hpp"

using namespace locksim;
using namespace locksim::raft;
using locksim::raft::testing::check_cases;
using locksim::raft::testing::check_raft_trace;
using locksim::raft::testing::Recorder;

namespace {

enum class Kind : int {
  // At a time, on a fixed member (or client).
  partition,     // the target (and in a group of 5 perhaps `other`) cut off from the rest; one way if flag
  crash,         // restarted after dur; power loss if flag
  pause,         // paused for dur
  delay_spike,   // messages from the target delayed by dur / 4 for 500 ms
  clock_jump,    // the target's wall clock, an hour forward (flag) or back
  client_pause,  // a client paused for dur
  // At a time, on whoever leads then.
  crash_leader,    // restarted after dur; power loss if flag
  isolate_leader,  // cut off from the other members for dur, with `group` - 1 more members
  pause_leader,    // paused for dur
  // Aimed at a moment.
  crash_voter,            // the target as it answers its nth vote request; restarted after dur / 20
  cut_follower,           // a follower of the leader at that time, cut off from the other members for dur
  pause_then_cut_leader,  // the leader paused for dur and, `delay` later, cut off for dur
  act_after_request,      // the leader at that time, `delay` after it takes its nth next client request:
                          // paused for dur (action 0), crashed and restarted after dur (1) or cut off (2)
  isolate_next_leader,    // the next member to win an election after at_ms, as it wins, for dur; one way if
                          // flag (its messages do not get out)
  crash_next_committer,   // the next leader whose commit index moves after at_ms; restarted after dur
  crash_voters,           // every member but the leader at at_ms, as it next answers a vote request;
                          // restarted after dur
};
constexpr int kBackgroundKinds = static_cast<int>(Kind::cut_follower) + 1;

struct PlannedFault {
  Kind kind = Kind::partition;
  int target = 0;  // member index (or client index)
  int other = 0;   // a second member
  std::int64_t at_ms = 0;
  std::int64_t dur_ms = 0;
  std::int64_t delay_us = 0;
  int nth = 1;
  int action = 0;
  int group = 1;
  bool flag = false;
};

constexpr int kClients = 3;
constexpr Duration kTtl = 800ms;
constexpr Time kRunEnd{5s};

/// One client's grants as it saw them: [granted, end of belief] in true time.
struct Belief {
  std::uint64_t token = 0;
  Time granted{}, end{};
};

/// A client that acquires "L", holds it a random while (renewing or not), releases or abandons it, and
/// repeats.
void lease_client(Context& ctx, World& w, const std::vector<ProcId>& servers, std::vector<Belief>& beliefs) {
  LeaseClient lc(servers, 0ns, 400ms, 3s);
  for (;;) {
    auto g = lc.acquire(ctx, "L", kTtl);
    if (!g) continue;
    const auto to_true = [&](Time local) { return w.now() + (local - ctx.now()); };
    Belief b{*g->token, w.now(), to_true(g->valid_until)};
    const bool renew = ctx.rng().chance(2, 3);
    const Time hold_until = ctx.now() + ctx.rng().uniform(0ms, 1500ms);
    while (ctx.now() < hold_until) {
      ctx.sleep(ctx.rng().uniform(50ms, 300ms));
      if (!renew) continue;
      const bool ok = lc.extend(ctx, *g, kTtl);
      b.end = std::max(b.end, to_true(g->valid_until));
      if (!ok) break;
    }
    if (ctx.rng().chance(3, 4)) {
      b.end = std::min(b.end, w.now());  // stops believing before it asks to unlock
      lc.release(ctx, *g);
    }
    beliefs.push_back(b);
  }
}

/// What the probe client sent and heard: per request, its grant key and every answer to it.
struct ProbeLog {
  std::map<std::uint64_t, std::uint64_t> key;                 // request → grant key
  std::map<std::uint64_t, std::vector<std::string>> answers;  // request → answers ("ok" or the error)
};

/// A client that asks for short leases and keeps every answer. An ambiguous outcome (no answer,
/// "leader-changed") is asked again with the same grant key; after a definite one, "not-leader" included
/// (nothing was done), the next grant has a new key. Its keys are even, the lease clients' odd.
void probe_client(Context& ctx, const std::vector<ProcId>& servers, ProbeLog& log) {
  RaftClient rc(servers, 2500ms);
  std::set<std::uint64_t> mine;
  std::uint64_t next_key = 2, key = 0;
  for (;;) {
    if (auto r = rc.wait(ctx, mine, ctx.now() + ctx.rng().uniform(20ms, 200ms)))  // late answers meanwhile
      log.answers[r->req].push_back(r->ok ? "ok" : r->error);
    if (key == 0) key = (next_key += 2) | (std::uint64_t{1} << 62);
    const std::uint64_t req = rc.send(ctx, Command{Op::grant, key, 300ms, {}, false});
    mine.insert(req);
    log.key[req] = key;
    const Time until = ctx.now() + rc.rpc_timeout();
    for (;;) {
      auto r = rc.wait(ctx, mine, until);
      if (!r) {  // no answer: perhaps done; ask the next member, with the same key
        rc.redirect(nullptr);
        break;
      }
      log.answers[r->req].push_back(r->ok ? "ok" : r->error);
      if (r->req != req) continue;
      if (r->error == "not-leader") {
        rc.redirect(&*r);
        key = 0;
      } else if (r->error == "leader-changed") {
        rc.redirect(nullptr);
      } else {
        key = 0;
      }
      break;
    }
  }
}

/// "not-leader" says nothing was done: a grant key whose every request was answered so (and answered) is
/// in no committed entry.
std::vector<std::string> check_probe(const ProbeLog& log, const Recorder& rec) {
  std::map<std::uint64_t, bool> only_not_leader;  // key → every request answered, all "not-leader"
  for (const auto& [req, key] : log.key) {
    auto a = log.answers.find(req);
    const bool nl = a != log.answers.end() && std::all_of(a->second.begin(), a->second.end(),
                                                          [](const auto& s) { return s == "not-leader"; });
    auto [it, fresh] = only_not_leader.emplace(key, nl);
    if (!fresh) it->second = it->second && nl;
  }
  std::vector<std::string> errors;
  for (const auto& [index, c] : rec.committed) {
    if (c.entry.cmd.op != Op::grant) continue;
    auto it = only_not_leader.find(c.entry.cmd.lease);
    if (it != only_not_leader.end() && it->second)
      errors.push_back(
          fmt::format("grant key {} was answered not-leader (nothing done), yet entry {} ({}) committed",
                      c.entry.cmd.lease, index, encode(c.entry)));
  }
  return errors;
}

/// Uniform in [lo, hi) whatever rapidcheck's current size (inRange alone shrinks the range for small sizes,
/// which would make most early plans nearly empty).
template <class T>
T pick(T lo, T hi) {
  return *rc::gen::resize(rc::kNominalSize, rc::gen::inRange<T>(lo, hi));
}

/// One fault of any background kind at a random time.
PlannedFault background_fault(std::uint32_t n) {
  PlannedFault f;
  f.kind = static_cast<Kind>(pick<int>(0, kBackgroundKinds));
  f.target = pick<int>(0, static_cast<int>(n));
  f.other = pick<int>(0, static_cast<int>(n));
  f.at_ms = pick<int>(0, 4000);
  f.dur_ms = pick<int>(10, 2500);
  f.nth = 1 + pick<int>(0, 3);
  f.group = 1 + pick<int>(0, static_cast<int>(n - 1) / 2);
  f.flag = *rc::gen::arbitrary<bool>();
  return f;
}

/// A classic situation, as faults with random times and durations.
std::vector<PlannedFault> situation(std::uint32_t n) {
  const int which = pick<int>(0, 5);
  const std::int64_t t = pick<int>(100, 2200);
  std::vector<PlannedFault> out;
  auto add = [&](Kind k, std::int64_t at, std::int64_t dur) -> PlannedFault& {
    PlannedFault f;
    f.kind = k;
    f.at_ms = at;
    f.dur_ms = dur;
    f.flag = *rc::gen::arbitrary<bool>();
    out.push_back(f);
    return out.back();
  };
  switch (which) {
    case 0: {  // Figure 8: the leader is cut off (with a minority) while its clients' requests come in; the
               // next leader is cut off as it wins; the first comes back, wins again and is crashed as its
               // commit index first moves; then the second comes back.
      const std::int64_t d1 = pick<int>(300, 1000);
      add(Kind::isolate_leader, t, d1).group = 1 + pick<int>(0, static_cast<int>(n - 1) / 2);
      add(Kind::isolate_next_leader, t, d1 + pick<int>(300, 1200)).flag = false;
      add(Kind::crash_next_committer, t + d1, pick<int>(200, 1500));
      break;
    }
    case 1:  // a re-vote after a restart: the leader crashes; each voter crashes as it next answers a vote
             // request and restarts at once; the winner is cut off as it wins; the old leader comes back and
             // campaigns in that same term.
      add(Kind::crash_leader, t, pick<int>(20, 500));
      add(Kind::crash_voters, t, pick<int>(1, 80));
      add(Kind::isolate_next_leader, t, pick<int>(300, 1500));
      break;
    case 2:  // a long pause of the leader, cut off while paused: the answers it finds are old news.
      add(Kind::pause_then_cut_leader, t, pick<int>(350, 2000)).delay_us = pick<int>(5'000, 150'000);
      break;
    case 3: {  // the leader stops right after it appends a client's request: the client asks again elsewhere
               // (a retried grant), and a deposed leader answers what it appended.
      PlannedFault& f = add(Kind::act_after_request, t, pick<int>(350, 2000));
      f.nth = 1 + pick<int>(0, 3);
      f.delay_us = pick<int>(0, 3000);
      f.action = *rc::gen::element(0, 0, 1, 2);
      break;
    }
    case 4:  // a follower cut off long enough to campaign, then back: the leader hears its higher term first
             // in an answer.
      add(Kind::cut_follower, t, pick<int>(200, 1500)).target = pick<int>(0, static_cast<int>(n));
      break;
  }
  return out;
}

/// Runs a plan's faults: timed ones through the world's fault plan or callbacks, the aimed ones through
/// triggers armed at their time and the group's observer.
class Nemesis {
 public:
  Nemesis(World& w, const Recorder& rec, std::vector<ProcId> ids, std::vector<ProcId> clients)
      : w_(w), rec_(rec), ids_(std::move(ids)), clients_(std::move(clients)) {}

  /// Wraps the recorder's observer: the aimed faults act as a leader wins or commits.
  std::shared_ptr<Observer> wrap(std::shared_ptr<Observer> o) {
    auto on_leader = o->on_leader;
    o->on_leader = [this, on_leader](const std::string& node, std::uint64_t term) {
      on_leader(node, term);
      for (Armed& a : armed_) {
        if (a.fired || a.f.kind != Kind::isolate_next_leader || w_.now() < a.from) continue;
        a.fired = true;
        const ProcId p = w_.find(node);
        const PlannedFault f = a.f;
        w_.schedule(w_.now(), [this, p, f] { cut_off({p}, f.dur_ms, f.flag); });
      }
    };
    auto on_commit = o->on_commit;
    o->on_commit = [this, on_commit](const std::string& node, std::uint64_t from, std::uint64_t to) {
      on_commit(node, from, to);
      if (!rec_.leading.count(node)) return;
      for (Armed& a : armed_) {
        if (a.fired || a.f.kind != Kind::crash_next_committer || w_.now() < a.from) continue;
        a.fired = true;
        const ProcId p = w_.find(node);
        w_.crash(p, a.f.flag);
        w_.schedule(w_.now() + std::chrono::milliseconds(a.f.dur_ms), [this, p] { w_.restart(p); });
      }
    };
    return o;
  }

  void plan(const PlannedFault& pf) {
    const Time at{std::chrono::milliseconds(pf.at_ms)};
    const std::size_t n = ids_.size();
    switch (pf.kind) {
      case Kind::partition: {
        Fault f = timed(pf);
        f.kind = Fault::Kind::partition;
        f.side_a = {ids_[pf.target]};
        if (pf.other != pf.target && n == 5) f.side_a.push_back(ids_[pf.other]);
        f.side_b = rest(f.side_a);
        f.one_way = pf.flag && pf.dur_ms % 3 == 0;
        w_.add_fault(f);
        break;
      }
      case Kind::crash: {
        Fault f = timed(pf);
        f.kind = Fault::Kind::crash;
        f.power_loss = pf.flag;
        w_.add_fault(f);
        break;
      }
      case Kind::pause: {
        Fault f = timed(pf);
        f.kind = Fault::Kind::pause;
        w_.add_fault(f);
        break;
      }
      case Kind::delay_spike: {
        Fault f = timed(pf);
        f.kind = Fault::Kind::delay_spike;
        f.extra = std::chrono::milliseconds(pf.dur_ms / 4);
        f.duration = 500ms;
        w_.add_fault(f);
        break;
      }
      case Kind::clock_jump: {
        Fault f = timed(pf);
        f.kind = Fault::Kind::clock_jump;
        f.duration = pf.flag ? std::chrono::hours(1) : -std::chrono::hours(1);
        w_.add_fault(f);
        break;
      }
      case Kind::client_pause: {
        Fault f = timed(pf);
        f.kind = Fault::Kind::pause;
        f.target = clients_[pf.target % clients_.size()];
        w_.add_fault(f);
        break;
      }
      case Kind::crash_voter: {
        Fault f = triggered(Trigger::Kind::send, ids_[pf.target], "raft.vote.reply",
                            static_cast<std::uint32_t>(pf.nth), 0ns);
        f.kind = Fault::Kind::crash;
        f.duration = std::chrono::milliseconds(1 + pf.dur_ms / 20);
        w_.add_fault(f);
        break;
      }
      case Kind::isolate_next_leader:
      case Kind::crash_next_committer:
        armed_.push_back({pf, at, false});
        break;
      default:  // aimed at whoever leads at that time
        w_.schedule(at, [this, pf] { at_leader(pf); });
        break;
    }
  }

 private:
  struct Armed {
    PlannedFault f;
    Time from{};
    bool fired = false;
  };

  Fault timed(const PlannedFault& pf) const {
    Fault f;
    f.when = Trigger::at_time(Time{std::chrono::milliseconds(pf.at_ms)});
    f.target = ids_[pf.target];
    f.duration = std::chrono::milliseconds(pf.dur_ms);
    return f;
  }
  /// A fault on `p` as it sends or takes its nth message of type `label` from now on.
  static Fault triggered(Trigger::Kind on, ProcId p, const char* label, std::uint32_t nth, Duration delay) {
    Fault f;
    f.when = Trigger{on, Time{0}, p, label, nth, delay};
    f.target = p;
    return f;
  }
  std::vector<ProcId> rest(const std::vector<ProcId>& side) const {
    std::vector<ProcId> r;
    for (ProcId p : ids_)
      if (std::find(side.begin(), side.end(), p) == side.end()) r.push_back(p);
    return r;
  }
  /// Cuts `side` off from the other members for dur_ms (one way: only its messages out are lost).
  void cut_off(const std::vector<ProcId>& side, std::int64_t dur_ms, bool one_way) {
    const PartitionId id = w_.partition(side, rest(side), one_way);
    w_.schedule(w_.now() + std::chrono::milliseconds(dur_ms), [this, id] { w_.heal(id); });
  }
  std::optional<std::size_t> leader_index() const {
    if (rec_.leaders.empty()) return std::nullopt;
    const ProcId l = w_.find(rec_.leaders.rbegin()->second);
    for (std::size_t i = 0; i < ids_.size(); ++i)
      if (ids_[i] == l) return i;
    return std::nullopt;
  }

  void at_leader(const PlannedFault& pf) {
    const Duration dur = std::chrono::milliseconds(pf.dur_ms);
    const auto li = leader_index();
    if (!li && pf.kind != Kind::crash_voters) return;
    const std::size_t n = ids_.size();
    const ProcId leader = li ? ids_[*li] : ProcId{};
    switch (pf.kind) {
      case Kind::crash_leader:
        w_.crash(leader, pf.flag);
        w_.schedule(w_.now() + dur, [this, leader] { w_.restart(leader); });
        break;
      case Kind::isolate_leader: {
        std::vector<ProcId> side{leader};
        for (int k = 1; k < pf.group; ++k) side.push_back(ids_[(*li + k + pf.other % (n - 1)) % n]);
        cut_off(side, pf.dur_ms, false);
        break;
      }
      case Kind::pause_leader:
        w_.pause(leader, dur);
        break;
      case Kind::cut_follower:
        cut_off({ids_[(*li + 1 + pf.target % (n - 1)) % n]}, pf.dur_ms, false);
        break;
      case Kind::pause_then_cut_leader:
        w_.pause(leader, dur);
        w_.schedule(w_.now() + std::chrono::microseconds(pf.delay_us),
                    [this, leader, pf] { cut_off({leader}, pf.dur_ms, false); });
        break;
      case Kind::act_after_request: {
        Fault f = triggered(Trigger::Kind::receive, leader, kClientRequestType,
                            static_cast<std::uint32_t>(pf.nth), std::chrono::microseconds(pf.delay_us));
        f.duration = dur;
        if (pf.action == 0) {
          f.kind = Fault::Kind::pause;
        } else if (pf.action == 1) {
          f.kind = Fault::Kind::crash;
          f.power_loss = pf.flag;
        } else {
          f.kind = Fault::Kind::partition;
          f.side_a = {leader};
          f.side_b = rest(f.side_a);
        }
        w_.add_fault(f);
        break;
      }
      case Kind::crash_voters:
        for (ProcId p : ids_) {
          if (p == leader) continue;
          Fault f = triggered(Trigger::Kind::send, p, "raft.vote.reply", 1, 0ns);
          f.kind = Fault::Kind::crash;
          f.duration = dur;
          f.power_loss = pf.flag;
          w_.add_fault(f);
        }
        break;
      default:
        break;
    }
  }

  World& w_;
  const Recorder& rec_;
  std::vector<ProcId> ids_, clients_;
  std::vector<Armed> armed_;
};

}  // namespace

TEST(RaftProperty, SafeUnderRandomFaultPlans) {
  std::uint64_t total_holders = 0, total_promises = 0, total_leaders = 0, total_grants = 0, runs = 0,
                probe_answers = 0;
  check_cases(2000, [&] {
    const std::uint32_t n = *rc::gen::element(3u, 3u, 5u);
    const auto seed = pick<std::uint64_t>(1, 1'000'000'000);
    const std::size_t max_batch = *rc::gen::element<std::size_t>(1, 2, 64, 64);
    const std::uint32_t duplicate_ppm = *rc::gen::element<std::uint32_t>(0, 0, 0, 200'000);
    std::vector<PlannedFault> plan;
    const int nfaults = pick<int>(0, 8);
    for (int i = 0; i < nfaults; ++i) plan.push_back(background_fault(n));
    const int nsituations = pick<int>(0, 3);
    for (int i = 0; i < nsituations; ++i)
      for (const PlannedFault& f : situation(n)) plan.push_back(f);

    WorldOptions wo;
    wo.seed = seed;
    wo.keep_trace = true;  // the per-member rules are checked on it
    wo.network.defaults.delay = DelayDist::uniform_of(1ms, 8ms);
    wo.network.defaults.duplicate_ppm = duplicate_ppm;
    World w(wo);
    Recorder rec(w);
    RaftOptions ro;
    ro.nodes = n;
    ro.max_batch = max_batch;
    std::vector<ProcId> ids(n);
    std::vector<std::vector<Belief>> beliefs(kClients);
    ProbeLog probe;
    std::vector<ProcId> clients;
    // The members first, then the clients: their ids are known before the nemesis is made.
    for (std::uint32_t i = 0; i < n; ++i) ids[i] = ProcId{i};
    for (int c = 0; c < kClients; ++c) clients.push_back(ProcId{n + static_cast<std::uint32_t>(c)});
    Nemesis nemesis(w, rec, ids, clients);
    const auto spawned = spawn_raft_group(w, ro, nemesis.wrap(rec.observer()));
    RC_ASSERT(spawned == ids);
    for (int c = 0; c < kClients; ++c)
      RC_ASSERT(w.spawn(
                    fmt::format("client{}", c + 1),
                    [&, c](Context& ctx) { lease_client(ctx, w, ids, beliefs[c]); },
                    ProcessOptions{.daemon = true}) == clients[c]);
    const ProcId prober = w.spawn(
        "probe", [&](Context& ctx) { probe_client(ctx, ids, probe); }, ProcessOptions{.daemon = true});
    // A duplicated request could be appended by a leader and answered "not-leader" by it later: the probe's
    // requests are never duplicated.
    if (duplicate_ppm > 0)
      for (ProcId p : ids) {
        LinkOptions& l = w.network().link(prober, p);
        l = wo.network.defaults;
        l.duplicate_ppm = 0;
      }
    for (const PlannedFault& pf : plan) nemesis.plan(pf);
    w.run_until(kRunEnd);

    std::vector<std::string> names;
    for (ProcId p : ids) names.push_back(w.name(p));
    rec.check_log_matching(names);
    std::vector<std::string> errors = rec.errors;
    for (auto& e : check_raft_trace(w, ids, {ro.election_timeout_max, ro.check_quorum})) errors.push_back(e);
    for (auto& e : check_probe(probe, rec)) errors.push_back(e);
    if (!errors.empty()) {
      std::string s;
      for (const auto& e : errors) s += e + "\n";
      RC_FAIL(s);
    }
    // Client view: no two grants of "L" believed at once (no clock drift here), tokens increase in grant
    // order.
    std::vector<Belief> all;
    for (const auto& bs : beliefs) all.insert(all.end(), bs.begin(), bs.end());
    std::sort(all.begin(), all.end(), [](const Belief& a, const Belief& b) { return a.token < b.token; });
    for (std::size_t i = 1; i < all.size(); ++i) {
      RC_ASSERT(all[i].token > all[i - 1].token);
      RC_ASSERT(all[i].granted >= all[i - 1].end);
    }
    ++runs;
    total_holders += rec.holders.size();
    total_promises += rec.promises;
    total_leaders += rec.leaders.size();
    total_grants += all.size();
    for (const auto& [req, a] : probe.answers) probe_answers += a.size();
  });
  std::cout << fmt::format(
      "[raft property] {} runs: {} leaders, {} holder changes, {} lease promises, {} client grants, {} probe "
      "answers\n",
      runs, total_leaders, total_holders, total_promises, total_grants, probe_answers);
  EXPECT_GT(total_holders, runs);  // the workload actually moved the lock around
}
