#include "locksim/protocols/zookeeper/lock_recipe.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "locksim/protocols/raft/lease_algorithm.hpp"
#include "locksim/protocols/zookeeper/znode_tree.hpp"

namespace locksim::zk {

std::string lock_path(const std::string& key) {
  return "/locks/" + key;
}

Duration acquire_timeout(const ProtocolConfig& cfg) {
  return raft::acquire_timeout(cfg);  // the lease client's rule
}

Duration rpc_timeout(const ProtocolConfig& cfg) {
  if (cfg.rpc_timeout > 0ns) return cfg.rpc_timeout;
  return std::max<Duration>(2 * cfg.election_timeout_max, 100ms);
}

LockRecipe::LockRecipe(Duration acquire_timeout, bool sequence_token)
    : acquire_timeout_(acquire_timeout), sequence_token_(sequence_token) {}

std::optional<Grant> LockRecipe::acquire(Link& link, const std::string& key, Duration ttl) {
  const Time give_up = link.now() + acquire_timeout_;
  const std::string parent = lock_path(key);
  bool noted = false;
  while (link.now() < give_up) {
    if (!link.ensure_session(ttl, give_up)) return std::nullopt;
    const std::uint64_t sid = link.session_id();
    // Curator's protection mode: the node's name carries this attempt's key, so a create retried after a
    // connection loss finds the node the first one made.
    const std::uint64_t pkey = link.rng().next() | 1;
    if (!noted) {
      link.note("acquire-sent", fmt::format("{} session={}", key, sid));
      noted = true;
    }
    const Created r = link.create(sid, parent, pkey, give_up);
    if (r.status == Status::no_answer) {
      // The node may exist: delete it by its key (Curator deletes a protected node it lost track of).
      link.remove(sid, parent, pkey, link.now() + link.rpc_timeout());
      return std::nullopt;
    }
    if (r.status == Status::refused) {  // session-expired
      link.mark_expired();
      continue;
    }
    for (;;) {
      const Position c = link.position(sid, r.node, give_up);
      if (c.status == Status::no_answer) {
        link.remove(sid, r.node, 0, link.now() + link.rpc_timeout());
        return std::nullopt;
      }
      if (c.status == Status::refused) break;  // no-node: the session's node is gone (it expired)
      if (c.lowest) {
        Grant g;
        g.key = key;
        g.value = std::to_string(r.czxid);
        g.token = sequence_token_ ? std::uint64_t{child_seq(r.node).value_or(0)} : r.czxid;
        g.valid_until = kTimeMax;  // believed until the client learns its session expired
        g.lease_id = sid;
        nodes_[g.value] = r.node;
        return g;
      }
      link.wait_watch(c.predecessor, give_up);
      if (link.expired()) break;
      if (link.now() >= give_up) {  // Curator's doDelete: a timed-out attempt deletes its node
        link.remove(sid, r.node, 0, link.now() + link.rpc_timeout());
        return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

bool LockRecipe::extend(Link& link, Grant& grant, Duration) {
  const bool own = link.session_id() == grant.lease_id;
  if (own && link.expired()) return false;
  if (link.ping(grant.lease_id, link.now() + link.rpc_timeout()) == Status::refused) {
    if (own) link.mark_expired();
    return false;
  }
  return true;  // answered, or Disconnected: the holder goes on believing
}

void LockRecipe::release(Link& link, const Grant& grant) {
  auto it = nodes_.find(grant.value);
  if (it == nodes_.end()) return;
  // Curator's guaranteed() delete: retried until it goes through, or the session is gone anyway.
  const Duration patience = std::max(link.rpc_timeout(), link.session_timeout());
  link.remove(grant.lease_id, it->second, 0, link.now() + patience);
  nodes_.erase(it);
}

bool LockRecipe::believes_valid(Link& link, const Grant& grant) const {
  return link.session_id() == grant.lease_id && !link.expired() && nodes_.count(grant.value) != 0;
}

}  // namespace locksim::zk
