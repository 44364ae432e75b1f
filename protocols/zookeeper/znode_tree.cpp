#include "locksim/protocols/zookeeper/znode_tree.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace locksim::zk {

std::string_view to_string(ZOp op) {
  switch (op) {
    case ZOp::noop:
      return "noop";
    case ZOp::create_session:
      return "create-session";
    case ZOp::ping:
      return "ping";
    case ZOp::close_session:
      return "close-session";
    case ZOp::create:
      return "create";
    case ZOp::check:
      return "check";
    case ZOp::remove:
      return "delete";
    case ZOp::remove_container:
      return "delete-container";
  }
  return "?";
}

std::string encode(const ZCommand& c) {
  return fmt::format("{} {} {} {} {} {}", static_cast<int>(c.op), c.session, c.key, c.timeout.count(),
                     c.expired ? 1 : 0, c.path);
}

std::optional<ZCommand> decode(std::string_view s) {
  std::uint64_t nums[5] = {};
  std::int64_t timeout = 0;
  const char* p = s.data();
  const char* end = s.data() + s.size();
  for (int i = 0; i < 5; ++i) {
    std::from_chars_result r{};
    if (i == 3)
      r = std::from_chars(p, end, timeout);
    else
      r = std::from_chars(p, end, nums[i]);
    if (r.ec != std::errc{} || r.ptr == end || *r.ptr != ' ') return std::nullopt;
    p = r.ptr + 1;
  }
  if (nums[0] > static_cast<std::uint64_t>(ZOp::remove_container)) return std::nullopt;
  ZCommand c;
  c.op = static_cast<ZOp>(nums[0]);
  c.session = nums[1];
  c.key = nums[2];
  c.timeout = Duration{timeout};
  c.expired = nums[4] != 0;
  c.path.assign(p, end);
  return c;
}

std::string child_name(const std::string& parent, std::uint64_t key, std::uint32_t seq) {
  return fmt::format("{}/_c_{:016x}-lock-{:010}", parent, key, seq);
}

std::optional<std::uint32_t> child_seq(std::string_view node) {
  const auto at = node.rfind("-lock-");
  if (at == std::string_view::npos) return std::nullopt;
  std::uint32_t seq = 0;
  const char* b = node.data() + at + 6;
  const char* e = node.data() + node.size();
  auto r = std::from_chars(b, e, seq);
  if (r.ec != std::errc{} || r.ptr != e) return std::nullopt;
  return seq;
}

std::string parent_of(std::string_view node) {
  const auto at = node.rfind('/');
  return std::string(at == std::string_view::npos ? std::string_view{} : node.substr(0, at));
}

Duration ZnodeTree::negotiate(Duration asked, Duration tick) {
  return std::clamp(asked, 2 * tick, 20 * tick);
}

const ZnodeTree::Child* ZnodeTree::find(const std::string& node) const {
  auto p = parents_.find(parent_of(node));
  auto seq = child_seq(node);
  if (p == parents_.end() || !seq) return nullptr;
  auto c = p->second.children.find(*seq);
  return c == p->second.children.end() || c->second.name != node ? nullptr : &c->second;
}

void ZnodeTree::remove_node(const std::string& node, std::vector<Change>& holders,
                            std::vector<Change>& deleted) {
  auto p = parents_.find(parent_of(node));
  auto seq = child_seq(node);
  if (p == parents_.end() || !seq) return;
  auto& kids = p->second.children;
  auto c = kids.find(*seq);
  if (c == kids.end() || c->second.name != node) return;
  const bool was_holder = c == kids.begin();
  deleted.push_back({node, p->first, c->second.session, c->second.czxid, c->second.seq});
  if (auto s = sessions_.find(c->second.session); s != sessions_.end()) s->second.ephemerals.erase(node);
  kids.erase(c);
  ++p->second.cversion;
  if (was_holder && !kids.empty()) {
    const Child& h = kids.begin()->second;
    holders.push_back({h.name, p->first, h.session, h.czxid, h.seq});
  }
}

