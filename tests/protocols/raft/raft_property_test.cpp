// Raft and lock-service safety under random fault plans (rapidcheck): partitions, crashes and restarts (with
// and without power loss), pauses of members and clients, delay spikes, wall-clock jumps; and the situations
// of Raft's classic bugs: a member crashed right after it votes and restarted at once, the leader paused for
// longer than an election timeout or cut off, followers catching up one entry per message through duplicated
// and reordered messages.
#include <gtest/gtest.h>

#include <algorithm>

#include "protocols/raft/lease.hpp"
#include "raft_test_util.hpp"

using namespace locksim;
using namespace locksim::raft;
using locksim::raft::testing::check_cases;
using locksim::raft::testing::Recorder;

namespace {

struct PlannedFault {
  int kind = 0;    // 0 partition, 1 crash, 2 pause, 3 delay spike, 4 wall-clock jump, 5 client pause,
                   // 6 crash the current leader, 7 isolate the current leader, 8 pause the current leader,
                   // 9 crash a member as it answers its nth vote request (restart after dur_ms / 20)
  int target = 0;  // member index (or client index)
  int other = 0;   // partition: a second member cut off with the target (if different)
  std::int64_t at_ms = 0;
  std::int64_t dur_ms = 0;
  bool flag = false;  // crash: power loss; partition: one way
};

constexpr int kClients = 3;
constexpr Duration kTtl = 800ms;

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

/// Uniform in [lo, hi) whatever rapidcheck's current size (inRange alone shrinks the range for small sizes,
/// which would make most early plans nearly empty).
template <class T>
T pick(T lo, T hi) {
  return *rc::gen::resize(rc::kNominalSize, rc::gen::inRange<T>(lo, hi));
}

}  // namespace

TEST(RaftProperty, SafeUnderRandomFaultPlans) {
  std::uint64_t total_holders = 0, total_promises = 0, total_leaders = 0, total_grants = 0, runs = 0;
  check_cases(1000, [&] {
    const std::uint32_t n = *rc::gen::element(3u, 3u, 5u);
    const auto seed = pick<std::uint64_t>(1, 1'000'000'000);
    const int nfaults = pick<int>(0, 9);
    const std::size_t max_batch = *rc::gen::element<std::size_t>(1, 2, 64, 64);
    const std::uint32_t duplicate_ppm = *rc::gen::element<std::uint32_t>(0, 0, 0, 200'000);
    std::vector<PlannedFault> plan;
    for (int i = 0; i < nfaults; ++i) {
      PlannedFault f;
      f.kind = pick<int>(0, 10);
      f.target = pick<int>(0, static_cast<int>(n));
      f.other = pick<int>(0, static_cast<int>(n));
      f.at_ms = pick<int>(0, 3500);
      f.dur_ms = pick<int>(10, 2500);
      f.flag = *rc::gen::arbitrary<bool>();
      plan.push_back(f);
    }

    WorldOptions wo;
    wo.seed = seed;
    wo.keep_trace = false;
    wo.network.defaults.delay = DelayDist::uniform_of(1ms, 8ms);
    wo.network.defaults.duplicate_ppm = duplicate_ppm;
    World w(wo);
    Recorder rec(w);
    RaftOptions ro;
    ro.nodes = n;
    ro.max_batch = max_batch;
    auto ids = spawn_raft_group(w, ro, rec.observer());
    std::vector<std::vector<Belief>> beliefs(kClients);
    std::vector<ProcId> clients;
    for (int c = 0; c < kClients; ++c)
      clients.push_back(w.spawn(
          fmt::format("client{}", c + 1), [&, c](Context& ctx) { lease_client(ctx, w, ids, beliefs[c]); },
          ProcessOptions{.daemon = true}));

    for (const PlannedFault& pf : plan) {
      if (pf.kind >= 6 && pf.kind <= 8) {  // aimed at whoever leads at that moment
        w.schedule(Time{std::chrono::milliseconds(pf.at_ms)}, [&w, &rec, &ids, pf] {
          if (rec.leaders.empty()) return;
          const ProcId leader = w.find(rec.leaders.rbegin()->second);
          const Duration d = std::chrono::milliseconds(pf.dur_ms);
          if (pf.kind == 6) {
            w.crash(leader, pf.flag);
            w.schedule(w.now() + d, [&w, leader] { w.restart(leader); });
          } else if (pf.kind == 7) {
            std::vector<ProcId> rest;
            for (ProcId p : ids)
              if (p != leader) rest.push_back(p);
            w.partition({leader}, rest, false);
            w.schedule(w.now() + d, [&w] { w.heal(); });
          } else {
            w.pause(leader, d);
          }
        });
        continue;
      }
      Fault f;
      f.when = Trigger::at_time(Time{std::chrono::milliseconds(pf.at_ms)});
      f.target = ids[pf.target];
      f.duration = std::chrono::milliseconds(pf.dur_ms);
      switch (pf.kind) {
        case 0:
          f.kind = Fault::Kind::partition;
          f.side_a = {ids[pf.target]};
          if (pf.other != pf.target && n == 5) f.side_a.push_back(ids[pf.other]);
          for (ProcId p : ids)
            if (std::find(f.side_a.begin(), f.side_a.end(), p) == f.side_a.end()) f.side_b.push_back(p);
          f.one_way = pf.flag && pf.dur_ms % 3 == 0;
          break;
        case 1:
          f.kind = Fault::Kind::crash;
          f.power_loss = pf.flag;
          break;
        case 2:
          f.kind = Fault::Kind::pause;
          break;
        case 3:
          f.kind = Fault::Kind::delay_spike;
          f.extra = std::chrono::milliseconds(pf.dur_ms / 4);
          f.duration = 500ms;
          break;
        case 4:
          f.kind = Fault::Kind::clock_jump;
          f.duration = pf.flag ? std::chrono::hours(1) : -std::chrono::hours(1);
          break;
        case 5:
          f.kind = Fault::Kind::pause;
          f.target = clients[pf.target % kClients];
          break;
        case 9:
          f.kind = Fault::Kind::crash;
          f.when = Trigger{Trigger::Kind::send,
                           Time{0},
                           ids[pf.target],
                           "raft.vote.reply",
                           static_cast<std::uint32_t>(1 + pf.dur_ms % 3),
                           0ns};
          f.duration = std::chrono::milliseconds(1 + pf.dur_ms / 20);
          break;
      }
      w.add_fault(f);
    }
    w.run_until(Time{4s});

    if (!rec.errors.empty()) RC_FAIL(rec.report());
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
  });
  std::cout << fmt::format(
      "[raft property] {} runs: {} leaders, {} holder changes, {} lease promises, {} client grants\n", runs,
      total_leaders, total_holders, total_promises, total_grants);
  EXPECT_GT(total_holders, runs);  // the workload actually moved the lock around
}
