// Faults aimed at roles ("crash the leader", "pause the holder"), resolved when they fire from the ground
// truth the servers record, and repeated faults, run end to end through the runner with the real protocols.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/nemesis.hpp"
#include "locksim/scenarios/replay.hpp"
#include "locksim/scenarios/runner.hpp"
#include "locksim/scenarios/shrink.hpp"

using namespace locksim;

namespace {

Scenario base(std::uint32_t clients = 2, Duration max_time = 20s) {
  Scenario sc;
  sc.name = "roles";
  sc.file = "roles-test";
  sc.max_time = max_time;
  sc.config.ttl = 2s;
  for (std::uint32_t i = 1; i <= clients; ++i) {
    ClientSpec c;
    c.name = fmt::format("client{}", i);
    c.start = 10ms * i;
    c.acquisitions = 1000;
    c.give_up_at = max_time - 5s;
    c.work_min = c.work_max = 100ms;
    c.retry_delay = 100ms;
    sc.clients.push_back(c);
  }
  return sc;
}

FaultSpec fault(Fault::Kind kind, std::string target, Time at, Duration duration = 0ns) {
  FaultSpec f;
  f.fault.kind = kind;
  f.fault.when = Trigger::at_time(at);
  f.fault.duration = duration;
  f.target = std::move(target);
  f.line = 7;
  return f;
}

std::vector<TraceEvent> events(const RunOutput& r, TraceKind k, std::string_view label = {}) {
  std::vector<TraceEvent> out;
  for (const auto& e : r.trace)
    if (e.kind == k && (label.empty() || e.label == label)) out.push_back(e);
  return out;
}

std::uint64_t term_of(const TraceEvent& e) {
  return std::stoull(e.detail.substr(e.detail.find('=') + 1));
}

/// The Raft leader at true time t as the trace shows it: among members that have not crashed, the one that
/// last logged raft-leader in the highest term and has not logged raft-step-down (nor crashed) since.
/// Events at t itself count only when they come before the trace record at index `before`.
std::string raft_leader_from_trace(const RunOutput& r, std::size_t before) {
  std::map<std::string, std::uint64_t> leading;  // member -> term it leads
  for (std::size_t i = 0; i < before; ++i) {
    const TraceEvent& e = r.trace[i];
    const std::string& n = r.name_of(e.proc);
    if (e.kind == TraceKind::note && e.label == "raft-leader") leading[n] = term_of(e);
    if ((e.kind == TraceKind::note && e.label == "raft-step-down") || e.kind == TraceKind::crash ||
        e.kind == TraceKind::restart)
      leading.erase(n);
  }
  std::string best;
  std::uint64_t term = 0;
  for (const auto& [n, t] : leading)
    if (best.empty() || t > term) best = n, term = t;
  return best;
}

std::size_t index_of(const RunOutput& r, TraceKind k, std::size_t from = 0) {
  for (std::size_t i = from; i < r.trace.size(); ++i)
    if (r.trace[i].kind == k) return i;
  return r.trace.size();
}

}  // namespace

TEST(FaultRoles, KillTheLeaderHitsWhicheverMemberLeadsOnEverySeed) {
  Scenario sc = base();
  sc.faults.push_back(fault(Fault::Kind::crash, "leader", 3s));
  std::set<std::string> hit;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    RunOptions ro;
    ro.seed = seed;
    RunOutput r = run_scenario(sc, "lease", ro);
    const std::size_t crash = index_of(r, TraceKind::crash);
    ASSERT_LT(crash, r.trace.size()) << "seed " << seed << ": nothing crashed";
    const std::string crashed = r.name_of(r.trace[crash].proc);
    EXPECT_EQ(r.trace[crash].time, 3s);
    EXPECT_EQ(crashed, raft_leader_from_trace(r, crash)) << "seed " << seed;
    // The fault's own record names the process and the role.
    const auto faults = events(r, TraceKind::fault, "crash");
    ASSERT_EQ(faults.size(), 1u);
    EXPECT_EQ(r.name_of(faults[0].proc), crashed);
    EXPECT_EQ(faults[0].detail, "leader=" + crashed);
    hit.insert(crashed);
  }
  EXPECT_GE(hit.size(), 2u) << "every seed elected the same member: the test shows nothing";
}

