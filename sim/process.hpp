#pragma once
/// Kernel internals, in a header only so that the message path inlines into the code that sends and
/// receives (a protocol's or a benchmark's body): a process's state, its mailbox, and Context::send and
/// Context::receive. Included at the end of sim/world.hpp; code outside sim/ sees a Process only through
/// its Context, and every member here is private to World and Context.
#include <boost/context/fiber.hpp>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "locksim/sim/world.hpp"

namespace locksim {

/// A FIFO of message slots with removal anywhere (a receive with a filter may take a later message). The
/// first few slots live inside the Process (no separate allocation to miss in cache); more spill to the heap.
class Mailbox {
 public:
  Mailbox() = default;
  Mailbox(const Mailbox&) = delete;  // data_ may point into the object itself
  Mailbox& operator=(const Mailbox&) = delete;
  ~Mailbox() {
    if (data_ != inline_) delete[] data_;
  }
  std::size_t size() const { return n_ - head_; }
  bool empty() const { return head_ == n_; }
  std::uint32_t operator[](std::size_t i) const { return data()[head_ + i]; }
  void push_back(std::uint32_t slot) {
    if (n_ == cap_) grow();
    data()[n_++] = slot;
  }
  void erase(std::size_t i) {
    std::uint32_t* d = data();
    if (i == 0) {
      ++head_;
    } else {
      std::memmove(d + head_ + i, d + head_ + i + 1, (n_ - head_ - i - 1) * sizeof(std::uint32_t));
      --n_;
    }
    if (head_ == n_) head_ = n_ = 0;
  }
  void clear() { head_ = n_ = 0; }

 private:
  static constexpr std::uint32_t kInline = 6;
  std::uint32_t* data() { return data_; }
  const std::uint32_t* data() const { return data_; }
  void grow() {
    const std::uint32_t live = n_ - head_;
    if (head_ > 0 && live < cap_ / 2 + 1) {  // room at the front: slide down
      std::memmove(data(), data() + head_, live * sizeof(std::uint32_t));
    } else {
      const std::uint32_t cap = cap_ * 2;
      auto* bigger = new std::uint32_t[cap];
      std::memcpy(bigger, data() + head_, live * sizeof(std::uint32_t));
      if (data_ != inline_) delete[] data_;
      data_ = bigger;
      cap_ = cap;
    }
    head_ = 0;
    n_ = live;
  }
  std::uint32_t* data_ = inline_;  ///< inline_, or a heap array once more than kInline wait (no branch)
  std::uint32_t inline_[kInline];
  std::uint32_t head_ = 0, n_ = 0, cap_ = kInline;
};

/// A process. Cache-line aligned, with what nearly every event touches (the scheduler's checks, the fiber,
/// the Context the body holds, the mailbox) in its first two lines: with 100,000 processes each of these is a
/// cache miss.
class alignas(64) Process {
 public:
  explicit Process(World& w) : context(w, *this) {}

 private:
  friend class World;
  friend class Context;
  // First line.
  ProcState state = ProcState::created;
  bool paused = false;
  bool waiting_receive = false;
  bool pending_wake = false;  // a wake came while paused
  bool killed = false;
  ProcId id;
  std::uint32_t incarnation = 0;
  std::uint64_t wait_gen = 0;  // bumped at every block; wake events carry it
  const std::function<bool(const Message&)>* filter = nullptr;
  boost::context::fiber fiber;  // its suspended context while it does not run
  Context context;
  // Second line.
  Mailbox mailbox;
  std::exception_ptr error;  // an exception that escaped the body, rethrown in scheduler context
  /// The world's next message id when this incarnation began (at its restart): a message with a smaller id
  /// was sent before, to an earlier incarnation, and is dropped when it arrives. (Ids grow with every send;
  /// a send no longer reads a table of incarnations, a cache miss per message in a world of 100,000.)
  std::uint64_t first_msg = 0;
  /// The monotonic reading the current sleep or receive timeout waits for (kTimeMax: none, or forever).
  Time wait_local = kTimeMax;
  // Third line.
  NodeClock clock;
  Rng rng;

  std::string name;
  Body body;
  ProcessOptions opts;
  Storage storage;

  // Pause.
  std::uint64_t pending_gen = 0;  // the wait generation of a wake that came while paused
  std::uint64_t pause_gen = 0;
  Time pause_until{0};           // when the current pause ends (kTimeMax: until an explicit resume)
  bool restart_pending = false;  // crashed with a planned restart: still counts as live
  bool host_down = false;        // crashed with its host (power loss): nothing answers for it until restart

  // Fiber.
  const void* stack_bottom = nullptr;
  std::size_t stack_size = 0;
  void* fake_stack = nullptr;

