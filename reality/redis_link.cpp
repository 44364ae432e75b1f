#include "reality/redis_link.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "reality/children.hpp"
#include "reality/sentinel.hpp"

namespace locksim::reality {

namespace {

/// SET NX PX, and only when it took effect: the INCR token (ARGV[3] = 1) and the service record, published
/// from inside the script so it is atomic with the SET (redis_server.hpp), with the server's own port: a
/// replica delivers a copy of its master's PUBLISH to its subscribers, and the port tells the copy apart.
constexpr const char* kAcquire = R"(local ok = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
if not ok then return false end
local tok = 0
if ARGV[3] == '1' then tok = redis.call('INCR', KEYS[1] .. ':token') end
local t = redis.call('TIME')
local port = string.match(redis.call('INFO', 'server'), 'tcp_port:(%d+)') or '0'
redis.call('PUBLISH', 'locksim:sets', KEYS[1] .. '\n' .. ARGV[1] .. '\n' .. t[1] .. '\n' .. t[2] .. '\n' .. port)
return {1, tok})";

/// The Redis documentation's compare-and-delete.
constexpr const char* kRelease = R"(if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
else
  return 0
end)";

/// Compare-and-PEXPIRE (node-redlock's extend, Redisson's renewal).
constexpr const char* kExtend = R"(if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  return 0
end)";

std::string millis(Duration d) {
  return std::to_string(std::max<std::int64_t>(1, d.count() / 1'000'000));
}

/// The command line Redis runs for a lock command of the algorithms.
std::vector<std::string> argv_of(const redis::Command& c) {
  using redis::Op;
  switch (c.op) {
    case Op::set_nx:
      return {"EVAL", kAcquire, "1", c.key, c.value, millis(c.ttl), c.fence_counter.empty() ? "0" : "1"};
    case Op::del_if_value:
      if (c.blind) return {"DEL", c.key};
      return {"EVAL", kRelease, "1", c.key, c.value};
    case Op::pexpire_if_value:
      return {"EVAL", kExtend, "1", c.key, c.value, millis(c.ttl)};
    default:
      throw std::logic_error(fmt::format("locksim reality: the Redis lock command {} is not run for real",
                                         redis::op_name(c.op)));
  }
}

redis::Answer answer_of(const redis::Command& c, const redisReply* r) {
  if (c.op == redis::Op::set_nx) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) return {};
    return {true, r->element[1]->type == REDIS_REPLY_INTEGER ? r->element[1]->integer : 0};
  }
  return {r->type == REDIS_REPLY_INTEGER && r->integer == 1, 0};
}

/// The peer closed the connection (EOF or an error waiting to be read; nothing else is expected on it
/// between commands).
bool closed_by_peer(int fd) {
  pollfd pf{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&pf, 1, 0) <= 0) return false;
  if (pf.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  char b = 0;
  return ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

timeval timeval_of(std::int64_t ns) {
  timeval tv{static_cast<time_t>(ns / 1'000'000'000), static_cast<suseconds_t>(ns % 1'000'000'000 / 1000)};
  if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1;
  return tv;
}

}  // namespace

RedisLink::RedisLink(std::vector<std::uint16_t> ports, std::vector<std::uint8_t> cut, Duration node_timeout,
                     std::int64_t t0, std::uint64_t seed,
                     std::function<void(const std::string&, const std::string&)> note)
    : ports_(std::move(ports)),
      cut_(std::move(cut)),
      timeout_(node_timeout),
      t0_(t0),
      rng_(seed),
      note_(std::move(note)),
      conns_(ports_.size(), nullptr) {
  cut_.resize(ports_.size(), 0);
}

RedisLink::~RedisLink() {
  for (redisContext* c : conns_)
    if (c) redisFree(c);
}

Time RedisLink::now() {
  return Time{mono_ns() - t0_};
}
Time RedisLink::wall() {
  return Time{real_ns()};
}
void RedisLink::sleep(Duration d) {
  if (d > 0ns) sleep_until_ns(mono_ns() + d.count());
}
void RedisLink::note(std::string_view label, std::string detail) {
  note_(std::string(label), detail);
}

