#pragma once
/// The world: one event queue ordered by time, then class, then insertion order (or a seeded tie-break),
/// processes as fibers, node clocks, the network, faults and the trace. Single-threaded; many worlds may live
/// in one program (nothing global).
///
/// Same-instant events. At one instant every world callback (a fault of the plan, the end of a pause or of
/// a partition, a planned restart, a periodic fsync, World::schedule) runs before every process step (a
/// process's start, a wake from a sleep or a timeout, a delivery), whichever was queued first: the class is
/// the top bit of the event's key (World::kProcessStep). So a fault at t takes effect before anything a
/// process does at t: a partition at 0 s cuts the messages sent at 0 s, and a packet arriving at t on a link
/// cut at t is lost (the link is looked at when the packet is sent and again when it arrives); a pause at t
/// stops a process before it runs at t; a heal at t lets a packet arriving at t through. A callback queued
/// at t by a process step of t (a fault a trigger fires, a crash asked for from inside a fiber) runs after
/// that step and before the steps of t still queued. Within a class the order is the insertion order (the
/// plan's order, for faults), or with shuffle_ties a seeded shuffle.
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "locksim/sim/any.hpp"
#include "locksim/sim/clock.hpp"
#include "locksim/sim/event_queue.hpp"
#include "locksim/sim/faults.hpp"
#include "locksim/sim/memory.hpp"
#include "locksim/sim/message.hpp"
#include "locksim/sim/network.hpp"
#include "locksim/sim/random.hpp"
#include "locksim/sim/storage.hpp"
#include "locksim/sim/time.hpp"
#include "locksim/sim/trace.hpp"

namespace locksim {

class World;
class Process;

/// Thrown inside a process's fiber to unwind it when it crashes or the world ends. Never catch it (it is not
/// a std::exception); a catch (...) must rethrow it (a process that goes on after it stops the program).
struct ProcessKilled {};

inline constexpr Duration kForever = kTimeMax;

class Context;
/// What a process (or a thread of it) runs.
using Body = std::function<void(Context&)>;

/// The narrow interface code running inside a world sees: what a real process has.
class Context {
 public:
  Context(World& w, Process& p) : world_(w), proc_(p) {}
  ProcId self() const;
  const std::string& name() const;
  /// This node's monotonic clock.
  Time now() const;
  /// This node's wall clock (may jump).
  Time wall() const;
  /// Sleep for d on this node's monotonic clock.
  void sleep(Duration d);
  /// Send a message; returns its id. A process being crashed sends nothing: a send (a reply, a call) from a
  /// destructor run by the crash's unwinding is discarded (traced as a drop, "sender crashed").
  std::uint64_t send(ProcId to, Message m);
  /// Reply to a request (sets reply_to and the destination).
  std::uint64_t reply(const Message& request, Message m);
  /// Next message (in arrival order) for which `filter` is true, or nothing after `timeout` on this node's
  /// clock.
  std::optional<Message> receive(Duration timeout, const std::function<bool(const Message&)>& filter = {});
  /// The next message, however long it takes (the same as receive(kForever), without building an empty
  /// filter at every call).
  std::optional<Message> receive();
  /// Send a request and wait for its reply (other messages stay in the mailbox). A call while the process is
  /// being crashed returns nothing at once (its request was discarded).
  std::optional<Message> call(ProcId to, Message request, Duration timeout);
  /// Log a note to the trace; fault triggers may fire on it (and may pause this process right here).
  void note(std::string_view label, std::string detail = {});
  /// This process's random stream.
  Rng& rng();
  /// This process's persistent storage (survives crashes according to its fsync policy); a thread's is its
  /// process's (one disk per host). Out of line: inlined, the thread test grew the callers (a Redis node's
  /// loop was no longer inlined, +5% instructions per explore run).
  Storage& storage();
  /// Restart count: 0 for the first incarnation (a thread: its process's).
  std::uint32_t incarnation() const;
  /// Look another process up by name (invalid ProcId if there is none).
  ProcId lookup(std::string_view name) const;

