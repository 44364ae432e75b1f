#pragma once
/// etcd's v3 API through its HTTP/JSON gateway (etcd 3.4: POST /v3/...; int64 fields are JSON strings, keys
/// and values base64), with libcurl. What the `lease` client process calls (client.cpp runs the lock logic
/// of protocols/raft/lease.cpp's LeaseClient with these), and what the parent's cluster uses for its health
/// checks and the leader.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace locksim::reality {

std::string base64(const std::string& in);
std::string unbase64(const std::string& in);

/// One POST of `body` to http://127.0.0.1:port/path; the parsed answer, or nullopt when no answer came within
/// `timeout_ms` or it was not JSON. An answer with an "error" field is returned as it is.
std::optional<nlohmann::json> etcd_post(std::uint16_t port, const std::string& path,
                                        const nlohmann::json& body, long timeout_ms);

/// A lease as granted: its id (decimal, as etcd's JSON writes it) and the TTL etcd gave it (seconds).
struct EtcdLease {
  std::string id;
  std::int64_t ttl_s = 0;
};

/// The calls of a lock client to a cluster: each goes to the member that answered last, and to the others in
/// turn when it does not answer (a killed member), within one timeout per member.
class EtcdCalls {
 public:
  EtcdCalls(std::vector<std::uint16_t> ports, long timeout_ms)
      : ports_(std::move(ports)), timeout_ms_(timeout_ms) {}
  /// /v3/lease/grant.
  std::optional<EtcdLease> grant(std::int64_t ttl_s);
  /// /v3/kv/txn: if the key's create revision is 0 (absent), put `value` under `lease`. The create revision
  /// (the txn's revision) when it took effect; 0 when the key exists; nullopt when no member answered.
  std::optional<std::uint64_t> create(const std::string& key, const std::string& value,
                                      const std::string& lease);
  /// /v3/lease/keepalive: true (alive, TTL > 0), false (etcd says the lease is gone), nullopt (no answer).
  std::optional<bool> keepalive(const std::string& lease);
  /// /v3/kv/deleterange of the key, /v3/lease/revoke (best effort).
  void remove(const std::string& key);
  void revoke(const std::string& lease);

 private:
  std::optional<nlohmann::json> call(const std::string& path, const nlohmann::json& body);
  std::vector<std::uint16_t> ports_;
  long timeout_ms_;
  std::size_t current_ = 0;
};

}  // namespace locksim::reality
