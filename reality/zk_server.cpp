#include "reality/zk_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "reality/children.hpp"
#include "reality/zk_client.hpp"

namespace locksim::reality {

namespace {

constexpr std::int64_t kStartDeadlineNs = 20'000'000'000;
constexpr const char* kJar = "/usr/share/java/zookeeper.jar";
/// slf4j's simple binding writes the server's log to stderr (the member's log file); without it ZooKeeper
/// logs nothing, and runs all the same.
constexpr const char* kLogBinding = "/usr/share/java/slf4j-simple.jar";

/// A four-letter command's answer (empty: no answer within `timeout_ms`).
std::string four_letter(std::uint16_t port, const char* cmd, int timeout_ms) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) return {};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  std::string out;
  const std::int64_t deadline = mono_ns() + std::int64_t{timeout_ms} * 1'000'000;
  auto wait = [&](short ev) {
    pollfd pf{fd, ev, 0};
    const std::int64_t left = (deadline - mono_ns()) / 1'000'000;
    return left > 0 && ::poll(&pf, 1, static_cast<int>(left)) == 1;
  };
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 && errno != EINPROGRESS) {
    ::close(fd);
    return {};
  }
  int err = 0;
  socklen_t len = sizeof err;
  if (wait(POLLOUT) && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0 &&
      ::write(fd, cmd, std::strlen(cmd)) > 0) {
    char buf[1024];
    while (wait(POLLIN)) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

/// "leader", "follower", ... from `srvr` (empty: no answer, or not serving yet).
std::string mode_of(std::uint16_t port, int timeout_ms) {
  const std::string s = four_letter(port, "srvr", timeout_ms);
  const auto at = s.find("Mode: ");
  if (at == std::string::npos) return {};
  return s.substr(at + 6, s.find('\n', at) - at - 6);
}

}  // namespace

std::string zk_missing() {
  if (find_program("java").empty() || ::access(kJar, R_OK) != 0)
    return "ZooKeeper is not installed (Debian: apt-get install zookeeper)";
  if (!zk_client_built())
    return "locksim was built without the ZooKeeper C client (apt-get install libzookeeper-mt-dev, then "
           "build "
           "again)";
  return {};
}

ZkEnsemble::ZkEnsemble(std::vector<std::string> names, const std::string& dir, std::int64_t tick_ms,
                       std::string lock_key)
    : tick_ms_(std::max<std::int64_t>(1, tick_ms)), lock_key_(std::move(lock_key)) {
  for (std::string& n : names) {
    Member m;
    m.name = std::move(n);
    m.dir = dir + "/" + m.name;
    ::mkdir(m.dir.c_str(), 0700);
    ::mkdir((m.dir + "/data").c_str(), 0700);
    m.client = free_loopback_port();
    m.quorum = free_loopback_port();
    m.election = free_loopback_port();
    members_.push_back(std::move(m));
  }
  for (std::size_t i = 0; i < members_.size(); ++i) {
    std::ofstream(members_[i].dir + "/data/myid") << i + 1 << "\n";
    write_config(members_[i]);
  }
}

ZkEnsemble::~ZkEnsemble() {
  if (recorder_) recorder_->stop();
  kill_all();
}

void ZkEnsemble::write_config(const Member& m) const {
  std::ofstream out(m.dir + "/zoo.cfg");
  // initLimit/syncLimit count ticks; a short tick keeps them long enough for a JVM on a busy machine.
  out << fmt::format(
      "tickTime={}\ninitLimit={}\nsyncLimit={}\ndataDir={}/data\nclientPort={}\nclientPortAddress=127.0.0.1\n"
      "admin.enableServer=false\n4lw.commands.whitelist=srvr,ruok\npreAllocSize=4096\n"
      "autopurge.purgeInterval=0\nreconfigEnabled=false\n",
      tick_ms_, std::max<std::int64_t>(10, 20'000 / tick_ms_), std::max<std::int64_t>(5, 10'000 / tick_ms_),
      m.dir, m.client);
  for (std::size_t i = 0; i < members_.size(); ++i) {
    const Member& o = members_[i];
    auto it = m.via.find(o.name);
    const auto [q, e] = it == m.via.end() ? std::pair{o.quorum, o.election} : it->second;
    out << fmt::format("server.{}=127.0.0.1:{}:{}\n", i + 1, q, e);
  }
}

std::vector<ZkEnsemble::PeerPorts> ZkEnsemble::peer_ports() const {
  std::vector<PeerPorts> out;
  for (const Member& m : members_) out.push_back({m.name, m.quorum, m.election});
  return out;
}

void ZkEnsemble::route(const std::string& from, const std::string& to, std::uint16_t quorum,
                       std::uint16_t election) {
  for (Member& m : members_)
    if (m.name == from) {
      m.via[to] = {quorum, election};
      write_config(m);
    }
}

