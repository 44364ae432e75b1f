#include "reality/client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "locksim/protocols/redis/redis.hpp"
#include "locksim/scenarios/workload.hpp"
#include "reality/children.hpp"
#include "reality/etcd_client.hpp"
#include "reality/pg_client.hpp"
#include "reality/redis_link.hpp"
#include "reality/zk_client.hpp"

namespace locksim::reality {

namespace {

std::string token_text(const std::optional<std::uint64_t>& t) {
  return t ? std::to_string(*t) : "-";
}

struct Grant {
  std::uint64_t id = 0;
  std::string value;
  std::optional<std::uint64_t> token;
  std::int64_t valid_until = 0;  ///< run ns, monotonic
};

class Client {
 public:
  explicit Client(const ClientPlan& p)
      : p_(p), rng_(static_cast<std::uint64_t>(real_ns()) ^ (static_cast<std::uint64_t>(::getpid()) << 32)) {
    if (etcd()) {
      etcd_ = std::make_unique<EtcdLink>(p.ports, kEtcdTimeout, p.t0, rng_.next(),
                                         [this](const std::string& l, const std::string& d) { note(l, d); });
      lease_algo_.emplace(p.config.keepalive_interval, raft::acquire_timeout(p.config),
                          raft::trusts_reply(p.config));
    } else if (db()) {
      // One transaction is bounded by rpc_timeout, or by the TTL (cirello.io/pglock's rule).
      const Duration tx = p.config.rpc_timeout > 0ns ? p.config.rpc_timeout : p.config.ttl;
      pg_ = std::make_unique<PgLink>(p.pg_conninfo, tx.count(), p.spec.name, p.t0,
                                     [this](const std::string& l, const std::string& d) { note(l, d); });
      db_algo_.emplace(
          dblease::LeaseClientOptions{.monotonic_deadline = p.config.variant == "monotonic-deadline",
                                      .app_counter = p.config.variant == "app-counter",
                                      .tx_timeout = p.config.rpc_timeout,
                                      .first_token = p.config.first_token});
    } else if (zk()) {
      std::string hosts;
      for (std::uint16_t port : p.ports)
        hosts += fmt::format("{}127.0.0.1:{}", hosts.empty() ? "" : ",", port);
      // The session timeout asked for is the lock's TTL, as the simulated client asks (the ensemble
      // negotiates it into [2, 20] x tickTime).
      zk_ = std::make_unique<ZkLink>(hosts, p.spec.name, zk::rpc_timeout(p.config), p.t0, rng_.next(),
                                     [this](const std::string& l, const std::string& d) { note(l, d); });
      zk_recipe_.emplace(zk::acquire_timeout(p.config), p.config.variant == "sequence-token");
    } else {
      redis_ =
          std::make_unique<RedisLink>(p.ports, p.cut, p.config.node_timeout, p.t0, rng_.next(),
                                      [this](const std::string& l, const std::string& d) { note(l, d); });
      if (p.sentinel_port) redis_->use_sentinel(p.sentinel_port, p.real_ports);
      if (p.protocol == "redlock")
        redlock_.emplace(p.config);
      else
        single_.emplace(p.config, p.protocol == "redis+incr" || p.config.incr_token);
    }
  }
  ~Client() {
    if (store_ >= 0) ::close(store_);
  }

  void run() { block(program_of(p_.spec)); }

 private:
  std::int64_t now() const { return mono_ns() - p_.t0; }

  void say(const std::string& line) {
    const std::string l = line + "\n";
    if (::write(p_.report_fd, l.data(), l.size()) < 0) ::_exit(3);
  }
  void note(const std::string& label, const std::string& detail = {}) {
    say(fmt::format("note {} {} {}", now(), label, detail));
    char b = 0;
    if (::read(p_.ack_fd, &b, 1) != 1) ::_exit(3);
  }

