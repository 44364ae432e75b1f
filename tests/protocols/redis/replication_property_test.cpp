// The replica's dataset is always the master's after a prefix of its stream: over random loss, duplication,
// reordering and partitions of the link, every apply continues the prefix, and once the link is clean again
// the replica converges to the master's dataset.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <ostream>

#include "replication_harness.hpp"

using namespace locksim;
using namespace locksim::redis;
using namespace locksim::redis::test;

namespace {

struct Plan {
  std::uint64_t seed = 1;
  std::size_t backlog = 1;
  Duration lag{0};
  LinkOptions down, up;
  struct Write {
    Duration gap;
    int kind;  ///< 0 SET NX, 1 DEL, 2 INCR
    int key;
  };
  std::vector<Write> writes;
  struct Cut {
    Duration at, length;
    bool one_way;  ///< master → replica only
  };
  std::vector<Cut> cuts;
};

void showValue(const LinkOptions& l, std::ostream& os) {
  os << "delay " << format_time(l.delay.min) << ".." << format_time(l.delay.max) << " loss " << l.loss_ppm
     << " dup " << l.duplicate_ppm << " reorder " << l.reorder_ppm << " +" << format_time(l.reorder_extra);
}

void showValue(const Plan& p, std::ostream& os) {
  os << "seed " << p.seed << " backlog " << p.backlog << " lag " << format_time(p.lag) << "\n  down: ";
  showValue(p.down, os);
  os << "\n  up: ";
  showValue(p.up, os);
  os << "\n  writes:";
  for (const auto& w : p.writes)
    os << " +" << format_time(w.gap) << "/"
       << "SDI"[w.kind] << w.key;
  for (const auto& c : p.cuts)
    os << "\n  cut at " << format_time(c.at) << " for " << format_time(c.length)
       << (c.one_way ? " one way" : "");
}

LinkOptions gen_link() {
  LinkOptions l;
  l.delay = DelayDist::uniform_of(1ms, Duration{*rc::gen::inRange<std::int64_t>(1, 20) * 1'000'000});
  l.loss_ppm = *rc::gen::element<std::uint32_t>(0, 0, 50'000, 200'000, 500'000);
  l.duplicate_ppm = *rc::gen::element<std::uint32_t>(0, 100'000, 500'000);
  l.reorder_ppm = *rc::gen::element<std::uint32_t>(0, 200'000, 600'000);
  l.reorder_extra = Duration{*rc::gen::inRange<std::int64_t>(0, 100) * 1'000'000};
  return l;
}

rc::Gen<Plan> gen_plan() {
  return rc::gen::exec([] {
    Plan p;
    p.seed = *rc::gen::arbitrary<std::uint64_t>();
    p.backlog = *rc::gen::inRange<std::size_t>(1, 40);
    p.lag = Duration{*rc::gen::inRange<std::int64_t>(0, 100) * 1'000'000};
    p.down = gen_link();
    p.up = gen_link();
    const int n = *rc::gen::inRange(1, 60);
    for (int i = 0; i < n; ++i)
      p.writes.push_back({Duration{*rc::gen::inRange<std::int64_t>(1, 400) * 1'000'000},
                          *rc::gen::inRange(0, 3), *rc::gen::inRange(0, 3)});
    const int cuts = *rc::gen::inRange(0, 4);
    for (int i = 0; i < cuts; ++i)
      p.cuts.push_back({Duration{*rc::gen::inRange<std::int64_t>(0, 20'000) * 1'000'000},
                        Duration{*rc::gen::inRange<std::int64_t>(1, 90'000) * 1'000'000},
                        *rc::gen::arbitrary<bool>()});
    return p;
  });
}

void check(const Plan& p) {
  ReplWorld rw(WorldOptions{.seed = p.seed}, ReplicationOptions{.backlog_size = p.backlog}, p.lag);
  rw.down() = p.down;
  rw.up() = p.up;
  std::vector<std::pair<Time, Command>> script;
  Time t{100ms};
  for (const auto& w : p.writes) {
    t += w.gap;
    const std::string key = fmt::format("k{}", w.key);
    switch (w.kind) {
      case 0:
        script.push_back({t, set_cmd(key, fmt::format("v{}", script.size()))});
        break;
      case 1:
        script.push_back({t, del_cmd(key)});
        break;
      default:
        script.push_back({t, incr_cmd(key)});
        break;
    }
  }
  Time end = t;
  for (const auto& c : p.cuts) {
    rw.world.schedule(Time{c.at}, [&rw, c] { rw.world.partition({rw.master}, {rw.replica}, c.one_way); });
    rw.world.schedule(Time{c.at + c.length}, [&rw] { rw.world.heal(); });
    end = std::max(end, Time{c.at + c.length});
  }
  rw.writes(script);
  // Heal and clean the link, then let acks, pings and resyncs settle.
  end += 1s;
  rw.world.schedule(end, [&rw] {
    rw.world.heal();
    rw.down() = LinkOptions{};
    rw.up() = LinkOptions{};
  });
  rw.world.run_until(end + 5s);
  RC_CLASSIFY(rw.count(TraceKind::send, "repl.continue") > 0, "partial resync");
  RC_CLASSIFY(rw.count(TraceKind::send, "repl.fullsync") > 1, "full resync after the first");
  RC_CLASSIFY(rw.stream.size() >= 20, ">= 20 commands");
  const std::uint64_t last = rw.expect_prefix();
  RC_ASSERT(!::testing::Test::HasFailure());
  RC_ASSERT(last == rw.stream.size());
  RC_ASSERT(rw.replica_data == rw.master_data);
}

}  // namespace

RC_GTEST_PROP(ReplicationProperty, TheReplicaIsAlwaysAPrefixAndConvergesAfterHealing, ()) {
  check(*gen_plan());
}
