// Determinism: random worlds (processes exchanging messages under delay, loss, duplication, pauses, crashes,
// restarts, clock jumps and drift, partitions) replay identically for a seed, differ across seeds, and keep
// the kernel's invariants (time order, monotonic clocks, no step of a paused or crashed process).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <xxhash.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "locksim/sim/world.hpp"

using namespace locksim;

namespace {

struct FaultSpec {
  int kind = 0;  // index into the switch in build_fault
  int target = 0;
  int peer = 0;
  std::int64_t at_us = 0;
  std::int64_t dur_us = 0;
  std::int64_t ppm = 0;
  bool flag = false;
  int nth = 1;
};

struct WorldSpec {
  int n = 2;
  int rounds = 10;
  int delay_kind = 0;
  std::uint32_t loss_ppm = 0;
  std::uint32_t dup_ppm = 0;
  std::uint32_t reorder_ppm = 0;
  bool shuffle = false;
  std::vector<FaultSpec> faults;
};

rc::Gen<FaultSpec> gen_fault(int n) {
  return rc::gen::build<FaultSpec>(
      rc::gen::set(&FaultSpec::kind, rc::gen::inRange(0, 10)),
      rc::gen::set(&FaultSpec::target, rc::gen::inRange(0, n)),
      rc::gen::set(&FaultSpec::peer, rc::gen::inRange(0, n)),
      rc::gen::set(&FaultSpec::at_us, rc::gen::inRange<std::int64_t>(0, 200'000)),
      rc::gen::set(&FaultSpec::dur_us, rc::gen::inRange<std::int64_t>(0, 200'000)),
      rc::gen::set(&FaultSpec::ppm, rc::gen::inRange<std::int64_t>(-400'000, 400'000)),
      rc::gen::set(&FaultSpec::flag, rc::gen::arbitrary<bool>()),
      rc::gen::set(&FaultSpec::nth, rc::gen::inRange(1, 4)));
}

WorldSpec gen_spec() {
  WorldSpec s;
  s.n = *rc::gen::inRange(2, 9);
  s.rounds = *rc::gen::inRange(5, 80);
  s.delay_kind = *rc::gen::inRange(0, 4);
  s.loss_ppm = *rc::gen::oneOf(rc::gen::just(0u), rc::gen::inRange<std::uint32_t>(0, 300'000));
  s.dup_ppm = *rc::gen::oneOf(rc::gen::just(0u), rc::gen::inRange<std::uint32_t>(0, 300'000));
  s.reorder_ppm = *rc::gen::oneOf(rc::gen::just(0u), rc::gen::inRange<std::uint32_t>(0, 500'000));
  s.shuffle = *rc::gen::arbitrary<bool>();
  s.faults = *rc::gen::resize(12, rc::gen::container<std::vector<FaultSpec>>(gen_fault(s.n)));
  return s;
}

Fault build_fault(const FaultSpec& f) {
  const ProcId t{static_cast<std::uint32_t>(f.target)}, q{static_cast<std::uint32_t>(f.peer)};
  const Time at = Time{f.at_us * 1000};
  const Duration d = Duration{f.dur_us * 1000};
  Fault x;
  x.when = Trigger::at_time(at);
  x.target = t;
  switch (f.kind) {
    case 0:
      x.kind = Fault::Kind::pause;
      x.duration = d;
      break;
    case 1:
      x.kind = Fault::Kind::crash;
      x.duration = f.flag ? d : 0ns;  // restart later, or stay down (until a restart fault)
      x.power_loss = f.nth > 1;
      break;
    case 2:
      x.kind = Fault::Kind::restart;
      break;
    case 3:
      x.kind = Fault::Kind::clock_jump;
      x.duration = f.flag ? d : -d * 100;
      break;
    case 4:
      x.kind = Fault::Kind::clock_drift;
      x.ppm = f.ppm;
      break;
    case 5:
      x.kind = Fault::Kind::partition;
      x.side_a = {t};
      x.side_b = {q};
      x.one_way = f.flag;
      x.duration = d;
      break;
    case 6:
      x.kind = Fault::Kind::heal;
      break;
    case 7:
      x.kind = Fault::Kind::delay_spike;
      x.peer = f.flag ? q : ProcId{};
      x.extra = d / 4;
      x.duration = d;
      x.count = static_cast<std::uint32_t>(f.nth - 1);
      break;
    case 8:  // pause right after the target's nth "tick" note
      x.kind = Fault::Kind::pause;
      x.when = Trigger::on_note(t, "tick", static_cast<std::uint32_t>(f.nth));
      x.duration = d;
      break;
    default:  // crash after some process's nth receive of a request, a little later
      x.kind = Fault::Kind::crash;
      x.when = Trigger{Trigger::Kind::receive, 0ns, {}, "req", static_cast<std::uint32_t>(f.nth), d / 10};
      x.duration = d + 1ms;
      break;
  }
  return x;
}

/// Each process: a random mix of sends, calls, receives (answering requests), sleeps, notes and writes.
void body(Context& c, int n, int rounds) {
  c.note("start", std::to_string(c.rng().next()));
  auto peer = [&] {
    return ProcId{static_cast<std::uint32_t>(c.rng().below(static_cast<std::uint64_t>(n)))};
  };
  for (int r = 0; r < rounds; ++r) {
    switch (c.rng().below(6)) {
      case 0:
        c.send(peer(), Message::of("m", r, std::to_string(r)));
        break;
      case 1: {
        auto rep = c.call(peer(), Message::of("req", r), c.rng().uniform(1ms, 15ms));
        if (rep) c.note("reply", std::to_string(*rep->as<int>()));
        break;
      }
      case 2:
      case 3: {
        auto m = c.receive(c.rng().uniform(0ms, 20ms));
        if (m && m->type == "req") c.reply(*m, Message::of("rep", *m->as<int>() + 1000));
        break;
      }
      case 4:
        c.sleep(c.rng().uniform(0ms, 10ms));
        break;
      default:
        c.note("tick", std::to_string(c.wall().count()));
        c.storage().put("k" + std::to_string(r % 3), std::to_string(r));
        if (c.rng().chance(1, 4)) c.storage().fsync();
        break;
    }
  }
}

struct Outcome {
  RunResult result;
  std::uint64_t hash = 0;
  std::vector<TraceEvent> events;
};

/// `huge_page_stacks`: the same world with its fiber stacks in the huge-page arena.
Outcome run_world(const WorldSpec& s, std::uint64_t seed, bool huge_page_stacks = false) {
  WorldOptions o;
  o.seed = seed;
  o.huge_page_stacks = huge_page_stacks;
  o.shuffle_ties = s.shuffle;
  o.limits.max_events = 200'000;
  o.limits.max_time = Time{20s};
  auto& l = o.network.defaults;
  switch (s.delay_kind) {
    case 0:
      l.delay = DelayDist::constant_of(1ms);
      break;
    case 1:
      l.delay = DelayDist::uniform_of(0ms, 10ms);
      break;
    case 2:
      l.delay = {DelayDist::Kind::exponential, 100us, 50ms, 2ms, 1.5};
      break;
    default:
      l.delay = {DelayDist::Kind::long_tail, 100us, 200ms, 1ms, 1.3};
      break;
  }
  l.loss_ppm = s.loss_ppm;
  l.duplicate_ppm = s.dup_ppm;
  l.reorder_ppm = s.reorder_ppm;
  l.reorder_extra = 5ms;
  World w(o);
  for (int i = 0; i < s.n; ++i) {
    ProcessOptions po;
    po.fsync = static_cast<FsyncPolicy>(i % 3);
    po.fsync_period = 7ms;
    po.clock.drift_ppm = (i % 2 ? 1 : -1) * 100 * i;
    po.clock.offset = Duration{i * 1'000'000'007LL};
    const int n = s.n, rounds = s.rounds;
    w.spawn(
        "p" + std::to_string(i), [n, rounds](Context& c) { body(c, n, rounds); }, po);
  }
  for (const auto& f : s.faults) w.add_fault(build_fault(f));
  Outcome out;
  out.result = w.run();
  out.hash = w.trace().hash();
  out.events = w.trace().events();
  return out;
}

bool same_event(const TraceEvent& a, const TraceEvent& b) {
  return a.time == b.time && a.node_time == b.node_time && a.wall_time == b.wall_time && a.kind == b.kind &&
         a.proc == b.proc && a.peer == b.peer && a.msg == b.msg && a.label == b.label && a.detail == b.detail;
}

/// Kernel invariants visible in the trace.
void check_invariants(const Outcome& o, int n) {
  struct PerProc {
    Time last_mono{0};
    bool paused = false, crashed = false;
    std::multiset<std::uint64_t> mailbox;  // delivered, not yet received, this incarnation
  };
  std::vector<PerProc> pp(static_cast<std::size_t>(n));
  Time last{0};
  for (const auto& e : o.events) {
    RC_ASSERT(e.time >= last);
    last = e.time;
    if (!e.proc.valid()) continue;
    auto& p = pp.at(e.proc.value);
    RC_ASSERT(e.node_time >= p.last_mono);  // a monotonic clock never goes back
    p.last_mono = e.node_time;
    const bool steps = e.kind == TraceKind::send || e.kind == TraceKind::receive ||
                       e.kind == TraceKind::note || e.kind == TraceKind::timeout || e.kind == TraceKind::exit;
    switch (e.kind) {
      case TraceKind::pause:
        p.paused = true;
        break;
      case TraceKind::resume:
        p.paused = false;
        break;
      case TraceKind::crash:
        p.paused = false;
        p.crashed = true;
        p.mailbox.clear();
        break;
      case TraceKind::restart:
        p.crashed = false;
        break;
      case TraceKind::start:
        RC_ASSERT(!p.paused && !p.crashed);
        break;
      case TraceKind::deliver:
        RC_ASSERT(!p.crashed);
        p.mailbox.insert(e.msg);
        break;
      case TraceKind::receive: {
        auto it = p.mailbox.find(e.msg);
        RC_ASSERT(it != p.mailbox.end());  // only what was delivered to this incarnation
        p.mailbox.erase(it);
        break;
      }
      default:
        break;
    }
    if (steps) {
      RC_ASSERT(!p.paused);  // a paused process takes no step
      RC_ASSERT(!p.crashed);
    }
  }
}

}  // namespace

RC_GTEST_PROP(DeterminismProperty, SameSeedSameTraceDifferentSeedDifferentHash, ()) {
  const WorldSpec spec = gen_spec();
  const auto seed = *rc::gen::inRange<std::uint64_t>(1, 1'000'000);
  const Outcome a = run_world(spec, seed);
  const Outcome b = run_world(spec, seed);
  RC_ASSERT(a.result.reason == b.result.reason);
  RC_ASSERT(a.result.end == b.result.end);
  RC_ASSERT(a.result.events == b.result.events);
  RC_ASSERT(a.hash == b.hash);
  RC_ASSERT(a.events.size() == b.events.size());
  for (std::size_t i = 0; i < a.events.size(); ++i) RC_ASSERT(same_event(a.events[i], b.events[i]));
  RC_ASSERT(!a.result.limit_hit());
  check_invariants(a, spec.n);
  // Where the stacks live (and how big they are) reaches nothing a run does: the same trace.
  const Outcome h = run_world(spec, seed, true);
  RC_ASSERT(h.hash == a.hash);
  RC_ASSERT(h.result.events == a.result.events);
  const Outcome c = run_world(spec, seed + 1);
  RC_ASSERT(c.hash != a.hash);
  check_invariants(c, spec.n);
  RC_TAG(a.events.size() < 100 ? "<100 events" : a.events.size() < 1000 ? "<1000 events" : ">=1000 events");
  RC_TAG(std::string(to_string(a.result.reason)));
}

TEST(Determinism, TraceHashCoversEveryField) {
  // Changing any single field of an event changes the hash.
  auto hash_of = [](const TraceEvent& e) {
    Trace t(false);
    t.record(e);
    return t.hash();
  };
  TraceEvent base{1ms, 2ms, 3ms, TraceKind::send, ProcId{1}, ProcId{2}, 7, "type", "detail"};
  const auto h = hash_of(base);
  std::vector<TraceEvent> variants(9, base);
  variants[0].time = 5ms;
  variants[1].node_time = 5ms;
  variants[2].wall_time = 5ms;
  variants[3].kind = TraceKind::deliver;
  variants[4].proc = ProcId{3};
  variants[5].peer = ProcId{3};
  variants[6].msg = 8;
  variants[7].label = "typf";
  variants[8].detail = "";
  for (std::size_t i = 0; i < variants.size(); ++i) EXPECT_NE(hash_of(variants[i]), h) << "field " << i;
  // Label/detail boundaries are length-prefixed: ("ab","c") differs from ("a","bc").
  TraceEvent x = base, y = base;
  x.label = "ab";
  x.detail = "c";
  y.label = "a";
  y.detail = "bc";
  EXPECT_NE(hash_of(x), hash_of(y));
}

TEST(Determinism, TraceHashIsXxh3OfTheDocumentedCanonicalBytes) {
  // An independent encoder of the canonical form (seven little-endian 64-bit words: time, node time, wall
  // time, proc << 32 | peer, msg, label size, detail size; the kind byte; the label; the detail), fed to
  // one-shot XXH3. Labels of every length 0..40 cover each path of the trace's short-string copy; a run of
  // events longer than the 16 KiB batch covers its flushes, and a 20 KiB detail the oversized path.
  std::vector<unsigned char> bytes;
  auto put = [&](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<unsigned char>(v >> (8 * i)));
  };
  Trace t(false);
  const std::string letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  for (int round = 0; round < 20; ++round) {
    for (std::size_t n = 0; n <= 40; ++n) {
      const std::string label = letters.substr(round % 8, n);
      const std::string detail = n % 3 == 0 ? std::string() : letters.substr(0, n / 2);
      const Time time{round * 1000 + static_cast<std::int64_t>(n)};
      const TraceKind kind = n % 2 ? TraceKind::send : TraceKind::deliver;
      t.record(time, time + 5ns, time - 7ns, kind, ProcId{static_cast<std::uint32_t>(n)}, ProcId{3}, n * 11,
               label, detail);
      put(static_cast<std::uint64_t>(time.count()));
      put(static_cast<std::uint64_t>((time + 5ns).count()));
      put(static_cast<std::uint64_t>((time - 7ns).count()));
      put((std::uint64_t{n} << 32) | 3u);
      put(n * 11);
      put(label.size());
      put(detail.size());
      bytes.push_back(static_cast<unsigned char>(kind));
      bytes.insert(bytes.end(), label.begin(), label.end());
      bytes.insert(bytes.end(), detail.begin(), detail.end());
    }
  }
  const std::string huge(20'000, 'h');
  t.record(1s, 1s, 1s, TraceKind::note, ProcId{1}, {}, 0, "big", huge);
  const std::uint64_t fixed[] = {
      1'000'000'000, 1'000'000'000, 1'000'000'000, (std::uint64_t{1} << 32) | ProcId::kNone, 0, 3,
      huge.size()};
  for (std::uint64_t v : fixed) put(v);
  bytes.push_back(static_cast<unsigned char>(TraceKind::note));
  bytes.insert(bytes.end(), {'b', 'i', 'g'});
  bytes.insert(bytes.end(), huge.begin(), huge.end());
  ASSERT_GT(bytes.size(), 3u * 16 * 1024);
  EXPECT_EQ(t.hash(), XXH3_64bits(bytes.data(), bytes.size()));
}

TEST(Determinism, KeepTraceDoesNotChangeTheHash) {
  auto simple = [](bool keep) {
    WorldOptions x;
    x.seed = 11;
    x.keep_trace = keep;
    x.network.defaults.delay = DelayDist::uniform_of(1ms, 9ms);
    World w(x);
    for (int i = 0; i < 3; ++i) w.spawn("p" + std::to_string(i), [](Context& c) { body(c, 3, 25); });
    w.run();
    return std::make_pair(w.trace().hash(), w.trace().count());
  };
  const auto kept = simple(true);
  EXPECT_GT(kept.second, 20u);
  EXPECT_EQ(kept, simple(false));
}

TEST(Determinism, FixedWorldWithFaultsReplays) {
  WorldSpec s;
  s.n = 4;
  s.rounds = 20;
  s.delay_kind = 1;
  s.loss_ppm = 100'000;
  s.faults = {
      {0, 1, 0, 20'000, 50'000}, {1, 2, 0, 30'000, 40'000, 0, true, 2}, {8, 0, 0, 0, 30'000, 0, false, 1}};
  const Outcome a = run_world(s, 5), b = run_world(s, 5);
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_EQ(a.result.reason, StopReason::done);
  EXPECT_GT(a.events.size(), 40u);
}