  bool holding() const { return held_.has_value() && !lost_; }
  bool etcd() const { return p_.protocol == "lease" || p_.protocol == "lease+fence"; }
  bool db() const { return p_.protocol == "db-lease" || p_.protocol == "db-lease+fence"; }
  bool zk() const { return p_.protocol == "zookeeper" || p_.protocol == "zookeeper+fence"; }

  void block(const std::vector<ClientStep>& steps) {
    for (const ClientStep& s : steps)
      if (!one(s)) return;
  }

  bool one(const ClientStep& s) {
    using K = ClientStep::Kind;
    if (!s.note.empty()) note(s.note, std::string(to_string(s.kind)));
    const bool holder_step = s.kind == K::write || s.kind == K::work || s.kind == K::check;
    if (holder_step && !holding()) return true;
    switch (s.kind) {
      case K::acquire:
        return acquire();
      case K::write:
        write();
        break;
      case K::work:
      case K::sleep:
        // A uniform range is drawn here, at random (a real run replays nothing).
        sleep_ns(s.duration.kind == Dist::Kind::uniform
                     ? rng_.between(s.duration.min.count(), s.duration.max.count())
                     : s.duration.min.count());
        break;
      case K::check:
        checked_ = now();
        if ((etcd_ && !lease_algo_->believes_valid(*etcd_, *lease_grant_)) || !db_believes_valid() ||
            (zk_ && !zk_recipe_->believes_valid(*zk_, *zk_grant_))) {
          note("expired", "lease no longer valid before write; not writing");
          lose("expired");
        } else {
          note("lease-check", fmt::format("ok, valid_for={:.3f}s", (held_->valid_until - now()) / 1e9));
        }
        break;
      case K::release:
        release();
        break;
      case K::repeat:
        for (std::uint64_t i = 0; i < s.count; ++i) block(s.steps);
        break;
      default:  // the plan refuses programs with other steps (plan.cpp)
        break;
    }
    return true;
  }

  void sleep_ns(std::int64_t d) {
    if (d > 0) sleep_until_ns(mono_ns() + d);
  }

  void lose(const char* reason) {
    say(fmt::format("end {} {} {}", held_->id, now(), reason));
    lost_ = true;
  }

  bool acquire() {
    const std::int64_t give_up = p_.spec.give_up_at.count() > 0 ? p_.spec.give_up_at.count() : kGiveUpNever;
    for (;;) {
      if (now() >= give_up) {
        note("gave-up");
        return false;
      }
      const std::int64_t requested = now();
      note("acquire", fmt::format("key={}", p_.lock_key));
      std::optional<Grant> g = zk()     ? zk_acquire()
                               : etcd() ? lease_acquire()
                               : db()   ? db_acquire()
                                        : redis_acquire();
      if (!g) {
        note("acquire-failed");
        sleep_ns(p_.spec.retry_delay.count());
        continue;
      }
      g->id = grants_++;
      lost_ = false;
      checked_.reset();
      writes_ = 0;
      ++holds_;
      // The request time is floored to the microsecond below: the servers' TIME has microseconds only.
      say(fmt::format("grant {} {} {} {} {} {}", g->id, requested / 1000 * 1000 - 1000, now(), g->valid_until,
                      token_text(g->token), g->value));
      held_ = std::move(g);
      note("acquired",
           fmt::format("token={} valid_for={:.3f}s", held_->token ? std::to_string(*held_->token) : "none",
                       (held_->valid_until - now()) / 1e9));
      return true;
    }
  }

  /// SingleNodeAlgorithm or RedlockAlgorithm (protocols/redis/lock_algorithms.hpp), the simulated clients'
  /// own code, over real Redis (redis_link.hpp).
  std::optional<Grant> redis_acquire() {
    const std::optional<locksim::Grant> g = redlock_ ? redlock_->acquire(*redis_, p_.lock_key, p_.config.ttl)
                                                     : single_->acquire(*redis_, p_.lock_key, p_.config.ttl);
    if (!g) return std::nullopt;
    return Grant{0, g->value, g->token, g->valid_until.count()};
  }

