// The `lease` and `lease+fence` protocols through the Protocol interface: registry, contention, expiry under
// a client pause with and without fencing (Kleppmann's scenario), wall-clock jumps, a leader crash
// mid-workload.
#include <gtest/gtest.h>

#include <algorithm>

#include "locksim/protocols/raft/lease.hpp"
#include "locksim/protocols/resource.hpp"
#include "raft_test_util.hpp"

using namespace locksim;

namespace {

WorldOptions opts(std::uint64_t seed) {
  WorldOptions o;
  o.seed = seed;
  o.keep_trace = false;
  o.network.defaults.delay = DelayDist::uniform_of(1ms, 5ms);
  return o;
}

struct ClientGrant {
  std::string client;
  std::uint64_t token = 0;
  Time granted{};
  Time released{};
};

/// `clients` clients take turns on "L": acquire, hold `hold` renewing every 200 ms, release; `rounds` times
/// each.
std::vector<ClientGrant> contend(World& w, Protocol& proto, const ProtocolConfig& cfg, int clients,
                                 int rounds, Duration hold) {
  auto out = std::make_shared<std::vector<ClientGrant>>();
  for (int c = 1; c <= clients; ++c) {
    w.spawn(fmt::format("client{}", c), [&w, &proto, cfg, rounds, hold, out](Context& ctx) {
      auto lc = proto.make_client(ctx, cfg);
      ctx.sleep(300ms);
      for (int r = 0; r < rounds; ++r) {
        auto g = lc->acquire(ctx, "L", cfg.ttl);
        if (!g) continue;
        ClientGrant cg{ctx.name(), *g->token, w.now(), {}};
        const Time until = ctx.now() + hold;
        while (ctx.now() < until) {
          ctx.sleep(200ms);
          EXPECT_TRUE(lc->believes_valid(ctx, *g));
        }
        EXPECT_TRUE(lc->extend(ctx, *g, cfg.ttl));
        cg.released = w.now();
        lc->release(ctx, *g);
        out->push_back(cg);
      }
    });
  }
  w.run();
  return *out;
}

void expect_exclusive(std::vector<ClientGrant> gs) {
  std::sort(gs.begin(), gs.end(), [](const auto& a, const auto& b) { return a.granted < b.granted; });
  for (std::size_t i = 1; i < gs.size(); ++i) {
    EXPECT_GT(gs[i].token, gs[i - 1].token);
    EXPECT_GE(gs[i].granted, gs[i - 1].released) << gs[i].client << " overlaps " << gs[i - 1].client;
  }
}

}  // namespace

TEST(LeaseProtocol, RegisteredWithAndWithoutFencing) {
  register_lease_protocols(ProtocolRegistry::instance());
  auto& reg = ProtocolRegistry::instance();
  ASSERT_TRUE(reg.has("lease"));
  ASSERT_TRUE(reg.has("lease+fence"));
  EXPECT_FALSE(reg.make("lease")->fenced());
  EXPECT_TRUE(reg.make("lease+fence")->fenced());
  EXPECT_EQ(reg.make("lease+fence")->name(), "lease+fence");
}

TEST(LeaseProtocol, ClientsTakeTurnsAndTheServiceRecordsEachHolderOnce) {
  World w(opts(21));
  History h;
  h.service_quorum = 5;
  ProtocolConfig cfg;
  cfg.ttl = 2s;
  auto proto =
      ProtocolRegistry::instance().has("lease") ? ProtocolRegistry::instance().make("lease") : nullptr;
  register_lease_protocols(ProtocolRegistry::instance());
  proto = ProtocolRegistry::instance().make("lease");
  ServiceInfo info = build_service(*proto, w, cfg, h);
  EXPECT_EQ(info.servers.size(), 3u);
  EXPECT_EQ(h.service_quorum, 1u);
  auto gs = contend(w, *proto, cfg, 3, 3, 500ms);
  ASSERT_EQ(gs.size(), 9u);
  expect_exclusive(gs);
  // One service record per grant, in token order, naming the lease the client holds.
  ASSERT_EQ(h.service_sets.size(), 9u);
  for (std::size_t i = 1; i < h.service_sets.size(); ++i)
    EXPECT_GT(h.service_sets[i].time, h.service_sets[i - 1].time);
  for (const auto& s : h.service_sets) {
    EXPECT_EQ(s.key, "L");
    EXPECT_EQ(s.node.rfind("raft", 0), 0u);
  }
}

