// The SQL-like database the lease runs on: row locks that block, serializable transactions, rollback when a
// client's connection goes, PostgreSQL's idle_in_transaction_session_timeout, tx.Now() on the database's
// clock, commits that survive a restart, and the fence table as a resource.
#include <gtest/gtest.h>

#include "locksim/protocols/dblease/sql.hpp"
#include "locksim/protocols/resource.hpp"

using namespace locksim;
using namespace locksim::dblease;

namespace {

WorldOptions opts() {
  WorldOptions o;
  o.seed = 7;
  o.keep_trace = false;
  o.network.defaults.delay = DelayDist::constant_of(1ms);
  o.limits.max_time = Time{120s};
  return o;
}

/// A world with db1 (and its options) and the connections table its clients share.
struct Db {
  explicit Db(DatabaseOptions o = {}) : world(opts()) { db = spawn_database(world, o, history, conns); }
  SqlConnection connect(Context& ctx) { return SqlConnection({ctx.lookup("db1")}, conns); }

  World world;
  History history;
  std::shared_ptr<Connections> conns = std::make_shared<Connections>();
  ProcId db;
};

SqlRequest begin() {
  return SqlRequest{.op = SqlOp::begin};
}
SqlRequest select(const std::string& key) {
  return SqlRequest{.op = SqlOp::select_for_update, .table = kLeaseTable, .key = key};
}
SqlRequest update(const std::string& key, Row r) {
  return SqlRequest{.op = SqlOp::update, .table = kLeaseTable, .key = key, .row = std::move(r)};
}
SqlRequest commit() {
  return SqlRequest{.op = SqlOp::commit};
}

constexpr Time kFar = Time{100s};

}  // namespace

// A second SELECT ... FOR UPDATE of a row waits until the holder's transaction ends; under serializable
// isolation it then fails (the row changed after the waiter's snapshot), and a retry sees the new row.
TEST(Database, RowLockBlocksUntilCommitThenSerializationFailure) {
  Db d;
  Time committed{}, answered{};
  std::string error;
  std::optional<Row> seen;
  d.world.spawn("a", [&](Context& ctx) {
    SqlConnection c = d.connect(ctx);
    ASSERT_TRUE(c.exec(ctx, begin(), kFar)->ok);
    ASSERT_TRUE(c.exec(ctx, select("L"), kFar)->ok);
    ctx.sleep(2s);
    ASSERT_TRUE(c.exec(ctx, update("L", Row{.token = 1, .owner = "a"}), kFar)->ok);
    ASSERT_TRUE(c.exec(ctx, commit(), kFar)->ok);
    committed = d.world.now();
  });
  d.world.spawn("b", [&](Context& ctx) {
    SqlConnection c = d.connect(ctx);
    ctx.sleep(100ms);
    ASSERT_TRUE(c.exec(ctx, begin(), kFar)->ok);
    auto r = c.exec(ctx, select("L"), kFar);
    answered = d.world.now();
    ASSERT_TRUE(r);
    error = r->error;
    ASSERT_TRUE(c.exec(ctx, begin(), kFar)->ok);
    auto again = c.exec(ctx, select("L"), kFar);
    ASSERT_TRUE(again && again->ok);
    seen = again->row;
  });
  d.world.run();
  EXPECT_GE(answered, committed) << "the second locker did not wait for the first's commit";
  EXPECT_EQ(error, kSerializationFailure);
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->owner, "a");
}

// A client that crashes inside its transaction: its session ends when the server sees the connection gone,
// the transaction rolls back and the waiting locker goes on (and finds the row unchanged).
TEST(Database, CrashedClientsTransactionRollsBack) {
  Db d;
  Time got{};
  std::optional<Row> seen;
  const ProcId a = d.world.spawn("a", [&](Context& ctx) {
    SqlConnection c = d.connect(ctx);
    ASSERT_TRUE(c.exec(ctx, begin(), kFar)->ok);
    ASSERT_TRUE(c.exec(ctx, select("L"), kFar)->ok);
    ASSERT_TRUE(c.exec(ctx, update("L", Row{.token = 9, .owner = "a"}), kFar)->ok);
    ctx.sleep(60s);  // crashed at 1 s, inside the transaction
    c.exec(ctx, commit(), kFar);
  });
  d.world.spawn("b", [&](Context& ctx) {
    SqlConnection c = d.connect(ctx);
    ctx.sleep(200ms);
    ASSERT_TRUE(c.exec(ctx, begin(), kFar)->ok);
    auto r = c.exec(ctx, select("L"), kFar);
    got = d.world.now();
    ASSERT_TRUE(r && r->ok) << (r ? r->error : "no answer");
    seen = r->row;
  });
  d.world.schedule(Time{1s}, [&] { d.world.crash(a, false); });
  d.world.run();
  EXPECT_GE(got, Time{1s});
  EXPECT_LT(got, Time{1s} + 50ms) << "the server did not notice the crashed client's connection";
  EXPECT_FALSE(seen) << "the crashed client's uncommitted row is visible";
}

