#include "reality/zk_client.hpp"

// The synchronous API (zoo_create2, zoo_get_children, ...) is declared for the threaded library only.
#define THREADED
#include <zookeeper/zookeeper.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>

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
  zhandle_t* zh = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  bool connected = false;
};

namespace {
void recorder_watcher(zhandle_t*, int type, int state, const char*, void* ctx) {
  auto* r = static_cast<ZkRecorder*>(ctx);
  (void)type;
  (void)state;
  r->wake();
}
void session_watcher(zhandle_t*, int type, int state, const char*, void* ctx);
}  // namespace

ZkRecorder::ZkRecorder(std::string hosts, std::string lock_key)
    : hosts_(std::move(hosts)), parent_("/locks/" + lock_key), impl_(new Impl) {}

ZkRecorder::~ZkRecorder() {
  stop();
  delete impl_;
}

void ZkRecorder::start(std::int64_t timeout_ns) {
  quiet_library();
  // The global watcher hears the session's state changes: a reconnect means reading the children again.
  impl_->zh = zookeeper_init(hosts_.c_str(), recorder_watcher, 30000, nullptr, this, 0);
  if (impl_->zh == nullptr) throw std::runtime_error("zookeeper_init failed");
  const std::int64_t deadline = mono_ns() + timeout_ns;
  while (zoo_state(impl_->zh) != ZOO_CONNECTED_STATE) {
    if (mono_ns() > deadline) throw std::runtime_error("the recorder's session did not connect");
    check_interrupted();
    ::usleep(5'000);
  }
  for (const std::string& p : {std::string("/locks"), parent_})
    if (const std::string why = create_persistent(impl_->zh, p); !why.empty()) throw std::runtime_error(why);
  scan();
  thread_ = std::thread([this] { loop(); });
}

void ZkRecorder::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (impl_ && impl_->zh) {
    zookeeper_close(impl_->zh);
    impl_->zh = nullptr;
  }
}