  void redis_release(const std::string& value) {
    locksim::Grant g;
    g.key = p_.lock_key;
    g.value = value;
    if (redlock_)
      redlock_->release(*redis_, g);
    else
      single_->release(*redis_, g);
  }

  void release() {
    if (!held_) return;
    const Grant g = *held_;
    held_.reset();
    if (lost_) {
      lost_ = false;
      return;
    }
    say(fmt::format("end {} {} released", g.id, now()));
    if (zk_)
      zk_recipe_->release(*zk_, *zk_grant_);  // deletes the lock node; the session stays open
    else if (etcd_)
      lease_algo_->release(*etcd_, *lease_grant_);  // unlock the key, then revoke the lease
    else if (pg_)
      db_algo_->release(*pg_, *db_grant_);  // only while the row names this owner (and token)
    else
      redis_release(g.value);
    note("released");
  }

  /// LeaseAlgorithm::acquire (protocols/raft/lease_algorithm.hpp), the simulated client's own, over etcd's
  /// v3 gateway (etcd_client.hpp): a lease of the TTL, valid from when the grant was sent, kept alive while
  /// the v3lock Lock call waits for the key name/<lease> to hold; its create revision is the token.
  std::optional<Grant> lease_acquire() {
    std::optional<locksim::Grant> g = lease_algo_->acquire(*etcd_, p_.lock_key, p_.config.ttl);
    if (!g) return std::nullopt;
    // The parent acks this note once etcd's own watch events made the key the holder: the service record
    // precedes the moment the client counts itself granted.
    note("acquire-committed", fmt::format("lease={} revision={}", g->lease_id, token_text(g->token)));
    lease_grant_ = std::move(g);
    return Grant{0, lease_grant_->value, lease_grant_->token, lease_grant_->valid_until.count()};
  }

  /// LockRecipe::acquire (protocols/zookeeper/lock_recipe.hpp), the simulated client's own, over the C
  /// client (zk_client.hpp): the lowest ephemeral sequential node holds, believed until the client learns its
  /// session expired; the token is the node's czxid. An attempt gives up after the simulated client's acquire
  /// timeout (max(3 x TTL, 5 s), or acquire_timeout_ms).
  std::optional<Grant> zk_acquire() {
    std::optional<locksim::Grant> g = zk_recipe_->acquire(*zk_, p_.lock_key, p_.config.ttl);
    if (!g) return std::nullopt;
    // The parent acks this note once its own session saw the node become the lowest child: the service's
    // record precedes the moment the client counts itself granted.
    note("acquire-committed", fmt::format("czxid={} session={}", g->value, g->lease_id));
    zk_grant_ = std::move(g);
    return Grant{0, zk_grant_->value, zk_grant_->token, INT64_MAX};
  }

  /// LeaseAlgorithm::acquire (protocols/dblease/lease_algorithm.hpp), the simulated client's own, over
  /// PostgreSQL (pg_client.hpp); a held lease answers "not acquired" at once and the workload's retry_delay
  /// paces the retries.
  std::optional<Grant> db_acquire() {
    std::optional<locksim::Grant> g = db_algo_->acquire(*pg_, p_.lock_key, p_.config.ttl);
    if (!g) return std::nullopt;
    db_grant_ = std::move(g);
    return Grant{0, db_grant_->value, db_grant_->token, db_grant_->valid_until.count()};
  }

  /// LeaseAlgorithm::believes_valid for the database lease (its wall clock before the row's Expires, or
  /// monotonic-deadline's); every other protocol: the monotonic clock before valid_until.
  bool db_believes_valid() {
    if (db()) return db_algo_->believes_valid(*pg_, *db_grant_);
    return now() < held_->valid_until;
  }

