#include "reality/proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <stdexcept>

#include "reality/children.hpp"

namespace locksim::reality {

namespace {

constexpr std::size_t kChunk = 64 * 1024;
/// What the proxy holds per direction before it stops reading the sender (its socket buffers then fill).
constexpr std::size_t kMaxHeld = 4 * 1024 * 1024;
/// How often a connection waiting for its server to listen tries again.
constexpr std::int64_t kConnectRetryNs = 20'000'000;

int listen_loopback(std::uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) throw std::runtime_error("proxy: socket failed");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 || ::listen(fd, 64) < 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) < 0) {
    ::close(fd);
    throw std::runtime_error("proxy: cannot listen on a loopback port");
  }
  port = ntohs(a.sin_port);
  return fd;
}

/// A blocking connect to 127.0.0.1:port (loopback: it succeeds or is refused at once), then non-blocking.
int connect_loopback(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) {
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

/// One forwarded connection: `fd[0]` the client's side (accepted), `fd[1]` the server's (connected).
/// Direction d reads fd[d] and writes fd[1 - d].
struct Proxy::Conn {
  struct Chunk {
    std::int64_t release = 0;  ///< mono_ns at which it may be written
    std::string bytes;         ///< empty: the sender's end of stream (a FIN), then shutdown(SHUT_WR)
  };
  std::size_t link = 0;
  int fd[2] = {-1, -1};
  std::deque<Chunk> queue[2];
  std::size_t held[2] = {0, 0};
  std::size_t offset[2] = {0, 0};    ///< of the front chunk already written
  bool eof[2] = {false, false};      ///< the sender of that direction closed
  bool shut[2] = {false, false};     ///< that direction's FIN was passed on
  bool started[2] = {false, false};  ///< that direction's first chunk was read
  std::int64_t accepted_at = 0;      ///< mono_ns of the accept
  bool dead = false;
};

Proxy::Proxy(std::uint64_t seed) : rng_(Rng(seed).stream("proxy")) {
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) < 0) throw std::runtime_error("proxy: pipe failed");
}

Proxy::~Proxy() {
  stop();
  for (int& f : wake_)
    if (f >= 0) ::close(f), f = -1;
}

std::size_t Proxy::add_link(std::string from, std::string to, std::uint16_t target) {
  auto l = std::make_unique<Link>();
  l->from = std::move(from);
  l->to = std::move(to);
  l->target = target;
  l->listen_fd = listen_loopback(l->port);
  std::size_t index = 0;
  {
    std::lock_guard lock(mu_);
    links_.push_back(std::move(l));
    index = links_.size() - 1;
  }
  wake();  // a running loop polls its listener from now on
  return index;
}

std::size_t Proxy::add_hidden_link(std::string from, std::string to, std::uint16_t target) {
  auto l = std::make_unique<Link>();
  l->from = std::move(from);
  l->to = std::move(to);
  l->target = target;
  std::lock_guard lock(mu_);
  links_.push_back(std::move(l));
  return links_.size() - 1;
}

void Proxy::set_classifier(std::size_t entry, Classifier c) {
  std::lock_guard lock(mu_);
  links_.at(entry)->classify = std::move(c);
}

void Proxy::set_rewrite(std::size_t link, Dir d, std::string from, std::string to) {
  if (from.size() != to.size()) throw std::invalid_argument("proxy: a rewrite keeps the length");
  std::lock_guard lock(mu_);
  links_.at(link)->rewrite_from[static_cast<int>(d)] = std::move(from);
  links_.at(link)->rewrite_to[static_cast<int>(d)] = std::move(to);
}

std::uint64_t Proxy::accepted(std::size_t link) const {
  return links_.at(link)->accepted.load();
}

std::uint16_t Proxy::port(std::size_t link) const {
  return links_.at(link)->port;
}
const std::string& Proxy::from(std::size_t link) const {
  return links_.at(link)->from;
}
const std::string& Proxy::to(std::size_t link) const {
  return links_.at(link)->to;
}

void Proxy::set_connect_patience(std::size_t link, std::chrono::nanoseconds patience) {
  std::lock_guard lock(mu_);
  links_.at(link)->patience_ns = patience.count();
}

void Proxy::retarget(std::size_t link, std::uint16_t target) {
  std::lock_guard lock(mu_);
  links_.at(link)->target = target;
}

void Proxy::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { loop(); });
}

