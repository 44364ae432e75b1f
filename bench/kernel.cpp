// Kernel benchmark: events per second of the world against bare probes of its two ingredients (a binary heap
// of events, a Boost.Context fiber switch), and the memory of a world of 10,000 sleeping processes.
#include <fmt/format.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <boost/context/fiber.hpp>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench.hpp"
#include "locksim/sim/world.hpp"

namespace locksim {
namespace {

namespace bctx = boost::context;
using Clock = std::chrono::steady_clock;  // bench/ only: wall time of a measurement

struct Sizes {
  std::uint64_t timer_events = 3'000'000;
  std::uint64_t fiber_events = 2'000'000;
  std::uint64_t probe_events = 20'000'000;
  int processes = 1000;
  int rss_processes = 10'000;
  int repeats = 3;  // best of
};

/// Wall time (steady_clock) by default; this process's CPU time with --cpu-time, for a machine shared with
/// other work, where wall time measures the other work too.
bool g_cpu_time = false;
/// Where a probe leaves a result that must be computed (the traced probe's hash).
volatile std::uint64_t g_sink = 0;

struct Stamp {
  Clock::time_point wall;
  double cpu;
};

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

Stamp stamp() {
  return {Clock::now(), cpu_seconds()};
}

double seconds_since(const Stamp& start) {
  if (g_cpu_time) return cpu_seconds() - start.cpu;
  return std::chrono::duration<double>(Clock::now() - start.wall).count();
}

/// Runs `w` in slices of simulated time until it has processed `events` more events; returns events per
/// second.
double run_events(World& w, std::uint64_t events) {
  const std::uint64_t first = w.events_processed();
  const auto start = stamp();
  while (w.events_processed() - first < events) w.run_until(w.now() + 10ms);
  const double s = seconds_since(start);
  return static_cast<double>(w.events_processed() - first) / s;
}

WorldOptions fast_world() {
  WorldOptions o;
  o.seed = 1;
  o.keep_trace = false;
  o.limits.max_events = ~std::uint64_t{0};
  return o;
}

/// `processes` daemons sleeping in a loop for slightly different times.
double timer_bench(const Sizes& z) {
  World w(fast_world());
  for (int i = 0; i < z.processes; ++i) {
    w.spawn(fmt::format("sleeper{}", i),
            [](Context& c) {
              const Duration period = 1ms + Duration{c.rng().below(1000)};
              for (;;) c.sleep(period);
            },
            {.daemon = true});
  }
  w.run_until(0ns);  // every process started and asleep
  return run_events(w, z.timer_events);
}

/// `processes` daemons, each repeatedly sending to a random peer and receiving (one message per process in
/// flight on average, so nobody starves).
double fiber_bench(const Sizes& z) {
  WorldOptions o = fast_world();
  o.network.defaults.delay = DelayDist::uniform_of(500us, 1500us);
  World w(o);
  const auto n = static_cast<std::uint64_t>(z.processes);
  for (int i = 0; i < z.processes; ++i) {
    w.spawn(fmt::format("peer{}", i),
            [n](Context& c) {
              for (;;) {
                c.send(ProcId{static_cast<std::uint32_t>(c.rng().below(n))}, Message{.type = "m"});
                c.receive();
              }
            },
            {.daemon = true});
  }
  w.run_until(0ns);
  return run_events(w, z.fiber_events);
}

/// The same shape as the world's event (time, tie, sequence, kind, two arguments: 40 bytes of plain data) in
/// a bare std binary heap of `processes` pending events: pop the earliest, run it, push its successor.
double probe_timer_bench(const Sizes& z) {
  struct Event {
    Time at;
    std::uint64_t tie;
    std::uint64_t seq;
    std::uint32_t kind;
    std::uint32_t a;
    std::uint64_t b;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      if (a.at != b.at) return a.at > b.at;
      if (a.tie != b.tie) return a.tie > b.tie;
      return a.seq > b.seq;
    }
  };
  std::vector<Event> heap;
  std::uint64_t seq = 0, ran = 0;
  Rng rng(1);
  for (int i = 0; i < z.processes; ++i) {
    heap.push_back(Event{Duration{rng.below(1'000'000)}, 0, seq++, 0, static_cast<std::uint32_t>(i), 0});
    std::push_heap(heap.begin(), heap.end(), Later{});
  }
  const auto start = stamp();
  for (std::uint64_t i = 0; i < z.probe_events; ++i) {
    std::pop_heap(heap.begin(), heap.end(), Later{});
    const Event ev = heap.back();
    heap.pop_back();
    ran += ev.kind + 1;
    heap.push_back(Event{ev.at + 1ms + Duration{i & 1023}, 0, seq++, 0, ev.a, ev.b});
    std::push_heap(heap.begin(), heap.end(), Later{});
  }
  const double s = seconds_since(start);
  if (ran != z.probe_events)
    std::fprintf(stderr, "probe_timer: ran %llu\n", static_cast<unsigned long long>(ran));
  return static_cast<double>(z.probe_events) / s;
}

/// The world's fiber stacks (sim/world.cpp): malloc'ed, the top shifted by World::stack_colour(index) so that
/// the hot top of each stack does not fall into the same cache sets as every other one's. The probe gets the
/// same stacks: it stands for the machinery the kernel cannot do without, at its best (with plain
/// fixedsize_stack stacks it is ~10% slower in the default build, which would flatter kernel_vs_probe).
struct ColouredStack {
  std::size_t size;
  std::size_t colour;
  bctx::stack_context allocate() {
    void* vp = std::malloc(size + colour);
    if (vp == nullptr) throw std::bad_alloc();
    bctx::stack_context sc;
    sc.size = size + colour;
    sc.sp = static_cast<char*>(vp) + sc.size;
    return sc;
  }
  void deallocate(bctx::stack_context& sc) noexcept { std::free(static_cast<char*>(sc.sp) - sc.size); }
};

/// The bare machinery of one fiber event, nothing else: pop the earliest entry of a binary heap of plain
/// (time, sequence, fiber) events, resume that fiber (and switch back), push its next event. This is what the
/// kernel cannot do without per event; kernel_vs_probe says how much the rest (messages, mailboxes, clocks,
/// trace hashing, fault triggers) costs on top.
/// `Traced`: the probe plus the trace the world keeps of a delivered message, the three canonical records
/// (send, deliver, receive) written into the kernel's own Trace and hashed, nothing kept. The world cannot
/// run without them (they are its trace hash and the history its checker reads), so the traced probe is the
/// bare machinery of a world's fiber event; kernel_vs_traced_probe says how far the kernel is from it. The
/// goal figure stays kernel_vs_probe.
template <bool Traced>
double probe_fiber_bench(const Sizes& z) {
  struct Ev {
    std::int64_t at;
    std::uint64_t seq;
    std::uint32_t fiber;
  };
  struct Later {
    bool operator()(const Ev& a, const Ev& b) const { return a.at != b.at ? a.at > b.at : a.seq > b.seq; }
  };
  bool stop = false;
  std::uint64_t ran = 0;
  std::vector<bctx::fiber> fibers;
  for (int i = 0; i < z.processes; ++i) {
    fibers.emplace_back(
        std::allocator_arg,
        ColouredStack{WorldOptions{}.stack_size, World::stack_colour(static_cast<std::uint32_t>(i))},
        [&stop, &ran](bctx::fiber&& sink) {
          while (!stop) {
            ++ran;
            sink = std::move(sink).resume();
          }
          return std::move(sink);
        });
  }
  for (auto& f : fibers) f = std::move(f).resume();  // first entry: stacks touched, as in a started world
  ran = 0;
  std::vector<Ev> heap;
  std::uint64_t seq = 0;
  Rng rng(1);
  for (std::uint32_t i = 0; i < fibers.size(); ++i) {
    heap.push_back(Ev{static_cast<std::int64_t>(rng.below(1'000'000)), seq++, i});
    std::push_heap(heap.begin(), heap.end(), Later{});
  }
  Trace trace(/*keep_events=*/false);
  const auto start = stamp();
  for (std::uint64_t i = 0; i < z.probe_events; ++i) {
    std::pop_heap(heap.begin(), heap.end(), Later{});
    const Ev ev = heap.back();
    heap.pop_back();
    auto& f = fibers[ev.fiber];
    f = std::move(f).resume();
    if constexpr (Traced) {
      const Time t{ev.at};
      const ProcId self{ev.fiber}, peer{static_cast<std::uint32_t>(i % fibers.size())};
      trace.record(t, t, t, TraceKind::deliver, self, peer, ev.seq, "m", {});
      trace.record(t, t, t, TraceKind::receive, self, peer, ev.seq, "m", {});
      trace.record(t, t, t, TraceKind::send, self, peer, seq, "m", {});
    }
    heap.push_back(Ev{ev.at + 1'000'000 + static_cast<std::int64_t>(i & 1023), seq++, ev.fiber});
    std::push_heap(heap.begin(), heap.end(), Later{});
  }
  if constexpr (Traced) g_sink = trace.hash();  // the hash is computed, and used
  const double s = seconds_since(start);
  stop = true;
  for (auto& f : fibers) f = std::move(f).resume();  // let every fiber return
  if (ran != z.probe_events)
    std::fprintf(stderr, "probe_fiber: ran %llu\n", static_cast<unsigned long long>(ran));
  return static_cast<double>(z.probe_events) / s;
}

/// Peak resident set of this process in MiB (VmHWM, falling back to getrusage).
double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // "VmHWM:  1234 kB"
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

/// Peak RSS with a world of `rss_processes` sleeping processes alive. Run first, so the high-water mark is
/// this world's, not an earlier benchmark's.
double rss_bench(const Sizes& z) {
  World w(fast_world());
  for (int i = 0; i < z.rss_processes; ++i) {
    w.spawn(fmt::format("sleeper{}", i), [](Context& c) { c.sleep(1h); });
  }
  w.run_until(1ms);
  return peak_rss_mib();
}

template <class F>
double best_of(int repeats, F&& f) {
  double best = 0;
  for (int i = 0; i < repeats; ++i) best = std::max(best, f());
  return best;
}

}  // namespace

