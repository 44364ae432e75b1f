#include "reality/zk_client.hpp"

// The synchronous API (zoo_create2, zoo_get_children, ...) is declared for the threaded library only.
#define THREADED
#include <zookeeper/zookeeper.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "locksim/protocols/zookeeper/znode_tree.hpp"
#include "reality/children.hpp"
#include "reality/zk_server.hpp"

namespace locksim::reality {

namespace {

/// The client library's log goes nowhere (it would interleave with the report); errors reach the caller
/// as return codes.
void quiet_library() {
  static FILE* null = std::fopen("/dev/null", "w");
  if (null) zoo_set_log_stream(null);
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
}

/// The sequence suffix of a lock node's name (the last 10 digits: ZooKeeper's %010d).
std::string seq_of(const std::string& name) {
  return name.size() >= 10 ? name.substr(name.size() - 10) : name;
}

/// The children's names, sorted by their sequence suffix (Curator's LockInternals.getSortedChildren).
std::vector<std::string> sorted(String_vector& sv) {
  std::vector<std::string> out;
  for (int i = 0; i < sv.count; ++i) out.emplace_back(sv.data[i]);
  deallocate_String_vector(&sv);
  std::sort(out.begin(), out.end(),
            [](const std::string& a, const std::string& b) { return seq_of(a) < seq_of(b); });
  return out;
}

/// Creates a persistent node if it is absent; "" or why not.
std::string create_persistent(zhandle_t* zh, const std::string& path) {
  const int rc = zoo_create(zh, path.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
  return rc == ZOK || rc == ZNODEEXISTS ? std::string() : fmt::format("create {}: {}", path, zerror(rc));
}

std::string current_server(zhandle_t* zh) {
  const char* s = zoo_get_current_server(zh);
  return s ? s : "";
}

}  // namespace

bool zk_client_built() {
  return true;
}

// ---- the recorder (the parent's session) ------------------------------------------------------------------

struct ZkRecorder::Impl {
  std::vector<zhandle_t*> zh;  ///< per member
};

namespace {
void recorder_watcher(zhandle_t*, int, int, const char*, void* ctx) {
  static_cast<ZkRecorder*>(ctx)->wake();
}
void session_watcher(zhandle_t*, int type, int state, const char*, void* ctx);

/// The recorder's session timeout: long, so a member's pause or crash does not expire it.
constexpr int kRecorderSessionMs = 30'000;
}  // namespace

ZkRecorder::ZkRecorder(std::string hosts, std::string lock_key)
    : parent_("/locks/" + lock_key), impl_(new Impl) {
  for (std::size_t at = 0; at <= hosts.size();) {
    const std::size_t comma = std::min(hosts.find(',', at), hosts.size());
    if (comma > at) hosts_.push_back(hosts.substr(at, comma - at));
    at = comma + 1;
  }
  lowest_.resize(hosts_.size());
  impl_->zh.resize(hosts_.size(), nullptr);
}

ZkRecorder::~ZkRecorder() {
  stop();
  delete impl_;
}

void ZkRecorder::start(std::int64_t timeout_ns) {
  quiet_library();
  // Each session's watcher hears its state changes too: a reconnect means reading the children again.
  for (std::size_t i = 0; i < hosts_.size(); ++i) {
    impl_->zh[i] = zookeeper_init(hosts_[i].c_str(), recorder_watcher, kRecorderSessionMs, nullptr, this, 0);
    if (impl_->zh[i] == nullptr) throw std::runtime_error("zookeeper_init failed");
  }
  const std::int64_t deadline = mono_ns() + timeout_ns;
  for (zhandle_t* zh : impl_->zh)
    while (zoo_state(zh) != ZOO_CONNECTED_STATE) {
      if (mono_ns() > deadline) throw std::runtime_error("the recorder's sessions did not connect");
      check_interrupted();
      ::usleep(5'000);
    }
  for (const std::string& p : {std::string("/locks"), parent_})
    if (const std::string why = create_persistent(impl_->zh.at(0), p); !why.empty())
      throw std::runtime_error(why);
  for (std::size_t i = 0; i < hosts_.size(); ++i) scan(i);
  for (std::size_t i = 0; i < hosts_.size(); ++i) threads_.emplace_back([this, i] { loop(i); });
}

void ZkRecorder::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
  if (impl_)
    for (zhandle_t*& zh : impl_->zh)
      if (zh) {
        zookeeper_close(zh);
        zh = nullptr;
      }
}

void ZkRecorder::wake() {
  {
    std::lock_guard lk(mu_);
    ++wakes_;
  }
  cv_.notify_all();
}

void ZkRecorder::loop(std::size_t member) {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lk(mu_);
      // A watch may be lost across a member's crash: read again at least every 50 ms anyway.
      cv_.wait_for(lk, std::chrono::milliseconds(50), [&] { return wakes_ != seen || stop_; });
      if (stop_) return;
      seen = wakes_;
    }
    zhandle_t*& zh = impl_->zh[member];
    if (zoo_state(zh) == ZOO_EXPIRED_SESSION_STATE) {  // its member was down longer than the timeout
      zookeeper_close(zh);
      zh = zookeeper_init(hosts_[member].c_str(), recorder_watcher, kRecorderSessionMs, nullptr, this, 0);
      if (zh == nullptr) return;
    }
    scan(member);
  }
}