TEST(FaultRoles, KillTheLeaderEveryFewSecondsHitsEachNewLeader) {
  Scenario sc = base(2, 30s);
  FaultSpec f = fault(Fault::Kind::crash, "leader", 2s, 1s);  // restarts after 1 s
  f.fault.repeat = {.every = 4s, .times = 5};
  sc.faults.push_back(f);
  RunOutput r = run_scenario(sc, "lease");
  std::size_t crashes = 0;
  for (std::size_t i = 0; i < r.trace.size(); ++i) {
    if (r.trace[i].kind != TraceKind::crash) continue;
    ++crashes;
    EXPECT_EQ(r.name_of(r.trace[i].proc), raft_leader_from_trace(r, i)) << "crash at " << r.trace[i].time;
  }
  EXPECT_EQ(crashes, 5u);
}

TEST(FaultRoles, ThePausedOldLeaderIsNotTheLeaderOnceALaterTermHasOne) {
  // A paused leader cannot step down: it still believes it leads its term when the others elect a new leader
  // in a later term. "The leader" is the new one.
  Scenario sc = base(2, 20s);
  sc.faults.push_back(fault(Fault::Kind::pause, "leader", 2s, 10s));
  sc.faults.push_back(fault(Fault::Kind::crash, "leader", 5s));
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    RunOptions ro;
    ro.seed = seed;
    RunOutput r = run_scenario(sc, "lease", ro);
    const auto pauses = events(r, TraceKind::pause);
    const std::size_t crash = index_of(r, TraceKind::crash);
    ASSERT_FALSE(pauses.empty());
    ASSERT_LT(crash, r.trace.size()) << "seed " << seed;
    const std::string crashed = r.name_of(r.trace[crash].proc);
    EXPECT_NE(crashed, r.name_of(pauses[0].proc)) << "seed " << seed;
    EXPECT_EQ(crashed, raft_leader_from_trace(r, crash)) << "seed " << seed;
  }
}

/// Every firing of a `leader` fault of kind `label` hit the member the trace shows leading at that instant,
/// and every skipped one came when the trace shows none. Returns the number of firings.
std::size_t expect_leader_firings(const RunOutput& r, std::string_view label) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < r.trace.size(); ++i) {
    const TraceEvent& e = r.trace[i];
    if (e.kind != TraceKind::fault || e.label != label) continue;
    ++n;
    const std::string leader = raft_leader_from_trace(r, i);
    if (e.detail.rfind("skipped", 0) == 0)
      EXPECT_EQ(leader, "") << "skipped at " << e.time << " while " << leader << " leads: " << e.detail;
    else
      EXPECT_EQ(r.name_of(e.proc), leader) << "at " << e.time << ": " << e.detail;
  }
  return n;
}

TEST(FaultRoles, ALeaderThatSteppedDownIsNotTheLeader) {
  // Every member alone: the leader steps down (check-quorum) and nobody can be elected after it.
  Scenario sc = base(1, 20s);
  FaultSpec cut;
  cut.fault.kind = Fault::Kind::partition;
  cut.fault.when = Trigger::at_time(2s);
  cut.side_a = {"raft1"};
  cut.side_b = {"raft2", "raft3"};
  FaultSpec cut2 = cut;
  cut2.side_a = {"raft2"};
  cut2.side_b = {"raft3"};
  sc.faults = {cut, cut2, fault(Fault::Kind::pause, "leader", 5s, 1s)};
  RunOutput r = run_scenario(sc, "lease");
  EXPECT_FALSE(events(r, TraceKind::note, "raft-step-down").empty());
  EXPECT_EQ(expect_leader_firings(r, "pause"), 1u);
  EXPECT_EQ(events(r, TraceKind::fault, "pause")[0].detail, "skipped: leader: no member leads now");
}

TEST(FaultRoles, ARestartedLeaderIsAFollower) {
  // The leader comes back 10 ms after its crash, before anyone else is elected: it is a follower then.
  Scenario sc = base(1, 20s);
  sc.faults.push_back(fault(Fault::Kind::crash, "leader", 2s, 10ms));
  FaultSpec probe = fault(Fault::Kind::pause, "leader", 2020ms, 1ms);
  probe.fault.repeat = {.every = 20ms, .times = 30};
  sc.faults.push_back(probe);
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    RunOptions ro;
    ro.seed = seed;
    RunOutput r = run_scenario(sc, "lease", ro);
    EXPECT_EQ(expect_leader_firings(r, "pause"), 30u) << "seed " << seed;
    EXPECT_EQ(events(r, TraceKind::fault, "pause")[0].detail, "skipped: leader: no member leads now");
  }
}

