// The renewal thread of a client process (scenarios/workload.hpp): background renewal as etcd's session,
// Redisson's watchdog and node-redlock's using() do it, with the ground truth it records.
#include <fmt/format.h>

#include <algorithm>

#include "locksim/scenarios/workload.hpp"

namespace locksim {

namespace workload {

/// The renewal thread: a fiber of the client process with a LockClient of its own (a protocol's client keeps
/// per-call state, such as the reply it is reading, that two fibers must not share), renewing whatever the
/// main fiber holds. Its schedule: `every` after the grant and after each renewal that went through, and/or
/// when `before_expiry` remains of the client's validity estimate; after a failed renewal, `retry` later.
/// Once the estimate has run out with no renewal through, renewal has failed for good for this hold (etcd's
/// keep-alive channel closes at its deadline; node-redlock refuses to extend an expired lock): the thread
/// says so (renewal-lost), sends nothing more for it, and waits for the next hold; the main fiber acts on it
/// per on_renew_failure. (Redisson's watchdog keeps no estimate and would still send its PEXPIRE, which
/// finds the key expired on the server unless the client resumed within a delivery delay of the expiry.)
/// A pause of the process stops this thread too: that is the point.
///
/// Ground truth: a renewal that went through moves the grant's believed_valid_until to the new estimate
/// (written here, by the workload: the protocol's client only returns its estimate). One that returns after
/// the main fiber released or acquired again (the generation moved on) changes nothing.
Body renewal_body(const WorkloadEnv& env, std::shared_ptr<Holding> held, RenewalDefaults plan) {
  return [env, held = std::move(held), plan](Context& ctx) {
    World& w = *env.world;
    History& h = *env.history;
    auto client = env.protocol->make_client(ctx, *env.config);
    const Duration ttl = env.config->ttl;
    for (;;) {
      Holding& st = *held;
      if (!st.grant || st.renewal_failed) {
        ctx.wait_notified(kForever);  // until the main fiber holds a lock again
        continue;
      }
      Time due = kTimeMax;
      if (st.retry_at != kTimeMax) {
        due = st.retry_at;
      } else {
        if (plan.every > 0ns) due = std::min(due, st.renewed_at + plan.every);
        if (plan.before_expiry > 0ns) due = std::min(due, st.grant->valid_until - plan.before_expiry);
      }
      if (ctx.now() < due) {
        ctx.wait_notified(due == kTimeMax ? kForever : due - ctx.now());
        continue;  // the time came, or a new hold did: look again
      }
      if (ctx.now() >= st.grant->valid_until) {  // it woke too late (a pause): nothing left to renew
        st.renewal_failed = true;
        ctx.note("renewal-lost", "the validity estimate ran out before the renewal was due");
        continue;
      }
      const std::uint64_t generation = st.generation;
      Grant g = *st.grant;
      const bool ok = client->extend(ctx, g, ttl);
      if (held->generation != generation || !held->grant) continue;  // released or replaced meanwhile
      if (ok) {
        held->grant->valid_until = g.valid_until;
        held->renewed_at = ctx.now();
        held->retry_at = kTimeMax;
        h.grants[held->gid].believed_valid_until = w.clock(ctx.self()).true_time_at(g.valid_until);
        ctx.note("renewed", fmt::format("valid_for={}s", format_seconds(g.valid_until - ctx.now(), 3)));
      } else if (ctx.now() < held->grant->valid_until) {
        held->retry_at = ctx.now() + plan.retry;
        ctx.note("renew-failed", "will retry");
      } else {
        held->renewal_failed = true;
        ctx.note("renewal-lost", "the validity estimate ran out with no renewal through");
      }
    }
  };
}

}  // namespace workload

}  // namespace locksim