redisContext* RedisLink::node(std::size_t i) {
  // A server that was killed and restarted closed this connection: a client notices before it sends (as
  // Redis clients' connection checks do) and connects again, instead of losing the command to a dead
  // socket. The simulated client's messages simply reach the restarted node.
  if (conns_[i] && (conns_[i]->err || closed_by_peer(conns_[i]->fd))) {
    redisFree(conns_[i]);
    conns_[i] = nullptr;
  }
  if (!conns_[i]) {
    redisContext* c = redisConnectWithTimeout("127.0.0.1", ports_[i], timeval_of(timeout_.count()));
    if (c == nullptr || c->err) {
      if (c) redisFree(c);
      return nullptr;
    }
    conns_[i] = c;
  }
  return conns_[i];
}

std::vector<redisContext*> RedisLink::send(const redis::Command& c, const std::vector<std::size_t>& to) {
  const std::vector<std::string> args = argv_of(c);
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.c_str());
    lens.push_back(a.size());
  }
  std::vector<redisContext*> sent(ports_.size(), nullptr);
  for (std::size_t i : to) {
    redisContext* ctx = node(i);
    if (!ctx) continue;
    redisAppendCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), lens.data());
    int done = 0;
    while (!done)
      if (redisBufferWrite(ctx, &done) != REDIS_OK) break;
    if (done) sent[i] = ctx;
  }
  return sent;
}

std::vector<std::optional<redis::Answer>> RedisLink::collect(const redis::Command& c,
                                                             const std::vector<redisContext*>& sent,
                                                             Time deadline) {
  std::vector<std::optional<redis::Answer>> out(sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i) {
    redisContext* ctx = sent[i];
    if (!ctx) continue;
    redisSetTimeout(ctx, timeval_of(std::max<std::int64_t>((deadline - now()).count(), 1000)));
    void* r = nullptr;
    if (redisGetReply(ctx, &r) != REDIS_OK || r == nullptr) continue;  // the connection is in error now
    out[i] = answer_of(c, static_cast<redisReply*>(r));
    freeReplyObject(r);
  }
  return out;
}

void RedisLink::use_sentinel(std::uint16_t sentinel_port, std::vector<std::uint16_t> real_ports) {
  sentinel_ = sentinel_port;
  real_ports_ = std::move(real_ports);
}

void RedisLink::discover() {
  if (!sentinel_) return;
  const auto ms = static_cast<int>(std::max<std::int64_t>(1, timeout_.count() / 1'000'000));
  const std::optional<std::uint16_t> port = sentinel_master_port(sentinel_, ms);
  if (!port) return;
  const auto it = std::find(real_ports_.begin(), real_ports_.end(), *port);
  if (it != real_ports_.end() && static_cast<std::size_t>(it - real_ports_.begin()) < ports_.size())
    master_ = static_cast<std::size_t>(it - real_ports_.begin());
}

std::optional<redis::Answer> RedisLink::request(const redis::Command& c, std::string_view label) {
  const std::size_t m = master_;
  const std::vector<redisContext*> sent =
      send(c, cut_[m] ? std::vector<std::size_t>{} : std::vector<std::size_t>{m});
  note(label, fmt::format("key={} value={} nodes=1", c.key, c.value));
  const Time deadline = now() + timeout_;
  std::optional<redis::Answer> a = collect(c, sent, deadline)[m];
  // A node cut off never answers: the request waits its timeout out, as over a partition.
  if (cut_[m] && now() < deadline) sleep(deadline - now());
  return a;
}

std::uint32_t RedisLink::round(const redis::Command& c, std::string_view label, Time deadline) {
  std::vector<std::size_t> to;
  for (std::size_t i = 0; i < ports_.size(); ++i)
    if (!cut_[i]) to.push_back(i);
  const std::vector<redisContext*> sent = send(c, to);
  note(label, fmt::format("key={} value={} nodes={}", c.key, c.value, ports_.size()));
  std::uint32_t votes = 0;
  for (const auto& a : collect(c, sent, deadline)) votes += a && a->ok ? 1 : 0;
  // A node cut off never answers: the round waits its deadline out, as over a partition.
  if (to.size() < ports_.size() && now() < deadline) sleep(deadline - now());
  return votes;
}

}  // namespace locksim::reality