  // Threads (sim/threads.cpp): a process may run more fibers than its main one, as an OS process runs
  // threads.
  /// Start a thread of this process running `body`: a fiber with its own mailbox and trace name
  /// ("client1/renew" for `name` "renew" in client1) that shares the process's fate exactly as an OS thread
  /// does. A pause of the process stops all its threads (a GC pause is stop-the-world); a crash kills them
  /// all; a restart runs only the main body again; the main body returning ends the threads too; the
  /// process's clock (its faults, its drift) and storage are theirs; a partition, link setting or delay spike
  /// naming the process applies to their messages; a fault trigger naming the process fires on their notes,
  /// sends and receives. A thread's own messages (sends, replies to them) are its own: another fiber of the
  /// process does not see them. It starts after the current step; starting a thread whose earlier run ended
  /// (or died with a crash) starts it again under the same name and id. Returns its id.
  ProcId spawn_thread(std::string name, Body body);
  /// The process this fiber belongs to: self() for a process's main fiber, its process for a thread.
  ProcId process() const;
  /// Sleep for at most `d` on this node's clock (kForever: until notified); ends early when another fiber of
  /// this process calls notify() on this one (a condition variable's wait). True if it was notified.
  bool wait_notified(Duration d);
  /// End fiber `t`'s wait_notified now (nothing if it is not waiting in one). `t` must be a fiber of this
  /// process (one of its threads or its main fiber): a process cannot poke another process's threads.
  void notify(ProcId t);

 private:
  /// Takes the message in mailbox place i out: the receive's trace record, triggers, a pause they fire.
  std::optional<Message> take(std::size_t i);
  World& world_;
  Process& proc_;
};

struct ProcessOptions {
  ClockOptions clock;
  FsyncPolicy fsync = FsyncPolicy::never;
  Duration fsync_period{1s};
  /// A daemon (a server) does not keep the world running: a run is done when every non-daemon process has
  /// ended.
  bool daemon = false;
  std::size_t stack_size = 0;  ///< 0 = the world's default
};

struct Limits {
  std::uint64_t max_events = 50'000'000;
  Time max_time = Time{std::chrono::hours(24 * 365)};
  std::size_t max_processes = 1'000'000;
  std::size_t max_mailbox = 1'000'000;  ///< messages waiting in one mailbox before the run stops
};

struct WorldOptions {
  std::uint64_t seed = 1;
  NetworkOptions network;
  Limits limits;
  std::size_t stack_size = 64 * 1024;
  /// Fiber stacks, and the Processes, from an arena of transparent huge pages (sim/memory.hpp;
  /// madvise(MADV_HUGEPAGE), in effect where /sys/kernel/mm/transparent_hugepage/enabled is `madvise` or
  /// `always`). For worlds of tens of thousands of processes, where each resume of a cold process otherwise
  /// misses the TLB on its own stack page: 100,000 clients of redlock-churn take 145 ns per message against
  /// 183 (bench/README.md). Every stack is then resident in full, so pair it with a small stack_size (100,000
  /// stacks of 16 KiB: ~1.7 GiB) and a workload known to fit: no kind of stack has a guard page, and a
  /// sanitizer build needs several times more stack (16 KiB overflows under AddressSanitizer). Off by
  /// default: 64 KiB malloc'ed stacks, of which only the touched pages cost memory. Where the stacks live
  /// reaches nothing a run does: the trace is the same either way.
  bool huge_page_stacks = false;
  bool keep_trace = true;
  /// At most this many trace events are kept in memory (reports show them; the hash covers all of them).
  std::uint64_t max_kept_events = Trace::kDefaultMaxKept;
  /// Break ties between events at the same time and of the same class (world callbacks still come before
  /// process steps) with a seeded random key instead of insertion order, to explore other interleavings
  /// (still deterministic for a given seed).
  bool shuffle_ties = false;
};

enum class StopReason : std::uint8_t {
  idle,           ///< no events left
  done,           ///< every non-daemon process ended
  until,          ///< run_until reached its time
  stopped,        ///< World::stop() was called
  time_limit,     ///< limits.max_time reached
  event_limit,    ///< limits.max_events reached
  mailbox_limit,  ///< a mailbox exceeded limits.max_mailbox
};
std::string_view to_string(StopReason r);

struct RunResult {
  StopReason reason = StopReason::idle;
  Time end{0};
  std::uint64_t events = 0;
  bool limit_hit() const {
    return reason == StopReason::time_limit || reason == StopReason::event_limit ||
           reason == StopReason::mailbox_limit;
  }
};

enum class ProcState : std::uint8_t { created, running, blocked, exited, crashed };

class World {
 public:
  explicit World(WorldOptions opts = {});
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  /// Extra bytes above a fiber stack of process `index` (its cache colour; sim/world.cpp says why): none for
  /// the first 64, then (index mod 64) KiB. The kernel benchmark's probe uses the same stacks.
  static constexpr std::size_t stack_colour(std::uint32_t index) {
    return index < 64 ? 0 : std::size_t{index % 64} * 1024;
  }

