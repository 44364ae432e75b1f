// redlock-churn (issue 8): C clients contend for one lock held on 5 Redis-like servers, every message taking
// exactly 3 ms one way. Written directly against the kernel (World, Context, Message), with its own minimal
// lock servers, so that it measures the kernel and nothing else; bench/peers/simgrid/ is the same workload in
// SimGrid.
#include <fmt/format.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench.hpp"
#include "locksim/sim/world.hpp"

namespace locksim {
namespace {

using Clock = std::chrono::steady_clock;  // bench/ only: wall time of a measurement

constexpr int kServers = 5;
constexpr int kQuorum = 3;
constexpr Duration kTtl = 10s;
constexpr Duration kOneWay = 3ms;
constexpr Duration kRetryMax = 100ms;

/// `SET lock <value> NX PX <ttl>`: the one resource's key is implied.
struct SetNx {
  std::uint64_t value;
  Duration ttl;
};
/// The compare-and-delete script: `if GET lock == value then DEL lock; return 1 else return 0`.
struct CompareDelete {
  std::uint64_t value;
};
/// A write to the resource under the lock.
struct Write {
  std::uint64_t value;
};

/// A reply that is all in its type, like Redis's `+OK`, nil, `:1` and `:0`.
Message bare(std::string type) {
  Message m;
  m.type = std::move(type);  // (assigning a const char* trips a false -Wrestrict in GCC 12 at -O3)
  return m;
}

/// A Redis-like lock server: one key, expiry checked lazily on this node's clock when the key is touched.
void lock_server(Context& ctx) {
  struct Held {
    std::uint64_t value;
    Time expires;
  };
  std::optional<Held> key;
  for (;;) {
    std::optional<Message> m = ctx.receive();
    if (key && ctx.now() >= key->expires) key.reset();  // lazy expiry
    if (const SetNx* set = m->as<SetNx>()) {
      if (key) {
        ctx.reply(*m, bare("nil"));
      } else {
        key = Held{set->value, ctx.now() + set->ttl};
        ctx.reply(*m, bare("OK"));
      }
    } else if (const CompareDelete* del = m->as<CompareDelete>()) {
      const bool mine = key && key->value == del->value;
      if (mine) key.reset();
      ctx.reply(*m, bare(mine ? "1" : "0"));
    }
  }
}

/// The resource: acknowledges every write.
void resource(Context& ctx) {
  for (;;) {
    std::optional<Message> m = ctx.receive();
    ctx.reply(*m, bare("ack"));
  }
}

/// One client: SET NX PX on all 5, collect 5 replies; with a quorum write to the resource and wait for the
/// ack; then compare-and-delete on all 5 and collect 5 replies. Without a quorum, sleep 0-100 ms after
/// releasing.
void client(Context& ctx, std::uint32_t index, const std::array<ProcId, kServers>& servers, ProcId store,
            std::uint64_t& acquisitions) {
  for (std::uint32_t attempt = 1;; ++attempt) {
    const std::uint64_t value = (std::uint64_t{index} << 32) | attempt;  // unique per attempt
    for (ProcId s : servers) ctx.send(s, Message::of("set", SetNx{value, kTtl}));
    int ok = 0;
    // Every request gets exactly one reply and nothing is lost, so the next 5 messages are these replies.
    for (int i = 0; i < kServers; ++i) ok += ctx.receive()->type == "OK" ? 1 : 0;
    const bool won = ok >= kQuorum;
    if (won) {
      ctx.send(store, Message::of("write", Write{value}));
      ctx.receive();  // the ack
    }
    for (ProcId s : servers) ctx.send(s, Message::of("del", CompareDelete{value}));
    for (int i = 0; i < kServers; ++i) ctx.receive();
    if (won) {
      ++acquisitions;
    } else {
      ctx.sleep(ctx.rng().uniform(0ms, kRetryMax));
    }
  }
}

/// This process's CPU time: on a machine busy with other work, wall time measures the other work too.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// Peak resident set of this process in MiB (VmHWM).
double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // "VmHWM:  1234 kB"
  }
  return 0;
}

bool parse_u64(std::string_view s, std::uint64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size();
}

