// Each anomaly kind of the safety contract (docs/safety.md) on hand-built histories, and a property that
// holds the checker to a reference: random histories made by a small, obviously right model of a store and a
// lock service, judged by the quadratic definitions.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "locksim/scenarios/checker/checker.hpp"
#include "tests/scenarios/history_builder.hpp"

using namespace locksim;
using namespace locksim::testing;

namespace {

/// client1 (epoch 1, token 1) and client2 (epoch 2, token 2): client2 is granted at 10 s.
struct TwoHolders {
  Builder b;
  std::uint64_t g1, g2;
  TwoHolders() {
    b.h.tokens_fence = true;
    g1 = b.grant("client1", "lock", "a", 1s, {{"n1", 1s}}, 10s, kTimeMax, 1);
    g2 = b.grant("client2", "lock", "b", 10s, {{"n1", 10s}}, 20s, kTimeMax, 2);
  }
};

}  // namespace

TEST(Anomaly, ADuplicateRefusedLaterDoesNotEraseAStaleWriteTheStoreTook) {
  TwoHolders t;
  t.b.write(t.g2, "x", 11s, 11s, true);
  auto stale = t.b.write(t.g1, "x", 2s, 12s, true);  // taken after epoch 2's write
  t.b.deliver(stale, 13s, false);                    // its duplicate, refused
  auto r = check(t.b.h);
  EXPECT_EQ(r.count(kStaleWriteAccepted), 1u);
  ASSERT_FALSE(r.violations.empty());
  EXPECT_EQ(r.violations[0].later.write, stale);
  EXPECT_EQ(r.violations[0].later.seq, 1u);  // the copy that was taken, not the refused one
  t.b.h.summarize();
  EXPECT_TRUE(t.b.h.writes[stale].accepted);
  EXPECT_EQ(t.b.h.writes[stale].copies, 2u);
}

TEST(Anomaly, ADuplicateTakenAfterANewerWriteIsStale) {
  TwoHolders t;
  auto early = t.b.write(t.g1, "x", 2s, 2s, true);  // in order...
  t.b.write(t.g2, "x", 11s, 11s, true);
  t.b.deliver(early, 12s, true);  // ...but the network delivers it again after epoch 2's write
  auto r = check(t.b.h);
  ASSERT_EQ(r.count(kStaleWriteAccepted), 1u);
  EXPECT_EQ(r.violations[0].later.arrived, 12s);
}

TEST(Anomaly, SameInstantArrivalsFollowTheStoresOrderInBothOrders) {
  for (bool newer_first : {true, false}) {
    TwoHolders t;
    // Both processed at 21 s (a stalled store draining its queue); write ids in send order: client1's first.
    auto w1 = t.b.write(t.g1, "x", 2s, kTimeMax, true);
    auto w2 = t.b.write(t.g2, "x", 11s, kTimeMax, true);
    if (newer_first) {
      t.b.deliver(w2, 21s, true);
      t.b.deliver(w1, 21s, true);
    } else {
      t.b.deliver(w1, 21s, true);
      t.b.deliver(w2, 21s, true);
    }
    auto r = check(t.b.h);
    EXPECT_EQ(r.safe, !newer_first) << newer_first;
    EXPECT_EQ(r.count(kStaleWriteAccepted), newer_first ? 1u : 0u);
    ASSERT_TRUE(r.write_near_miss);
    EXPECT_EQ(r.write_near_miss->margin, 0ns);
  }
}

TEST(Anomaly, AFenceThatTookTheOlderTokenFirstIsRightAtTheSameInstant) {
  TwoHolders t;
  auto w1 = t.b.write(t.g1, "x", 2s, kTimeMax, true, 1);
  auto w2 = t.b.write(t.g2, "x", 11s, kTimeMax, true, 2);
  t.b.deliver(w1, 21s, true);  // token 1, then token 2: both accepted, correctly
  t.b.deliver(w2, 21s, true);
  EXPECT_TRUE(check(t.b.h).safe);
}