// A client paused inside its transaction keeps its row lock for as long as the pause lasts (PostgreSQL's
// default); with idle_in_transaction_session_timeout the server ends the session and the lock passes on.
TEST(Database, PausedClientHoldsItsLockUnlessIdleTimeout) {
  for (const Duration timeout : {Duration{0}, Duration{2s}}) {
    Db d(DatabaseOptions{.idle_in_transaction_timeout = timeout});
    Time got{};
    std::string commit_error = "unset";
    const ProcId a = d.world.spawn("a", [&](Context& ctx) {
      SqlConnection c = d.connect(ctx);
      ASSERT_TRUE(c.exec(ctx, begin(), kFar)->ok);
      ASSERT_TRUE(c.exec(ctx, select("L"), kFar)->ok);
      ctx.sleep(10ms);  // paused here for 10 s
      auto r = c.exec(ctx, commit(), kFar);
      commit_error = r ? r->error : "no answer";
    });
    d.world.spawn("b", [&](Context& ctx) {
      SqlConnection c = d.connect(ctx);
      ctx.sleep(200ms);
      ASSERT_TRUE(c.exec(ctx, begin(), kFar)->ok);
      ASSERT_TRUE(c.exec(ctx, select("L"), kFar)->ok);
      got = d.world.now();
    });
    d.world.schedule(Time{5ms}, [&] { d.world.pause(a, 10s); });
    d.world.run();
    if (timeout == 0ns) {
      EXPECT_GE(got, Time{10s}) << "the lock did not wait for the paused holder";
      EXPECT_EQ(commit_error, "");
    } else {
      EXPECT_GE(got, Time{2s});
      EXPECT_LT(got, Time{3s}) << "idle_in_transaction_session_timeout did not end the session";
      EXPECT_EQ(commit_error, kSessionTerminated);
    }
  }
}

// tx.Now() is the database's own wall clock when the transaction began, whatever the client's reads.
TEST(Database, TxNowIsTheDatabasesClock) {
  Db d;
  d.world.clock_jump(d.db, 100s);
  Time now{};
  d.world.spawn("a", [&](Context& ctx) {
    SqlConnection c = d.connect(ctx);
    ctx.sleep(1s);
    now = c.exec(ctx, begin(), kFar)->now;
  });
  d.world.run();
  EXPECT_EQ(now, Time{101s} + 1ms);
}

// A committed row survives a crash with power loss (commit fsyncs), an uncommitted one does not.
TEST(Database, CommittedRowsSurviveRestart) {
  Db d;
  std::optional<Row> seen;
  d.world.spawn("a", [&](Context& ctx) {
    SqlConnection c = d.connect(ctx);
    ASSERT_TRUE(c.exec(ctx, begin(), kFar)->ok);
    ASSERT_TRUE(c.exec(ctx, select("L"), kFar)->ok);
    ASSERT_TRUE(c.exec(ctx, update("L", Row{.token = 5, .owner = "a"}), kFar)->ok);
    ASSERT_TRUE(c.exec(ctx, commit(), kFar)->ok);
    ASSERT_TRUE(c.exec(ctx, begin(), kFar)->ok);
    ASSERT_TRUE(c.exec(ctx, select("M"), kFar)->ok);
    ASSERT_TRUE(c.exec(ctx, update("M", Row{.token = 1, .owner = "a"}), kFar)->ok);
    ctx.sleep(2s);  // db1 crashes and restarts meanwhile
    auto r = c.exec(ctx, commit(), kFar);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->error, kSessionTerminated);
    SqlConnection c2 = d.connect(ctx);
    ASSERT_TRUE(c2.exec(ctx, begin(), kFar)->ok);
    seen = c2.exec(ctx, select("L"), kFar)->row;
    EXPECT_FALSE(c2.exec(ctx, select("M"), kFar)->row);
  });
  d.world.schedule(Time{500ms}, [&] { d.world.crash(d.db, true); });
  d.world.schedule(Time{1s}, [&] { d.world.restart(d.db); });
  d.world.run();
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->token, 5u);
}

// The fence table as a resource: a write below the highest token is refused, an equal one accepted; each
// delivered request is in the resource log under the database's name.
TEST(Database, SameDbFenceAcceptsEqualRefusesLower) {
  Db d;
  std::vector<bool> accepted;
  d.world.spawn("a", [&](Context& ctx) {
    const ProcId db = ctx.lookup("db1");
    for (const std::uint64_t t : {2, 2, 1, 3}) {
      auto r = ctx.call(db, Message::of(kWriteType, WriteRequest{"k", fmt::format("v{}", t), t, 0}), 1s);
      ASSERT_TRUE(r && r->as<WriteReply>());
      accepted.push_back(r->as<WriteReply>()->accepted);
    }
  });
  d.world.run();
  EXPECT_EQ(accepted, (std::vector<bool>{true, true, false, true}));
  ASSERT_EQ(d.history.resource_log.size(), 4u);
  EXPECT_EQ(d.history.resource_log[2].resource, "db1");
  EXPECT_FALSE(d.history.resource_log[2].accepted);
  EXPECT_TRUE(d.history.resource_log[3].applied);
}
