#pragma once
/// A userspace TCP proxy on loopback that stands for the network between a real run's processes: one
/// listening port per link (a client process and a server process), each accepted connection forwarded to the
/// server's real port, byte for byte, in both directions. Each direction of a link has controls the parent
/// changes while the run goes:
///
/// - delay: every chunk read from one side (one read(2), so for the request/response protocols here one
///   message or a part of one) is held for a duration drawn from the link's distribution with the proxy's
///   seeded Rng, and released no earlier than the chunk before it: bytes are never reordered within a
///   connection.
/// - a delay spike: the next `count` chunks (0: every chunk until it is cleared) get `extra` on top.
/// - cut (a partition, one direction): nothing is forwarded that way until it heals. The bytes are held, not
///   lost: a TCP connection over a real partition stalls (its segments are retransmitted until they get
///   through or the endpoint gives up) and never loses bytes from the middle of a stream. The proxy stops
///   reading the sending side (its socket buffers fill, as a real sender's do), keeps what it had already
///   read, and delivers all of it, in order, after the heal. A connection a client opens while its link is
///   cut towards the server is accepted (the kernel completes the handshake before the proxy sees it) but
///   not connected onward until the heal; a connection the client gives up on is closed by the client, and
///   that close (FIN) is held like its bytes.
///
/// One thread runs one poll loop for every link. The destructor (or stop()) closes every socket and joins it.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "locksim/sim/distribution.hpp"
#include "locksim/sim/random.hpp"

namespace locksim::reality {

class Proxy {
 public:
  /// The two directions of a link: `up` from the client (the connecting side) to the server, `down` back.
  enum class Dir : std::uint8_t { up = 0, down = 1 };

  explicit Proxy(std::uint64_t seed);
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  /// A link `from` (the client) → `to` (the server) listening on a fresh loopback port, forwarding to
  /// 127.0.0.1:`target`. Links may be added after start() too (the clients' links once the members' run).
  /// Returns its index.
  std::size_t add_link(std::string from, std::string to, std::uint16_t target);
  /// A link with no listening port of its own (port() 0): connections reach it through an entry link's
  /// classifier (below), as when every member of a cluster dials one advertised port.
  std::size_t add_hidden_link(std::string from, std::string to, std::uint16_t target);
  /// Which link a connection accepted on `entry` belongs to: the classifier gets the accepted socket and
  /// returns a link index (a hidden link towards the same target), or nothing: the connection stays on
  /// `entry`. Called on the proxy's thread, at accept, before any byte is read. Set before start().
  using Classifier = std::function<std::optional<std::size_t>(int fd)>;
  void set_classifier(std::size_t entry, Classifier c);
  /// The first chunk of each connection in that direction has `from` replaced by `to` (the same length):
  /// a member that announces its own address in its first message (ZooKeeper's election handshake, which
  /// the other side dials back) announces the proxy's port instead. Set before the link carries anything.
  void set_rewrite(std::size_t link, Dir d, std::string from, std::string to);
  /// Connections accepted on that link (as classified) so far.
  std::uint64_t accepted(std::size_t link) const;
  std::size_t links() const { return links_.size(); }
  std::uint16_t port(std::size_t link) const;
  const std::string& from(std::size_t link) const;
  const std::string& to(std::size_t link) const;
  /// A connection accepted on that link while its server does not listen is connected onward once it does,
  /// within `patience` of the accept, instead of being closed at once (the default): the port a member dials
  /// before its peer opened it. A ZooKeeper leader opens its quorum port only once elected, and a follower
  /// that finds it refused retries; accepted and then closed by the proxy, it would give the leader up.
  void set_connect_patience(std::size_t link, std::chrono::nanoseconds patience);
  /// Points a link at another port of its server (a server restarted on a new port); new connections only.
  void retarget(std::size_t link, std::uint16_t target);

  /// Starts the forwarding thread (after the clients were forked: none of them holds its state).
  void start();
  /// Closes every connection and listening socket and joins the thread; idempotent.
  void stop();

  /// Every chunk in that direction is held a duration drawn from `delay` (constant 0: none).
  void set_delay(std::size_t link, Dir d, const Dist& delay);
  /// The next `count` chunks in that direction (0: every one until cleared with extra 0) get `extra` more.
  void set_spike(std::size_t link, Dir d, std::chrono::nanoseconds extra, std::uint32_t count);
  /// Cuts (true) or heals (false) that direction.
  void set_cut(std::size_t link, Dir d, bool cut);

  /// Ends every connection of the link now, both sides shut down and what the proxy held for them dropped
  /// (not delivered): the stand-in for bytes that were still in a killed sender's own buffers.
  void drop(std::size_t link);

  /// Bytes forwarded so far in that direction (written to the other side).
  std::uint64_t forwarded(std::size_t link, Dir d) const;
  /// Connections open now, over every link.
  std::size_t open_connections() const;

 private:
  struct Control {
    Dist delay = Dist::constant_of(std::chrono::nanoseconds{0});
    std::chrono::nanoseconds spike{0};
    std::uint32_t spike_left = 0;
    bool spike_all = false;
    bool cut = false;
    std::atomic<std::uint64_t> forwarded{0};
  };
  struct Link {
    std::string from, to;
    std::uint16_t target = 0, port = 0;
    int listen_fd = -1;
    Classifier classify;
    std::string rewrite_from[2], rewrite_to[2];
    std::atomic<std::uint64_t> accepted{0};
    std::int64_t patience_ns = 0;
    Control dir[2];
  };
  struct Conn;

  void loop();
  void wake();
  std::int64_t draw_delay(Link& l, Dir d, std::int64_t now);

  std::vector<std::unique_ptr<Link>> links_;
  std::vector<std::unique_ptr<Conn>> conns_;
  mutable std::mutex mu_;
  Rng rng_;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> open_{0};
  std::thread thread_;
};

}  // namespace locksim::reality
