#include "locksim/protocols/raft/lock_service.hpp"

#include <fmt/format.h>

#include <charconv>

namespace locksim::raft {

std::string_view to_string(Op op) {
  switch (op) {
    case Op::noop:
      return "noop";
    case Op::grant:
      return "grant";
    case Op::keepalive:
      return "keepalive";
    case Op::revoke:
      return "revoke";
    case Op::lock:
      return "lock";
    case Op::unlock:
      return "unlock";
  }
  return "?";
}

std::string encode_command(const Command& c) {
  return fmt::format("{} {} {} {} {}", static_cast<int>(c.op), c.lease, c.ttl.count(), c.expired ? 1 : 0,
                     c.name);
}

std::optional<Command> decode_command(std::string_view s) {
  std::uint64_t nums[4] = {};
  std::int64_t ttl = 0;
  const char* p = s.data();
  const char* end = s.data() + s.size();
  for (int i = 0; i < 4; ++i) {
    std::from_chars_result r{};
    if (i == 2)
      r = std::from_chars(p, end, ttl);
    else
      r = std::from_chars(p, end, nums[i]);
    if (r.ec != std::errc{} || r.ptr == end || *r.ptr != ' ') return std::nullopt;
    p = r.ptr + 1;
  }
  if (nums[0] > static_cast<std::uint64_t>(Op::unlock)) return std::nullopt;
  Command c;
  c.op = static_cast<Op>(nums[0]);
  c.lease = nums[1];
  c.ttl = Duration{ttl};
  c.expired = nums[3] != 0;
  c.name.assign(p, end);
  return c;
}

// ---------------------------------------------------------------- lock service

std::optional<std::pair<std::uint64_t, std::uint64_t>> LockService::holder(const std::string& lock) const {
  auto it = keys_.find(lock);
  if (it == keys_.end() || it->second.empty()) return std::nullopt;
  const auto& [rev, lease] = *it->second.begin();
  return std::pair{lease, rev};
}

std::optional<std::uint64_t> LockService::key_rev(const std::string& lock, std::uint64_t lease) const {
  auto it = keys_.find(lock);
  if (it == keys_.end()) return std::nullopt;
  for (const auto& [rev, l] : it->second)
    if (l == lease) return rev;
  return std::nullopt;
}

void LockService::delete_key(const std::string& lock, std::uint64_t lease,
                             std::vector<HolderChange>& changes) {
  auto it = keys_.find(lock);
  if (it == keys_.end()) return;
  auto& revs = it->second;
  const bool was_holder = !revs.empty() && revs.begin()->second == lease;
  for (auto k = revs.begin(); k != revs.end(); ++k) {
    if (k->second == lease) {
      revs.erase(k);
      break;
    }
  }
  if (auto l = leases_.find(lease); l != leases_.end()) l->second.locks.erase(lock);
  if (revs.empty()) {
    keys_.erase(it);
    return;
  }
  if (was_holder) changes.push_back({lock, revs.begin()->second, revs.begin()->first});
}

LockService::Result LockService::apply(std::uint64_t index, const Command& c,
                                       std::vector<HolderChange>& changes) {
  switch (c.op) {
    case Op::noop:
      return {true, 0, {}};
    case Op::grant: {
      if (c.lease != 0) {  // the client's grant key: a retry names the lease the first grant created
        const auto [it, fresh] = grant_keys_.emplace(c.lease, index);
        if (!fresh) {
          if (!leases_.count(it->second)) return {false, it->second, "lease-not-found"};
          return {true, it->second, {}};
        }
      }
      leases_[index] = Lease{c.ttl, {}};
      return {true, index, {}};
    }
    case Op::keepalive:
      if (!leases_.count(c.lease)) return {false, c.lease, "lease-not-found"};
      return {true, c.lease, {}};
    case Op::revoke: {
      auto it = leases_.find(c.lease);
      if (it == leases_.end()) return {false, c.lease, "lease-not-found"};
      const std::set<std::string> locks = it->second.locks;
      for (const auto& lock : locks) delete_key(lock, c.lease, changes);
      leases_.erase(c.lease);
      return {true, c.lease, {}};
    }
    case Op::lock: {
      auto it = leases_.find(c.lease);
      if (it == leases_.end()) return {false, c.lease, "lease-not-found"};
      if (auto rev = key_rev(c.name, c.lease)) return {true, *rev, {}};
      auto& revs = keys_[c.name];
      revs[index] = c.lease;
      it->second.locks.insert(c.name);
      if (revs.begin()->first == index) changes.push_back({c.name, c.lease, index});
      return {true, index, {}};
    }
    case Op::unlock: {
      if (!key_rev(c.name, c.lease)) return {false, c.lease, "no-key"};
      delete_key(c.name, c.lease, changes);
      return {true, c.lease, {}};
    }
  }
  return {false, 0, "bad-op"};
}

}  // namespace locksim::raft