TEST(FaultRoles, PrimaryFollowsARedisFailover) {
  Scenario sc = base(1, 30s);
  sc.config.replica = true;
  sc.config.failover_after = 1s;
  // redis1 stops long enough for the sentinel to promote replica1; then the primary is crashed.
  sc.faults.push_back(fault(Fault::Kind::pause, "primary", 2s, 10s));
  sc.faults.push_back(fault(Fault::Kind::crash, "primary", 6s));
  RunOutput r = run_scenario(sc, "redis");
  const auto pauses = events(r, TraceKind::pause);
  ASSERT_FALSE(pauses.empty());
  EXPECT_EQ(r.name_of(pauses[0].proc), "redis1");
  const auto crashes = events(r, TraceKind::crash);
  ASSERT_EQ(crashes.size(), 1u);
  EXPECT_EQ(r.name_of(crashes[0].proc), "replica1");
}

TEST(FaultRoles, PauseTheHolderPausesWhoeverAcquiredFirst) {
  for (int first : {1, 2}) {
    Scenario sc = base();
    sc.clients[first - 1].start = 0ns;
    sc.clients[2 - first].start = 1s;
    FaultSpec f;
    f.fault.kind = Fault::Kind::pause;
    f.fault.when.kind = Trigger::Kind::note;
    f.fault.when.label = "acquired";
    f.fault.duration = 5s;
    f.target = "holder";
    sc.faults.push_back(f);
    for (const char* protocol : {"redis", "lease", "redlock"}) {
      RunOutput r = run_scenario(sc, protocol);
      ASSERT_FALSE(r.history.grants.empty());
      const GrantRecord& g = r.history.grants[0];
      EXPECT_EQ(g.client, fmt::format("client{}", first)) << protocol;
      const auto pauses = events(r, TraceKind::pause);
      ASSERT_EQ(pauses.size(), 1u) << protocol;
      EXPECT_EQ(r.name_of(pauses[0].proc), g.client) << protocol;
      EXPECT_EQ(pauses[0].time, g.granted) << protocol;  // right at its acquired note
    }
  }
  // At the second grant of the run, the holder is the second client to acquire: the newest grant's.
  Scenario sc = base();
  sc.clients[1].start = 1s;
  for (ClientSpec& c : sc.clients) c.acquisitions = 1;
  FaultSpec f;
  f.fault.kind = Fault::Kind::pause;
  f.fault.when = Trigger::on_note({}, "acquired", 2);
  f.fault.duration = 1s;
  f.target = "holder";
  sc.faults.push_back(f);
  RunOutput r = run_scenario(sc, "lease");
  ASSERT_GE(r.history.grants.size(), 2u);
  const auto pauses = events(r, TraceKind::pause);
  ASSERT_EQ(pauses.size(), 1u);
  EXPECT_EQ(pauses[0].time, r.history.grants[1].granted);
  EXPECT_EQ(r.name_of(pauses[0].proc), r.history.grants[1].client);
  EXPECT_NE(r.history.grants[1].client, r.history.grants[0].client);
}

TEST(FaultRoles, ARepeatedPauseOfAnyClientWithJitter) {
  Scenario sc = base(3, 30s);
  FaultSpec f = fault(Fault::Kind::pause, "any-client", 2s, 500ms);
  f.fault.repeat = {.every = 2s, .times = 8, .jitter = 300ms};
  sc.faults.push_back(f);
  RunOutput a = run_scenario(sc, "lease");
  RunOutput b = run_scenario(sc, "lease");
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  const auto faults = events(a, TraceKind::fault, "pause");
  ASSERT_EQ(faults.size(), 8u);
  std::set<std::string> who;
  bool jittered = false;
  for (std::size_t k = 0; k < faults.size(); ++k) {
    const Time nominal = 2s + 2s * static_cast<std::int64_t>(k);
    EXPECT_GE(faults[k].time, nominal);
    EXPECT_LE(faults[k].time, nominal + 300ms);
    jittered |= faults[k].time != nominal;
    const std::string n = a.name_of(faults[k].proc);
    EXPECT_EQ(n.rfind("client", 0), 0u) << n;
    EXPECT_EQ(faults[k].detail, "duration=0.5s any-client=" + n);
    who.insert(n);
  }
  EXPECT_TRUE(jittered);
  EXPECT_GE(who.size(), 2u);
}