  /// Create a process; it starts at the current time (its first step is an event).
  ProcId spawn(std::string name, Body body, ProcessOptions opts = {});
  /// Start a thread of process `process` (Context::spawn_thread says what a thread shares). Kernel actions
  /// (pause, resume, crash, restart, clock changes, partition sides) given a thread's id act on its process.
  ProcId spawn_thread(ProcId process, std::string name, Body body);
  /// The process `p` belongs to: p itself, or the process thread p is a thread of.
  ProcId process_of(ProcId p) const;
  /// The threads of process `p`, in the order they were first started (ended ones too).
  std::vector<ProcId> threads_of(ProcId p) const;

  /// Run until no events are left, every non-daemon process ended, stop() or a limit.
  RunResult run();
  /// Run events with time <= t, then set the clock to t.
  RunResult run_until(Time t);
  /// Run one event; false if there was none.
  bool step();
  /// Ask the current run to stop after the event in progress.
  void stop() {
    stop_requested_ = true;
    gate_ = 0;
  }

  Time now() const { return now_; }
  /// True while the world is being destroyed (fibers are unwound then, but nothing crashed).
  bool shutting_down() const { return shutting_down_; }
  std::uint64_t seed() const { return opts_.seed; }
  Trace& trace() { return trace_; }
  const Trace& trace() const { return trace_; }
  Network& network() { return network_; }
  std::uint64_t events_processed() const { return events_; }
  std::uint64_t messages_delivered() const { return delivered_; }

  std::size_t process_count() const { return procs_.size(); }
  const std::string& name(ProcId p) const;
  ProcId find(std::string_view name) const;
  ProcState state(ProcId p) const;
  bool paused(ProcId p) const;
  NodeClock& clock(ProcId p);
  Storage& storage(ProcId p);
  Time monotonic(ProcId p) const;
  Time wall(ProcId p) const;

  /// Schedule a world-level callback (observers, scenario drivers); runs in scheduler context.
  void schedule(Time at, std::function<void()> fn);

  // Kernel actions: used by the fault plan, usable directly by scenarios and tests.
  void pause(ProcId p, Duration d);
  void resume(ProcId p);
  void crash(ProcId p, bool power_loss);
  void restart(ProcId p);
  void clock_jump(ProcId p, Duration by);
  void clock_drift(ProcId p, std::int64_t ppm);
  /// Cut the links between a and b (a -> b only if one_way); the trace record names the partition ("#2 a |
  /// b"). Partitions overlap: a link stays cut while any partition in force cuts it.
  PartitionId partition(const std::vector<ProcId>& a, const std::vector<ProcId>& b, bool one_way);
  /// End partition `id` only (recorded as "heal" with its name), if it is still in force.
  void heal(PartitionId id);
  /// End every partition (recorded as "heal", "all").
  void heal();

  /// Add a fault to the plan (timed faults are scheduled now; triggered ones armed). Throws
  /// std::invalid_argument for a repetition Repeat::check refuses (unbounded, or more than
  /// Repeat::kMaxFirings firings).
  void add_fault(Fault f);
  const std::vector<Fault>& faults() const { return faults_; }
  /// The durations fault i drew from its Fault::duration_dist, one per firing that took effect, in order
  /// (empty for a fault without one). The draws a weighted estimator needs (scenarios/risk.hpp).
  const std::vector<Duration>& drawn_durations(std::size_t i) const { return fault_state_.at(i).drawn; }
  /// How many firings of fault i took effect (skipped ones, whose role named nobody, not counted).
  std::uint32_t applied_firings(std::size_t i) const { return fault_state_.at(i).applied; }