namespace {

/// Kleppmann's scenario: client1 acquires, checks its lease, pauses 4 s (TTL 1 s) and then writes; meanwhile
/// client2 acquires and writes. Returns whether client1's late write was accepted.
struct PauseOutcome {
  bool stale_accepted = false;
  bool client2_accepted = false;
  std::uint64_t token1 = 0, token2 = 0;
  bool client1_believes_after = true;
};

PauseOutcome gc_pause(const std::string& protocol) {
  register_lease_protocols(ProtocolRegistry::instance());
  World w(opts(5));
  History h;
  ProtocolConfig cfg;
  cfg.ttl = 1s;
  auto proto = ProtocolRegistry::instance().make(protocol);
  build_service(*proto, w, cfg, h);
  ProcId store = spawn_resource(
      w, "store", ResourceOptions{proto->fenced() ? ResourceMode::fenced : ResourceMode::unfenced, {}}, h);
  PauseOutcome out;
  auto write = [&](Context& ctx, const Grant& g, const std::string& value) {
    WriteRequest rq{"file", value, proto->fenced() ? g.token : std::nullopt, 0};
    auto r = ctx.call(store, Message::of(kWriteType, rq), 1s);
    return r && r->as<WriteReply>() && r->as<WriteReply>()->accepted;
  };
  ProcId c1 = w.spawn("client1", [&](Context& ctx) {
    auto lc = proto->make_client(ctx, cfg);
    ctx.sleep(500ms);
    auto g = lc->acquire(ctx, "L", cfg.ttl);
    ASSERT_TRUE(g);
    out.token1 = *g->token;
    ASSERT_TRUE(lc->believes_valid(ctx, *g));
    ctx.note("checked");  // the pause fault fires here
    out.stale_accepted = write(ctx, *g, "client1");
    out.client1_believes_after = lc->believes_valid(ctx, *g);
  });
  w.spawn("client2", [&](Context& ctx) {
    auto lc = proto->make_client(ctx, cfg);
    ctx.sleep(1s);
    auto g = lc->acquire(ctx, "L", cfg.ttl);
    ASSERT_TRUE(g);
    out.token2 = *g->token;
    out.client2_accepted = write(ctx, *g, "client2");
    lc->release(ctx, *g);
  });
  Fault f;
  f.kind = Fault::Kind::pause;
  f.when = Trigger::on_note(c1, "checked");
  f.target = c1;
  f.duration = 4s;
  w.add_fault(f);
  w.run();
  return out;
}

}  // namespace

TEST(LeaseProtocol, GcPauseBreaksLeaseButFencingRejectsTheStaleWrite) {
  PauseOutcome plain = gc_pause("lease");
  EXPECT_GT(plain.token2, plain.token1);
  EXPECT_TRUE(plain.client2_accepted);
  EXPECT_TRUE(plain.stale_accepted)
      << "lease: the paused client's write lands after the new holder's (unsafe)";
  EXPECT_FALSE(plain.client1_believes_after);

  PauseOutcome fenced = gc_pause("lease+fence");
  EXPECT_GT(fenced.token2, fenced.token1);
  EXPECT_TRUE(fenced.client2_accepted);
  EXPECT_FALSE(fenced.stale_accepted) << "lease+fence: the resource rejects the older token";
}

TEST(LeaseProtocol, WallClockJumpsOnMembersChangeNothing) {
  register_lease_protocols(ProtocolRegistry::instance());
  auto run = [](bool jumps) {
    World w(opts(33));
    History h;
    ProtocolConfig cfg;
    cfg.ttl = 1s;
    auto proto = ProtocolRegistry::instance().make("lease+fence");
    ServiceInfo info = build_service(*proto, w, cfg, h);
    if (jumps) {
      for (std::size_t i = 0; i < info.servers.size(); ++i) {
        Fault f;
        f.kind = Fault::Kind::clock_jump;
        f.target = info.servers[i];
        f.when = Trigger::at_time(Time{std::chrono::milliseconds(700 + 450 * i)});
        f.duration = i % 2 ? -std::chrono::hours(1) : std::chrono::hours(2);
        w.add_fault(f);
      }
    }
    auto gs = contend(w, *proto, cfg, 3, 2, 1500ms);  // holds longer than the TTL: keep-alives matter
    return std::pair{h.service_sets, gs};
  };
  auto [base_sets, base_grants] = run(false);
  auto [jump_sets, jump_grants] = run(true);
  ASSERT_EQ(base_grants.size(), 6u);
  expect_exclusive(jump_grants);
  ASSERT_EQ(base_sets.size(), jump_sets.size());
  for (std::size_t i = 0; i < base_sets.size(); ++i) {
    EXPECT_EQ(base_sets[i].time, jump_sets[i].time);
    EXPECT_EQ(base_sets[i].value, jump_sets[i].value);
    EXPECT_EQ(base_sets[i].node, jump_sets[i].node);
  }
}

TEST(LeaseProtocol, LeaderCrashDuringWorkloadKeepsTokensIncreasing) {
  register_lease_protocols(ProtocolRegistry::instance());
  World w(opts(44));
  History h;
  ProtocolConfig cfg;
  cfg.ttl = 1s;
  auto proto = ProtocolRegistry::instance().make("lease+fence");
  build_service(*proto, w, cfg, h);
  std::vector<std::string> leaders;
  w.on_note([&](ProcId p, std::string_view label, std::string_view) {
    if (label == "raft-leader") leaders.push_back(w.name(p));
  });
  // Crash whoever leads at 2 s and at 4.5 s; each comes back 1.5 s later.
  for (Time at : {Time{2s}, Time{4500ms}}) {
    w.schedule(at, [&w, &leaders] {
      ProcId p = w.find(leaders.back());
      w.crash(p, true);
      w.schedule(w.now() + 1500ms, [&w, p] { w.restart(p); });
    });
  }
  auto gs = contend(w, *proto, cfg, 3, 4, 400ms);
  EXPECT_GE(leaders.size(), 3u);
  EXPECT_GE(gs.size(), 10u);
  expect_exclusive(gs);
  std::vector<std::uint64_t> values;
  for (const auto& s : h.service_sets) values.push_back(std::stoull(s.value));
  EXPECT_TRUE(std::is_sorted(values.begin(), values.end()));
}