TEST(FaultRoles, APickDrawsFromItsOwnStreamOnly) {
  // With one client, any-client always picks client1 (the pick still draws): the run must be the run with
  // client1 named, record for record, but for the fault's own detail.
  Scenario sc = base(1);
  sc.faults.push_back(fault(Fault::Kind::pause, "client1", 2s, 3s));
  RunOutput named = run_scenario(sc, "redlock");
  sc.faults[0].target = "any-client";
  RunOutput picked = run_scenario(sc, "redlock");
  ASSERT_EQ(named.trace.size(), picked.trace.size());
  for (std::size_t i = 0; i < named.trace.size(); ++i) {
    const TraceEvent &a = named.trace[i], &b = picked.trace[i];
    EXPECT_EQ(a.time, b.time);
    EXPECT_EQ(a.proc, b.proc);
    EXPECT_EQ(a.label, b.label);
    if (a.kind == TraceKind::fault)
      EXPECT_EQ(b.detail, a.detail + " any-client=client1");
    else
      EXPECT_EQ(a.detail, b.detail);
  }
}

TEST(FaultRoles, ARoleWithNobodySkipsTheFiringAndSaysWhy) {
  Scenario sc = base();
  sc.faults.push_back(fault(Fault::Kind::crash, "leader", 0s));  // no election has happened at 0 s
  sc.faults.push_back(fault(Fault::Kind::pause, "holder", 0s, 1s));
  RunOutput r = run_scenario(sc, "lease");
  EXPECT_TRUE(events(r, TraceKind::crash).empty());
  const auto faults = events(r, TraceKind::fault);
  ASSERT_EQ(faults.size(), 2u);
  EXPECT_EQ(faults[0].detail.rfind("skipped: leader: no member has a role on record", 0), 0u)
      << faults[0].detail;
  EXPECT_EQ(faults[1].detail, "skipped: holder: no client has been granted the lock yet");

  // Redlock's masters are independent: none of them is the primary.
  Scenario rl = base();
  rl.faults.push_back(fault(Fault::Kind::crash, "primary", 2s));
  RunOutput q = run_scenario(rl, "redlock");
  EXPECT_TRUE(events(q, TraceKind::crash).empty());
  const auto skipped = events(q, TraceKind::fault);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].detail,
            "skipped: primary: no member has a role on record (none has started yet, or the service has no "
            "leader: Redlock's masters are independent)");

  // Every member crashed: nobody leads, though each has a role on record.
  Scenario all = base();
  for (const char* m : {"raft1", "raft2", "raft3"}) all.faults.push_back(fault(Fault::Kind::crash, m, 2s));
  all.faults.push_back(fault(Fault::Kind::pause, "leader", 3s, 1s));
  RunOutput z = run_scenario(all, "lease");
  const auto last = events(z, TraceKind::fault, "pause");
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].detail, "skipped: leader: no member leads now");
}

TEST(FaultRoles, HolderServersAreTheRedlockMajorityThatSetTheValue) {
  Scenario sc = base(1);
  FaultSpec f;
  f.fault.kind = Fault::Kind::crash;
  f.fault.when.kind = Trigger::Kind::note;
  f.fault.when.label = "acquired";
  f.target = "holder-servers";
  sc.faults.push_back(f);
  RunOutput r = run_scenario(sc, "redlock");
  ASSERT_FALSE(r.history.grants.empty());
  const GrantRecord& g = r.history.grants[0];
  std::set<std::string> set_by;
  for (const ServiceSet& s : r.history.service_sets)
    if (s.value == g.value && s.time <= g.granted) set_by.insert(s.node);
  std::set<std::string> crashed;
  for (const auto& e : events(r, TraceKind::crash)) crashed.insert(r.name_of(e.proc));
  EXPECT_GE(set_by.size(), 3u);
  EXPECT_EQ(crashed, set_by);
}

