#include "locksim/protocols/consul/kv_store.hpp"

#include <fmt/format.h>

#include <charconv>

namespace locksim::consul {

std::string_view to_string(KOp op) {
  switch (op) {
    case KOp::noop:
      return "noop";
    case KOp::session_create:
      return "session-create";
    case KOp::session_renew:
      return "session-renew";
    case KOp::session_destroy:
      return "session-destroy";
    case KOp::acquire:
      return "acquire";
    case KOp::release:
      return "release";
    case KOp::get:
      return "get";
  }
  return "?";
}

std::string encode(const KCommand& c) {
  return fmt::format("{} {} {} {} {} {} {}", static_cast<int>(c.op), c.session, c.ttl.count(),
                     c.lock_delay.count(), c.invalidated ? 1 : 0, c.wait_index, c.key);
}

std::optional<KCommand> decode(std::string_view s) {
  std::uint64_t nums[6] = {};
  std::int64_t durs[2] = {};
  const char* p = s.data();
  const char* end = s.data() + s.size();
  for (int i = 0; i < 6; ++i) {
    std::from_chars_result r{};
    if (i == 2 || i == 3)
      r = std::from_chars(p, end, durs[i - 2]);
    else
      r = std::from_chars(p, end, nums[i]);
    if (r.ec != std::errc{} || r.ptr == end || *r.ptr != ' ') return std::nullopt;
    p = r.ptr + 1;
  }
  if (nums[0] > static_cast<std::uint64_t>(KOp::get)) return std::nullopt;
  KCommand c;
  c.op = static_cast<KOp>(nums[0]);
  c.session = nums[1];
  c.ttl = Duration{durs[0]};
  c.lock_delay = Duration{durs[1]};
  c.invalidated = nums[4] != 0;
  c.wait_index = nums[5];
  c.key.assign(p, end);
  return c;
}

const KvStore::Entry* KvStore::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

KvStore::Result KvStore::apply(std::uint64_t index, const KCommand& c, std::vector<Change>& changes) {
  switch (c.op) {
    case KOp::noop:
      return {true, 0, {}};
    case KOp::session_create: {
      if (c.session != 0) {
        auto k = session_keys_.find(c.session);
        if (k != session_keys_.end()) {
          if (sessions_.count(k->second)) return {true, k->second, {}};
          return {false, 0, "invalid-session"};  // created and destroyed already
        }
        session_keys_[c.session] = index;
      }
      sessions_[index] = Session{c.ttl, c.lock_delay, {}};
      return {true, index, {}};
    }
    case KOp::session_renew:
      if (!sessions_.count(c.session)) return {false, c.session, "invalid-session"};
      return {true, c.session, {}};
    case KOp::session_destroy: {
      auto s = sessions_.find(c.session);
      if (s == sessions_.end()) return {false, c.session, "invalid-session"};
      // Behavior `release` (state/session.go deleteSessionTxn): each held key loses its holder.
      for (const std::string& key : s->second.locks) {
        Entry& e = kv_[key];
        e.session = 0;
        e.modify_index = index;
        changes.push_back({key, 0, index, e.lock_index, c.session});
      }
      sessions_.erase(s);
      return {true, c.session, {}};
    }
    case KOp::acquire: {
      auto s = sessions_.find(c.session);
      if (s == sessions_.end()) return {false, 0, "invalid-session"};
      auto [it, fresh] = kv_.try_emplace(c.key);
      Entry& e = it->second;
      if (fresh) e.create_index = index;
      if (e.session != 0 && e.session != c.session) return {false, 0, {}};  // held: the CAS fails
      const bool new_holder = e.session != c.session;
      e.modify_index = index;
      if (new_holder) {
        ++e.lock_index;
        e.session = c.session;
        s->second.locks.insert(c.key);
        changes.push_back({c.key, c.session, index, e.lock_index, 0});
      }
      return {true, e.modify_index, {}};
    }
    case KOp::release: {
      auto it = kv_.find(c.key);
      if (it == kv_.end() || it->second.session != c.session) return {false, 0, {}};
      Entry& e = it->second;
      e.session = 0;
      e.modify_index = index;
      if (auto s = sessions_.find(c.session); s != sessions_.end()) s->second.locks.erase(c.key);
      changes.push_back({c.key, 0, index, e.lock_index, c.session});
      return {true, index, {}};
    }
    case KOp::get: {
      const Entry* e = find(c.key);
      return {true, e ? e->modify_index : 0, {}};
    }
  }
  return {false, 0, "unknown"};
}

}  // namespace locksim::consul