  /// Observe notes logged by processes (ground-truth recorders use this). Runs synchronously inside the
  /// fiber.
  void on_note(std::function<void(ProcId, std::string_view label, std::string_view detail)> fn) {
    note_observers_.push_back(std::move(fn));
  }

 private:
  friend class Context;
  friend class Process;
  /// A queue entry (sim/event_queue.hpp): plain data, 32 bytes. `kind` is an EvKind; `a`: wake/start: the
  /// process, deliver: the message slot, callback: the callback slot; `b`: wake: the wait generation,
  /// deliver: receiver << 32 (whether the receiver restarted since is in the message's id:
  /// Process::first_msg). `key`: the event's class in the top bit (kProcessStep: the same-instant rule at
  /// the top of this file), below it the insertion sequence, or with shuffle_ties 63 seeded random bits.
  enum class EvKind : std::uint32_t { wake, deliver, callback, start };
  static constexpr std::uint64_t kProcessStep = std::uint64_t{1} << 63;  ///< key class: after callbacks
  using Event = QueuedEvent;
  /// Allocates on 64-byte boundaries: a slab of 96-byte messages then has every slot in exactly two cache
  /// lines. (An alignas(32) on Message did the same, but made every function with a Message on its stack
  /// realign the stack pointer and keep a frame pointer: 4% of the kernel benchmark.) Big arrays (the slab
  /// and the dense per-process tables of a world of 100,000 processes) on huge pages: sim/memory.hpp.
  template <class T>
  struct LineAligned {
    using value_type = T;
    LineAligned() = default;
    template <class U>
    LineAligned(const LineAligned<U>&) noexcept {}
    T* allocate(std::size_t n) { return static_cast<T*>(allocate_lines(n * sizeof(T))); }
    void deallocate(T* p, std::size_t n) noexcept { free_lines(p, n * sizeof(T)); }
    friend bool operator==(const LineAligned&, const LineAligned&) { return true; }
  };
  /// A slab with a free list: stable slot numbers for messages and callbacks waiting in the queue.
  template <class T, class Alloc = std::allocator<T>>
  struct Slab {
    std::vector<T, Alloc> items;
    std::vector<std::uint32_t> free;
    LOCKSIM_ALWAYS_INLINE std::uint32_t put(T&& v) {
      if (!free.empty()) {
        const std::uint32_t i = free.back();
        free.pop_back();
        items[i] = std::move(v);
        return i;
      }
      items.push_back(std::move(v));
      return static_cast<std::uint32_t>(items.size() - 1);
    }
    T take(std::uint32_t i) {
      T v = std::move(items[i]);
      free.push_back(i);
      return v;
    }
    /// Give slot i back once its item has been moved out.
    void release(std::uint32_t i) { free.push_back(i); }
    void drop(std::uint32_t i) {
      items[i] = T{};
      free.push_back(i);
    }
  };

