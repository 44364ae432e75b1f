// Built instead of etcd_client.cpp and etcd_server.cpp when pkg-config finds no libcurl: `locksim reality`
// runs the Redis protocols only, and says why lease and lease+fence are skipped.
#include "reality/etcd_client.hpp"
#include "reality/etcd_server.hpp"

namespace locksim::reality {

namespace {
constexpr const char* kWhy =
    "locksim was built without libcurl, which the etcd client needs (apt-get install libcurl4-openssl-dev, "
    "then build again)";
}

std::string etcd_missing() {
  return kWhy;
}

std::optional<EtcdLease> EtcdCalls::grant(std::int64_t) {
  return std::nullopt;
}
std::optional<std::uint64_t> EtcdCalls::create(const std::string&, const std::string&, const std::string&) {
  return std::nullopt;
}
std::optional<bool> EtcdCalls::keepalive(const std::string&) {
  return std::nullopt;
}
void EtcdCalls::remove(const std::string&) {}
void EtcdCalls::revoke(const std::string&) {}

EtcdCluster::EtcdCluster(std::vector<std::string>, const std::string&, std::string) {}
EtcdCluster::~EtcdCluster() = default;
void EtcdCluster::start() {
  throw StartError(kWhy);
}
void EtcdCluster::advance_revision(std::uint64_t) {}
void EtcdCluster::kill(const std::string&) {}
void EtcdCluster::restart(const std::string&) {}
bool EtcdCluster::has(const std::string&) const {
  return false;
}
bool EtcdCluster::running(const std::string&) const {
  return false;
}
std::string EtcdCluster::leader() const {
  return {};
}
std::vector<std::uint16_t> EtcdCluster::client_ports() const {
  return {};
}
std::vector<std::uint16_t> EtcdCluster::all_ports() const {
  return {};
}
std::vector<pid_t> EtcdCluster::pids() const {
  return {};
}
bool EtcdCluster::wait_record(std::uint64_t, std::int64_t) const {
  return false;
}
std::vector<LeaseRecord> EtcdCluster::records() const {
  return {};
}

}  // namespace locksim::reality
