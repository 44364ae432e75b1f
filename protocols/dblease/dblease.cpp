#include "locksim/protocols/dblease/dblease.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace locksim {
namespace dblease {

namespace {

/// The database lease client's world in the simulator: its process's Context, one SqlConnection.
class SimLink final : public Link {
 public:
  SimLink(Context& ctx, SqlConnection& conn) : ctx_(ctx), conn_(conn) {}
  Time now() override { return ctx_.now(); }
  Time wall() override { return ctx_.wall(); }
  void note(std::string_view label, std::string detail) override { ctx_.note(label, std::move(detail)); }
  const std::string& name() const override { return ctx_.name(); }
  std::uint64_t unique() override { return conn_.unique(); }
  std::optional<SqlReply> exec(SqlRequest rq, Time deadline, std::string_view note) override {
    return conn_.exec(ctx_, std::move(rq), deadline, note);
  }

 private:
  Context& ctx_;
  SqlConnection& conn_;
};

}  // namespace

DbLeaseClient::DbLeaseClient(std::vector<ProcId> servers, std::shared_ptr<Connections> connections,
                             LeaseClientOptions opts)
    : conn_(std::move(servers), std::move(connections)), algo_(opts) {}

std::optional<Grant> DbLeaseClient::acquire(Context& ctx, const std::string& key, Duration ttl) {
  SimLink link(ctx, conn_);
  return algo_.acquire(link, key, ttl);
}

bool DbLeaseClient::extend(Context& ctx, Grant& grant, Duration ttl) {
  SimLink link(ctx, conn_);
  return algo_.extend(link, grant, ttl);
}

void DbLeaseClient::release(Context& ctx, const Grant& grant) {
  SimLink link(ctx, conn_);
  algo_.release(link, grant);
}

bool DbLeaseClient::believes_valid(Context& ctx, const Grant& grant) {
  SimLink link(ctx, conn_);
  return algo_.believes_valid(link, grant);
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
