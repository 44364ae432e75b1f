#include "locksim/sim/world.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/context/fiber.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "locksim/sim/memory.hpp"

#if defined(LOCKSIM_ASAN)
#include <sanitizer/common_interface_defs.h>
#define LOCKSIM_START_SWITCH(save, bottom, size) __sanitizer_start_switch_fiber(save, bottom, size)
#define LOCKSIM_FINISH_SWITCH(save, bottom, size) __sanitizer_finish_switch_fiber(save, bottom, size)
#else
#define LOCKSIM_START_SWITCH(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#define LOCKSIM_FINISH_SWITCH(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#endif

namespace ctx = boost::context;

// The deep prefetch of big worlds (World::prefetch_next): the arguments of queue_.peek_hint. The running
// event has been popped already, so peek_hint(k) is the (k + 1)-th event after it: the tables' entries are
// prefetched 9 events ahead and the rest 4 (measured as such: bench/README.md, the tenth session).
constexpr std::size_t kTableAhead = 8;
constexpr std::size_t kDeepAhead = 3;
/// Processes from which a world is too big for the caches (a process's hot data is ~1.3 KiB: its stack top
/// and its Process).
constexpr std::size_t kDeepWorld = 8192;

namespace locksim {

std::string_view to_string(StopReason r) {
  switch (r) {
    case StopReason::idle:
      return "idle";
    case StopReason::done:
      return "done";
    case StopReason::until:
      return "until";
    case StopReason::stopped:
      return "stopped";
    case StopReason::time_limit:
      return "time limit";
    case StopReason::event_limit:
      return "event limit";
    case StopReason::mailbox_limit:
      return "mailbox limit";
  }
  return "?";
}

namespace {
/// A malloc'ed fiber stack that remembers where it is (for the sanitizer fiber annotations), with a cache
/// colour from the 65th process on: `size` plus (process id mod 64) KiB. Stacks allocated one after another
/// are 64 KiB + 16 bytes apart, so without it the hot kilobyte at the top of every stack falls into the same
/// few L2 sets (1,000 processes: a quarter of the sets hold all of them). The extra space is usable stack;
/// pages never touched cost no memory. Measured: +5% fiber events per second at 1,000 processes. Not for the
/// first 64: a small world's stacks fit the caches anyway, and blocks of odd sizes cost the worlds that
/// explore creates and destroys by the thousand malloc's reuse of warm memory (redis runs/s −30%).
struct RecordingStack {
  std::size_t size;
  std::uint32_t index;  // the process's id (its cache colour)
  const void** bottom;  // where to record the stack (the Process's)
  std::size_t* recorded_size;
  StackArena* arena;  // null: malloc'ed
  ctx::stack_context allocate() {
    std::size_t block = 0;
    char* base = StackArena::allocate_stack(arena, size, World::stack_colour(index), block);
    ctx::stack_context sc;
    sc.size = block;
    sc.sp = base + block;
    *bottom = base;
    *recorded_size = block;
    return sc;
  }
  void deallocate(ctx::stack_context& sc) noexcept {
    StackArena::free_stack(arena, static_cast<char*>(sc.sp) - sc.size, sc.size);
  }
};

[[maybe_unused]] thread_local const void* main_stack_bottom = nullptr;
[[maybe_unused]] thread_local std::size_t main_stack_size = 0;
}  // namespace

struct World::Fibers {
  ctx::fiber main;                    // the scheduler's context, suspended while a fiber runs
  std::unique_ptr<StackArena> arena;  // WorldOptions::huge_page_stacks (outlives procs_: declared before)
};

// ---------------------------------------------------------------- Context

ProcId Context::lookup(std::string_view name) const {
  return world_.find(name);
}

void Context::sleep(Duration d) {
  // Ends when this node's monotonic clock reads local + d: armed at the true time that comes, and armed again
  // if the clock's drift changes in between (World::clock_drift).
  if (d < 0ns) d = 0ns;
  const Time local = now();
  Process& p = proc_;
  p.wait_local = d >= kForever - local ? kTimeMax : local + d;
  const Time deadline = p.wait_local == kTimeMax ? kTimeMax : p.clock.true_time_at(p.wait_local);
  const std::uint64_t gen = ++p.wait_gen;
  World& w = world_;
  w.push_event(std::max(deadline, w.now_), World::EvKind::wake, p.id.value, gen);
  w.block(p);
  p.wait_local = kTimeMax;
}

std::uint64_t Context::reply(const Message& request, Message m) {
  m.reply_to = request.id;
  return send(request.from, std::move(m));
}

std::optional<Message> Context::receive(Duration timeout, const std::function<bool(const Message&)>& filter) {
  World& w = world_;
  Process& p = proc_;
  // The timeout ends when this node's monotonic clock reads `until` (kTimeMax: never): its true time is
  // worked out at each wait, and again if the clock's drift changes during one (World::clock_drift).
  Time until = kTimeMax;
  if (timeout < kForever) {
    const Time local = now();
    if (timeout < kForever - local) until = local + timeout;
  }
  for (;;) {
    for (std::size_t i = 0; i < p.mailbox.size(); ++i) {
      if (!filter || filter(w.messages_.items[p.mailbox[i]])) return take(i);
    }
    if (until != kTimeMax && now() >= until) {
      w.record(TraceKind::timeout, p.id);
      return std::nullopt;
    }
    const std::uint64_t gen = ++p.wait_gen;
    p.waiting_receive = true;
    p.filter =
        filter ? &filter : nullptr;  // null for "any message": deliver need not look at the fiber's stack
    if (until != kTimeMax) {
      p.wait_local = until;
      w.push_event(std::max(p.clock.true_time_at(until), w.now_), World::EvKind::wake, p.id.value, gen);
    }
    w.block(p);
    p.wait_local = kTimeMax;
    p.waiting_receive = false;
    p.filter = nullptr;
  }
}

std::optional<Message> Context::call(ProcId to, Message request, Duration timeout) {
  const std::uint64_t id = send(to, std::move(request));
  if (proc_.killed) return std::nullopt;  // the request of a dying process was discarded: no reply, no wait
  return receive(timeout, [id](const Message& m) { return m.reply_to == id; });
}

void Context::note(std::string_view label, std::string detail) {
  World& w = world_;
  for (auto& obs : w.note_observers_) obs(proc_.id, label, detail);
  w.record(TraceKind::note, proc_.id, {}, 0, std::string(label), std::move(detail));
  w.check_triggers(Trigger::Kind::note, proc_.id, label);
  // A process crashed while paused logs its notes on its way down, but does not stop at its pause again.
  if (proc_.paused && !proc_.killed) w.pause_here(proc_);
}

// ---------------------------------------------------------------- World

World::World(WorldOptions opts)
    : opts_(std::move(opts)),
      rng_(opts_.seed),
      tie_rng_(rng_.stream("scheduler/ties")),
      trace_(opts_.keep_trace, opts_.max_kept_events),
      network_(opts_.network, rng_.stream("network")),
      queue_(),
      fibers_(std::make_unique<Fibers>()) {
  if (opts_.huge_page_stacks) fibers_->arena = std::make_unique<StackArena>();
}

World::~World() {
  shutting_down_ = true;
  for (auto& p : procs_) kill_fiber(*p);
}

void World::push(Time at, std::function<void()> fn) {
  push_event(at, EvKind::callback, callbacks_.put(std::move(fn)), 0);
}

LOCKSIM_ALWAYS_INLINE void World::dispatch(const Event& ev) {
  switch (static_cast<EvKind>(ev.kind)) {
    case EvKind::wake:
      if (Process* r = wake(*procs_[ev.a], ev.b)) switch_to(*r);
      break;
    case EvKind::deliver:
      if (Process* r = deliver(ev.a)) switch_to(*r);
      break;
    case EvKind::start:
      start_fiber(*procs_[ev.a]);
      break;
    case EvKind::callback: {
      std::function<void()> fn = callbacks_.take(ev.a);
      fn();
      break;
    }
  }
}

void World::schedule(Time at, std::function<void()> fn) {
  push(std::max(at, now_), std::move(fn));
}

void World::record(TraceKind k, ProcId p, ProcId peer, std::uint64_t msg, std::string_view label,
                   std::string_view detail) {
  Time node_time{0}, wall_time{0};
  if (p.valid()) {
    const Process& pr = *procs_[p.value];
    node_time = pr.clock.monotonic(now_);
    wall_time = node_time + pr.clock.wall_offset();
  }
  trace_.record(now_, node_time, wall_time, k, p, peer, msg, label, detail);
}

void World::ProcessDelete::operator()(Process* p) const noexcept {
  static_assert(sizeof(std::unique_ptr<Process, ProcessDelete>) == sizeof(Process*));  // stateless
  if (p->in_arena)
    p->~Process();
  else
    delete p;
}

ProcId World::spawn(std::string name, Body body, ProcessOptions opts) {
  if (procs_.size() >= opts_.limits.max_processes)
    throw std::length_error(fmt::format("too many processes (limit {})", opts_.limits.max_processes));
  if (find(name).valid()) throw std::invalid_argument(fmt::format("duplicate process name '{}'", name));
  names_.emplace(name, ProcId{static_cast<std::uint32_t>(procs_.size())});
  std::unique_ptr<Process, ProcessDelete> p;
  if (StackArena* arena = fibers_->arena.get()) {
    p.reset(new (arena->allocate_object(sizeof(Process), alignof(Process))) Process(*this));
    p->in_arena = true;
  } else {
    p.reset(new Process(*this));
  }
  p->id = ProcId{static_cast<std::uint32_t>(procs_.size())};
  p->name = std::move(name);
  p->body = std::move(body);
  p->opts = opts;
  p->clock = NodeClock(opts.clock);
  p->storage.policy = opts.fsync;
  p->storage.fsync_period = opts.fsync_period;
  p->rng = rng_.stream("process/" + p->name);
  Process& ref = *p;
  procs_.push_back(std::move(p));
  saved_sp_.push_back(nullptr);
  deep_prefetch_ = procs_.size() >= kDeepWorld;
  if (!opts.daemon) ++live_;
  push_event(now_, EvKind::start, ref.id.value, 0);
  arm_fsync(ref);
  return ref.id;
}

void World::arm_fsync(Process& p) {
  if (p.storage.policy != FsyncPolicy::periodic || p.storage.fsync_period <= 0ns) return;
  schedule_fsync(p, p.clock.monotonic(now_) + p.storage.fsync_period);
}

void World::schedule_fsync(Process& p, Time local) {
  p.fsync_local = local;
  const std::uint64_t gen = ++p.fsync_gen;
  push(std::max(p.clock.true_time_at(local), now_), [this, &p, gen] {
    if (gen != p.fsync_gen || p.state == ProcState::crashed || p.state == ProcState::exited) return;
    if (!p.paused) p.storage.fsync();  // a stopped process's background fsync thread is stopped too
    arm_fsync(p);
  });
}

void World::start_fiber(Process& p) {
  if (p.state != ProcState::created) return;  // crashed, or a stale start of an incarnation already running
  if (p.paused) {
    p.pending_start = true;
    p.pending_since = now_;
    return;
  }
  p.state = ProcState::running;
  p.killed = false;
  p.wait_local = kTimeMax;
  p.wait_gen++;
  record(TraceKind::start, p.id, {}, 0, {},
         p.incarnation ? fmt::format("incarnation={}", p.incarnation) : "");
  std::size_t stack = p.opts.stack_size ? p.opts.stack_size : opts_.stack_size;
  p.fiber = ctx::fiber(
      std::allocator_arg,
      RecordingStack{stack, p.id.value, &p.stack_bottom, &p.stack_size, fibers_->arena.get()},
      [this, &p](ctx::fiber&& from) {
        landed(p, std::move(from));  // always from the scheduler's stack: starts are not handed off
        bool ended = false;
        try {
          p.body(p.context);
          ended = true;
        } catch (const ProcessKilled&) {
        } catch (...) {
          p.error = std::current_exception();
          ended = true;
        }
        if (ended) process_ended(p);
        from_ = &p;
        LOCKSIM_START_SWITCH(nullptr, main_stack_bottom, main_stack_size);
        return std::move(fibers_->main);
      });
  switch_to(p);
}

void World::switch_to(Process& p) {
  // On the scheduler's own stack. Control comes back here when a fiber blocks and does not hand off to
  // another one (see block()): from p, or from the last fiber of a chain of hand-offs that p started.
  Process* prev = current_;
  current_ = &p;
  from_ = nullptr;
  [[maybe_unused]] void* main_fake = nullptr;
  LOCKSIM_START_SWITCH(&main_fake, p.stack_bottom, p.stack_size);
  ctx::fiber back = std::move(p.fiber).resume();
  LOCKSIM_FINISH_SWITCH(main_fake, nullptr, nullptr);
  Process& last = *from_;
  keep_suspended(last, std::move(back));
  current_ = prev;
  if (handoff_error_) std::rethrow_exception(std::exchange(handoff_error_, nullptr));
  if (last.error) {
    auto e = last.error;
    last.error = nullptr;
    std::rethrow_exception(e);
  }
}

template <class Fiber>
void World::keep_suspended(Process& p, Fiber&& f) {
  p.fiber = std::move(f);
  // A suspended boost::context::fiber is one pointer: the stack address where jump_fcontext saved the
  // fiber's registers. Kept for prefetch_next.
  static_assert(sizeof(ctx::fiber) == sizeof(void*));
  std::memcpy(&saved_sp_[p.id.value], &p.fiber, sizeof(void*));
}

template <class Fiber>
LOCKSIM_ALWAYS_INLINE void World::landed(Process& p, Fiber&& from) {
  // Inside p's fiber, just resumed: keep the context that resumed us, the scheduler's or (a hand-off) the
  // fiber that blocked.
  [[maybe_unused]] const void* bottom = nullptr;
  [[maybe_unused]] std::size_t size = 0;
  LOCKSIM_FINISH_SWITCH(p.fake_stack, &bottom, &size);
  if (from_ == nullptr) {
    fibers_->main = std::move(from);
#if defined(LOCKSIM_ASAN)
    main_stack_bottom = bottom;
    main_stack_size = size;
#endif
  } else {
    keep_suspended(*from_, std::move(from));
  }
  current_ = &p;
}

void World::pause_here(Process& p) {
  p.pending_gen = ++p.wait_gen;
  p.pending_wake = true;
  p.pending_since = now_;
  block(p);
}

Process* World::run_to_switch() {
  // Inside a fiber that is blocking, during run_until: run the next events here, on its stack, as long as
  // they are deliveries and wakes, exactly as the scheduler's loop would (same checks, same order), and
  // return the process the first one to resume a fiber resumes. nullptr: the scheduler must take over
  // (another kind of event, or a reason to stop).
  current_ = nullptr;  // scheduler context
  while (const Event* next = next_to_run()) {
    if (static_cast<EvKind>(next->kind) != EvKind::deliver && static_cast<EvKind>(next->kind) != EvKind::wake)
      break;
    const Event ev = *next;
    queue_.drop_peeked();
    now_ = ev.at;
    ++events_;
    prefetch_next();
    Process* r = nullptr;
    try {
      r = static_cast<EvKind>(ev.kind) == EvKind::deliver ? deliver(ev.a) : wake(*procs_[ev.a], ev.b);
    } catch (...) {
      // A receive filter threw: not this fiber's doing. The scheduler rethrows it, as when it runs the
      // event itself.
      handoff_error_ = std::current_exception();
      return nullptr;
    }
    if (r != nullptr) return r;
  }
  return nullptr;
}

void World::block(Process& p) {
  // Inside p's fiber: give up control until a wake event resumes us. Inside run_until, the next events run
  // right here and control passes straight to the fiber they resume (one switch per event instead of two,
  // to the scheduler and back out); otherwise, or when the scheduler must take over, back to the scheduler.
  if (p.killed) [[unlikely]]
    went_on_after_its_end(p);
  p.state = ProcState::blocked;
  Process* next = handoff_ ? run_to_switch() : nullptr;
  if (next == &p) {  // its own delivery or timer: no switch at all
    current_ = &p;
    p.state = ProcState::running;
    return;
  }
  from_ = &p;
  ctx::fiber from;
  if (next != nullptr) {
    LOCKSIM_START_SWITCH(&p.fake_stack, next->stack_bottom, next->stack_size);
    from = std::move(next->fiber).resume();
  } else {
    LOCKSIM_START_SWITCH(&p.fake_stack, main_stack_bottom, main_stack_size);
    from = std::move(fibers_->main).resume();
  }
  landed(p, std::move(from));
  if (p.killed) throw ProcessKilled{};
  p.state = ProcState::running;
}

void World::went_on_after_its_end(Process& p) {
  // ProcessKilled is unwinding p's stack (a crash, or the world's end) and p waits again: a catch (...) in
  // its body did not rethrow it, or a destructor waits. Its fiber is being taken down, so nothing can go on
  // from here (this used to end in a segmentation fault somewhere later): say which process, and stop.
  std::fprintf(
      stderr,
      "locksim: process '%s' went on after its end (a crash, or the world's end): a catch (...) in its "
      "body did not rethrow what it caught, or a destructor waited; a process must let its end pass\n",
      p.name.c_str());
  std::abort();
}

Process* World::wake(Process& p, std::uint64_t gen) {
  if (gen != p.wait_gen || p.state != ProcState::blocked) return nullptr;
  if (p.paused) {
    p.pending_wake = true;
    p.pending_gen = gen;
    p.pending_since = now_;
    return nullptr;
  }
  return &p;
}

LOCKSIM_ALWAYS_INLINE Process* World::deliver(std::uint32_t slot) {
  // The message stays in its slot until a receive takes it; the mailbox holds the slot number.
  const Message& m = messages_.items[slot];
  Process& p = *procs_[m.to.value];
  if (p.state == ProcState::crashed || p.state == ProcState::exited || m.id < p.first_msg) {
    if (network_.options().refuse_when_down) [[unlikely]]
      return refuse(p, slot);
    record(TraceKind::drop, p.id, m.from, m.id, m.type,
           p.state == ProcState::exited ? "receiver exited" : "receiver crashed");
    messages_.drop(slot);
    return nullptr;
  }
  // A link cut now loses the packet, however the network looked when it left (the send checked too).
  if (network_.any_cut() && network_.blocked(m.from, m.to)) [[unlikely]]
    return cut_in_flight(slot);
  ++delivered_;
  record_of(TraceKind::deliver, p, m.from, m.id, m.type);
  const bool wanted = p.waiting_receive && (p.filter == nullptr || (*p.filter)(m));
  p.mailbox.push_back(slot);
  if (p.mailbox.size() > opts_.limits.max_mailbox) [[unlikely]] {
    mailbox_overflow_ = true;
    gate_ = 0;
  }
  if (wanted) {
    const std::uint64_t gen = p.wait_gen;
    p.waiting_receive = false;  // one wake is enough
    return wake(p, gen);
  }
  return nullptr;
}

Process* World::refuse(Process& p, std::uint32_t slot) {
  const Message& m = messages_.items[slot];
  const char* why = p.state == ProcState::exited ? "receiver exited" : "receiver crashed";
  const Process& host = p.host != nullptr ? *p.host : p;
  // A packet on a cut link never reaches the host; a host that is down answers nothing; a refusal is not
  // answered (its sender may be down too).
  if (network_.any_cut() && network_.blocked(m.from, m.to)) {
    return cut_in_flight(slot);  // held, the host answers when it gets it: at the heal
  } else if (host.host_down || is_refusal(m)) {
    record(TraceKind::drop, p.id, m.from, m.id, m.type, host.host_down ? "receiver's host down" : why);
  } else {
    record(TraceKind::drop, p.id, m.from, m.id, m.type,
           p.state == ProcState::exited ? "receiver exited: connection refused"
                                        : "receiver crashed: connection refused");
    send_refusal(p, m);
  }
  messages_.drop(slot);
  return nullptr;
}

void World::send_refusal(const Process& p, const Message& m) {
  Message r = Message::of(kConnectionRefusedType, ConnectionRefused{m.type});
  r.id = next_msg_++;
  r.reply_to = m.id;
  r.from = p.id;
  r.to = m.from;
  record(TraceKind::send, p.id, r.to, r.id, r.type, "by the host");
  const Fate fate = network_.decide(p.id, r.to, now_);
  if (fate.lost) {  // a reset is not retransmitted: one that meets a cut link is lost even when held
    record(TraceKind::drop, r.to, p.id, r.id, r.type, fate.held ? "partition" : fate.why);
  } else {  // (a duplicated reset is one reset: the first copy)
    const std::uint64_t dest = std::uint64_t{r.to.value} << 32;
    push_event(now_ + fate.delays[0], EvKind::deliver, messages_.put(std::move(r)), dest);
  }
}

std::uint64_t World::discard_send(Process& p, ProcId to, const Message& m) {
  const std::uint64_t id = next_msg_++;
  if (!shutting_down_)
    record(TraceKind::drop, to.value < procs_.size() ? to : ProcId{}, p.id, id, m.type, "sender crashed");
  return id;
}

void World::process_ended(Process& p) {
  p.state = ProcState::exited;
  record(TraceKind::exit, p.id);
  if (!p.opts.daemon && live_ > 0) --live_;
  gate_ = 0;  // perhaps the last live process: run_until looks
  if (!p.threads.empty()) [[unlikely]]
    end_threads_later(p);
}

void World::end_threads_later(Process& p) {
  // The main body returned: the process exits, and its threads with it (from scheduler context, at once).
  push(now_, [this, &p] { end_threads(p, false, {}); });
}

void World::kill_fiber(Process& p) {
  if (!p.fiber) return;
  if (p.state == ProcState::created) {  // never ran: nothing to unwind
    p.fiber = ctx::fiber{};
    return;
  }
  p.killed = true;
  switch_to(p);  // the block() inside throws ProcessKilled; the entry function returns
  p.killed = false;
}

// ---------------------------------------------------------------- running

template <int Below, int Above>
LOCKSIM_ALWAYS_INLINE void World::prefetch_event(const Event& e) {
  std::uint32_t proc = e.a;
  if (static_cast<EvKind>(e.kind) == EvKind::deliver) {
    proc = static_cast<std::uint32_t>(e.b >> 32);
    const char* m = reinterpret_cast<const char*>(&messages_.items[e.a]);
    __builtin_prefetch(m);
    __builtin_prefetch(m + 64);
  }
  if (static_cast<EvKind>(e.kind) == EvKind::callback) return;
  // The Process's first three lines: all the message path reads (the fourth on holds its name, body,
  // options and storage).
  const char* pr = reinterpret_cast<const char*>(procs_[proc].get());
  for (int line = 0; line < 3; ++line) __builtin_prefetch(pr + 64 * line);
  // Its fiber's stack, with intent to write: resuming pops the saved registers there, and the code it runs
  // writes frames and temporaries around them (a process that wakes in receive() and sends; with hand-off,
  // it then runs the next events below its own frames). The address comes from a dense table, not from the
  // cold Process.
  if (const char* sp = static_cast<const char*>(saved_sp_[proc])) {
#pragma GCC unroll 16
    for (int off = -Below; off < Above; off += 64) __builtin_prefetch(sp + off, 1);
  }
}

LOCKSIM_ALWAYS_INLINE void World::prefetch_next() {
  // With many processes, most events touch a Process and a message that are cold: start loading those of the
  // next events while this one runs (a hint only: a wrong guess costs nothing). peek() may move the queue's
  // floor to the next event's time; an event this one schedules before it is still run in order (see
  // sim/event_queue.hpp).
  if (const Event* next = queue_.peek()) {
    std::uint32_t proc = next->a;
    if (static_cast<EvKind>(next->kind) == EvKind::deliver) {
      proc = static_cast<std::uint32_t>(next->b >> 32);
      __builtin_prefetch(&messages_.items[next->a]);
    }
    if (static_cast<EvKind>(next->kind) != EvKind::callback) __builtin_prefetch(procs_[proc].get());
  }
  if (!deep_prefetch_) {
    // A world of a few thousand processes stays in the L2 and L3 caches: the event after next is early
    // enough, and looking further ahead costs more than it saves (8% of the kernel benchmark's 1,000
    // processes). The stack window: what a process resuming in receive() touches, from run_to_switch's
    // frame below the saved registers up through the body's frame above them. With that frame at 144 bytes
    // (208 before next_to_run), −128…+384 measured +5% over −256…+256 (13.42 against 12.81 M fiber events
    // per CPU second, 10 side-by-side pairs); −128…+320, +448 and +512, −64…+384 and −192…+384 at least as
    // fast, within noise of each other. −128…+448 covers the kernel benchmark's body frame; against −256…+256
    // it measured +0.7%, +1.0% and +5.4% in three sets of 30 pairs: a small gain.
    if (const Event* far = queue_.peek_hint(1)) prefetch_event<128, 448>(*far);
    return;
  }
  // A world too big for the caches: what its events touch comes from memory, and each address from a load
  // (a dense table's entry, then the Process or stack it points to) that misses too. So start earlier, in
  // two steps: the tables' entries and the message kTableAhead events ahead, the rest kDeepAhead ahead, by
  // when those entries are in cache. Memory-level parallelism is the limit here, so the stack window is
  // smaller below the saved registers. Measured on the scale benchmark's 100,000 clients for 60 s: 179-188
  // ns per message, against 202 with the small-world prefetch.
  if (const Event* e = queue_.peek_hint(kTableAhead)) {
    std::uint32_t proc = e->a;
    if (static_cast<EvKind>(e->kind) == EvKind::deliver) {
      proc = static_cast<std::uint32_t>(e->b >> 32);
      __builtin_prefetch(&messages_.items[e->a]);
    }
    if (static_cast<EvKind>(e->kind) != EvKind::callback) {
      __builtin_prefetch(&procs_[proc]);
      __builtin_prefetch(&saved_sp_[proc]);
    }
  }
  if (const Event* e = queue_.peek_hint(kDeepAhead)) prefetch_event<256, 512>(*e);
}

LOCKSIM_ALWAYS_INLINE void World::run_next() {
  run_event(queue_.pop());
}

LOCKSIM_ALWAYS_INLINE void World::run_event(const Event& ev) {
  now_ = ev.at;
  ++events_;
  prefetch_next();
  dispatch(ev);
}

bool World::step() {
  if (queue_.empty()) return false;
  run_next();
  return true;
}

void World::open_gate() {
  const bool may_stop =
      stop_requested_ || mailbox_overflow_ || (live_ == 0 && run_forever_ && !procs_.empty());
  gate_ = may_stop ? 0 : opts_.limits.max_events;
}

LOCKSIM_ALWAYS_INLINE const World::Event* World::next_to_run() {
  if (events_ >= gate_) return nullptr;
  const Event* next = queue_.peek();
  return next != nullptr && next->at <= horizon_ ? next : nullptr;
}

RunResult World::run_until(Time until) {
  stop_requested_ = false;
  RunResult r;
  horizon_ = std::min(until, opts_.limits.max_time);
  run_forever_ = until == kTimeMax;
  // Fibers may hand control to each other only inside this loop (not in step(), which runs one event).
  struct Handoff {
    bool& on;
    explicit Handoff(bool& b) : on(b) { on = true; }
    ~Handoff() { on = false; }
  } handoff(handoff_);
  open_gate();
  for (;;) {
    // The common case in one test. When it fails, the checks below find the reason in their order of
    // precedence.
    if (const Event* next = next_to_run()) [[likely]] {
      const Event ev = *next;
      queue_.drop_peeked();
      run_event(ev);
      continue;
    }
    if (stop_requested_) {
      r.reason = StopReason::stopped;
      break;
    }
    if (mailbox_overflow_) {
      r.reason = StopReason::mailbox_limit;
      record(TraceKind::limit, {}, {}, 0, "mailbox", fmt::format("max={}", opts_.limits.max_mailbox));
      break;
    }
    if (live_ == 0 && !procs_.empty() && until == kTimeMax) {
      r.reason = StopReason::done;
      break;
    }
    if (queue_.empty()) {
      r.reason = StopReason::idle;
      break;
    }
    const Time next = queue_.top().at;
    if (next > until) {
      now_ = until;
      r.reason = StopReason::until;
      break;
    }
    if (next > opts_.limits.max_time) {
      now_ = opts_.limits.max_time;
      r.reason = StopReason::time_limit;
      record(TraceKind::limit, {}, {}, 0, "time", fmt::format("max={}", format_time(opts_.limits.max_time)));
      break;
    }
    if (events_ >= opts_.limits.max_events) {
      r.reason = StopReason::event_limit;
      record(TraceKind::limit, {}, {}, 0, "events", fmt::format("max={}", opts_.limits.max_events));
      break;
    }
    open_gate();  // it was closed for nothing (a process ended, say, but another is live): open it again
    run_next();
  }
  r.end = now_;
  r.events = events_;
  return r;
}

RunResult World::run() {
  return run_until(kTimeMax);
}

// ---------------------------------------------------------------- lookups

const std::string& World::name(ProcId p) const {
  static const std::string none = "-";
  return p.valid() && p.value < procs_.size() ? procs_[p.value]->name : none;
}

ProcId World::find(std::string_view n) const {
  auto it = names_.find(n);
  return it == names_.end() ? ProcId{} : it->second;
}

ProcState World::state(ProcId p) const {
  return procs_[p.value]->state;
}
bool World::paused(ProcId p) const {
  return procs_[p.value]->paused;
}
NodeClock& World::clock(ProcId p) {
  return procs_[p.value]->clock;
}
Storage& World::storage(ProcId p) {
  return procs_[p.value]->storage;
}
Time World::monotonic(ProcId p) const {
  return procs_[p.value]->clock.monotonic(now_);
}
Time World::wall(ProcId p) const {
  return procs_[p.value]->clock.wall(now_);
}

}  // namespace locksim