/// Simulated seconds at most (~31.7 years; simulated time ends at ~292): more would overflow the clock.
constexpr double kMaxSimSeconds = 1e9;

/// A number of simulated seconds above 0 and at most kMaxSimSeconds (not inf, not nan).
bool parse_seconds(std::string_view s, double& out) {
  try {
    std::size_t used = 0;
    const double v = std::stod(std::string(s), &used);
    if (used != s.size() || !(v > 0 && v <= kMaxSimSeconds)) return false;
    out = v;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

/// The message for a bad --sim-seconds value.
void bad_seconds(std::string_view bench, std::string_view value) {
  fmt::print(stderr,
             "{} bench: --sim-seconds takes a number of seconds above 0 and at most {:.0f}, not '{}'\n",
             bench, kMaxSimSeconds, value);
}

}  // namespace

ChurnResult run_churn(const ChurnOptions& o) {
  const auto start = Clock::now();
  const double cpu_start = cpu_seconds();
  WorldOptions wo;
  wo.seed = o.seed;
  wo.keep_trace = false;
  wo.network.defaults.delay = DelayDist::constant_of(kOneWay);
  wo.limits.max_events = ~std::uint64_t{0};
  wo.limits.max_processes = o.clients + 16;
  if (o.stack_size != 0) wo.stack_size = o.stack_size;
  wo.huge_page_stacks = o.huge_page_stacks;
  World w(wo);
  ProcessOptions daemon;
  daemon.daemon = true;
  std::array<ProcId, kServers> servers{};
  for (int i = 0; i < kServers; ++i) servers[i] = w.spawn(fmt::format("redis{}", i + 1), lock_server, daemon);
  const ProcId store = w.spawn("resource", resource, daemon);
  ChurnResult r;
  for (std::uint32_t c = 0; c < o.clients; ++c) {
    w.spawn(
        fmt::format("client{}", c),
        [c, &servers, store, &r](Context& ctx) { client(ctx, c, servers, store, r.acquisitions); }, daemon);
  }
  const Time end = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(o.sim_seconds));
  w.run_until(end);
  r.messages = w.messages_delivered();
  r.events = w.events_processed();
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  r.cpu_s = cpu_seconds() - cpu_start;
  return r;
}

int run_churn_bench(int argc, char** argv) {
  ChurnOptions o;
  bool cpu_time = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const bool has_value = i + 1 < argc;
    std::uint64_t n = 0;
    if (a == "--clients" && has_value && parse_u64(argv[i + 1], n) && n > 0 && n < (1u << 31)) {
      o.clients = static_cast<std::uint32_t>(n);
      ++i;
    } else if (a == "--sim-seconds" && has_value) {
      if (!parse_seconds(argv[i + 1], o.sim_seconds)) {
        bad_seconds("churn", argv[i + 1]);
        return 2;
      }
      ++i;
    } else if (a == "--seed" && has_value && parse_u64(argv[i + 1], o.seed)) {
      ++i;
    } else if (a == "--cpu-time") {
      cpu_time = true;
    } else if (a == "--help" || a == "-h") {
      fmt::print(
          "usage: {} [--clients C] [--sim-seconds T] [--seed S] [--cpu-time]\n"
          "  redlock-churn: C clients (default 30) contend for one lock on 5 Redis-like servers, 3 ms one "
          "way,\n"
          "  for T simulated seconds (default 10). Prints one line:\n"
          "  impl=locksim clients=C sim_seconds=T acquisitions=A messages=M wall_s=W msgs_per_wall_s=R\n"
          "  --cpu-time: W is this process's CPU seconds instead of wall seconds (for a busy machine)\n",
          argc > 0 ? argv[0] : "churn");
      return 0;
    } else {
      fmt::print(stderr, "churn bench: bad argument '{}' (try --help)\n", a);
      return 2;
    }
  }
  const ChurnResult r = run_churn(o);
  const double seconds = cpu_time ? r.cpu_s : r.wall_s;
  fmt::print(
      "impl=locksim clients={} sim_seconds={} acquisitions={} messages={} wall_s={:.3f} "
      "msgs_per_wall_s={:.0f}\n",
      o.clients, o.sim_seconds, r.acquisitions, r.messages, seconds,
      static_cast<double>(r.messages) / seconds);
  return 0;
}

