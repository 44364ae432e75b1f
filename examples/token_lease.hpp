#pragma once
// A lock protocol written from scratch, as a user of locksim writes one: a single lease server that hands out
// a fencing token with every grant, and its client. It comes in two versions:
//
//  - "token-lease": the token counter lives in the server's memory. A crash and restart starts it over, so a
//    grant after the restart carries a token an earlier holder already had: the fenced store can no longer
//    tell the old holder from the new one (a token-regression). The bug a property test should find.
//  - "token-lease-durable": the fixed twin. The counter is written to the server's disk and fsynced before
//  the
//    grant is answered, so a restart (with or without power loss) goes on from where it was.
//
// The protocol declares its service before the run (one server, "lockd1"), so scenario files, the nemesis and
// replay files can aim faults at it by name. The server records each grant it makes through a recorder bound
// to that process: the checker orders grants by those records, never by what a client says.
#include <charconv>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "locksim/protocols/history.hpp"
#include "locksim/protocols/lock.hpp"
#include "locksim/sim/world.hpp"

namespace example {

using namespace locksim;  // an example's brevity; a library header would not

/// The server's process name, as the protocol declares it.
inline constexpr const char* kLeaseServer = "lockd1";

struct LeaseRequest {
  enum class Op : std::uint8_t { acquire, release } op = Op::acquire;
  std::string key, holder;
  Duration ttl{0};
};
struct LeaseReply {
  bool granted = false;
  std::uint64_t token = 0;
};

/// Client side: up to five tries, 100 ms each; it believes its lease lasts ttl from when it asked (on its
/// own monotonic clock), the way a careful client does.
class TokenLeaseClient : public LockClient {
 public:
  explicit TokenLeaseClient(ProcId server) : server_(server) {}
  std::optional<Grant> acquire(Context& ctx, const std::string& key, Duration ttl) override {
    for (int attempt = 0; attempt < 5; ++attempt) {
      const Time asked = ctx.now();
      std::string holder = ctx.name() + "-" + std::to_string(ctx.rng().next() % 1'000'000);
      auto rep = ctx.call(
          server_, Message::of("LEASE", LeaseRequest{LeaseRequest::Op::acquire, key, holder, ttl}), 100ms);
      if (const LeaseReply* r = rep ? rep->as<LeaseReply>() : nullptr; r && r->granted)
        return Grant{key, holder, r->token, asked + ttl};
      ctx.sleep(100ms);
    }
    return std::nullopt;
  }
  bool extend(Context&, Grant&, Duration) override { return false; }
  void release(Context& ctx, const Grant& g) override {
    ctx.call(server_, Message::of("LEASE", LeaseRequest{LeaseRequest::Op::release, g.key, g.value, 0ns}),
             100ms);
  }

 private:
  ProcId server_;
};

/// The lease server. Leases expire by the server's monotonic clock; they are in memory in both versions (a
/// restarted server has forgotten who held what: fencing is what keeps the store safe then).
class TokenLease : public Protocol {
 public:
  explicit TokenLease(bool durable_counter) : durable_(durable_counter) {}
  std::string name() const override { return durable_ ? "token-lease-durable" : "token-lease"; }
  std::string summary() const override {
    return durable_ ? "single lease server, fencing token counter fsynced to disk"
                    : "single lease server, fencing token counter in memory (reused after a restart)";
  }
  bool fenced() const override { return true; }

  /// One lease server. Its records back a grant on their own (quorum 1).
  ServiceDecl declare(const ProtocolConfig&) const override {
    ServiceDecl d;
    d.processes = {ServiceProcess{.name = kLeaseServer, .roles = {ProcessRole::server}}};
    d.quorum = 1;
    return d;
  }

  ServiceInfo build(World& world, const ProtocolConfig&, History& history) override {
    const bool durable = durable_;
    const ServiceRecorder record = history.recorder(world, kLeaseServer);
    world.spawn(
        kLeaseServer,
        [durable, record](Context& ctx) {
          std::uint64_t next_token = 1;
          if (durable) {
            if (auto saved = ctx.storage().get("next_token"))
              std::from_chars(saved->data(), saved->data() + saved->size(), next_token);
          }
          std::map<std::string, std::pair<std::string, Time>> leases;  // key -> holder, expiry (monotonic)
          for (;;) {
            auto m = ctx.receive();
            const auto* rq = m ? m->as<LeaseRequest>() : nullptr;
            if (!rq) continue;
            auto it = leases.find(rq->key);
            const bool free = it == leases.end() || it->second.second <= ctx.now();
            if (rq->op == LeaseRequest::Op::release) {
              if (!free && it->second.first == rq->holder) leases.erase(it);
              ctx.reply(*m, Message::of("LEASE-OK", LeaseReply{true, 0}));
            } else if (free) {
              const std::uint64_t token = next_token++;
              if (durable) {  // on disk before anyone hears of the token
                ctx.storage().put("next_token", std::to_string(next_token));
                ctx.storage().fsync();
              }
              leases[rq->key] = {rq->holder, ctx.now() + rq->ttl};
              record.grant(rq->key, rq->holder);
              ctx.reply(*m, Message::of("LEASE-OK", LeaseReply{true, token}));
            } else {
              ctx.reply(*m, Message::of("LEASE-BUSY", LeaseReply{false, 0}));
            }
          }
        },
        ProcessOptions{.daemon = true});
    return {};  // the runner takes the declared processes build() spawned
  }

  std::unique_ptr<LockClient> make_client(Context& ctx, const ProtocolConfig&) override {
    return std::make_unique<TokenLeaseClient>(ctx.lookup(kLeaseServer));
  }

 private:
  bool durable_;
};

/// Registers "token-lease" and "token-lease-durable" (idempotent).
inline void register_token_lease() {
  auto& reg = ProtocolRegistry::instance();
  reg.add("token-lease", "single lease server, token counter in memory",
          [] { return std::make_unique<TokenLease>(false); });
  reg.add("token-lease-durable", "single lease server, token counter on disk",
          [] { return std::make_unique<TokenLease>(true); });
}

}  // namespace example