TEST(Anomaly, LostUpdateWithWritesInEpochOrder) {
  TwoHolders t;
  // client1 reads 0 at 2 s and writes 1 at 15 s (acknowledged); client2 read 0 at 10.5 s, writes 1 at 18 s.
  auto lost = t.b.increment(t.g1, "c", 0, 15s, 15s, true, 2s);
  auto over = t.b.increment(t.g2, "c", 0, 18s, 18s, true, 10'500ms);
  auto r = check(t.b.h);
  EXPECT_EQ(r.count(kStaleWriteAccepted), 0u);
  ASSERT_EQ(r.count(kLostUpdate), 1u);
  const Violation& v = r.violations[0];
  EXPECT_EQ(v.earlier.write, lost);
  EXPECT_EQ(v.later.write, over);
  EXPECT_EQ(r.lost.lost, 1u);
  EXPECT_EQ(r.lost.acknowledged, 2u);
  EXPECT_FALSE(r.safe);
}

TEST(Anomaly, AReadAfterTheWriteLosesNothing) {
  TwoHolders t;
  t.b.increment(t.g1, "c", 0, 3s, 3s, true, 2s);
  t.b.increment(t.g2, "c", 1, 12s, 12s, true, 11s);
  EXPECT_TRUE(check(t.b.h).safe);
}

TEST(Anomaly, AnUnacknowledgedWriteIsNeverALostUpdate) {
  TwoHolders t;
  t.b.increment(t.g1, "c", 0, 15s, 15s, /*acknowledged=*/false, 2s);
  t.b.increment(t.g2, "c", 0, 18s, 18s, true, 10'500ms);
  EXPECT_EQ(check(t.b.h).count(kLostUpdate), 0u);
}

TEST(Anomaly, TokenRegressionNeedsNoWrite) {
  Builder b;
  b.h.tokens_fence = true;
  b.grant("client1", "lock", "a", 1s, {{"n1", 1s}}, 10s, 9s, 2);
  auto g2 = b.grant("client2", "lock", "b", 10s, {{"n1", 10s}}, 20s, kTimeMax, 1);  // after a failover
  auto r = check(b.h);
  ASSERT_EQ(r.count(kTokenRegression), 1u);
  EXPECT_EQ(r.violations[0].grant_later.grant, g2);
  EXPECT_EQ(r.violations[0].grant_earlier.token, 2u);
  // An equal token is a regression too: a fence that takes equal tokens lets the older holder in.
  b.h.grants[g2].token = 2;
  EXPECT_EQ(check(b.h).count(kTokenRegression), 1u);
  b.h.grants[g2].token = 3;
  EXPECT_TRUE(check(b.h).safe);
  // Tokens an unfenced protocol carries for show are not a contract.
  b.h.grants[g2].token = 1;
  b.h.tokens_fence = false;
  EXPECT_TRUE(check(b.h).safe);
}

TEST(Anomaly, TheNewestHolderRefusedIsAFreshWriteRejected) {
  TwoHolders t;
  t.b.write(t.g1, "x", 2s, 2s, true, 1);
  auto refused = t.b.write(t.g2, "x", 11s, 11s, false, 2);  // a backwards fence
  auto r = check(t.b.h);
  ASSERT_EQ(r.count(kFreshWriteRejected), 1u);
  EXPECT_EQ(r.violations[0].later.write, refused);
  EXPECT_EQ(r.violations[0].earlier.token, 1u);  // the write that set the fence
}

TEST(Anomaly, RefusingASupersededHolderOrADuplicateOfATakenWriteIsRight) {
  TwoHolders t;
  t.b.write(t.g2, "x", 11s, 11s, true, 2);
  t.b.write(t.g1, "x", 2s, 12s, false, 1);  // superseded at 10 s: refusing it is the fence's job
  auto w = t.b.write(t.g2, "x", 13s, 13s, true, 2);
  t.b.deliver(w, 14s, false);  // a refused duplicate of a write that already took effect
  EXPECT_TRUE(check(t.b.h).safe);
}

TEST(Anomaly, RecordsFromUndeclaredProcessesBackNothing) {
  Builder b;
  b.grant("client1", "lock", "a", 1s, {{"n1", 1s}});
  b.h.service_set(500ms, "intruder", "lock", "b");  // a process that is not the service
  GrantRecord g;
  g.client = "client2";
  g.key = "lock";
  g.value = "b";
  g.requested = 0s;
  g.granted = 2s;
  b.h.add_grant(g);
  auto r = check(b.h);
  EXPECT_EQ(r.undeclared_records, 1u);
  EXPECT_EQ(r.unbacked_grants, 1u);
  EXPECT_FALSE(r.backed[1]);
  EXPECT_EQ(r.service_grant_time[1], 2s);  // ordered by the client's view, flagged
  EXPECT_EQ(r.backing_records[0], 1u);
}

TEST(Anomaly, EqualServiceTimesFollowTheServicesRecordSequence) {
  Builder b;
  // The service recorded b before a at the same instant; the clients heard in the other order.
  b.h.service_set(1s, "n1", "lock", "b");
  b.h.service_set(1s, "n1", "lock", "a");
  b.h.service_nodes = {"n1"};
  for (auto [client, value, granted] : {std::tuple{"client1", "a", 2s}, std::tuple{"client2", "b", 3s}}) {
    GrantRecord g;
    g.client = client;
    g.key = "lock";
    g.value = value;
    g.granted = granted;
    b.h.add_grant(g);
  }
  EXPECT_EQ(check(b.h).epoch_of_grant, (std::vector<std::uint64_t>{2, 1}));
}

// ------------------------------------------------------------------------------------------------ reference

namespace {

/// A random history made by a reference model: a lock service granting epochs 1..n at increasing times (with
/// tokens that may regress), and a store (fenced with >=, or unfenced) processing a random stream of write
/// copies, duplicates and reads in one key, one entry per copy.
struct Reference {
  History h;
  std::map<std::string, std::uint32_t> expected;  // anomaly kind -> count, by the quadratic definitions
};

Reference make_reference() {
  Reference ref;
  History& h = ref.h;
  h.tokens_fence = true;
  h.service_nodes = {"n1"};
  const bool fenced = *rc::gen::arbitrary<bool>();
  const auto n = *rc::gen::inRange<std::size_t>(1, 6);
  std::vector<Time> granted(n);
  Time t = 1s;
  for (std::size_t e = 0; e < n; ++e) {
    t += *rc::gen::inRange<std::int64_t>(0, 3) * 1s;  // equal times allowed
    granted[e] = t;
    GrantRecord g;
    g.client = "c" + std::to_string(e);
    g.key = "lock";
    g.value = "v" + std::to_string(e);
    g.requested = t - 1ms;
    g.granted = t;
    g.token = *rc::gen::inRange<std::uint64_t>(1, 8);
    h.service_set(t, "n1", "lock", g.value);
    h.add_grant(g);
  }
  // The store.
  std::optional<std::uint64_t> highest;
  std::string value = "0";
  Time now = 1s;
  const auto events = *rc::gen::inRange(0, 25);
  for (int i = 0; i < events; ++i) {
    now += *rc::gen::inRange<std::int64_t>(0, 3) * 500ms;
    std::vector<std::size_t> live;  // grants a client may act under by now
    for (std::size_t e = 0; e < n; ++e)
      if (granted[e] <= now) live.push_back(e);
    if (live.empty()) continue;
    const int what = *rc::gen::inRange(0, 4);
    auto judge = [&](const std::optional<std::uint64_t>& token) {
      return !fenced || !highest || (token && *token >= *highest);
    };
    // The store takes one delivered copy of write `id`: check, apply, log.
    auto deliver = [&](std::uint64_t id) {
      const WriteRecord& w = h.writes[id];
      const bool ok = judge(w.token);
      if (ok) value = w.value, highest = fenced ? std::max(highest.value_or(0), *w.token) : highest;
      h.log({.op = ResourceEntry::Op::write,
             .time = now,
             .resource = "store",
             .key = "x",
             .request = id,
             .token = w.token,
             .accepted = ok,
             .applied = ok,
             .value = w.value,
             .reason = ok ? "" : "fence"});
      return ok;
    };
    if (what == 3 && !h.writes.empty()) {  // a duplicate copy of an earlier write
      deliver(*rc::gen::inRange<std::size_t>(0, h.writes.size()));
      continue;
    }
    const std::size_t g = *rc::gen::elementOf(live);
    std::uint64_t read = kNoId;
    std::string base;
    if (what == 2) {  // a read served now, the write computed from it comes later
      ReadRecord rd;
      rd.client = h.grants[g].client;
      rd.grant = g;
      rd.key = "x";
      rd.token = h.grants[g].token;
      rd.sent = now;
      const bool ok = judge(rd.token);
      if (ok && fenced) highest = std::max(highest.value_or(0), *rd.token);
      rd.answered = ok;
      rd.observed = ok ? value : "";
      read = h.add_read(rd);
      h.log({.op = ResourceEntry::Op::read,
             .time = now,
             .resource = "store",
             .key = "x",
             .request = read,
             .token = rd.token,
             .accepted = ok,
             .value = rd.observed});
      if (!ok) continue;
      base = value;
      now += *rc::gen::inRange<std::int64_t>(0, 3) * 500ms;
    }
    WriteRecord w;
    w.client = h.grants[g].client;
    w.grant = g;
    w.key = "x";
    w.token = h.grants[g].token;
    w.sent = now;
    w.read_modify_write = read != kNoId;
    w.read = read;
    w.value = read != kNoId ? std::to_string(std::stoll(base) + 1) : std::to_string(1000 + i);
    const auto id = h.add_write(w);
    h.writes[id].acknowledged = deliver(id) && *rc::gen::inRange(0, 4) != 0;
  }

  // The definitions, quadratic and literal. Epochs are the grants' order (granted, then id).
  auto epoch = [&](std::uint64_t write) { return h.writes[write].grant + 1; };
  const auto& log = h.resource_log;
  for (std::size_t j = 0; j < log.size(); ++j) {
    if (log[j].op != ResourceEntry::Op::write || !log[j].applied) continue;
    for (std::size_t i = 0; i < j; ++i)
      if (log[i].op == ResourceEntry::Op::write && log[i].applied &&
          epoch(log[i].request) > epoch(log[j].request)) {
        ++ref.expected[kStaleWriteAccepted];
        break;
      }
  }
  for (const WriteRecord& w : h.writes) {
    if (!w.read_modify_write || !w.acknowledged) continue;
    std::size_t s = 0;
    while (log[s].op == ResourceEntry::Op::read || log[s].request != w.id || !log[s].applied) ++s;
    for (std::size_t x = s + 1; x < log.size(); ++x) {
      if (log[x].op != ResourceEntry::Op::write || !log[x].applied || log[x].request == w.id) continue;
      const WriteRecord& o = h.writes[log[x].request];
      std::size_t rs = 0;
      if (!o.read_modify_write) continue;
      while (!(log[rs].op == ResourceEntry::Op::read && log[rs].request == o.read)) ++rs;
      if (rs < s) {
        ++ref.expected[kLostUpdate];
        break;
      }
    }
  }
  std::uint64_t top = 0;
  for (std::size_t e = 0; e < n; ++e) {
    if (e > 0 && *h.grants[e].token <= top) ++ref.expected[kTokenRegression];
    top = std::max(top, *h.grants[e].token);
  }
  for (const ResourceEntry& x : log) {
    if (x.op != ResourceEntry::Op::write || x.accepted) continue;
    bool ever = false;
    for (const ResourceEntry& y : log)
      ever |= y.op == ResourceEntry::Op::write && y.request == x.request && y.applied;
    std::uint64_t newest = 0;
    for (std::size_t e = 0; e < n; ++e)
      if (granted[e] <= x.time) newest = e + 1;
    if (!ever && epoch(x.request) == newest) ++ref.expected[kFreshWriteRejected];
  }
  return ref;
}

}  // namespace

RC_GTEST_PROP(AnomalyProperty, TheCheckerFindsWhatTheReferenceModelDefines, ()) {
  Reference ref = make_reference();
  const CheckResult r = check(ref.h);
  for (const auto& [k, v] : r.anomaly_counts) RC_LOG() << "checker " << k << " " << v << "\n";
  for (const auto& [k, v] : ref.expected) RC_LOG() << "reference " << k << " " << v << "\n";
  for (const auto& e : ref.h.resource_log)
    RC_LOG() << e.seq << " op" << int(e.op) << " t=" << e.time.count() / 1'000'000 << "ms req " << e.request
             << " tok " << (e.token ? *e.token : 0)
             << (e.applied    ? " applied"
                 : e.accepted ? " served"
                              : " refused")
             << "\n";
  for (const auto& g : ref.h.grants)
    RC_LOG() << "grant " << g.id << " at " << g.granted.count() / 1'000'000 << " token " << *g.token << "\n";
  for (const auto& w : ref.h.writes)
    RC_LOG() << "write " << w.id << " grant " << w.grant << " rmw " << w.read_modify_write << " read "
             << w.read << " ack " << w.acknowledged << "\n";
  std::string kinds;
  for (const auto& [k, v] : ref.expected) kinds += k + " ";
  RC_TAG(kinds.empty() ? std::string("safe") : kinds);
  RC_ASSERT(r.anomaly_counts == ref.expected);
  RC_ASSERT(r.safe == ref.expected.empty());
}
