#include "reality/children.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace locksim::reality {

namespace {

constexpr int kMaxChildren = 256;
std::array<std::atomic<pid_t>, kMaxChildren> g_children{};
std::atomic<bool> g_interrupted{false};

extern "C" void on_signal(int) {
  g_interrupted.store(true);
  for (auto& c : g_children) {
    const pid_t p = c.load();
    if (p > 0) ::kill(p, SIGKILL);
  }
}

}  // namespace

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // A client that dies closes its pipe: reading gives EOF, writing must not kill the parent.
  signal(SIGPIPE, SIG_IGN);
  // The children of a server killed before them (a SIGKILLed postmaster's backends) become this process's
  // children, not init's (which may not reap them: they would stay zombies): reap_adopted() ends them.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
}

int reap_adopted() {
  const pid_t self = ::getpid();
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const std::size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(stat.c_str() + paren + 1, " %c %ld", &state, &ppid) != 2 || ppid != self) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    bool registered = false;
    for (auto& c : g_children) registered = registered || c.load() == pid;
    if (registered) continue;
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    ++n;
  }
  return n;
}

void become_child() {
  ::setpgid(0, 0);
  // A parent that dies without unwinding (a crash, SIGKILL) takes its servers and clients with it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  for (auto& c : g_children) c.store(0);
  g_interrupted.store(false);
}

bool interrupted() {
  return g_interrupted.load();
}

void check_interrupted() {
  if (interrupted()) throw Interrupted();
}

void register_child(pid_t pid) {
  for (auto& c : g_children) {
    pid_t expected = 0;
    if (c.compare_exchange_strong(expected, pid)) return;
  }
  ::kill(pid, SIGKILL);
  throw std::runtime_error("too many child processes");
}

void forget_child(pid_t pid) {
  for (auto& c : g_children) {
    pid_t expected = pid;
    if (c.compare_exchange_strong(expected, 0)) return;
  }
}

int registered_children() {
  int n = 0;
  for (auto& c : g_children) n += c.load() > 0 ? 1 : 0;
  return n;
}

void kill_and_reap(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  ::kill(pid, SIGCONT);  // a stopped process dies of SIGKILL anyway; this is for clarity of ps output
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  forget_child(pid);
}

TempDir::TempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + tmpl);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

namespace {

/// Whether 127.0.0.1:port can be bound now (a listener or a socket in TIME_WAIT there says no).
bool bindable(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

/// The kernel's range for ports it picks itself (bind to port 0, an outgoing connection).
std::pair<unsigned, unsigned> ephemeral_range() {
  unsigned lo = 32768, hi = 60999;
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  unsigned a = 0, b = 0;
  if (in >> a >> b && a <= b && b <= 65535) lo = a, hi = b;
  return {lo, hi};
}

}  // namespace

std::uint16_t free_loopback_port() {
  // A port handed out here is bound by its server only later, so it must not be one the kernel could
  // give meanwhile to a proxy's listener or an outgoing connection: it comes from outside the ephemeral
  // range, and never twice in one process.
  static std::mutex mu;
  static std::set<std::uint16_t> given;
  static std::uint64_t state = 0;
  std::lock_guard lock(mu);
  if (state == 0)
    state = (static_cast<std::uint64_t>(::getpid()) << 32) ^ static_cast<std::uint64_t>(mono_ns()) ^
            0x9e3779b97f4a7c15ULL;  // wall time: spreads concurrent processes over the range
  const auto [lo, hi] = ephemeral_range();
  std::vector<std::pair<unsigned, unsigned>> spans;  // inclusive, outside the ephemeral range
  if (lo > 10'000) spans.push_back({10'000, lo - 1});
  if (hi < 65'000) spans.push_back({hi + 1, 65'000});
  unsigned total = 0;
  for (const auto& [a, b] : spans) total += b - a + 1;
  if (total >= 1'000) {
    for (int attempt = 0; attempt < 4'096; ++attempt) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      unsigned k = static_cast<unsigned>((state >> 33) % total);
      std::uint16_t port = 0;
      for (const auto& [a, b] : spans) {
        if (k <= b - a) {
          port = static_cast<std::uint16_t>(a + k);
          break;
        }
        k -= b - a + 1;
      }
      if (given.count(port) == 0 && bindable(port)) {
        given.insert(port);
        return port;
      }
    }
  }
  // No room outside the ephemeral range: let the kernel pick, still never the same port twice.
  for (int attempt = 0; attempt < 1'024; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) < 0) {
      const int e = errno;
      ::close(fd);
      throw std::system_error(e, std::generic_category(), "bind 127.0.0.1:0");
    }
    ::close(fd);
    const std::uint16_t port = ntohs(a.sin_port);
    if (given.insert(port).second) return port;
  }
  throw std::runtime_error("no free loopback port left");
}

bool port_open(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

std::int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::int64_t real_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void sleep_until_ns(std::int64_t deadline_ns) {
  for (;;) {
    check_interrupted();
    const std::int64_t left = deadline_ns - mono_ns();
    if (left <= 0) return;
    const std::int64_t slice = left < 20'000'000 ? left : 20'000'000;
    timespec ts{static_cast<time_t>(slice / 1'000'000'000), static_cast<long>(slice % 1'000'000'000)};
    ::nanosleep(&ts, nullptr);
  }
}

std::string find_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  p += ":/usr/sbin:/sbin";
  std::size_t start = 0;
  while (start <= p.size()) {
    const std::size_t end = p.find(':', start);
    const std::string dir = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!dir.empty()) {
      const std::string f = dir + "/" + name;
      if (::access(f.c_str(), X_OK) == 0) return f;
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return {};
}

std::string log_tail(const std::string& file, std::size_t lines, std::string_view skip) {
  std::ifstream in(file);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);)
    if (skip.empty() || line.find(skip) == std::string::npos) all.push_back(line);
  std::string out;
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += all[i] + "\n";
  return out;
}

pid_t spawn_server(std::vector<std::string> args, const SpawnOptions& o) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int out = o.log.empty() ? -1 : ::open(o.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (out >= 0 && o.change_user) (void)!::fchown(out, o.uid, o.gid);
  const pid_t pid = ::fork();
  if (pid < 0) {
    if (out >= 0) ::close(out);
    throw StartError(fmt::format("fork: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    become_child();  // Ctrl-C in the terminal reaches the parent, which kills us itself
    if (o.change_user) {
      if (::setgid(o.gid) != 0 || ::setgroups(0, nullptr) != 0 || ::setuid(o.uid) != 0) ::_exit(126);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // cleared by the change of credentials
    }
    if (!o.dir.empty() && ::chdir(o.dir.c_str()) != 0) ::_exit(126);
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) ::dup2(null, 0);
    const int to = out >= 0 ? out : null;
    if (to >= 0) {
      ::dup2(to, 1);
      ::dup2(to, 2);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  register_child(pid);
  if (out >= 0) ::close(out);
  return pid;
}

}  // namespace locksim::reality
