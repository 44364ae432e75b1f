#include "locksim/protocols/raft/lease_algorithm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace locksim::raft {

LeaseAlgorithm::LeaseAlgorithm(Duration keepalive_interval, Duration acquire_timeout, bool trust_reply)
    : keepalive_interval_(keepalive_interval), acquire_timeout_(acquire_timeout), trust_reply_(trust_reply) {}

Duration LeaseAlgorithm::interval(Duration ttl) const {
  return keepalive_interval_ > 0ns ? keepalive_interval_ : ttl / 3;
}

void LeaseAlgorithm::keepalive(LeaseLink& link, LeaseState& st, std::uint64_t lease, Time deadline) {
  if (link.now() >= deadline) return;
  const Time sent = link.now();  // validity counts from the first send: conservative when redirected
  auto r = link.submit(Command{Op::keepalive, lease, 0ns, {}, false}, deadline);
  if (!r) {
    st.keepalive_due = link.now();  // unreachable: try again at the next chance
    return;
  }
  if (r->ok) {
    st.valid_until = std::max(st.valid_until, sent + st.ttl);
    st.keepalive_due = sent + interval(st.ttl);
  } else {
    st.lost = true;
  }
}

void LeaseAlgorithm::revoke(LeaseLink& link, std::uint64_t lease) {
  link.submit(Command{Op::revoke, lease, 0ns, {}, false}, link.now() + link.rpc_timeout());
}

std::optional<Grant> LeaseAlgorithm::acquire(LeaseLink& link, const std::string& key, Duration ttl) {
  const Time give_up = link.now() + acquire_timeout_;
  while (link.now() < give_up) {
    // 1. A lease. Its validity is measured from when the grant request was sent.
    // The grant carries a key of this attempt's own: submit() asks again after an ambiguous answer (a
    // timeout, "leader-changed") and the first grant may have committed; the key makes the retry name
    // that lease instead of creating a second one, which nobody would revoke or keep alive.
    const Time sent = link.now();
    const std::uint64_t grant_key = link.rng().next() | 1;  // never 0 (no key)
    auto g = link.submit(Command{Op::grant, grant_key, ttl, {}, false}, give_up);
    if (!g) return std::nullopt;
    if (!g->ok) continue;
    const std::uint64_t lease = g->value;
    LeaseState st{ttl, sent + ttl, sent + interval(ttl), false};

    // 2. The lock key under it; wait until it is the holder, keeping the lease alive meanwhile.
    std::set<std::uint64_t> reqs;
    std::uint64_t last_req = 0;
    std::optional<ClientReply> got;
    bool noted = false;
    while (!got && !st.lost && link.now() < st.valid_until && link.now() < give_up) {
      last_req = link.send(Command{Op::lock, lease, 0ns, key, false});
      reqs.insert(last_req);
      if (!noted) {
        link.note("acquire-sent", fmt::format("{} lease={}", key, lease));
        noted = true;
      }
      for (;;) {
        auto r = link.wait(reqs, std::min({st.keepalive_due, give_up, st.valid_until}));
        if (!r) {
          // Time for a keep-alive (which also finds the leader again), then ask again: lock is idempotent.
          if (link.now() >= st.keepalive_due) keepalive(link, st, lease, std::min(st.valid_until, give_up));
          break;
        }
        if (r->ok) {
          got = r;
          break;
        }
        // Not done, or perhaps done by a leader that lost its office: ask again (lock is idempotent).
        if (Client::nothing_done(*r) || r->error == "leader-changed") {
          if (r->req != last_req) continue;  // an older request's answer: the newer one is still out
          if (!link.follow(*r)) link.sleep(kRetryPause);
          break;
        }
        st.lost = true;  // lease-not-found / deleted: the lease expired while we waited
        break;
      }
    }
    if (got && (trust_reply_ || link.now() < st.valid_until)) {
      leases_[lease] = st;
      Grant grant;
      grant.key = key;
      grant.value = std::to_string(lease);
      grant.token = got->value;  // the create revision
      grant.valid_until = st.valid_until;
      grant.lease_id = lease;
      return grant;
    }
    if (!st.lost) revoke(link, lease);  // best effort; the TTL cleans up otherwise
  }
  return std::nullopt;
}

void LeaseAlgorithm::adopt_renewal(LeaseState& st, const Grant& grant) const {
  // Another client of this process (a renewal thread's) kept the lease alive: the grant says until when, as
  // etcd's one lessor per client keeps one deadline per lease for every goroutine. Without a second client
  // the grant never runs ahead of this state (acquire and extend copy it there), so nothing changes.
  if (grant.valid_until <= st.valid_until) return;
  st.valid_until = grant.valid_until;
  st.keepalive_due = std::max(st.keepalive_due, grant.valid_until - st.ttl + interval(st.ttl));
}

bool LeaseAlgorithm::extend(LeaseLink& link, Grant& grant, Duration ttl) {
  auto it = leases_.find(grant.lease_id);
  // A lease this client did not acquire (a renewal thread's client, keeping alive the lease its process's
  // main fiber holds): all it needs is in the grant. Its keep-alives reach the grant, not this client.
  LeaseState adopted{ttl, grant.valid_until, link.now(), false};
  LeaseState& st = it != leases_.end() ? it->second : adopted;
  adopt_renewal(st, grant);
  if (!st.lost && link.now() < st.valid_until) keepalive(link, st, grant.lease_id, st.valid_until);
  grant.valid_until = st.valid_until;
  return !st.lost && link.now() < st.valid_until;
}

bool LeaseAlgorithm::believes_valid(LeaseLink& link, const Grant& grant) {
  auto it = leases_.find(grant.lease_id);
  if (it == leases_.end()) return false;
  LeaseState& st = it->second;
  adopt_renewal(st, grant);
  if (!st.lost && link.now() < st.valid_until && link.now() >= st.keepalive_due)
    keepalive(link, st, grant.lease_id, st.valid_until);
  return !st.lost && link.now() < st.valid_until;
}

void LeaseAlgorithm::release(LeaseLink& link, const Grant& grant) {
  link.submit(Command{Op::unlock, grant.lease_id, 0ns, grant.key, false}, link.now() + link.rpc_timeout());
  revoke(link, grant.lease_id);
  leases_.erase(grant.lease_id);
}

Duration acquire_timeout(const ProtocolConfig& cfg) {
  Duration t = std::max<Duration>(3 * cfg.ttl, 5s);
  if (auto it = cfg.extra.find("acquire_timeout_ms"); it != cfg.extra.end()) {
    std::int64_t ms = 0;
    std::from_chars(it->second.data(), it->second.data() + it->second.size(), ms);
    if (ms > 0) t = std::chrono::milliseconds(ms);
  }
  return t;
}

bool trusts_reply(const ProtocolConfig& cfg) {
  return cfg.variant == "trust-reply" || cfg.variant == "no-recheck-after-wait";
}

}  // namespace locksim::raft