ZnodeTree::Result ZnodeTree::apply(std::uint64_t term, std::uint64_t index, const ZCommand& c,
                                   std::vector<Change>& holders, std::vector<Change>& deleted) {
  // The zxid: the epoch is the term; the counter starts again at 1 with each term's first entry.
  if (term != epoch_) {
    epoch_ = term;
    epoch_start_ = index;
  }
  zxid_ = make_zxid(epoch_, index - epoch_start_ + 1);
  switch (c.op) {
    case ZOp::noop:
      return {true, 0, {}, {}};
    case ZOp::create_session: {
      if (c.session != 0) {  // the client's key: a retry names the session the first one created
        const auto [it, fresh] = session_keys_.emplace(c.session, index);
        if (!fresh) {
          if (!sessions_.count(it->second)) return {false, it->second, {}, "session-expired"};
          return {true, it->second, std::to_string(sessions_.at(it->second).timeout.count()), {}};
        }
      }
      const Duration t = negotiate(c.timeout, tick_);
      sessions_[index] = Session{t, {}};
      return {true, index, std::to_string(t.count()), {}};
    }
    case ZOp::ping:
      if (!sessions_.count(c.session)) return {false, c.session, {}, "session-expired"};
      return {true, c.session, {}, {}};
    case ZOp::close_session: {
      auto it = sessions_.find(c.session);
      if (it == sessions_.end()) return {false, c.session, {}, "session-expired"};
      const std::set<std::string> nodes = it->second.ephemerals;
      for (const auto& n : nodes) remove_node(n, holders, deleted);
      sessions_.erase(c.session);
      return {true, c.session, {}, {}};
    }
    case ZOp::create: {
      auto s = sessions_.find(c.session);
      if (s == sessions_.end()) return {false, c.session, {}, "session-expired"};
      auto [pit, fresh_parent] = parents_.try_emplace(c.path);
      Parent& p = pit->second;
      if (fresh_parent) p.czxid = zxid_;
      for (const auto& [seq, child] : p.children)  // protection mode: this attempt's node already exists
        if (child.session == c.session && child.key == c.key) return {true, child.czxid, child.name, {}};
      const std::uint32_t seq = p.cversion;
      Child child{child_name(c.path, c.key, seq), zxid_, c.session, c.key, seq};
      ++p.cversion;
      s->second.ephemerals.insert(child.name);
      const bool lowest = p.children.empty() || seq < p.children.begin()->first;
      auto [cit, ok] = p.children.emplace(seq, child);
      (void)ok;
      if (lowest) holders.push_back({child.name, c.path, c.session, child.czxid, seq});
      return {true, cit->second.czxid, cit->second.name, {}};
    }
    case ZOp::check: {
      const Child* me = find(c.path);
      if (!me) return {false, 0, {}, "no-node"};
      const Parent& p = parents_.at(parent_of(c.path));
      auto it = p.children.find(me->seq);
      if (it == p.children.begin()) return {true, 1, {}, {}};
      return {true, 0, std::prev(it)->second.name, {}};
    }
    case ZOp::remove: {
      std::string node = c.path;
      if (c.key != 0) {  // the child of parent `path` that this session's attempt `key` created, if any
        node.clear();
        if (auto p = parents_.find(c.path); p != parents_.end())
          for (const auto& [seq, child] : p->second.children)
            if (child.session == c.session && child.key == c.key) node = child.name;
      }
      if (node.empty() || !find(node)) return {false, 0, {}, "no-node"};
      remove_node(node, holders, deleted);
      return {true, 0, {}, {}};
    }
    case ZOp::remove_container: {
      auto it = parents_.find(c.path);
      if (it == parents_.end()) return {false, 0, {}, "no-node"};
      if (!it->second.children.empty()) return {false, 0, {}, "not-empty"};
      parents_.erase(it);
      return {true, 0, {}, {}};
    }
  }
  return {false, 0, {}, "bad-op"};
}

}  // namespace locksim::zk
