#include "locksim/protocols/redis/lock_algorithms.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "locksim/protocols/redis/redis.hpp"

namespace locksim::redis {
namespace {

/// Redisson keeps the fencing counter beside the lock: "{lock}:token".
std::string fence_key(const std::string& key) {
  return key + ":token";
}

}  // namespace

std::string random_value(Rng& rng) {
  // Two draws in sequence: as two arguments of one call their order would be unspecified (GCC and Clang
  // differ, and so did every Redis trace hash). The order kept is GCC's (the golden hashes').
  const std::uint64_t second = rng.next();
  const std::uint64_t first = rng.next();
  return fmt::format("{:016x}{:016x}", first, second);
}

SingleNodeAlgorithm::SingleNodeAlgorithm(const ProtocolConfig& cfg, bool incr) : cfg_(cfg), incr_(incr) {}

std::optional<Grant> SingleNodeAlgorithm::acquire(Link& link, const std::string& key, Duration ttl) {
  link.forget_stale();
  for (std::uint32_t attempt = 0; attempt <= cfg_.retry_count; ++attempt) {
    if (attempt > 0) link.sleep(retry_pause(link.rng(), cfg_));
    link.discover();
    Command c{.op = Op::set_nx, .key = key, .value = random_value(link.rng()), .ttl = ttl};
    if (incr_) c.fence_counter = fence_key(key);
    const Time start = link.now();
    const std::optional<Answer> r = link.request(c, "acquire-sent");
    if (!r || !r->ok) continue;  // timeout, nil (held by someone else) or READONLY
    Grant g;
    g.key = key;
    g.value = c.value;
    g.valid_until = start + ttl;
    if (incr_) g.token = static_cast<std::uint64_t>(r->integer);
    return g;
  }
  return std::nullopt;
}

bool SingleNodeAlgorithm::extend(Link& link, Grant& grant, Duration ttl) {
  link.forget_stale();
  link.discover();
  const Time start = link.now();
  const std::optional<Answer> r = link.request(
      {.op = Op::pexpire_if_value, .key = grant.key, .value = grant.value, .ttl = ttl}, "extend-sent");
  if (!r || !r->ok) return false;
  grant.valid_until = start + ttl;
  return true;
}

void SingleNodeAlgorithm::release(Link& link, const Grant& grant) {
  link.forget_stale();
  link.discover();
  link.request({.op = Op::del_if_value,
                .key = grant.key,
                .value = grant.value,
                .blind = cfg_.variant == "blind-release"},
               "release-sent");
}

RedlockAlgorithm::RedlockAlgorithm(const ProtocolConfig& cfg) : cfg_(cfg) {}

std::optional<Grant> RedlockAlgorithm::acquire(Link& link, const std::string& key, Duration ttl) {
  link.forget_stale();
  const std::uint32_t quorum = majority(static_cast<std::uint32_t>(link.nodes()));
  for (std::uint32_t attempt = 0; attempt <= cfg_.retry_count; ++attempt) {
    if (attempt > 0) link.sleep(retry_pause(link.rng(), cfg_));
    const std::string value = random_value(link.rng());
    const Round r = round(link, {.op = Op::set_nx, .key = key, .value = value, .ttl = ttl}, "acquire-sent");
    if (r.votes >= quorum) {
      if (auto until = valid_until(link, r, ttl)) {
        Grant g;
        g.key = key;
        g.value = value;
        g.valid_until = *until;
        return g;
      }
    }
    link.note("attempt-failed", fmt::format("key={} votes={}/{}", key, r.votes, link.nodes()));
    unlock_all(link, key, value);
  }
  return std::nullopt;
}

bool RedlockAlgorithm::extend(Link& link, Grant& grant, Duration ttl) {
  link.forget_stale();
  const Round r = round(
      link, {.op = Op::pexpire_if_value, .key = grant.key, .value = grant.value, .ttl = ttl}, "extend-sent");
  if (r.votes < majority(static_cast<std::uint32_t>(link.nodes()))) return false;
  auto until = valid_until(link, r, ttl);
  if (!until) return false;
  grant.valid_until = *until;
  return true;
}

void RedlockAlgorithm::release(Link& link, const Grant& grant) {
  link.forget_stale();
  unlock_all(link, grant.key, grant.value);
}

RedlockAlgorithm::Round RedlockAlgorithm::round(Link& link, const Command& c, std::string_view label) {
  Round r{0, link.wall(), link.now()};
  r.votes = link.round(c, label, r.start_mono + cfg_.node_timeout);
  return r;
}

std::optional<Time> RedlockAlgorithm::valid_until(Link& link, const Round& r, Duration ttl) const {
  const Duration drift = redlock_drift(cfg_, ttl);
  if (cfg_.variant == "no-elapsed-check") return r.start_mono + ttl - drift;
  const Duration validity_wall = ttl - (link.wall() - r.start_wall) - drift;
  if (validity_wall <= 0ns) return std::nullopt;
  Time until = link.now() + validity_wall;
  if (cfg_.elapsed_recheck) {
    const Time mono_now = link.now();
    if (ttl - (mono_now - r.start_mono) - drift <= 0ns) return std::nullopt;
    until = std::min(until, r.start_mono + ttl - drift);
  }
  return until;
}

void RedlockAlgorithm::unlock_all(Link& link, const std::string& key, const std::string& value) {
  round(link, {.op = Op::del_if_value, .key = key, .value = value, .blind = cfg_.variant == "blind-release"},
        "release-sent");
}

}  // namespace locksim::redis