void ZkRecorder::wake() {
  {
    std::lock_guard lk(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

void ZkRecorder::loop() {
  for (;;) {
    {
      std::unique_lock lk(mu_);
      // A watch may be lost across a member's crash: read again at least every 50 ms anyway.
      cv_.wait_for(lk, std::chrono::milliseconds(50), [this] { return woken_ || stop_; });
      if (stop_) return;
      woken_ = false;
    }
    scan();
  }
}

void ZkRecorder::scan() {
  String_vector sv{};
  if (zoo_wget_children(impl_->zh, parent_.c_str(), recorder_watcher, this, &sv) != ZOK) return;
  const std::vector<std::string> kids = sorted(sv);
  if (kids.empty() || kids.front() == lowest_) return;
  Stat st{};
  if (zoo_exists(impl_->zh, (parent_ + "/" + kids.front()).c_str(), 0, &st) != ZOK) return;
  const std::int64_t t = mono_ns();
  const std::string server = current_server(impl_->zh);
  std::lock_guard lk(mu_);
  lowest_ = kids.front();
  records_.push_back(
      {t, server, kids.front(), static_cast<std::uint64_t>(st.czxid), st.ctime, st.ephemeralOwner});
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

// ---- the lock recipe (a client process's session) ---------------------------------------------------------

struct ZkLock::Impl {
  zhandle_t* zh = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t events = 0;
  bool expired = false;
};

namespace {
void session_watcher(zhandle_t*, int type, int state, const char*, void* ctx) {
  auto* s = static_cast<ZkLock::Impl*>(ctx);
  {
    std::lock_guard lk(s->mu);
    if (type == ZOO_SESSION_EVENT && state == ZOO_EXPIRED_SESSION_STATE) s->expired = true;
    ++s->events;
  }
  s->cv.notify_all();
}
}  // namespace

ZkLock::ZkLock(std::string hosts, std::string lock_key, std::string client, std::int64_t session_timeout_ns,
               Note note)
    : hosts_(std::move(hosts)),
      parent_("/locks/" + lock_key),
      client_(std::move(client)),
      timeout_ns_(session_timeout_ns),
      note_(std::move(note)),
      impl_(new Impl) {
  quiet_library();
}

ZkLock::~ZkLock() {
  close();
  delete impl_;
}

void ZkLock::close() {
  if (impl_->zh) zookeeper_close(impl_->zh);
  impl_->zh = nullptr;
}

void ZkLock::mark_expired() {
  std::lock_guard lk(impl_->mu);
  impl_->expired = true;
}

bool ZkLock::expired() const {
  std::lock_guard lk(impl_->mu);
  return impl_->expired;
}

bool ZkLock::ensure_session(std::int64_t give_up_ns) {
  if (impl_->zh && !expired()) return true;
  close();
  {
    std::lock_guard lk(impl_->mu);
    impl_->expired = false;
  }
  const int ms = static_cast<int>(std::max<std::int64_t>(1, timeout_ns_ / 1'000'000));
  impl_->zh = zookeeper_init(hosts_.c_str(), session_watcher, ms, nullptr, impl_, 0);
  if (impl_->zh == nullptr) return false;
  while (zoo_state(impl_->zh) != ZOO_CONNECTED_STATE) {
    if (mono_ns() >= give_up_ns) return false;
    ::usleep(2'000);
  }
  note_("zk-session",
        fmt::format("session=0x{:x} timeout={}ms server={}", zoo_client_id(impl_->zh)->client_id,
                    zoo_recv_timeout(impl_->zh), current_server(impl_->zh)));
  return true;
}

std::optional<ZkHold> ZkLock::acquire(std::int64_t give_up_ns) {
  bool noted = false;
  // Curator's protection mode: the node's name carries this acquisition's id, so a create whose answer was
  // lost finds the node it made among the children (and a retried create reuses the id).
  const std::string protect = fmt::format(
      "_c_{:016x}-", static_cast<std::uint64_t>(real_ns()) ^ static_cast<std::uint64_t>(::getpid()));
  while (mono_ns() < give_up_ns) {
    if (!ensure_session(give_up_ns)) return std::nullopt;
    zhandle_t* zh = impl_->zh;
    if (!noted) {
      note_("acquire-sent", fmt::format("{} session=0x{:x}", parent_, zoo_client_id(zh)->client_id));
      noted = true;
    }
    const std::string prefix = parent_ + "/" + protect + "lock-";
    char path[512] = {0};
    Stat st{};
    int rc = zoo_create2(zh, prefix.c_str(), client_.data(), static_cast<int>(client_.size()),
                         &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, path, sizeof path, &st);
    std::string node;
    std::uint64_t czxid = 0;
    if (rc == ZOK) {
      node = path + parent_.size() + 1;
      czxid = static_cast<std::uint64_t>(st.czxid);
    } else if (rc == ZSESSIONEXPIRED) {
      mark_expired();
      continue;                  // a new session, a new node
    } else if (rc == ZNONODE) {  // Curator's creatingParentContainersIfNeeded (persistent parents here)
      create_persistent(zh, "/locks");
      create_persistent(zh, parent_);
      continue;
    } else {
      // The answer was lost: look for the node by its protection id (its czxid read back), else retry.
      ::usleep(20'000);
      String_vector sv{};
      if (zoo_get_children(zh, parent_.c_str(), 0, &sv) != ZOK) continue;
      for (const std::string& k : sorted(sv))
        if (k.rfind(protect, 0) == 0) node = k;
      if (node.empty() || zoo_exists(zh, (parent_ + "/" + node).c_str(), 0, &st) != ZOK) continue;
      czxid = static_cast<std::uint64_t>(st.czxid);
    }
    for (;;) {
      if (mono_ns() >= give_up_ns) {  // Curator's doDelete: a timed-out attempt deletes its node
        zoo_delete(zh, (parent_ + "/" + node).c_str(), -1);
        return std::nullopt;
      }
      String_vector sv{};
      rc = zoo_get_children(zh, parent_.c_str(), 0, &sv);
      if (rc == ZSESSIONEXPIRED) mark_expired();
      if (rc == ZSESSIONEXPIRED || expired()) break;
      if (rc != ZOK) {
        ::usleep(20'000);
        continue;
      }
      const std::vector<std::string> kids = sorted(sv);
      const auto me = std::find(kids.begin(), kids.end(), node);
      if (me == kids.end()) break;  // the node is gone: the session expired
      if (me == kids.begin()) return ZkHold{node, czxid};
      const std::string pred = parent_ + "/" + *(me - 1);
      std::uint64_t seen = 0;
      {
        std::lock_guard lk(impl_->mu);
        seen = impl_->events;
      }
      Stat ps{};
      rc = zoo_wexists(zh, pred.c_str(), session_watcher, impl_, &ps);
      if (rc == ZNONODE) continue;  // gone already: read the children again
      // Wait for the watch (NodeDeleted), a change of the connection, or a third of the session timeout.
      const std::int64_t slice = std::max<std::int64_t>(timeout_ns_ / 3, 1'000'000);
      const std::int64_t until = std::min(give_up_ns, mono_ns() + slice);
      std::unique_lock lk(impl_->mu);
      impl_->cv.wait_for(lk, std::chrono::nanoseconds(std::max<std::int64_t>(0, until - mono_ns())),
                         [&] { return impl_->events != seen; });
    }
  }
  return std::nullopt;
}

void ZkLock::release(const ZkHold& h) {
  if (impl_->zh == nullptr || expired()) return;
  zoo_delete(impl_->zh, (parent_ + "/" + h.node).c_str(), -1);
}

}  // namespace locksim::reality
