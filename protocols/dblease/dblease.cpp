#include "locksim/protocols/dblease/dblease.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace locksim {
namespace dblease {

namespace {
/// Serialization failures retried within one acquire/extend/release before it gives up.
constexpr int kSerializationRetries = 8;
}  // namespace

DbLeaseClient::DbLeaseClient(std::vector<ProcId> servers, std::shared_ptr<Connections> connections,
                             LeaseClientOptions opts)
    : conn_(std::move(servers), std::move(connections)), opts_(opts) {}

template <class Change>
DbLeaseClient::Outcome DbLeaseClient::transaction(Context& ctx, const std::string& key, Duration timeout,
                                                  Change&& change, Row& row, Time& now,
                                                  std::string_view commit_note) {
  const Time deadline = ctx.now() + timeout;
  auto failed = [&](const std::optional<SqlReply>& r) {
    if (!r) return Outcome::failed;
    return r->error == kSerializationFailure ? Outcome::retry : Outcome::failed;
  };
  auto b = conn_.exec(ctx, SqlRequest{.op = SqlOp::begin}, deadline);
  if (!b || !b->ok) return failed(b);
  now = b->now;  // tx.Now(): the database's clock
  auto s =
      conn_.exec(ctx, SqlRequest{.op = SqlOp::select_for_update, .table = kLeaseTable, .key = key}, deadline);
  if (!s || !s->ok) return failed(s);
  row = s->row.value_or(Row{.token = opts_.first_token > 0 ? opts_.first_token - 1 : 0});
  if (!change(row, now)) {
    conn_.exec(ctx, SqlRequest{.op = SqlOp::rollback}, deadline);
    return Outcome::refused;
  }
  auto u = conn_.exec(ctx, SqlRequest{.op = SqlOp::update, .table = kLeaseTable, .key = key, .row = row},
                      deadline);
  if (!u || !u->ok) return failed(u);
  auto c = conn_.exec(ctx, SqlRequest{.op = SqlOp::commit}, deadline, commit_note);
  if (!c || !c->ok) return failed(c);  // no answer: it may have committed; the TTL settles it
  return Outcome::done;
}

template <class Change>
DbLeaseClient::Outcome DbLeaseClient::with_retries(Context& ctx, const std::string& key, Duration timeout,
                                                   Change&& change, Row& row, Time& now,
                                                   std::string_view commit_note) {
  Outcome o = Outcome::retry;
  for (int i = 0; i <= kSerializationRetries && o == Outcome::retry; ++i) {
    if (i > 0) ctx.note("serialization-retry", key);
    o = transaction(ctx, key, timeout, change, row, now, commit_note);
  }
  return o == Outcome::retry ? Outcome::failed : o;
}

void DbLeaseClient::set_validity(Context& ctx, Grant& g, Time expires, Time sent, Duration ttl) const {
  g.lease_id = static_cast<std::uint64_t>(expires.count());
  // What the client believes, on its monotonic clock for the reports: the wall-clock deadline read now, or
  // the monotonic one from before the request.
  g.valid_until = opts_.monotonic_deadline ? sent + ttl : ctx.now() + (expires - ctx.wall());
}

std::optional<Grant> DbLeaseClient::acquire(Context& ctx, const std::string& key, Duration ttl) {
  const Time sent = ctx.now();
  const std::string owner = fmt::format("{}#{}", ctx.name(), conn_.unique());
  Row row;
  Time now{};
  // The notes' AcquireLease: free or expired by the database's clock, then Token++, Owner, Expires.
  auto take = [&](Row& r, Time tx_now) {
    if (!r.owner.empty() && r.expires > tx_now) return false;
    ++r.token;
    r.owner = owner;
    r.expires = tx_now + ttl;
    return true;
  };
  // "acquire-sent": the COMMIT that makes the client the holder has left; its answer is in flight.
  if (with_retries(ctx, key, timeout_for(ttl), take, row, now, "acquire-sent") != Outcome::done)
    return std::nullopt;
  Grant g;
  g.key = key;
  g.value = owner;
  g.token =
      opts_.app_counter ? ++app_counter_ + (opts_.first_token > 0 ? opts_.first_token - 1 : 0) : row.token;
  set_validity(ctx, g, row.expires, sent, ttl);
  return g;
}

bool DbLeaseClient::extend(Context& ctx, Grant& grant, Duration ttl) {
  const Time sent = ctx.now();
  Row row;
  Time now{};
  // Only the owner, with its token, while the row still names it and has not expired.
  auto renew = [&](Row& r, Time tx_now) {
    if (r.owner != grant.value || r.expires <= tx_now) return false;
    if (!opts_.app_counter && grant.token && r.token != *grant.token) return false;
    r.expires = tx_now + ttl;
    return true;
  };
  if (with_retries(ctx, grant.key, timeout_for(ttl), renew, row, now) != Outcome::done) return false;
  set_validity(ctx, grant, row.expires, sent, ttl);
  return true;
}

void DbLeaseClient::release(Context& ctx, const Grant& grant) {
  Row row;
  Time now{};
  auto free = [&](Row& r, Time tx_now) {
    if (r.owner != grant.value) return false;
    if (!opts_.app_counter && grant.token && r.token != *grant.token) return false;
    r.owner.clear();
    r.expires = tx_now;
    return true;
  };
  with_retries(ctx, grant.key, timeout_for(std::max<Duration>(grant.valid_until - ctx.now(), 1s)), free, row,
               now);
}

bool DbLeaseClient::believes_valid(Context& ctx, const Grant& grant) {
  if (opts_.monotonic_deadline) return ctx.now() < grant.valid_until;
  return ctx.wall() < Time{static_cast<std::int64_t>(grant.lease_id)};
}

namespace {

class DbLeaseProtocol final : public Protocol {
 public:
  explicit DbLeaseProtocol(bool fenced) : fenced_(fenced) {}
  std::string name() const override { return fenced_ ? "db-lease+fence" : "db-lease"; }
  std::string summary() const override {
    return fenced_ ? "the design notes' SQL lease row (Token++, Expires = tx.Now() + ttl); writes carry the "
                     "token (WriteWithFence, >=)"
                   : "the design notes' SQL lease row (SELECT FOR UPDATE, Expires = tx.Now() + ttl); writes "
                     "carry no token";
  }
  bool fenced() const override { return fenced_; }
  std::vector<Variant> variants() const override {
    return {{"monotonic-deadline",
             "the client measures its lease on its monotonic clock from before the request, not by Expires"},
            {"app-counter", "the token comes from the application's own in-memory counter, not row.Token++"}};
  }

