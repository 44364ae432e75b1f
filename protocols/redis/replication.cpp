#include "locksim/protocols/redis/replication.hpp"

#include <fmt/format.h>

#include <utility>

namespace locksim::redis {

std::string describe(const ReplicationOp& op) {
  return op.entry ? fmt::format("SET {} {}", op.key, op.entry->value) : fmt::format("DEL {}", op.key);
}

Message repl_cmd_message(ReplCommand c) {
  std::string detail = fmt::format("offset={} {}", c.offset, describe(c.op));
  return Message::of("repl.cmd", std::move(c), std::move(detail));
}

Message psync_message(Psync p) {
  std::string detail = fmt::format("replid={} offset={}", p.replid, p.offset);
  return Message::of("repl.psync", std::move(p), std::move(detail));
}

Message partial_resync_message(PartialResync p) {
  std::string detail =
      p.ops.empty() ? fmt::format("replid={} offset={} (nothing missing)", p.replid, p.first)
                    : fmt::format("replid={} offsets={}..{}", p.replid, p.first, p.first + p.ops.size() - 1);
  return Message::of("repl.continue", std::move(p), std::move(detail));
}

Message full_resync_message(FullResync f) {
  std::string detail = fmt::format("replid={} offset={} keys={}", f.replid, f.offset, f.data.size());
  return Message::of("repl.fullsync", std::move(f), std::move(detail));
}

Message ack_message(ReplAck a) {
  std::string detail = fmt::format("replid={} offset={}", a.replid, a.offset);
  return Message::of("repl.ack", std::move(a), std::move(detail));
}

Message ping_message(ReplPing p) {
  std::string detail =
      fmt::format("replid={} offset={}{}", p.replid, p.offset, p.connected ? "" : " (not connected)");
  return Message::of("repl.ping", std::move(p), std::move(detail));
}

void Backlog::push(std::uint64_t offset, ReplicationOp op, Time due) {
  if (!ring_.empty() && offset != last_ + 1) reset();  // not the next command: start over
  last_ = offset;
  if (ring_.size() < capacity_) {
    ring_.push_back(Item{std::move(op), due});
  } else {
    ring_[head_] = Item{std::move(op), due};
    head_ = (head_ + 1) % capacity_;
  }
}

std::vector<ReplicationOp> Backlog::suffix(std::uint64_t from) const {
  std::vector<ReplicationOp> out;
  if (!covers(from)) return out;
  for (std::uint64_t o = from; o <= last_ && !ring_.empty(); ++o) out.push_back(at(o).op);
  return out;
}

}  // namespace locksim::redis