namespace {

int run_scale_size(std::uint64_t c, double fixed_seconds, std::uint64_t messages, std::uint64_t stack_kib,
                   bool huge_page_stacks, double& cpu_ns_out) {
  ChurnOptions o;
  o.clients = static_cast<std::uint32_t>(c);
  o.stack_size = stack_kib * 1024;
  o.huge_page_stacks = huge_page_stacks;
  // A losing client's cycle is 12 ms of messages plus a 50 ms mean sleep: ~20 messages per 62 ms.
  o.sim_seconds = fixed_seconds > 0
                      ? fixed_seconds
                      : std::max(0.5, static_cast<double>(messages) / (static_cast<double>(c) * 320.0));
  if (!(o.sim_seconds <= kMaxSimSeconds)) {
    fmt::print(stderr, "scale bench: --messages {} at {} clients is more than {:.0f} simulated seconds\n",
               messages, c, kMaxSimSeconds);
    return 2;
  }
  o.sim_seconds = static_cast<double>(static_cast<std::int64_t>(o.sim_seconds * 1000)) / 1000;  // ms
  // The child's CPU ns per message comes back through a pipe, as text: the growth lines need it.
  int fds[2];
  if (pipe(fds) != 0) {
    fmt::print(stderr, "scale bench: pipe failed\n");
    return 1;
  }
  const pid_t child = fork();  // a fresh process per size: VmHWM is a per-process high-water mark
  if (child < 0) {
    fmt::print(stderr, "scale bench: fork failed\n");
    return 1;
  }
  if (child == 0) {
    close(fds[0]);
    const ChurnResult r = run_churn(o);
    const double cpu_ns = r.cpu_s * 1e9 / static_cast<double>(r.messages);
    fmt::print(
        "clients={} sim_seconds={} acquisitions={} messages={} wall_s={:.3f} cpu_s={:.3f} "
        "ns_per_msg={:.1f} "
        "cpu_ns_per_msg={:.1f} peak_rss_mib={:.1f} stack_kib={} huge_page_stacks={:d}\n",
        o.clients, o.sim_seconds, r.acquisitions, r.messages, r.wall_s, r.cpu_s,
        r.wall_s * 1e9 / static_cast<double>(r.messages), cpu_ns, peak_rss_mib(),
        (o.stack_size ? o.stack_size : WorldOptions{}.stack_size) / 1024, o.huge_page_stacks);
    std::fflush(stdout);
    const std::string text = fmt::format("{:.17g}", cpu_ns);
    const bool sent = write(fds[1], text.data(), text.size()) == static_cast<ssize_t>(text.size());
    _exit(sent ? 0 : 1);
  }
  close(fds[1]);
  std::string text;
  char buf[64];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
    if (n > 0)
      text.append(buf, static_cast<std::size_t>(n));
    else if (errno != EINTR)
      break;
  }
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  double cpu_ns = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), cpu_ns);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || ec != std::errc{} ||
      end != text.data() + text.size()) {
    fmt::print(stderr, "scale bench: clients={} failed (status {})\n", c, status);
    return 1;
  }
  cpu_ns_out = cpu_ns;
  return 0;
}

/// The median of a non-empty list (the mean of the middle two for an even count).
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

constexpr std::uint64_t kMaxRounds = 1000;

}  // namespace

