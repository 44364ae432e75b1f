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

struct EtcdLink::Impl {};
EtcdLink::EtcdLink(std::vector<std::uint16_t> ports, Duration rpc_timeout, std::int64_t t0,
                   std::uint64_t seed, Note note)
    : ports_(std::move(ports)), rpc_timeout_(rpc_timeout), t0_(t0), rng_(seed), note_(std::move(note)) {}
EtcdLink::~EtcdLink() = default;
Time EtcdLink::now() {
  return Time{0};
}
void EtcdLink::sleep(Duration) {}
void EtcdLink::note(std::string_view, std::string) {}
std::optional<raft::ClientReply> EtcdLink::submit(const raft::Command&, Time) {
  return std::nullopt;
}
std::uint64_t EtcdLink::send(const raft::Command&) {
  return 0;
}
std::optional<raft::ClientReply> EtcdLink::wait(const std::set<std::uint64_t>&, Time) {
  return std::nullopt;
}
bool EtcdLink::follow(const raft::ClientReply&) {
  return false;
}
std::string v3lock_key(const std::string& name, std::uint64_t lease) {
  return name + "/" + std::to_string(lease);
}

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
void EtcdCluster::set_paused(const std::string&, bool) {}

pid_t EtcdCluster::pid(const std::string&) const {
  return -1;
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