void ZkEnsemble::spawn(Member& m) {
  const std::string java = find_program("java");
  if (java.empty() || ::access(kJar, R_OK) != 0) throw StartError(zk_missing());
  std::string cp = kJar;
  if (::access(kLogBinding, R_OK) == 0) cp += std::string(":") + kLogBinding;
  std::vector<std::string> args = {java,
                                   "-Xmx128m",
                                   "-XX:+UseSerialGC",
                                   "-XX:TieredStopAtLevel=1",
                                   "-Dzookeeper.admin.enableServer=false",
                                   "-Dzookeeper.jmx.log4j.disable=true",
                                   "-cp",
                                   cp,
                                   "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                                   m.dir + "/zoo.cfg"};
  m.pid = spawn_server(std::move(args), {.dir = m.dir, .log = m.dir + "/zookeeper.log"});
}

void ZkEnsemble::kill_all() {
  for (Member& m : members_) {
    kill_and_reap(m.pid);
    m.pid = -1;
  }
}

void ZkEnsemble::fail(const std::string& why) {
  std::string tails;
  for (const Member& m : members_)
    tails += fmt::format("{}:\n{}", m.name, log_tail(m.dir + "/zookeeper.log", 8, "srvr command"));
  if (recorder_) recorder_->stop();
  kill_all();
  check_interrupted();
  throw StartError(fmt::format("{}\n{}", why, tails));
}

void ZkEnsemble::start() {
  try {
    for (Member& m : members_) spawn(m);
  } catch (...) {
    kill_all();
    throw;
  }
  const std::int64_t deadline = mono_ns() + kStartDeadlineNs;
  for (;;) {
    int serving = 0, leaders = 0;
    for (Member& m : members_) {
      int st = 0;
      if (::waitpid(m.pid, &st, WNOHANG) == m.pid) {
        forget_child(m.pid);
        m.pid = -1;
        fail(fmt::format("{}: ZooKeeper exited at start-up (client port {})", m.name, m.client));
      }
      const std::string mode = mode_of(m.client, 200);
      serving += mode == "leader" || mode == "follower" ? 1 : 0;
      leaders += mode == "leader" ? 1 : 0;
    }
    if (serving == static_cast<int>(members_.size()) && leaders == 1) break;
    if (mono_ns() > deadline || interrupted())
      fail("ZooKeeper's ensemble did not elect a leader within 20 s");
    ::usleep(50'000);
  }
}

void ZkEnsemble::start_recorder() {
  recorder_ = std::make_unique<ZkRecorder>(connect_string(), lock_key_);
  try {
    recorder_->start(5'000'000'000);
  } catch (const std::runtime_error& e) {
    fail(fmt::format("ZooKeeper: the recorder's session: {}", e.what()));
  }
}

void ZkEnsemble::kill(const std::string& name) {
  for (Member& m : members_)
    if (m.name == name) {
      kill_and_reap(m.pid);
      m.pid = -1;
    }
}

void ZkEnsemble::restart(const std::string& name) {
  for (Member& m : members_)
    if (m.name == name && m.pid <= 0) spawn(m);  // it rejoins on its own; the run goes on meanwhile
}

bool ZkEnsemble::has(const std::string& name) const {
  for (const Member& m : members_)
    if (m.name == name) return true;
  return false;
}

bool ZkEnsemble::running(const std::string& name) const {
  for (const Member& m : members_)
    if (m.name == name) return m.pid > 0;
  return false;
}

std::string ZkEnsemble::leader() const {
  for (const Member& m : members_)
    if (m.pid > 0 && mode_of(m.client, 500) == "leader") return m.name;
  return {};
}

std::vector<std::uint16_t> ZkEnsemble::client_ports() const {
  std::vector<std::uint16_t> out;
  for (const Member& m : members_) out.push_back(m.client);
  return out;
}

std::string ZkEnsemble::connect_string() const {
  std::string out;
  for (const Member& m : members_) out += fmt::format("{}127.0.0.1:{}", out.empty() ? "" : ",", m.client);
  return out;
}

std::string ZkEnsemble::member_of_port(std::uint16_t port) const {
  for (const Member& m : members_)
    if (m.client == port) return m.name;
  return {};
}

std::vector<std::uint16_t> ZkEnsemble::all_ports() const {
  std::vector<std::uint16_t> out;
  for (const Member& m : members_) out.insert(out.end(), {m.client, m.quorum, m.election});
  return out;
}

pid_t ZkEnsemble::pid(const std::string& name) const {
  for (const Member& m : members_)
    if (m.name == name) return m.pid;
  return -1;
}

std::vector<pid_t> ZkEnsemble::pids() const {
  std::vector<pid_t> out;
  for (const Member& m : members_) out.push_back(m.pid);
  return out;
}

}  // namespace locksim::reality