  int store() {
    if (store_ >= 0) return store_;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(p_.store_port);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) {
      if (fd >= 0) ::close(fd);
      return -1;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return store_ = fd;
  }

  void write() {
    const std::int64_t checked = checked_.value_or(now());
    const std::uint32_t slot = writes_++;
    const std::uint64_t wid = writes_sent_++;
    const std::string value = fmt::format("{}#{}.{}", p_.spec.name, holds_, slot);
    const std::optional<std::uint64_t> token = p_.send_tokens ? held_->token : std::nullopt;
    note("write", fmt::format("value={} token={}", value, token ? std::to_string(*token) : "none"));
    // A pause the note triggered has happened by now: the write leaves the client after it.
    say(fmt::format("write {} {} {} {} {} {} {}", wid, held_->id, now(), checked, checked_ ? 1 : 0,
                    token_text(token), value));
    if (p_.same_db) {
      // WriteWithFence in db1 (resource = "same-db"): the database decides and logs it.
      const std::string reply = pg_->write(p_.resource_key, p_.spec.name, wid, token, value);
      if (reply.empty()) {
        note("write-timeout");
      } else {
        const bool accepted = reply == "A";
        say(fmt::format("ack {} {}", wid, accepted ? 1 : 0));
        note(accepted ? "write-accepted" : "write-rejected", accepted ? "" : reply.substr(2));
      }
      return;
    }
    const int fd = store();
    const std::string line =
        fmt::format("W {} {} {} {} {}\n", p_.spec.name, wid, token_text(token), p_.resource_key, value);
    std::string reply;
    if (fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size())) {
      pollfd pf{fd, POLLIN, 0};
      char c = 0;
      while (::poll(&pf, 1, 5000) == 1 && ::read(fd, &c, 1) == 1 && c != '\n') reply += c;
    }
    if (fd < 0) {
      note("write-refused", "connection refused: the resource is not running");
    } else if (reply.empty()) {
      note("write-timeout");
    } else {
      const bool accepted = reply == "A";
      say(fmt::format("ack {} {}", wid, accepted ? 1 : 0));
      note(accepted ? "write-accepted" : "write-rejected", accepted ? "" : reply.substr(2));
    }
  }

  static constexpr std::int64_t kGiveUpNever = INT64_MAX;
  static constexpr Duration kEtcdTimeout = 1s;  ///< per member and call; etcd's default election timeout

  const ClientPlan& p_;
  Rng rng_;  ///< the workload's draws (a real run is not replayed: seeded from the time and the pid)
  std::unique_ptr<RedisLink> redis_;
  std::optional<redis::SingleNodeAlgorithm> single_;
  std::optional<redis::RedlockAlgorithm> redlock_;
  std::unique_ptr<EtcdLink> etcd_;
  std::optional<raft::LeaseAlgorithm> lease_algo_;
  std::optional<locksim::Grant> lease_grant_;  ///< the algorithm's grant of the lease held
  std::unique_ptr<PgLink> pg_;
  std::optional<dblease::LeaseAlgorithm> db_algo_;
  std::optional<locksim::Grant> db_grant_;  ///< the algorithm's grant of the lease held
  std::unique_ptr<ZkLink> zk_;
  std::optional<zk::LockRecipe> zk_recipe_;
  std::optional<locksim::Grant> zk_grant_;  ///< the recipe's grant of the lock held
  int store_ = -1;
  std::optional<Grant> held_;
  bool lost_ = false;
  std::optional<std::int64_t> checked_;
  std::uint64_t grants_ = 0, writes_sent_ = 0;
  std::uint32_t holds_ = 0, writes_ = 0;
};

}  // namespace

void client_main(const ClientPlan& plan) {
  sleep_until_ns(plan.t0 + plan.spec.start.count());
  {
    Client c(plan);
    c.run();
  }
  const std::string done = "done\n";
  (void)!::write(plan.report_fd, done.data(), done.size());
  ::_exit(0);
}

}  // namespace locksim::reality
