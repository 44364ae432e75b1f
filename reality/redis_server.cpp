#include "reality/redis_server.hpp"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "reality/children.hpp"

namespace locksim::reality {

redisContext* redis_connect(std::uint16_t port, int timeout_ms) {
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (c == nullptr) return nullptr;
  if (c->err) {
    redisFree(c);
    return nullptr;
  }
  return c;
}

RedisServer::RedisServer(RedisOptions opts, std::string dir) : opts_(std::move(opts)), dir_(std::move(dir)) {
  ::mkdir(dir_.c_str(), 0700);
  port_ = free_loopback_port();
}

RedisServer::~RedisServer() {
  kill();
}

void RedisServer::start() {
  if (pid_ > 0) return;
  const std::string bin = find_program("redis-server");
  if (bin.empty()) throw StartError("redis-server is not installed (Debian: apt-get install redis-server)");
  const std::string log = dir_ + "/redis.log";
  std::vector<std::string> args = {bin,
                                   "--bind",
                                   "127.0.0.1",
                                   "--port",
                                   std::to_string(port_),
                                   "--dir",
                                   dir_,
                                   "--logfile",
                                   log,
                                   "--daemonize",
                                   "no",
                                   "--save",
                                   "",
                                   "--protected-mode",
                                   "yes",
                                   "--appendonly",
                                   opts_.aof ? "yes" : "no",
                                   "--appendfsync",
                                   opts_.fsync == FsyncPolicy::always     ? "always"
                                   : opts_.fsync == FsyncPolicy::periodic ? "everysec"
                                                                          : "no"};
  // A replica's initial sync starts at once (Redis 7's diskless sync waits 5 s for more replicas by default).
  args.insert(args.end(), {"--repl-diskless-sync-delay", "0"});
  if (opts_.replicaof) {
    args.insert(args.end(), {"--replicaof", "127.0.0.1", std::to_string(opts_.replicaof)});
    // The replica answers reads with what it has (before its first sync too); writes are refused.
    args.insert(args.end(), {"--replica-serve-stale-data", "yes"});
  }
  if (opts_.announce_port)
    args.insert(args.end(), {"--replica-announce-port", std::to_string(opts_.announce_port)});
  pid_ = spawn_server(std::move(args));
  const std::int64_t deadline = mono_ns() + 5'000'000'000;
  for (;;) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      forget_child(pid_);
      pid_ = -1;
      throw StartError(fmt::format("{}: redis-server exited at start-up (port {}):\n{}", opts_.name, port_,
                                   log_tail(log)));
    }
    if (redisContext* c = redis_connect(port_, 100)) {
      auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
      const bool ok = r != nullptr && r->type == REDIS_REPLY_STATUS && std::string(r->str) == "PONG";
      if (r) freeReplyObject(r);
      redisFree(c);
      if (ok) return;
    }
    if (mono_ns() > deadline || interrupted()) {
      kill();
      check_interrupted();
      throw StartError(fmt::format("{}: redis-server did not answer PING on 127.0.0.1:{} within 5 s:\n{}",
                                   opts_.name, port_, log_tail(log)));
    }
    ::usleep(10'000);
  }
}

void RedisServer::kill() {
  if (pid_ <= 0) return;
  kill_and_reap(pid_);
  pid_ = -1;
}

void RedisServer::command(const std::vector<std::string>& args) {
  redisContext* c = redis_connect(port_, 1000);
  if (!c) throw StartError(fmt::format("{}: cannot connect to 127.0.0.1:{}", opts_.name, port_));
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.c_str());
    lens.push_back(a.size());
  }
  auto* r =
      static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
  const bool ok = r != nullptr && r->type != REDIS_REPLY_ERROR;
  const std::string err = r && r->type == REDIS_REPLY_ERROR ? r->str : c->errstr;
  if (r) freeReplyObject(r);
  redisFree(c);
  if (!ok) throw StartError(fmt::format("{}: {} failed: {}", opts_.name, args.front(), err));
}

std::string RedisServer::info(const std::string& section, const std::string& field) const {
  redisContext* c = redis_connect(port_, 500);
  if (!c) return {};
  auto* r = static_cast<redisReply*>(redisCommand(c, "INFO %s", section.c_str()));
  std::string out;
  if (r && r->type == REDIS_REPLY_STRING) {
    std::istringstream in(std::string(r->str, r->len));
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.rfind(field + ":", 0) == 0) {
        out = line.substr(field.size() + 1);
        break;
      }
    }
  }
  if (r) freeReplyObject(r);
  redisFree(c);
  return out;
}

RecordListener::RecordListener(std::string node, std::uint16_t port)
    : node_(std::move(node)), port_(port), thread_([this] { loop(); }) {}

RecordListener::~RecordListener() {
  stop_ = true;
  if (const int fd = fd_.load(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
  thread_.join();
}

void RecordListener::wait_subscribed() {
  const std::int64_t deadline = mono_ns() + 5'000'000'000;
  // Subscribed on a connection that has not been lost since.
  while (subscribed_.load() <= lost_.load()) {
    if (mono_ns() > deadline)
      throw StartError(fmt::format("{}: could not subscribe to its grant records within 5 s", node_));
    check_interrupted();
    ::usleep(2'000);
  }
}

void RecordListener::wait_disconnected() {
  const std::int64_t deadline = mono_ns() + 5'000'000'000;
  while (subscribed_.load() > lost_.load() && mono_ns() < deadline) ::usleep(1'000);
}

std::vector<SetRecord> RecordListener::records() const {
  std::lock_guard lk(mu_);
  return records_;
}

void RecordListener::loop() {
  while (!stop_) {
    redisContext* c = redis_connect(port_, 200);
    if (!c) {
      ::usleep(5'000);
      continue;
    }
    fd_ = c->fd;
    if (stop_) {  // the destructor may have missed this descriptor
      fd_ = -1;
      redisFree(c);
      break;
    }
    auto* r = static_cast<redisReply*>(redisCommand(c, "SUBSCRIBE locksim:sets"));
    if (r) {
      freeReplyObject(r);
      ++subscribed_;
      for (;;) {
        void* out = nullptr;
        if (redisGetReply(c, &out) != REDIS_OK || out == nullptr) break;
        auto* m = static_cast<redisReply*>(out);
        if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 && m->element[2]->type == REDIS_REPLY_STRING) {
          std::istringstream in(std::string(m->element[2]->str, m->element[2]->len));
          std::string key, value;
          std::int64_t sec = 0, usec = 0;
          unsigned port = 0;  // the node where the SET ran (0: not said)
          if (std::getline(in, key) && std::getline(in, value) && (in >> sec >> usec)) {
            if (!(in >> port)) port = 0;
            if (port == 0 || port == port_) {
              std::lock_guard lk(mu_);
              records_.push_back({(sec * 1'000'000 + usec) * 1000, node_, key, value});
            } else {
              ++copies_;
            }
          }
        }
        freeReplyObject(m);
      }
      ++lost_;
    }
    fd_ = -1;
    redisFree(c);
  }
}

}  // namespace locksim::reality
