// redlock-churn (issue 8) against SimGrid's s4u API: the same workload as bench/churn.cpp, to compare
// simulators. One host with a route to itself over one FATPIPE link of 3 ms latency and huge bandwidth,
// network model CM02 with a raised TCP-gamma, 1-byte payloads (see g_payload: 0 bytes breaks the timing in
// SimGrid 3.32) and a permanent receiver on every mailbox,
// so that every message takes exactly 3 ms; the largest |receive - send - 3 ms| over all messages is measured
// and printed to prove it.
#include <time.h>
#include <xbt/log.h>
#include <simgrid/s4u.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace {

constexpr int kServers = 5;
constexpr int kQuorum = 3;
constexpr double kTtl = 10.0;
constexpr double kOneWay = 0.003;
constexpr std::uint64_t kRetryMaxNs = 100'000'000;  // 100 ms

/// SplitMix64 (Steele, Lea, Flood 2014): our own seeded generator; no std:: distributions.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform integer in [0, bound) by multiply-high (bias below 2^-30 for the bounds used here).
  std::uint64_t below(std::uint64_t bound) {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(next()) * bound) >> 64);
  }

 private:
  std::uint64_t state_;
};

enum class Kind : std::uint8_t { set, del, write, ok, nil, one, zero, ack };

/// One message. `sent` is the simulated send time, to check that delivery takes exactly 3 ms.
struct Msg {
  Kind kind;
  std::uint64_t value;
  double ttl;
  sg4::Mailbox* reply_to;
  double sent;
};

struct Stats {
  std::uint64_t acquisitions = 0;
  std::uint64_t messages = 0;
  double max_delay_error = 0;
};
Stats g_stats;  // one simulation per program
/// Simulated bytes per message. 1, not 0: in SimGrid 3.32 a 0-byte message to a mailbox with a permanent
/// receiver does not take the link's latency (the first arrives at once, later ones when the next message
/// completes), which the max_delay_error_s check shows as 0.003; with 1 byte over a 1e300 B/s link every
/// delay is 3 ms to 1e-15 s.
std::uint64_t g_payload = 1;

void send(sg4::Mailbox* to, Kind kind, std::uint64_t value, sg4::Mailbox* reply_to, double ttl = 0) {
  // Detached: the sender goes on at once, like a datagram; the permanent receiver makes it complete on
  // arrival.
  to->put_init(new Msg{kind, value, ttl, reply_to, sg4::Engine::get_clock()}, g_payload)->detach();
}

/// Receives the next message (the caller deletes it) and checks its delivery time.
Msg* receive(sg4::Mailbox* box) {
  Msg* m = box->get<Msg>();
  ++g_stats.messages;
  g_stats.max_delay_error =
      std::max(g_stats.max_delay_error, std::abs(sg4::Engine::get_clock() - m->sent - kOneWay));
  return m;
}

void reply(const Msg* request, Kind kind) {
  send(request->reply_to, kind, request->value, nullptr);
}

/// A Redis-like lock server: one key, expiry checked lazily on the server's clock when the key is touched.
void lock_server(sg4::Mailbox* box) {
  box->set_receiver(sg4::Actor::self());
  struct Held {
    std::uint64_t value;
    double expires;
  };
  std::optional<Held> key;
  for (;;) {
    Msg* m = receive(box);
    const double now = sg4::Engine::get_clock();
    if (key && now >= key->expires) key.reset();  // lazy expiry
    if (m->kind == Kind::set) {
      if (key) {
        reply(m, Kind::nil);
      } else {
        key = Held{m->value, now + m->ttl};
        reply(m, Kind::ok);
      }
    } else if (m->kind == Kind::del) {
      const bool mine = key && key->value == m->value;
      if (mine) key.reset();
      reply(m, mine ? Kind::one : Kind::zero);
    }
    delete m;
  }
}

/// The resource: acknowledges every write.
void resource(sg4::Mailbox* box) {
  box->set_receiver(sg4::Actor::self());
  for (;;) {
    Msg* m = receive(box);
    reply(m, Kind::ack);
    delete m;
  }
}

/// One client, as in bench/churn.cpp.
void client(std::uint32_t index, std::uint64_t seed, std::array<sg4::Mailbox*, kServers> servers,
            sg4::Mailbox* store) {
  sg4::Mailbox* box = sg4::Mailbox::by_name("client" + std::to_string(index));
  box->set_receiver(sg4::Actor::self());
  SplitMix64 rng(seed ^ (0x632be59bd9b4e019ULL * (index + 1)));
  for (std::uint32_t attempt = 1;; ++attempt) {
    const std::uint64_t value = (std::uint64_t{index} << 32) | attempt;  // unique per attempt
    for (sg4::Mailbox* s : servers) send(s, Kind::set, value, box, kTtl);
    int ok = 0;
    for (int i = 0; i < kServers; ++i) {
      Msg* m = receive(box);
      ok += m->kind == Kind::ok ? 1 : 0;
      delete m;
    }
    const bool won = ok >= kQuorum;
    if (won) {
      send(store, Kind::write, value, box);
      delete receive(box);  // the ack
    }
    for (sg4::Mailbox* s : servers) send(s, Kind::del, value, box);
    for (int i = 0; i < kServers; ++i) delete receive(box);
    if (won) {
      ++g_stats.acquisitions;
    } else {
      sg4::this_actor::sleep_for(static_cast<double>(rng.below(kRetryMaxNs + 1)) * 1e-9);
    }
  }
}

