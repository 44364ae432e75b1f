#include "reality/store_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <sstream>
#include <system_error>

#include "reality/children.hpp"

namespace locksim::reality {

StoreServer::StoreServer(bool fenced, std::int64_t t0_ns) : fenced_(fenced), t0_(t0_ns) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::system_error(errno, std::generic_category(), "store: socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 || ::listen(listen_fd_, 64) < 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) < 0) {
    const int e = errno;
    ::close(listen_fd_);
    throw std::system_error(e, std::generic_category(), "store: bind 127.0.0.1");
  }
  port_ = ntohs(a.sin_port);
  if (::pipe2(wake_, O_CLOEXEC) < 0) {
    ::close(listen_fd_);
    throw std::system_error(errno, std::generic_category(), "store: pipe");
  }
}

StoreServer::~StoreServer() {
  if (thread_.joinable()) {
    stop_ = true;
    const char b = 'x';
    (void)!::write(wake_[1], &b, 1);
    thread_.join();
  }
  ::close(wake_[0]);
  ::close(wake_[1]);
  ::close(listen_fd_);
}

void StoreServer::start() {
  thread_ = std::thread([this] { loop(); });
}

void StoreServer::pause(bool on) {
  paused_ = on;
  const char b = 'p';
  (void)!::write(wake_[1], &b, 1);
}

std::vector<StoreEntry> StoreServer::log() const {
  std::lock_guard lk(mu_);
  return log_;
}

std::string StoreServer::handle(const std::string& line) {
  std::istringstream in(line);
  std::string op, client, token_text, key;
  std::uint64_t write = 0;
  if (!(in >> op >> client >> write >> token_text >> key) || op != "W") return "R bad request";
  std::string value;
  in >> std::ws;
  std::getline(in, value);
  StoreEntry e;
  e.time_ns = mono_ns() - t0_;
  e.client = client;
  e.write = write;
  e.key = key;
  e.value = value;
  if (token_text != "-") e.token = std::stoull(token_text);
  std::lock_guard lk(mu_);
  if (!fenced_) {
    e.accepted = true;
  } else if (!e.token) {
    e.reason = "no token";
  } else {
    auto it = highest_.find(key);
    if (it != highest_.end() && *e.token < it->second) {
      e.reason = fmt::format("token {} < highest {}", *e.token, it->second);
    } else {
      e.accepted = true;
      highest_[key] = *e.token;
    }
  }
  log_.push_back(e);
  return e.accepted ? "A" : "R " + e.reason;
}

void StoreServer::loop() {
  std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
  std::map<int, std::string> buffers;
  // Requests that arrived while paused, in arrival order: the connection and the line.
  std::vector<std::pair<int, std::string>> waiting;
  const auto answer = [&](int fd, const std::string& line) {
    const std::string reply = handle(line) + "\n";
    if (fd >= 0) (void)!::write(fd, reply.data(), reply.size());
  };
  for (;;) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents) {
      char b[16];
      (void)!::read(wake_[0], b, sizeof b);
      if (stop_) break;
      if (!paused_) {
        for (const auto& [fd, line] : waiting) answer(fd, line);  // resumed: the queue, in arrival order
        waiting.clear();
      }
    }
    if (fds[1].revents & POLLIN) {
      const int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) fds.push_back({c, POLLIN, 0});
    }
    for (std::size_t i = 2; i < fds.size();) {
      if (!fds[i].revents) {
        ++i;
        continue;
      }
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        ::close(fds[i].fd);
        buffers.erase(fds[i].fd);
        for (auto& w : waiting)  // what arrived before the close is still taken at the resume, unanswered
          if (w.first == fds[i].fd) w.first = -1;
        fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      std::string& b = buffers[fds[i].fd];
      b.append(buf, static_cast<std::size_t>(n));
      for (std::size_t nl; (nl = b.find('\n')) != std::string::npos;) {
        if (paused_)
          waiting.emplace_back(fds[i].fd, b.substr(0, nl));
        else
          answer(fds[i].fd, b.substr(0, nl));
        b.erase(0, nl + 1);
      }
      ++i;
    }
  }
  for (std::size_t i = 2; i < fds.size(); ++i) ::close(fds[i].fd);
}

}  // namespace locksim::reality