  void push_event(Time at, EvKind kind, std::uint32_t a, std::uint64_t b);
  void dispatch(const Event& ev);
  void run_next();                  ///< pop the next event and run it (the queue must not be empty)
  void run_event(const Event& ev);  ///< run an event taken out of the queue
  /// The next event if run_until goes on with it without a second look (the gate is open and the event is
  /// within the run's time bounds), else nullptr: then run_until checks every reason to stop in order.
  const Event* next_to_run();
  /// Sets gate_: closed when a reason to stop may hold (stop(), a mailbox overflow, no live process left in
  /// a run to the end), else the event limit.
  void open_gate();
  void push(Time at, std::function<void()> fn);
  void start_fiber(Process& p);
  void switch_to(Process& p);
  /// The process the wake resumes now, or nullptr.
  Process* wake(Process& p, std::uint64_t gen);
  void block(Process& p);       // called inside p's fiber
  void pause_here(Process& p);  // inside p's fiber: p was just paused; stop until it resumes
  /// The process the delivery resumes now, or nullptr.
  Process* deliver(std::uint32_t slot);
  Process* run_to_switch();  // inside a blocking fiber: run events until one resumes a fiber
  struct Fibers;             // the scheduler's suspended context (Boost.Context stays out of this header)
  template <class Fiber>
  void keep_suspended(Process& p, Fiber&& f);
  template <class Fiber>
  void landed(Process& p, Fiber&& from);
  void prefetch_next();
  template <int Below, int Above>
  void prefetch_event(const Event& e);  ///< what e will touch: its message, Process, stack top
  void record(TraceKind k, ProcId p, ProcId peer = {}, std::uint64_t msg = 0, std::string_view label = {},
              std::string_view detail = {});
  /// record() for an event of a process at hand (the message path: send, deliver, receive), inline.
  void record_of(TraceKind k, const Process& p, ProcId peer, std::uint64_t msg, const MsgType& label,
                 std::string_view detail = {});
  /// Firing k of planned fault i: resolves its targets (Fault::targets_at_fire), applies it, and queues the
  /// next firing of its repetition.
  void fire_planned(std::size_t i);
  /// Calls fault i's target callback on g (its copy) with the fault's own pick stream; a firing that names
  /// no process where the kind needs one is skipped.
  Resolution resolve(std::size_t i, Fault& g);
  /// A firing whose targets are already known (resolved at a trigger, to act at once), then the next one.
  void fire_resolved(std::size_t i, const Fault& f, const Resolution& r);
  /// Queues firing `fired` of fault i at its nominal time plus its jitter, unless the repetition is over.
  void schedule_firing(std::size_t i);
  /// Applies a fault with known targets; `detail` is added to its trace records.
  void fire(const Fault& f, std::string_view detail = {});
  void fire_one(const Fault& f, ProcId target, std::string_view detail);
  void check_triggers(Trigger::Kind kind, ProcId p, std::string_view label) {
    if (have_triggers_[static_cast<int>(kind)]) match_triggers(kind, p, label);
  }
  void match_triggers(Trigger::Kind kind, ProcId p, std::string_view label);
  void process_ended(Process& p);
  /// The process of `id` (for a thread's id, its process): kernel actions act on a whole process.
  Process& process_ref(ProcId id) { return process_ref(*procs_[id.value]); }
  static Process& process_ref(Process& p);
  /// A process lost its volatile state (a crash, or a thread dying with its process): mailbox, waits,
  /// pause.
  void lose_volatile(Process& p);
  /// End process h's threads still alive: with its crash (`crashed`: traced as their crash) or because its
  /// main body returned (traced as their exit).
  void end_threads(Process& h, bool crashed, std::string_view detail);
  [[gnu::cold, gnu::noinline]] void end_threads_later(Process& h);
  /// A pause of p ended: the start or wake it missed.
  void wake_after_pause(Process& p);
  /// A send of a process whose stack is unwinding (ProcessKilled: a crash, or the world's end): a killed
  /// process sends nothing. Traced as a drop, "sender crashed" (not at the world's end); returns its id.
  /// A message for a process that is not running, with refuse_when_down on: its host answers
  /// "conn-refused" (sim/network.hpp), unless the host is down or the link is cut.
  [[gnu::cold, gnu::noinline]] Process* refuse(Process& p, std::uint32_t slot);
  /// p's host answers message m, which it will not take, with a "conn-refused" message (refuse()).
  void send_refusal(const Process& p, const Message& m);

  // Messages held by cut links (NetworkOptions::cut_messages = held; sim/held.cpp).
  /// Keep m, which met a cut link, until the link opens; `why` says where it met the cut (the trace's
  /// detail).
  [[gnu::cold, gnu::noinline]] void hold(Message&& m, std::string_view why);
  /// The message in `slot` arrived on a cut link: lost ("partition in flight"), or held when the network
  /// holds what meets a cut (but a refusal even then: a reset is not retransmitted).
  [[gnu::cold, gnu::noinline]] Process* cut_in_flight(std::uint32_t slot);
  /// The links `opened` opened again: their held messages go out, each link's in the order they were sent.
  [[gnu::cold, gnu::noinline]] void release_held(const Network::Links& opened);
  /// Why held message m cannot go out at a heal (its connection is gone: an end crashed or restarted since
  /// it was sent), or nullptr.
  const char* connection_reset(const Message& m);
  [[gnu::cold, gnu::noinline]] std::uint64_t discard_send(Process& p, ProcId to, const Message& m);
  void kill_fiber(Process& p);
  [[noreturn, gnu::cold]] static void went_on_after_its_end(Process& p);
  void arm_fsync(Process& p);
  /// The periodic fsync at the true time p's monotonic clock reads `local` (re-armed on a drift change).
  void schedule_fsync(Process& p, Time local);
  /// p's clock drift changed: its sleep or receive timeout, and its periodic fsync, wait for a reading of its
  /// monotonic clock, which now comes at another true time: arm them again for it.
  void rearm_local_deadlines(Process& p);