  /// db1, the primary; with `replica`, db2, an asynchronous hot standby that is promoted when db1 falls
  /// silent. Grants are recorded by the server that commits them: one record backs a grant.
  ServiceDecl declare(const ProtocolConfig& cfg) const override {
    using R = ProcessRole;
    ServiceDecl d;
    d.processes.push_back({"db1", {R::server, R::primary, R::leader_capable}});
    if (cfg.replica) d.processes.push_back({"db2", {R::server, R::replica, R::leader_capable}});
    d.quorum = 1;
    d.names_hint = "db2 needs replica = true";
    return d;
  }

  ServiceInfo build(World& world, const ProtocolConfig& cfg, History& history) override {
    connections_ = std::make_shared<Connections>();
    DatabaseOptions o{.name = "db1",
                      .replica = false,
                      .peer = cfg.replica ? "db2" : "",
                      .replication_delay = cfg.replication_delay,
                      .failover_after = cfg.failover_after,
                      .idle_in_transaction_timeout = cfg.idle_in_transaction_timeout};
    spawn_database(world, o, history, connections_);
    if (cfg.replica) {
      o.name = "db2";
      o.replica = true;
      o.peer = "db1";
      spawn_database(world, o, history, connections_);
    }
    return {};
  }

  std::string resource_process(const ProtocolConfig& cfg) const override {
    return cfg.same_db_resource ? "db1" : "";
  }

  /// A lease library's background renewal: every ttl/3 (etcd's and Redisson's third; cirello.io/pglock's
  /// client.go renews its 20 s lease every 5 s, a quarter, and stops renewing after one failed heartbeat
  /// without telling the holder).
  RenewalDefaults renewal_defaults(const ProtocolConfig& cfg) const override {
    return {.every = cfg.ttl / 3,
            .before_expiry = Duration{0},
            .retry = cfg.ttl / 3,
            .stop_on_failure = false,
            .source =
                "a lease library's renewal every ttl/3 (as etcd's and Redisson's); cirello.io/pglock "
                "client.go: heartbeat every 5 s of a 20 s lease; the holder is not told of a failure"};
  }

  std::unique_ptr<LockClient> make_client(Context& ctx, const ProtocolConfig& cfg) override {
    if (!connections_) connections_ = std::make_shared<Connections>();
    std::vector<ProcId> servers{ctx.lookup("db1")};
    if (cfg.replica) servers.push_back(ctx.lookup("db2"));
    return std::make_unique<DbLeaseClient>(
        std::move(servers), connections_,
        LeaseClientOptions{.monotonic_deadline = cfg.variant == "monotonic-deadline",
                           .app_counter = cfg.variant == "app-counter",
                           .tx_timeout = cfg.rpc_timeout,
                           .first_token = cfg.first_token});
  }

 private:
  bool fenced_;
  std::shared_ptr<Connections> connections_;
};

}  // namespace
}  // namespace dblease

void register_dblease_protocols(ProtocolRegistry& registry) {
  registry.add(
      "db-lease",
      "the design notes' SQL lease row (SELECT FOR UPDATE, Expires = tx.Now() + ttl); writes carry no "
      "token",
      [] { return std::make_unique<dblease::DbLeaseProtocol>(false); });
  registry.add("db-lease+fence",
               "the design notes' SQL lease row (Token++, Expires = tx.Now() + ttl); writes carry the token "
               "(WriteWithFence, >=)",
               [] { return std::make_unique<dblease::DbLeaseProtocol>(true); });
}

}  // namespace locksim