TEST(FaultRoles, ATargetListHitsEachProcess) {
  Scenario sc = base(3);
  FaultSpec f = fault(Fault::Kind::pause, "client1", 1s, 1s);
  f.more_targets = {"client3", "leader"};
  sc.faults.push_back(f);
  RunOutput r = run_scenario(sc, "lease");
  std::vector<std::string> paused;
  for (const auto& e : events(r, TraceKind::pause)) paused.push_back(r.name_of(e.proc));
  ASSERT_EQ(paused.size(), 3u);
  EXPECT_EQ(paused[0], "client1");
  EXPECT_EQ(paused[1], "client3");
  EXPECT_EQ(paused[2].rfind("raft", 0), 0u);
}

TEST(FaultRoles, PartitionTheLeaderAloneAndAMinority) {
  for (const char* split : {"leader-alone", "minority", "majority"}) {
    Scenario sc = base();
    sc.config.nodes = 5;
    FaultSpec f;
    f.fault.kind = Fault::Kind::partition;
    f.fault.when = Trigger::at_time(3s);
    f.fault.duration = 2s;
    f.split = split;
    sc.faults.push_back(f);
    RunOutput r = run_scenario(sc, "lease");
    const std::size_t at = [&] {
      for (std::size_t i = 0; i < r.trace.size(); ++i)
        if (r.trace[i].kind == TraceKind::network && r.trace[i].label == "partition") return i;
      return r.trace.size();
    }();
    ASSERT_LT(at, r.trace.size()) << split;
    const std::string leader = raft_leader_from_trace(r, at);
    const std::string& d = r.trace[at].detail;  // "#1 raft3,raft4 | raft1,raft2,raft5,store,client1,..."
    const std::string a = d.substr(d.find(' ') + 1, d.find(" | ") - d.find(' ') - 1);
    const std::string b = d.substr(d.find(" | ") + 3);
    const std::string s(split);
    if (s == "leader-alone") {
      EXPECT_EQ(a, leader);
      EXPECT_NE(b.find("client1"), std::string::npos);
    } else if (s == "minority") {
      EXPECT_EQ(a.rfind(leader, 0), 0u) << d;
      EXPECT_EQ(std::count(a.begin(), a.end(), ','), 1) << d;  // 2 of 5
      EXPECT_NE(b.find("client1"), std::string::npos) << d;
    } else {
      EXPECT_EQ(a.find(leader), std::string::npos) << d;
      EXPECT_EQ(std::count(a.begin(), a.end(), ','), 1) << d;  // 2 of 5 cut off; the leader keeps 3
      EXPECT_NE(b.find(leader), std::string::npos) << d;
    }
    const auto f_ev = events(r, TraceKind::fault, "partition");
    ASSERT_EQ(f_ev.size(), 1u);
    EXPECT_EQ(f_ev[0].detail, fmt::format("duration=2s split={} leader={}", split, leader));
  }
}

TEST(FaultRoles, PartitionSidesMayBeRoles) {
  Scenario sc = base();
  FaultSpec f;
  f.fault.kind = Fault::Kind::partition;
  f.fault.when = Trigger::at_time(3s);
  f.fault.duration = 1s;
  f.side_a = {"leader"};
  f.side_b = {"raft1", "raft2", "raft3"};
  sc.faults.push_back(f);
  RunOutput r = run_scenario(sc, "lease");
  const auto parts = events(r, TraceKind::network, "partition");
  ASSERT_EQ(parts.size(), 1u);
  const std::string& d = parts[0].detail;
  const std::string a = d.substr(d.find(' ') + 1, d.find(" | ") - d.find(' ') - 1);
  EXPECT_EQ(a.rfind("raft", 0), 0u);
  EXPECT_EQ(d.substr(d.find(" | ") + 3).find(a), std::string::npos) << d;  // the leader left side_b
  EXPECT_EQ(std::count(d.begin(), d.end(), ','), 1) << d;                  // the two others
}

TEST(FaultRoles, RolesThatDoNotFitTheKindAreInputErrors) {
  Scenario sc = base();
  sc.faults.push_back(fault(Fault::Kind::restart, "leader", 1s));
  EXPECT_THROW(run_scenario(sc, "lease"), InputError);
  sc.faults[0] = fault(Fault::Kind::delay_spike, "client1", 1s, 1s);
  sc.faults[0].fault.extra = 1s;
  sc.faults[0].peer = "holder";
  EXPECT_THROW(run_scenario(sc, "lease"), InputError);
  sc.faults[0] = fault(Fault::Kind::pause, "client1", 1s, 1s);
  sc.faults[0].fault.repeat = {.every = 1ns, .until = Time{std::chrono::hours(24 * 365)}};
  try {
    run_scenario(sc, "lease");
    FAIL() << "a fault every 1 ns for a year was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.line, 7u);
    EXPECT_NE(e.message.find("10000"), std::string::npos) << e.message;
  }
}