  std::uint64_t fsync_gen = 0;
  Time fsync_local = kTimeMax;  // the monotonic reading the next periodic fsync waits for (kTimeMax: none)
  bool pending_start = false;   // start (or restart) came while paused
  bool in_arena = false;        // allocated in the world's StackArena (World::ProcessDelete)
  bool waiting_notify = false;  // blocked in Context::wait_notified: Context::notify may end the wait
  Time pending_since{0};        // when its pending wake or start came due (the order threads resume in)

  // Threads (sim/threads.cpp). A thread is a Process of its own (fiber, mailbox, trace name "host/name") that
  // shares its host's fate; none of this is read on the message path.
  Process* host = nullptr;        // the process this one is a thread of (nullptr: it is a process)
  std::vector<Process*> threads;  // this process's threads, in the order they were first started
};

// ---------------------------------------------------------------- the message path, inline

LOCKSIM_ALWAYS_INLINE void World::record_of(TraceKind k, const Process& p, ProcId peer, std::uint64_t msg,
                                            const MsgType& label, std::string_view detail) {
  const Time node_time = p.clock.monotonic(now_);
  trace_.record_roomy_label(now_, node_time, node_time + p.clock.wall_offset(), k, p.id, peer, msg,
                            label.bytes(), label.size(), detail);
}

LOCKSIM_ALWAYS_INLINE void World::push_event(Time at, EvKind kind, std::uint32_t a, std::uint64_t b) {
  // The key's top bit is the event's class (World::kProcessStep): world callbacks first, then process steps.
  // `kind` is a constant at nearly every call site, so the class costs no branch.
  std::uint64_t key = opts_.shuffle_ties ? tie_rng_.next() >> 1 : seq_++;
  if (kind != EvKind::callback) key |= kProcessStep;
  queue_.push(Event{at, key, static_cast<std::uint32_t>(kind), a, b});
}

inline ProcId Context::self() const {
  return proc_.id;
}
inline const std::string& Context::name() const {
  return proc_.name;
}
inline Time Context::now() const {
  return proc_.clock.monotonic(world_.now_);
}
inline Time Context::wall() const {
  return proc_.clock.wall(world_.now_);
}
inline Rng& Context::rng() {
  return proc_.rng;
}

inline std::uint64_t Context::send(ProcId to, Message m) {
  World& w = world_;
  if (proc_.killed) [[unlikely]]
    return w.discard_send(proc_, to, m);
  m.id = w.next_msg_++;
  m.from = proc_.id;
  m.to = to;
  const std::uint64_t id = m.id;
  // (An invalid id, kNone, is above every index too: the process limit is below it.)
  if (to.value >= w.procs_.size()) [[unlikely]]
    throw std::out_of_range("send to an unknown process");
  w.record_of(TraceKind::send, proc_, to, id, m.type, m.detail);
  w.check_triggers(Trigger::Kind::send, proc_.id, m.type);
  Fate fate = w.network_.decide(proc_.id, to, w.now_);
  const std::uint64_t dest = std::uint64_t{to.value} << 32;
  if (fate.copies == 1) [[likely]] {  // not lost, not duplicated
    w.push_event(w.now_ + fate.delays[0], World::EvKind::deliver, w.messages_.put(std::move(m)), dest);
  } else if (fate.lost) {
    if (fate.held) [[unlikely]]
      w.hold(std::move(m), "sent while the link was cut");
    else
      w.record(TraceKind::drop, to, proc_.id, id, m.type, fate.why);
  } else {
    for (std::uint32_t i = 0; i < fate.copies; ++i) {
      if (i > 0) w.record(TraceKind::duplicate, to, proc_.id, id, m.type);
      const std::uint32_t slot =
          (i + 1 == fate.copies) ? w.messages_.put(std::move(m)) : w.messages_.put(Message(m));
      w.push_event(w.now_ + fate.delays[i], World::EvKind::deliver, slot, dest);
    }
  }
  if (proc_.paused) w.pause_here(proc_);  // a fault fired by this send paused us: stop right here
  return id;
}

LOCKSIM_ALWAYS_INLINE std::optional<Message> Context::take(std::size_t i) {
  World& w = world_;
  Process& p = proc_;
  const std::uint32_t slot = p.mailbox[i];
  p.mailbox.erase(i);
  std::optional<Message> m(std::in_place, std::move(w.messages_.items[slot]));  // one move, then NRVO
  w.messages_.release(slot);
  w.record_of(TraceKind::receive, p, m->from, m->id, m->type);
  w.check_triggers(Trigger::Kind::receive, p.id, m->type);
  if (p.paused) w.pause_here(p);
  return m;
}

LOCKSIM_ALWAYS_INLINE std::optional<Message> Context::receive() {
  Process& p = proc_;
  for (;;) {
    if (!p.mailbox.empty()) return take(0);
    ++p.wait_gen;
    p.waiting_receive = true;
    p.filter = nullptr;
    world_.block(p);
    p.waiting_receive = false;
  }
}

}  // namespace locksim
