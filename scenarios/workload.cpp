#include "scenarios/workload.hpp"

#include <fmt/format.h>

#include "protocols/resource.hpp"

namespace locksim {

namespace {

std::string token_text(const std::optional<std::uint64_t>& t) {
  return t ? fmt::format("{}", *t) : "none";
}

/// Ends the belief interval of the grant in progress if the fiber unwinds (crash) or returns.
struct BeliefGuard {
  History* h;
  World* w;
  std::optional<std::uint64_t> grant;
  const char* reason = "crashed";
  ~BeliefGuard() {
    if (grant && !w->shutting_down()) h->end_belief(*grant, w->now(), reason);
  }
};

}  // namespace

Body client_body(const WorkloadEnv& env, const ClientSpec& spec) {
  return [env, spec](Context& ctx) {
    World& w = *env.world;
    History& h = *env.history;
    auto client = env.protocol->make_client(ctx, *env.config);
    const Duration ttl = env.config->ttl;
    const bool fenced = env.protocol->fenced();
    std::uint32_t done = 0;
    BeliefGuard guard{&h, &w, std::nullopt};
    while (done < spec.acquisitions) {
      if (w.now() >= env.give_up_at) {
        ctx.note("gave-up");
        return;
      }
      const Time requested = w.now();
      ctx.note("acquire", fmt::format("key={}", env.lock_key));
      std::optional<Grant> grant = client->acquire(ctx, env.lock_key, ttl);
      if (!grant) {
        ctx.note("acquire-failed");
        ctx.sleep(spec.retry_delay);
        continue;
      }
      ++done;
      GrantRecord rec;
      rec.client = ctx.name();
      rec.key = env.lock_key;
      rec.value = grant->value;
      rec.token = grant->token;
      rec.requested = requested;
      rec.granted = w.now();
      rec.believed_valid_until = w.clock(ctx.self()).true_time_at(grant->valid_until);
      const std::uint64_t gid = h.add_grant(rec);
      guard.grant = gid;
      ctx.note("acquired", fmt::format("token={} valid_for={}", token_text(grant->token),
                                       format_seconds(grant->valid_until - ctx.now(), 3) + "s"));

      bool lost = false;
      for (std::uint32_t i = 0; i < spec.writes_per_hold && !lost; ++i) {
        std::optional<std::int64_t> read_value;
        std::uint64_t read_id = kNoId;
        if (spec.read_modify_write) {
          ReadRecord rr;
          rr.client = ctx.name();
          rr.grant = gid;
          rr.key = env.resource_key;
          rr.token = fenced ? grant->token : std::nullopt;
          rr.sent = w.now();
          read_id = h.add_read(rr);
          const ReadRequest rq{env.resource_key, rr.token, read_id};
          auto rep = ctx.call(env.resource, Message::of(kReadType, rq), 5s);
          std::int64_t v = 0;
          if (!rep) {
            ctx.note("read-timeout");
            continue;
          }
          const auto* r = rep->as<ReadReply>();
          if (r && r->rejected) {
            ctx.note("read-rejected", r->reason);
            h.end_belief(gid, w.now(), "fenced out");
            lost = true;
            break;
          }
          if (r) {
            h.reads[read_id].answered = true;
            h.reads[read_id].observed = r->value.value_or("");
          }
          if (r && r->value) v = std::stoll(*r->value);
          read_value = v;
        }
        if (spec.work_max > 0ns) ctx.sleep(ctx.rng().uniform(spec.work_min, spec.work_max));
        if (spec.extend_before_write) {
          if (!client->extend(ctx, *grant, ttl)) {
            ctx.note("extend-failed");
            h.end_belief(gid, w.now(), "extend failed");
            lost = true;
            break;
          }
          ctx.note("extended",
                   fmt::format("valid_for={}", format_seconds(grant->valid_until - ctx.now(), 3) + "s"));
          h.grants[gid].believed_valid_until = w.clock(ctx.self()).true_time_at(grant->valid_until);
        }
        Time checked = w.now();  // taken before the note: a pause triggered by the note falls after the check
        if (spec.check_before_write) {
          checked = w.now();
          if (!client->believes_valid(ctx, *grant)) {
            ctx.note("expired", "lease no longer valid before write; not writing");
            h.end_belief(gid, w.now(), "expired");
            lost = true;
            break;
          }
          ctx.note("lease-check",
                   fmt::format("ok, valid_for={}", format_seconds(grant->valid_until - ctx.now(), 3) + "s"));
        }
        WriteRecord wr;
        wr.client = ctx.name();
        wr.grant = gid;
        wr.key = env.resource_key;
        wr.value =
            read_value ? fmt::format("{}", *read_value + 1) : fmt::format("{}#{}.{}", ctx.name(), done, i);
        wr.token = fenced ? grant->token : std::nullopt;
        wr.sent = w.now();
        wr.checked = checked;
        wr.read_modify_write = spec.read_modify_write;
        wr.read = read_id;
        wr.read_value = read_value;
        const std::uint64_t wid = h.add_write(wr);
        ctx.note("write", fmt::format("value={} token={}", wr.value, token_text(wr.token)));
        // A pause the note triggered has happened by now: the write leaves the client after it.
        h.writes[wid].sent = w.now();
        auto rep = ctx.call(env.resource,
                            Message::of(kWriteType, WriteRequest{env.resource_key, wr.value, wr.token, wid},
                                        fmt::format("token={}", token_text(wr.token))),
                            5s);
        if (rep) {
          const auto* r = rep->as<WriteReply>();
          h.writes[wid].acknowledged = r && r->accepted;
          ctx.note(r && r->accepted ? "write-accepted" : "write-rejected", r ? r->reason : "");
        } else {
          ctx.note("write-timeout");
        }
      }
      if (!lost) {
        if (spec.release) {
          // The client stops acting as holder when it decides to release, before the unlock goes out: the
          // service may grant the lock to the next client as soon as the unlock arrives.
          h.end_belief(gid, w.now(), "released");
          client->release(ctx, *grant);
          ctx.note("released");
        }  // without a release the belief lasts until the client's own validity runs out
      }
      guard.grant.reset();
      if (spec.think_max > 0ns) ctx.sleep(ctx.rng().uniform(spec.think_min, spec.think_max));
    }
  };
}

}  // namespace locksim