void ZkRecorder::scan(std::size_t member) {
  zhandle_t* zh = impl_->zh[member];
  String_vector sv{};
  if (zoo_wget_children(zh, parent_.c_str(), recorder_watcher, this, &sv) != ZOK) return;
  const std::vector<std::string> kids = sorted(sv);
  if (kids.empty() || kids.front() == lowest_[member]) return;
  Stat st{};
  if (zoo_exists(zh, (parent_ + "/" + kids.front()).c_str(), 0, &st) != ZOK) return;
  const std::int64_t t = mono_ns();
  std::lock_guard lk(mu_);
  lowest_[member] = kids.front();
  const auto czxid = static_cast<std::uint64_t>(st.czxid);
  for (const ZkRecord& r : records_)
    if (r.czxid == czxid) return;  // another member's session saw it first
  records_.push_back({t, hosts_[member], kids.front(), czxid, st.ctime, st.ephemeralOwner});
}

bool ZkRecorder::wait_record(std::uint64_t czxid, std::int64_t timeout_ns) {
  const std::int64_t deadline = mono_ns() + timeout_ns;
  for (;;) {
    {
      std::lock_guard lk(mu_);
      for (const ZkRecord& r : records_)
        if (r.czxid == czxid) return true;
    }
    if (mono_ns() > deadline) return false;
    wake();
    ::usleep(1'000);
  }
}

std::vector<ZkRecord> ZkRecorder::records() const {
  std::lock_guard lk(mu_);
  return records_;
}

// ---- the lock recipe's link (a client process's session)
// ----------------------------------------------------

struct ZkLink::Impl {
  zhandle_t* zh = nullptr;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::uint64_t events = 0;
  bool expired = false;
};

namespace {
void session_watcher(zhandle_t*, int type, int state, const char*, void* ctx) {
  auto* s = static_cast<ZkLink::Impl*>(ctx);
  {
    std::lock_guard lk(s->mu);
    if (type == ZOO_SESSION_EVENT && state == ZOO_EXPIRED_SESSION_STATE) s->expired = true;
    ++s->events;
  }
  s->cv.notify_all();
}

/// No answer (yet): the library reconnects, and the request is asked again.
bool transient(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZINVALIDSTATE;
}

constexpr std::int64_t kRetryPauseUs = 20'000;
}  // namespace

ZkLink::ZkLink(std::string hosts, std::string client, Duration rpc_timeout, std::int64_t t0,
               std::uint64_t seed, Note note)
    : hosts_(std::move(hosts)),
      client_(std::move(client)),
      rpc_timeout_(rpc_timeout),
      t0_(t0),
      rng_(seed),
      note_(std::move(note)),
      impl_(new Impl) {
  quiet_library();
}

ZkLink::~ZkLink() {
  close();
  delete impl_;
}

void ZkLink::close() {
  if (impl_->zh) zookeeper_close(impl_->zh);
  impl_->zh = nullptr;
}

Time ZkLink::now() {
  return Time{mono_ns() - t0_};
}

void ZkLink::note(std::string_view label, std::string detail) {
  note_(std::string(label), detail);
}

void ZkLink::mark_expired() {
  std::lock_guard lk(impl_->mu);
  impl_->expired = true;
}

bool ZkLink::expired() const {
  std::lock_guard lk(impl_->mu);
  return impl_->expired;
}

std::uint64_t ZkLink::session_id() const {
  if (impl_->zh == nullptr) return 0;
  return static_cast<std::uint64_t>(zoo_client_id(impl_->zh)->client_id);
}

Duration ZkLink::session_timeout() const {
  if (impl_->zh == nullptr) return Duration{0};
  return std::chrono::milliseconds(zoo_recv_timeout(impl_->zh));
}

bool ZkLink::ensure_session(Duration ttl, Time give_up) {
  if (impl_->zh && !expired()) return true;
  close();
  {
    std::lock_guard lk(impl_->mu);
    impl_->expired = false;
  }
  const int ms = static_cast<int>(std::max<std::int64_t>(1, ttl.count() / 1'000'000));
  impl_->zh = zookeeper_init(hosts_.c_str(), session_watcher, ms, nullptr, impl_, 0);
  if (impl_->zh == nullptr) return false;
  while (zoo_state(impl_->zh) != ZOO_CONNECTED_STATE) {
    if (now() >= give_up) return false;
    ::usleep(2'000);
  }
  note_("zk-session", fmt::format("session={} timeout={}ms server={}", session_id(),
                                  zoo_recv_timeout(impl_->zh), current_server(impl_->zh)));
  return true;
}

zk::Created ZkLink::create(std::uint64_t, const std::string& parent, std::uint64_t key, Time deadline) {
  zhandle_t* zh = impl_->zh;
  if (zh == nullptr) return {};
  const std::string protect = fmt::format("_c_{:016x}-", key);
  const std::string prefix = parent + "/" + protect + "lock-";
  for (;;) {
    char path[512] = {0};
    Stat st{};
    const int rc = zoo_create2(zh, prefix.c_str(), client_.data(), static_cast<int>(client_.size()),
                               &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, path, sizeof path, &st);
    if (rc == ZOK) return {zk::Status::ok, path, static_cast<std::uint64_t>(st.czxid)};
    if (rc == ZSESSIONEXPIRED) {
      mark_expired();
      return {zk::Status::refused, {}, 0};
    }
    if (now() >= deadline) return {};
    if (rc == ZNONODE) {  // Curator's creatingParentContainersIfNeeded (persistent parents here)
      create_persistent(zh, "/locks");
      create_persistent(zh, parent);
      continue;
    }
    // No answer: the node may have been made. Protection mode finds it among the children by its name.
    ::usleep(kRetryPauseUs);
    String_vector sv{};
    if (zoo_get_children(zh, parent.c_str(), 0, &sv) != ZOK) continue;
    for (const std::string& k : sorted(sv)) {
      if (k.rfind(protect, 0) != 0) continue;
      Stat ks{};
      const std::string node = parent + "/" + k;
      if (zoo_exists(zh, node.c_str(), 0, &ks) == ZOK)
        return {zk::Status::ok, node, static_cast<std::uint64_t>(ks.czxid)};
    }
  }
}

zk::Position ZkLink::position(std::uint64_t, const std::string& node, Time deadline) {
  zhandle_t* zh = impl_->zh;
  if (zh == nullptr) return {};
  const std::string parent = zk::parent_of(node);
  const std::string name = node.substr(parent.size() + 1);
  for (;;) {
    String_vector sv{};
    const int rc = zoo_get_children(zh, parent.c_str(), 0, &sv);
    if (rc == ZOK) {
      const std::vector<std::string> kids = sorted(sv);
      const auto me = std::find(kids.begin(), kids.end(), name);
      if (me == kids.end()) return {zk::Status::refused, false, {}};  // the node is gone: the session expired
      if (me == kids.begin()) return {zk::Status::ok, true, {}};
      return {zk::Status::ok, false, parent + "/" + *(me - 1)};
    }
    if (rc == ZSESSIONEXPIRED) mark_expired();
    if (rc == ZSESSIONEXPIRED || rc == ZNONODE) return {zk::Status::refused, false, {}};
    if (!transient(rc) || now() >= deadline) return {};
    ::usleep(kRetryPauseUs);
  }
}

void ZkLink::remove(std::uint64_t, const std::string& path, std::uint64_t key, Time deadline) {
  zhandle_t* zh = impl_->zh;
  if (zh == nullptr) return;
  for (;;) {
    std::string node = path;
    int rc = ZOK;
    if (key != 0) {  // the child of `path` that attempt `key` created, if any
      node.clear();
      String_vector sv{};
      rc = zoo_get_children(zh, path.c_str(), 0, &sv);
      if (rc == ZOK) {
        const std::string protect = fmt::format("_c_{:016x}-", key);
        for (const std::string& k : sorted(sv))
          if (k.rfind(protect, 0) == 0) node = path + "/" + k;
        if (node.empty()) return;
      }
    }
    if (rc == ZOK) rc = zoo_delete(zh, node.c_str(), -1);
    if (rc == ZSESSIONEXPIRED) mark_expired();
    if (!transient(rc) || now() >= deadline) return;
    ::usleep(kRetryPauseUs);
  }
}

void ZkLink::wait_watch(const std::string& predecessor, Time until) {
  zhandle_t* zh = impl_->zh;
  if (zh == nullptr) return;
  std::uint64_t seen = 0;
  {
    std::lock_guard lk(impl_->mu);
    seen = impl_->events;
  }
  Stat ps{};
  const int rc = zoo_wexists(zh, predecessor.c_str(), session_watcher, impl_, &ps);
  if (rc == ZSESSIONEXPIRED) mark_expired();
  if (rc != ZOK) return;  // gone already (or no answer): the recipe reads the children again
  // The watch (NodeDeleted), a change of the connection, or a third of the session timeout.
  const Time slice_end = now() + std::max<Duration>(session_timeout() / 3, 1ms);
  const Time end = std::min(until, slice_end);
  std::unique_lock lk(impl_->mu);
  impl_->cv.wait_for(lk, std::max<Duration>(end - now(), Duration{0}), [&] { return impl_->events != seen; });
}

zk::Status ZkLink::ping(std::uint64_t, Time) {
  if (impl_->zh == nullptr) return zk::Status::no_answer;
  Stat st{};
  const int rc = zoo_exists(impl_->zh, "/", 0, &st);
  if (rc == ZOK) return zk::Status::ok;
  if (rc == ZSESSIONEXPIRED) {
    mark_expired();
    return zk::Status::refused;
  }
  return zk::Status::no_answer;
}

}  // namespace locksim::reality