/// This process's CPU time (--cpu-time): on a busy machine, wall time measures the other work too.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

bool parse(const char* s, double& out, double min = 1e-300) {
  char* end = nullptr;
  out = std::strtod(s, &end);
  return end != s && *end == '\0' && out >= min;
}

}  // namespace

int main(int argc, char** argv) {
  double clients = 30, sim_seconds = 10, seed = 1, bandwidth = 1e300, payload = 1;
  bool cpu_time = false;
  std::vector<std::string_view> cfg;  // --cfg=name:value, SimGrid's own options
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--cpu-time") {
      cpu_time = true;
    } else if (a.rfind("--cfg=", 0) == 0) {
      cfg.push_back(a);
    } else if (a == "--payload-bytes" && i + 1 < argc && parse(argv[i + 1], payload, 0)) {
      g_payload = static_cast<std::uint64_t>(payload);
      ++i;
    } else if (a == "--bandwidth" && i + 1 < argc && parse(argv[i + 1], bandwidth)) {
      ++i;
    } else if (a == "--clients" && i + 1 < argc && parse(argv[i + 1], clients)) {
      ++i;
    } else if (a == "--sim-seconds" && i + 1 < argc && parse(argv[i + 1], sim_seconds)) {
      ++i;
    } else if (a == "--seed" && i + 1 < argc && parse(argv[i + 1], seed)) {
      ++i;
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--clients C] [--sim-seconds T] [--seed S] [--payload-bytes B] [--bandwidth BPS]\n"
          "          [--cpu-time]  (wall_s is then CPU seconds)\n"
          "          [--cfg=name:value...]\n"
          "  redlock-churn in SimGrid; prints impl=simgrid clients=C sim_seconds=T acquisitions=A "
          "messages=M wall_s=W msgs_per_wall_s=R max_delay_error_s=E\n",
          argv[0]);
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  const auto n = static_cast<std::uint32_t>(clients);

  const auto start = std::chrono::steady_clock::now();  // bench/ only: wall time of the measurement
  const double cpu_start = cpu_seconds();
  xbt_log_control_set("root.thresh:warning");  // no "Configuration change" lines on stderr
  int engine_argc = 1;
  sg4::Engine e(&engine_argc, argv);
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/TCP-gamma:1e300");  // the window never bounds a 3 ms link
  sg4::Engine::set_config("network/crosstraffic:0");
  for (std::string_view a : cfg) sg4::Engine::set_config(std::string(a.substr(6)));  // after ours: overrides
  auto* zone = sg4::create_full_zone("world");
  sg4::Host* host = zone->create_host("host", 1e9);
  sg4::Link* link = zone->create_link("wire", bandwidth)
                        ->set_latency(kOneWay)
                        ->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE);
  zone->add_route(host->get_netpoint(), host->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(link)},
                  false);
  zone->seal();

  std::array<sg4::Mailbox*, kServers> servers{};
  for (int i = 0; i < kServers; ++i) {
    servers[i] = sg4::Mailbox::by_name("redis" + std::to_string(i + 1));
    sg4::Actor::create("redis" + std::to_string(i + 1), host, lock_server, servers[i]);
  }
  sg4::Mailbox* store = sg4::Mailbox::by_name("resource");
  sg4::Actor::create("resource", host, resource, store);
  for (std::uint32_t c = 0; c < n; ++c) {
    sg4::Actor::create("client" + std::to_string(c), host, client, c, static_cast<std::uint64_t>(seed),
                       servers, store);
  }
  e.run_until(sim_seconds);
  const double wall = cpu_time
                          ? cpu_seconds() - cpu_start
                          : std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "impl=simgrid clients=%u sim_seconds=%g acquisitions=%llu messages=%llu wall_s=%.3f "
      "msgs_per_wall_s=%.0f "
      "max_delay_error_s=%.3g\n",
      n, sim_seconds, static_cast<unsigned long long>(g_stats.acquisitions),
      static_cast<unsigned long long>(g_stats.messages), wall, static_cast<double>(g_stats.messages) / wall,
      g_stats.max_delay_error);
  std::fflush(stdout);
  std::_Exit(0);  // actors are still running at T: skip tearing the simulation down
}