int run_scale_bench(int argc, char** argv) {
  std::vector<std::uint64_t> sizes{30, 300, 3'000, 30'000, 100'000};
  double fixed_seconds = 0;            // 0: chosen per size for about `messages` messages
  std::uint64_t messages = 5'000'000;  // target per size when the simulated time is not fixed
  std::uint64_t stack_kib = 0;         // 0: the world's default
  bool huge_page_stacks = false;
  std::uint64_t rounds = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--clients" && has_value) {
      sizes.clear();
      std::string_view list = argv[++i];
      while (!list.empty()) {
        const auto comma = list.find(',');
        std::uint64_t n = 0;
        if (!parse_u64(list.substr(0, comma), n) || n == 0 || n >= (1u << 31)) {
          fmt::print(stderr, "scale bench: bad --clients list\n");
          return 2;
        }
        sizes.push_back(n);
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
      }
    } else if (a == "--sim-seconds" && has_value) {
      if (!parse_seconds(argv[i + 1], fixed_seconds)) {
        bad_seconds("scale", argv[i + 1]);
        return 2;
      }
      ++i;
    } else if (a == "--messages" && has_value && parse_u64(argv[i + 1], messages) && messages > 0) {
      ++i;
    } else if (a == "--stack-kib" && has_value && parse_u64(argv[i + 1], stack_kib) && stack_kib >= 8 &&
               stack_kib <= 1024) {
      ++i;
    } else if (a == "--huge-page-stacks") {
      huge_page_stacks = true;
    } else if (a == "--rounds" && has_value && parse_u64(argv[i + 1], rounds) && rounds >= 1 &&
               rounds <= kMaxRounds) {
      ++i;
    } else if (a == "--help" || a == "-h") {
      fmt::print(
          "usage: {} [--clients C1,C2,...] [--sim-seconds T | --messages N] [--stack-kib K] "
          "[--huge-page-stacks] [--rounds R]\n"
          "  redlock-churn at each C (default 30,300,3000,30000,100000), each in a child process so that its "
          "peak\n"
          "  RSS is its own. Without --sim-seconds the simulated time is chosen for about N messages per "
          "size\n"
          "  (default 5000000; a client sends about 320 messages per simulated second). One line per size:\n"
          "  clients=C sim_seconds=T acquisitions=A messages=M wall_s=W cpu_s=U ns_per_msg=X "
          "cpu_ns_per_msg=Z\n"
          "  peak_rss_mib=Y stack_kib=K huge_page_stacks=0|1  (ns_per_msg from wall time, cpu_ns_per_msg "
          "from\n"
          "  this process's CPU time)\n"
          "  --stack-kib K: fiber stacks of K KiB (8-1024; default the world's 64)\n"
          "  --huge-page-stacks: stacks from a transparent-huge-page arena (WorldOptions::huge_page_stacks;\n"
          "  for big worlds, with a small --stack-kib: every stack is resident in full)\n"
          "  --rounds R (1-{}): run the whole list R times, a round at a time, so that every size sees the "
          "machine\n"
          "  of every moment (on a machine whose speed drifts, only runs taken in turn compare). Then one "
          "line per\n"
          "  size after the first: growth clients=C from_clients=C0 cpu_ns_per_msg=X from_cpu_ns_per_msg=X0 "
          "ratio=X/X0\n"
          "  rounds=R, each figure the median of its R runs (issue 8's goal: at most 2 from 30 to "
          "100000)\n",
          argc > 0 ? argv[0] : "scale", kMaxRounds);
      return 0;
    } else if (a == "--rounds") {
      fmt::print(stderr, "scale bench: --rounds takes a whole number from 1 to {}, not '{}'\n", kMaxRounds,
                 has_value ? argv[i + 1] : "");
      return 2;
    } else {
      fmt::print(stderr, "scale bench: bad argument '{}' (try --help)\n", a);
      return 2;
    }
  }
  std::fflush(stdout);
  // per_size[k]: the CPU ns per message of size k's runs, one per round.
  std::vector<std::vector<double>> per_size(sizes.size());
  for (std::uint64_t round = 0; round < rounds; ++round) {
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      double cpu_ns = 0;
      if (const int rc =
              run_scale_size(sizes[k], fixed_seconds, messages, stack_kib, huge_page_stacks, cpu_ns))
        return rc;
      per_size[k].push_back(cpu_ns);
    }
  }
  for (std::size_t k = 1; k < sizes.size(); ++k) {
    const double from = median(per_size[0]);
    const double to = median(per_size[k]);
    fmt::print(
        "growth clients={} from_clients={} cpu_ns_per_msg={:.1f} from_cpu_ns_per_msg={:.1f} ratio={:.2f} "
        "rounds={}\n",
        sizes[k], sizes[0], to, from, to / from, rounds);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace locksim