int run_kernel_bench(int argc, char** argv) {
  Sizes z;
  std::string_view only;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--quick") {
      z.timer_events /= 20;
      z.fiber_events /= 20;
      z.probe_events /= 20;
      z.repeats = 1;
    } else if (a == "--cpu-time") {
      g_cpu_time = true;
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
      if (only != "timer" && only != "fiber" && only != "probe_timer" && only != "probe_fiber" &&
          only != "probe_fiber_traced" && only != "rss") {
        fmt::print(stderr,
                   "kernel bench: --only takes timer, fiber, probe_timer, probe_fiber, probe_fiber_traced or "
                   "rss\n");
        return 2;
      }
    } else if (a == "--processes" && i + 1 < argc) {
      const std::string_view v = argv[++i];
      int n = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec != std::errc{} || end != v.data() + v.size() || n < 1 || n > 1'000'000) {
        fmt::print(stderr, "kernel bench: --processes takes an integer from 1 to 1000000, not '{}'\n", v);
        return 2;
      }
      z.processes = n;
    } else if (a == "--help" || a == "-h") {
      fmt::print(
          "usage: {} [--quick] [--cpu-time] [--only "
          "timer|fiber|probe_timer|probe_fiber|probe_fiber_traced|rss]"
          " [--processes N]\n"
          "  prints kernel performance figures, one `name: value` per line\n"
          "  --quick     short smoke run (1/20 of the events, no repeats)\n"
          "  --cpu-time  rates per second of process CPU time instead of wall time (for a busy machine)\n"
          "  --only X    run one measurement (for profiling)\n"
          "  --processes N  processes (and probe fibers) in the timer and fiber figures (default 1000; the\n"
          "              goals are stated for 1000: other sizes are for analysis)\n",
          argc > 0 ? argv[0] : "kernel");
      return 0;
    } else {
      fmt::print(stderr, "kernel bench: unknown argument '{}' (try --help)\n", a);
      return 2;
    }
  }
  auto want = [&](std::string_view name) { return only.empty() || only == name; };
  const double rss = want("rss") ? rss_bench(z) : 0;
  const double timer = want("timer") ? best_of(z.repeats, [&] { return timer_bench(z); }) : 0;
  const double fiber = want("fiber") ? best_of(z.repeats, [&] { return fiber_bench(z); }) : 0;
  const double probe_timer =
      want("probe_timer") ? best_of(z.repeats, [&] { return probe_timer_bench(z); }) : 0;
  const double probe_fiber =
      want("probe_fiber") ? best_of(z.repeats, [&] { return probe_fiber_bench<false>(z); }) : 0;
  const double probe_traced =
      want("probe_fiber_traced") ? best_of(z.repeats, [&] { return probe_fiber_bench<true>(z); }) : 0;
  if (want("timer")) fmt::print("timer_events_per_s: {:.0f}\n", timer);
  if (want("fiber")) fmt::print("fiber_events_per_s: {:.0f}\n", fiber);
  if (want("probe_timer")) fmt::print("probe_timer_events_per_s: {:.0f}\n", probe_timer);
  if (want("probe_fiber")) fmt::print("probe_fiber_events_per_s: {:.0f}\n", probe_fiber);
  if (want("probe_fiber_traced")) fmt::print("probe_fiber_traced_events_per_s: {:.0f}\n", probe_traced);
  if (only.empty()) fmt::print("kernel_vs_probe: {:.3f}\n", fiber / probe_fiber);
  if (only.empty()) fmt::print("kernel_vs_traced_probe: {:.3f}\n", fiber / probe_traced);
  if (want("rss")) fmt::print("peak_rss_mib_10k_sleeping: {:.1f}\n", rss);
  std::fflush(stdout);
  return 0;
}

}  // namespace locksim