TEST(FaultRoles, ARepetitionWithNoEndRunsUntilTheScenarioEnds) {
  Scenario sc = base(1, 10s);
  sc.clients[0].give_up_at = 10s;  // the run lasts to max_time
  FaultSpec f = fault(Fault::Kind::pause, "client1", 1s, 100ms);
  f.fault.repeat = {.every = 2s};
  sc.faults.push_back(f);
  RunOutput r = run_scenario(sc, "redis");
  EXPECT_EQ(events(r, TraceKind::fault, "pause").size(), 5u);  // 1, 3, 5, 7, 9 s
  ASSERT_EQ(r.faults.size(), 1u);
  EXPECT_EQ(r.faults[0].repeat.until, 10s);
}

// ------------------------------------------------------------------------------------------ replay, shrink

TEST(FaultRoles, ReplayFilesRoundTripRolesAndRepetitionExactly) {
  Scenario sc = base(3, 20s);
  sc.config.nodes = 5;
  FaultSpec pauses = fault(Fault::Kind::pause, "any-client", 2s, 400ms);
  pauses.more_targets = {"holder", "any-client"};
  pauses.fault.repeat = {.every = 2s, .times = 4, .jitter = 300ms};
  FaultSpec cut;
  cut.fault.kind = Fault::Kind::partition;
  cut.fault.when = Trigger::on_note({}, "acquired", 2, 10ms);
  cut.trigger_proc = "client1";
  cut.fault.duration = 1s;
  cut.fault.repeat = {.every = 3s, .until = 15s};
  cut.split = "minority";
  FaultSpec sides;
  sides.fault.kind = Fault::Kind::partition;
  sides.fault.when = Trigger::at_time(9s);
  sides.fault.duration = 500ms;
  sides.side_a = {"leader"};
  sides.side_b = {"client2", "holder-servers"};
  FaultSpec kill = fault(Fault::Kind::crash, "leader", 5s, 1s);
  kill.fault.repeat.jitter = 1ms;  // jitter alone: one firing, a little late
  FaultSpec spike = fault(Fault::Kind::delay_spike, "client1", 3s, 1s);
  spike.more_targets = {"any-server"};
  spike.fault.extra = 100ms;
  spike.fault.count = 2;
  sc.faults = {pauses, cut, sides, kill, spike};

  const RunOutput r = run_scenario(sc, "lease");
  ReplayInfo info{"lease", r.trace_hash, r.verdict(), "fault_roles_test", ""};
  const std::string text = scenario_to_toml(sc, &info);
  const ReplayFile f = load_replay_text(text, "roles-replay.toml");
  EXPECT_EQ(scenario_to_toml(f.scenario, &info), text);
  ASSERT_EQ(f.scenario.faults.size(), sc.faults.size());
  for (std::size_t i = 0; i < sc.faults.size(); ++i) {
    const FaultSpec &a = sc.faults[i], &b = f.scenario.faults[i];
    EXPECT_EQ(a.target, b.target) << i;
    EXPECT_EQ(a.more_targets, b.more_targets) << i;
    EXPECT_EQ(a.side_a, b.side_a) << i;
    EXPECT_EQ(a.side_b, b.side_b) << i;
    EXPECT_EQ(a.split, b.split) << i;
    EXPECT_EQ(a.fault.repeat.every, b.fault.repeat.every) << i;
    EXPECT_EQ(a.fault.repeat.times, b.fault.repeat.times) << i;
    EXPECT_EQ(a.fault.repeat.until, b.fault.repeat.until) << i;
    EXPECT_EQ(a.fault.repeat.jitter, b.fault.repeat.jitter) << i;
  }
  const ReplayCheck c = replay(f);
  EXPECT_TRUE(c.hash_matches) << hash_text(c.run.trace_hash) << " vs " << hash_text(r.trace_hash);
  EXPECT_TRUE(c.verdict_matches);
  // The plan did something: role faults fired and named their processes.
  std::size_t named = 0;
  for (const auto& e : c.run.trace)
    if (e.kind == TraceKind::fault && e.detail.find('=') != std::string::npos) ++named;
  EXPECT_GE(named, 6u);
}