void Proxy::stop() {
  stop_ = true;
  wake();
  if (thread_.joinable()) thread_.join();
  for (auto& c : conns_)
    for (int& f : c->fd)
      if (f >= 0) ::close(f), f = -1;
  conns_.clear();
  open_ = 0;
  for (auto& l : links_)
    if (l->listen_fd >= 0) ::close(l->listen_fd), l->listen_fd = -1;
}

void Proxy::drop(std::size_t link) {
  {
    std::lock_guard lock(mu_);
    for (auto& c : conns_)
      if (c->link == link && !c->dead) {
        // shutdown, not only close: a forked process may hold a copy of the descriptor.
        for (int f : c->fd)
          if (f >= 0) ::shutdown(f, SHUT_RDWR);
        for (int d = 0; d < 2; ++d) {
          c->queue[d].clear();
          c->held[d] = 0;
          c->offset[d] = 0;
        }
        c->dead = true;
      }
  }
  wake();
}

void Proxy::wake() {
  const char b = 'w';
  if (wake_[1] >= 0) (void)!::write(wake_[1], &b, 1);
}

void Proxy::set_delay(std::size_t link, Dir d, const Dist& delay) {
  {
    std::lock_guard lock(mu_);
    links_.at(link)->dir[static_cast<int>(d)].delay = delay;
  }
  wake();
}

void Proxy::set_spike(std::size_t link, Dir d, std::chrono::nanoseconds extra, std::uint32_t count) {
  {
    std::lock_guard lock(mu_);
    Control& c = links_.at(link)->dir[static_cast<int>(d)];
    c.spike = extra;
    c.spike_left = count;
    c.spike_all = count == 0 && extra.count() > 0;
  }
  wake();
}

void Proxy::set_cut(std::size_t link, Dir d, bool cut) {
  {
    std::lock_guard lock(mu_);
    links_.at(link)->dir[static_cast<int>(d)].cut = cut;
  }
  wake();
}

std::uint64_t Proxy::forwarded(std::size_t link, Dir d) const {
  return links_.at(link)->dir[static_cast<int>(d)].forwarded.load();
}

std::size_t Proxy::open_connections() const {
  return open_.load();
}

std::int64_t Proxy::draw_delay(Link& l, Dir d, std::int64_t now) {
  // Under mu_.
  Control& c = l.dir[static_cast<int>(d)];
  std::int64_t t = now + c.delay.sample(rng_).count();
  if (c.spike_all || c.spike_left > 0) {
    t += c.spike.count();
    if (c.spike_left > 0 && --c.spike_left == 0) c.spike = std::chrono::nanoseconds{0};
  }
  return t;
}