  WorldOptions opts_;
  Rng rng_;
  Rng tie_rng_;
  Trace trace_;
  Network network_;
  EventQueue queue_;
  Slab<Message, LineAligned<Message>>
      messages_;  ///< messages in flight and in mailboxes (a mailbox holds slot numbers)
  Slab<std::function<void()>> callbacks_;
  std::uint64_t seq_ = 0;
  Time now_{0};
  std::uint64_t events_ = 0;
  std::uint64_t delivered_ = 0;
  std::uint64_t next_msg_ = 1;
  std::size_t live_ = 0;  // non-daemon processes not yet ended
  bool stop_requested_ = false;
  /// run_until runs events without a second look while events_ < gate_: the event limit, or 0 once
  /// something happened that may be a reason to stop (stop(), a mailbox overflow, a process ended or
  /// crashed). One comparison per event instead of four; run_until's slow path then checks each reason and
  /// opens the gate again if none holds.
  std::uint64_t gate_ = 0;
  bool shutting_down_ = false;
  bool mailbox_overflow_ = false;
  Process* current_ = nullptr;
  Process* from_ = nullptr;  ///< the fiber being suspended by the switch in progress (nullptr: the scheduler)
  std::unique_ptr<Fibers> fibers_;
  std::exception_ptr handoff_error_;  ///< thrown by an event a blocking fiber ran; rethrown by the scheduler
  bool handoff_ = false;              ///< inside run_until: a blocking fiber may run the next events itself
  bool run_forever_ = false;          ///< run_until(kTimeMax): the run is done when no live process is left
  Time horizon_{0};                   ///< run_until's last time: min(until, limits.max_time)
  /// Destroys a Process, and frees it unless it lives in the huge-page arena (WorldOptions::huge_page_stacks;
  /// the memory goes with the arena). Stateless (Process::in_arena says which): procs_'s entries stay one
  /// pointer each.
  struct ProcessDelete {
    void operator()(Process* p) const noexcept;
  };
  std::vector<std::unique_ptr<Process, ProcessDelete>> procs_;
  std::vector<const void*, LineAligned<const void*>>
      saved_sp_;                ///< per process, dense: where its suspended fiber saved its registers
  bool deep_prefetch_ = false;  ///< a world too big for the caches: prefetch further ahead (prefetch_next)
  std::map<std::string, ProcId, std::less<>> names_;
  std::vector<Fault> faults_;
  std::map<PartitionId, std::string> partition_names_;  ///< partitions in force: their trace names
  /// Messages held by cut links, by directed link between hosts (as Network::blocked() looks at it), in the
  /// order they met the cut (released in the order they were sent: by id).
  std::map<std::pair<ProcId, ProcId>, std::vector<Message>> held_;
  /// Per planned fault: how its trigger and repetition stand, and its own random streams (made when first
  /// needed: a fault with no jitter and no picks draws nothing and derives nothing).
  struct FaultState {
    std::uint32_t hits = 0;   ///< trigger events matched so far
    std::uint32_t fired = 0;  ///< firings queued or done
    Time first{0};            ///< nominal time of the first firing
    std::optional<Rng> jitter_rng, pick_rng, duration_rng, period_rng, extra_rng;
    Time nominal{0};  ///< a drawn period (Repeat::every_dist): the nominal time of the last firing queued
    std::uint32_t applied = 0;    ///< firings that took effect
    std::vector<Duration> drawn;  ///< the durations drawn from duration_dist, in firing order
  };
  std::vector<FaultState> fault_state_;
  bool have_triggers_[4] = {false, false, false, false};
  std::vector<std::function<void(ProcId, std::string_view, std::string_view)>> note_observers_;
};

}  // namespace locksim

#include "locksim/sim/process.hpp"  // the message path, inline
