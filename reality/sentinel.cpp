#include "reality/sentinel.hpp"

#include <hiredis/hiredis.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "reality/children.hpp"
#include "reality/redis_server.hpp"

namespace locksim::reality {

namespace {

/// A connection whose commands time out after `timeout_ms` too.
redisContext* connect(std::uint16_t port, int timeout_ms) {
  redisContext* c = redis_connect(port, timeout_ms);
  if (c == nullptr) return nullptr;
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  redisSetTimeout(c, tv);
  return c;
}

/// The number of replicas the sentinel lists for mymaster; -1 without an answer.
int replicas_known(std::uint16_t port) {
  redisContext* c = connect(port, 200);
  if (!c) return -1;
  auto* r = static_cast<redisReply*>(redisCommand(c, "SENTINEL replicas mymaster"));
  const int n = r && r->type == REDIS_REPLY_ARRAY ? static_cast<int>(r->elements) : -1;
  if (r) freeReplyObject(r);
  redisFree(c);
  return n;
}

}  // namespace

std::optional<std::uint16_t> sentinel_master_port(std::uint16_t port, int timeout_ms) {
  redisContext* c = connect(port, std::max(1, timeout_ms));
  if (!c) return std::nullopt;
  auto* r = static_cast<redisReply*>(redisCommand(c, "SENTINEL get-master-addr-by-name mymaster"));
  std::optional<std::uint16_t> out;
  if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING)
    out = static_cast<std::uint16_t>(std::stoul(std::string(r->element[1]->str, r->element[1]->len)));
  if (r) freeReplyObject(r);
  redisFree(c);
  return out;
}

RedisSentinel::RedisSentinel(std::string dir, std::uint16_t master_port, std::int64_t down_after_ms,
                             std::int64_t failover_timeout_ms)
    : dir_(std::move(dir)),
      master_port_(master_port),
      down_after_ms_(std::max<std::int64_t>(1, down_after_ms)),
      failover_timeout_ms_(std::max<std::int64_t>(1, failover_timeout_ms)) {
  ::mkdir(dir_.c_str(), 0700);
  port_ = free_loopback_port();
}

RedisSentinel::~RedisSentinel() {
  kill();
}

void RedisSentinel::start(std::size_t replicas, std::int64_t wait_ms) {
  if (pid_ > 0) return;
  const std::string bin = find_program("redis-server");
  if (bin.empty()) throw StartError("redis-server is not installed (Debian: apt-get install redis-server)");
  const std::string conf = dir_ + "/sentinel.conf", log = dir_ + "/sentinel.log";
  {
    // The sentinel rewrites this file (its state); it must be writable.
    std::ofstream out(conf);
    out << fmt::format(
        "bind 127.0.0.1\nport {}\ndir {}\nlogfile {}\ndaemonize no\nprotected-mode no\n"
        "sentinel resolve-hostnames no\nsentinel deny-scripts-reconfig yes\n"
        "sentinel monitor mymaster 127.0.0.1 {} 1\n"
        "sentinel down-after-milliseconds mymaster {}\nsentinel failover-timeout mymaster {}\n"
        "sentinel parallel-syncs mymaster 1\n",
        port_, dir_, log, master_port_, down_after_ms_, failover_timeout_ms_);
  }
  std::vector<std::string> args = {bin, conf, "--sentinel"};
  pid_ = spawn_server(std::move(args));
  if (on_spawn_) on_spawn_(pid_);
  const std::int64_t deadline = mono_ns() + wait_ms * 1'000'000;
  for (;;) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      forget_child(pid_);
      pid_ = -1;
      throw StartError(fmt::format("sentinel1: redis-server --sentinel exited at start-up (port {}):\n{}",
                                   port_, log_tail(log)));
    }
    if (replicas_known(port_) >= static_cast<int>(replicas)) return;
    if (mono_ns() > deadline || interrupted()) {
      kill();
      check_interrupted();
      throw StartError(fmt::format(
          "sentinel1: the sentinel on 127.0.0.1:{} did not list {} replica(s) of mymaster within {} ms:\n{}",
          port_, replicas, wait_ms, log_tail(log)));
    }
    ::usleep(20'000);
  }
}

void RedisSentinel::kill() {
  if (pid_ <= 0) return;
  kill_and_reap(pid_);
  pid_ = -1;
}

std::optional<std::uint16_t> RedisSentinel::master_port(int timeout_ms) const {
  return sentinel_master_port(port_, timeout_ms);
}

std::string RedisSentinel::log() const {
  std::ifstream in(dir_ + "/sentinel.log");
  std::string out;
  for (std::string line; std::getline(in, line);)
    if (line.find(" +") != std::string::npos || line.find(" -") != std::string::npos) out += line + "\n";
  return out;
}

}  // namespace locksim::reality
