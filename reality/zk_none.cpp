// Built instead of zk_client.cpp when the ZooKeeper C client (libzookeeper-mt-dev) is not found: `locksim
// reality` runs the other protocols, and says why zookeeper and zookeeper+fence are skipped (zk_missing()).
#include <stdexcept>

#include "reality/zk_client.hpp"
#include "reality/zk_server.hpp"

namespace locksim::reality {

bool zk_client_built() {
  return false;
}

struct ZkRecorder::Impl {};
ZkRecorder::ZkRecorder(std::string hosts, std::string lock_key)
    : hosts_{std::move(hosts)}, parent_(lock_key) {}
ZkRecorder::~ZkRecorder() = default;
void ZkRecorder::start(std::int64_t) {
  throw std::runtime_error(zk_missing());
}
void ZkRecorder::stop() {}
void ZkRecorder::wake() {}
bool ZkRecorder::wait_record(std::uint64_t, std::int64_t) {
  return false;
}
std::vector<ZkRecord> ZkRecorder::records() const {
  return {};
}

struct ZkLink::Impl {};
ZkLink::ZkLink(std::string, std::string, Duration, std::int64_t, std::uint64_t, Note) : t0_(0), rng_(0) {}
ZkLink::~ZkLink() = default;
Time ZkLink::now() {
  return {};
}
void ZkLink::note(std::string_view, std::string) {}
bool ZkLink::ensure_session(Duration, Time) {
  return false;
}
std::uint64_t ZkLink::session_id() const {
  return 0;
}
Duration ZkLink::session_timeout() const {
  return {};
}
bool ZkLink::expired() const {
  return true;
}
void ZkLink::mark_expired() {}
zk::Created ZkLink::create(std::uint64_t, const std::string&, std::uint64_t, Time) {
  return {};
}
zk::Position ZkLink::position(std::uint64_t, const std::string&, Time) {
  return {};
}
void ZkLink::remove(std::uint64_t, const std::string&, std::uint64_t, Time) {}
void ZkLink::wait_watch(const std::string&, Time) {}
zk::Status ZkLink::ping(std::uint64_t, Time) {
  return zk::Status::no_answer;
}

}  // namespace locksim::reality
