// Messages held by cut links (NetworkOptions::cut_messages = held): a stream's semantics, as TCP gives them.
// A message that meets a cut link, when it is sent or when it arrives, is kept by its directed link (between
// the hosts) instead of being lost; when the link opens again (its partitions heal) the link's held messages
// go out in the order they were sent, each with a delay the link draws from the heal, each arriving after
// the one before it. One whose sender or receiver crashed or restarted meanwhile is dropped at the heal: its
// connection is gone. When messages that meet a cut are lost (the default), only cut_in_flight() runs here.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "locksim/sim/world.hpp"

namespace locksim {

void World::hold(Message&& m, std::string_view why) {
  const std::pair<ProcId, ProcId> link{network_.host(m.from), network_.host(m.to)};
  record(TraceKind::hold, m.to, m.from, m.id, m.type, why);
  held_[link].push_back(std::move(m));
}

Process* World::cut_in_flight(std::uint32_t slot) {
  const Message& m = messages_.items[slot];
  if (!network_.holds() || is_refusal(m)) {  // (a reset is not retransmitted)
    record(TraceKind::drop, m.to, m.from, m.id, m.type, "partition in flight");
    messages_.drop(slot);
    return nullptr;
  }
  hold(messages_.take(slot), "in flight when the link was cut");
  return nullptr;
}

const char* World::connection_reset(const Message& m) {
  // A message id below a process's first_msg was sent before its current incarnation began.
  const Process& s = process_ref(m.from);
  if (m.id < s.first_msg) return "connection reset: sender restarted";
  if (s.state == ProcState::crashed) return "connection reset: sender crashed";
  const Process& r = process_ref(m.to);
  if (m.id < r.first_msg) return "connection reset: receiver restarted";
  if (r.state == ProcState::crashed) return "connection reset: receiver crashed";
  return nullptr;
}

void World::release_held(const Network::Links& opened) {
  for (const auto& link : opened) {
    auto it = held_.find(link);
    if (it == held_.end()) continue;
    std::vector<Message> msgs = std::move(it->second);
    held_.erase(it);
    // Sent order: a message sent before the cut and held when it arrived goes before those held at their
    // send (the copies of a duplicated one stay in the order they came).
    std::stable_sort(msgs.begin(), msgs.end(),
                     [](const Message& a, const Message& b) { return a.id < b.id; });
    Time last = kTimeMax;  // when the previous one arrives (kTimeMax: none yet)
    for (Message& m : msgs) {
      if (const char* why = connection_reset(m)) {
        record(TraceKind::drop, m.to, m.from, m.id, m.type, why);
        // The receiver's host answers the retransmission with a reset, as it answers any message for a
        // process that is not (or no longer) there.
        // (connection_reset() looks at the sender first: a reset with a live sender is the receiver's.)
        const Process& s = process_ref(m.from);
        const bool sender_alive = m.id >= s.first_msg && s.state != ProcState::crashed;
        if (sender_alive && network_.options().refuse_when_down && !process_ref(m.to).host_down)
          send_refusal(*procs_[m.to.value], m);
        continue;
      }
      // Each one after the one before it, by at least 1 ns, so that no tie-break (shuffle_ties) swaps them.
      Time at = now_ + network_.held_delay(m.from, m.to, now_);
      if (last != kTimeMax && at <= last) at = last + 1ns;
      last = at;
      record(TraceKind::hold, m.to, m.from, m.id, m.type,
             fmt::format("released by the heal: arrives in {}", format_time(at - now_)));
      const std::uint64_t dest = std::uint64_t{m.to.value} << 32;
      push_event(at, EvKind::deliver, messages_.put(std::move(m)), dest);
    }
  }
}

}  // namespace locksim