TEST(FaultRoles, ReplayFilesWrittenBeforeStillReplay) {
  const std::filesystem::path dir = std::filesystem::path(LOCKSIM_SOURCE_DIR) / "tests/scenarios/replays";
  std::size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    SCOPED_TRACE(entry.path().filename().string());
    const ReplayFile f = load_replay_file(entry.path().string());
    const ReplayCheck c = replay(f);
    EXPECT_TRUE(c.hash_matches) << hash_text(c.run.trace_hash) << " vs "
                                << hash_text(f.info.expected_trace_hash);
    EXPECT_TRUE(c.verdict_matches);
    ++n;
  }
  EXPECT_GE(n, 3u);
}

TEST(FaultRoles, ShrinkingARepeatedRoleFaultKeepsOneFiring) {
  // Pausing the holder right after it acquires is Kleppmann's story; ten repetitions of it are noise.
  Scenario sc = base(2, 60s);
  for (ClientSpec& c : sc.clients) {
    c.acquisitions = 1;
    c.give_up_at = 0ns;
    c.check_before_write = false;  // it works 100 ms, then writes, whatever happened meanwhile
  }
  sc.clients[1].start = 1s;
  sc.config.ttl = 10s;
  FaultPlan plan;
  FaultSpec f;
  f.fault.kind = Fault::Kind::pause;
  f.fault.when = Trigger::on_note({}, "acquired", 1);
  f.trigger_proc = "client1";
  f.fault.duration = 15s;
  f.target = "holder";
  f.fault.repeat = {.every = 1s, .times = 10, .jitter = 5ms};
  plan.faults.push_back(f);
  const ShrinkResult r = shrink_failure(sc, "redis", plan, 1);
  ASSERT_TRUE(r.failed_at_start);
  ASSERT_EQ(r.plan.faults.size(), 1u);
  EXPECT_FALSE(r.plan.faults[0].fault.repeat.repeats());
  EXPECT_EQ(r.plan.faults[0].fault.repeat.jitter, 0ns);
  EXPECT_EQ(r.plan.faults[0].target, "holder");
  EXPECT_NE(describe(r.plan).find("pause holder"), std::string::npos) << describe(r.plan);
  // What the shrinker kept replays from its file.
  Scenario out = r.scenario;
  out.seed = 1;
  ReplayInfo info{"redis", r.trace_hash, r.verdict, "shrink", describe(r.plan)};
  const ReplayCheck c = replay(load_replay_text(scenario_to_toml(out, &info), "shrunk.toml"));
  EXPECT_TRUE(c.hash_matches);
}

TEST(FaultRoles, DescribeNamesRolesListsSplitsAndRepetition) {
  FaultSpec f = fault(Fault::Kind::pause, "any-client", 5s, 3s);
  f.more_targets = {"any-client"};
  f.fault.repeat = {.every = 5s, .until = 55s, .jitter = 1s};
  EXPECT_EQ(describe(f), "pause any-client,any-client for 3s at 5s, every 5s, until 55s, jitter 1s");
  FaultSpec p;
  p.fault.kind = Fault::Kind::partition;
  p.fault.when = Trigger::at_time(1s);
  p.fault.duration = 2s;
  p.split = "leader-alone";
  p.fault.repeat = {.every = 10s, .times = 3};
  EXPECT_EQ(describe(p), "partition split leader-alone for 2s at 1s, every 10s, 3 times");
}

TEST(FaultRoles, TheRoleCatalogScenariosHoldTheirVerdictsOnSeedsOneToTwenty) {
  for (const char* name : {"kill-the-leader", "partition-the-leader"}) {
    const Scenario sc = load_scenario(name);
    ASSERT_FALSE(sc.expect.empty()) << name;
    for (const auto& [protocol, expectation] : sc.expect) {
      ASSERT_TRUE(expectation.verdict) << name << " × " << protocol;
      const Verdict verdict = *expectation.verdict;
      for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        RunOptions ro;
        ro.seed = seed;
        ro.keep_trace = false;
        const RunOutput r = run_scenario(sc, protocol, ro);
        EXPECT_EQ(r.verdict(), verdict) << name << " × " << protocol << " seed " << seed;
        EXPECT_FALSE(r.inconclusive()) << name << " × " << protocol << " seed " << seed;
      }
    }
  }
}
