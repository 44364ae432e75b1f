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
    : hosts_(std::move(hosts)), parent_(lock_key) {}
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

struct ZkLock::Impl {};
ZkLock::ZkLock(std::string, std::string, std::string, std::int64_t, Note) : timeout_ns_(0) {}
ZkLock::~ZkLock() = default;
std::optional<ZkHold> ZkLock::acquire(std::int64_t) {
  return std::nullopt;
}
void ZkLock::release(const ZkHold&) {}
bool ZkLock::expired() const {
  return false;
}

}  // namespace locksim::reality