void Proxy::loop() {
  std::vector<pollfd> fds;
  // What each pollfd is: a link's listener, a connection's side, or the wake pipe.
  struct Slot {
    int kind;  // 0 wake, 1 listener, 2 connection side
    std::size_t index;
    int side;
  };
  std::vector<Slot> slots;
  char buf[kChunk];
  while (!stop_) {
    const std::int64_t now = mono_ns();
    std::int64_t next = now + 50'000'000;  // at least every 50 ms
    fds.clear();
    slots.clear();
    fds.push_back({wake_[0], POLLIN, 0});
    slots.push_back({0, 0, 0});
    {
      std::lock_guard lock(mu_);
      for (std::size_t i = 0; i < links_.size(); ++i)
        if (links_[i]->listen_fd >= 0) {
          fds.push_back({links_[i]->listen_fd, POLLIN, 0});
          slots.push_back({1, i, 0});
        }
      for (std::size_t k = 0; k < conns_.size(); ++k) {
        Conn& c = *conns_[k];
        Link& l = *links_[c.link];
        if (c.dead) continue;
        // The server's side is connected once the client→server direction is not cut.
        if (c.fd[1] < 0 && !l.dir[0].cut) {
          c.fd[1] = connect_loopback(l.target);
          if (c.fd[1] < 0) {  // refused: the server is down; the client sees its connection closed
            if (now - c.accepted_at < l.patience_ns) {  // or not listening yet: tried again shortly
              next = std::min(next, now + kConnectRetryNs);
              continue;
            }
            c.dead = true;
            continue;
          }
          no_delay(c.fd[1]);
        }
        for (int d = 0; d < 2; ++d) {
          const int src = c.fd[d], dst = c.fd[1 - d];
          short ev_src = 0, ev_dst = 0;
          if (src >= 0 && !c.eof[d] && !l.dir[d].cut && c.held[d] < kMaxHeld) ev_src |= POLLIN;
          if (!c.queue[d].empty() && !l.dir[d].cut && dst >= 0) {
            if (c.queue[d].front().release <= now)
              ev_dst |= POLLOUT;
            else
              next = std::min(next, c.queue[d].front().release);
          }
          if (ev_src) {
            fds.push_back({src, ev_src, 0});
            slots.push_back({2, k, d});
          }
          if (ev_dst) {
            fds.push_back({dst, ev_dst, 0});
            slots.push_back({2, k, d + 2});  // side 2/3: writing direction d
          }
        }
      }
    }
    const std::int64_t wait = std::max<std::int64_t>(0, next - mono_ns());
    ::poll(fds.data(), fds.size(), static_cast<int>((wait + 999'999) / 1'000'000));
    if (stop_) break;
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      const Slot s = slots[i];
      if (s.kind == 0) {
        while (::read(wake_[0], buf, sizeof buf) > 0) {
        }
      } else if (s.kind == 1) {
        Link& l = *links_[s.index];
        for (;;) {
          const int fd = ::accept4(l.listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
          if (fd < 0) break;
          no_delay(fd);
          auto c = std::make_unique<Conn>();
          c->link = s.index;
          if (l.classify)
            if (const auto to = l.classify(fd); to && *to < links_.size()) c->link = *to;
          ++links_[c->link]->accepted;
          c->fd[0] = fd;
          c->accepted_at = mono_ns();
          conns_.push_back(std::move(c));
          ++open_;
        }
      } else if (s.side < 2) {
        // Read what direction d's sender has, and queue it with its release time.
        Conn& c = *conns_[s.index];
        const int d = s.side;
        const ssize_t n = ::read(c.fd[d], buf, sizeof buf);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          c.eof[d] = true;
          const std::int64_t at = c.queue[d].empty() ? mono_ns() : c.queue[d].back().release;
          c.queue[d].push_back({at, {}});
        } else if (n > 0) {
          std::int64_t at = draw_delay(*links_[c.link], static_cast<Dir>(d), mono_ns());
          if (!c.queue[d].empty()) at = std::max(at, c.queue[d].back().release);  // never reorder
          std::string bytes(buf, static_cast<std::size_t>(n));
          const Link& l = *links_[c.link];
          if (!c.started[d] && !l.rewrite_from[d].empty())
            if (const auto p = bytes.find(l.rewrite_from[d]); p != std::string::npos)
              bytes.replace(p, l.rewrite_from[d].size(), l.rewrite_to[d]);
          c.started[d] = true;
          c.queue[d].push_back({at, std::move(bytes)});
          c.held[d] += static_cast<std::size_t>(n);
        }
      } else {
        // Write direction d's due chunks to its receiver.
        Conn& c = *conns_[s.index];
        const int d = s.side - 2;
        const int dst = c.fd[1 - d];
        const std::int64_t t = mono_ns();
        while (!c.queue[d].empty() && c.queue[d].front().release <= t) {
          Conn::Chunk& ch = c.queue[d].front();
          if (ch.bytes.empty()) {
            ::shutdown(dst, SHUT_WR);
            c.shut[d] = true;
            c.queue[d].pop_front();
            continue;
          }
          const ssize_t n =
              ::send(dst, ch.bytes.data() + c.offset[d], ch.bytes.size() - c.offset[d], MSG_NOSIGNAL);
          if (n < 0) {
            if (errno != EAGAIN && errno != EINTR) c.dead = true;
            break;
          }
          c.offset[d] += static_cast<std::size_t>(n);
          links_[c.link]->dir[d].forwarded += static_cast<std::uint64_t>(n);
          if (c.offset[d] < ch.bytes.size()) break;
          c.held[d] -= ch.bytes.size();
          c.offset[d] = 0;
          c.queue[d].pop_front();
        }
      }
    }
    // Connections that are over: both directions passed their FIN on, or one side failed.
    for (auto& c : conns_)
      if (c->dead || (c->shut[0] && c->shut[1])) {
        // shutdown before close: a forked client may hold a copy of the descriptor, and the other end must
        // see this end go.
        for (int& f : c->fd)
          if (f >= 0) ::shutdown(f, SHUT_RDWR), ::close(f), f = -1;
        c->dead = true;
      }
    const auto before = conns_.size();
    std::erase_if(conns_, [](const std::unique_ptr<Conn>& c) { return c->dead; });
    open_ -= before - conns_.size();
  }
}

}  // namespace locksim::reality
