#pragma once
/// etcd's v3 API through its HTTP/JSON gateway (etcd 3.4: POST /v3/...; int64 fields are JSON strings, keys
/// and values base64), with libcurl: the `lease` client process's link (EtcdLink), and what the parent's
/// cluster uses for its health checks and the leader.
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "locksim/protocols/raft/lease_algorithm.hpp"

namespace locksim::reality {

std::string base64(const std::string& in);
std::string unbase64(const std::string& in);

/// One POST of `body` to http://127.0.0.1:port/path; the parsed answer, or nullopt when no answer came within
/// `timeout_ms` or it was not JSON. An answer with an "error" field is returned as it is.
std::optional<nlohmann::json> etcd_post(std::uint16_t port, const std::string& path,
                                        const nlohmann::json& body, long timeout_ms);

/// The v3lock key of a lock held under a lease: "<name>/<lease in hex>" (concurrency.Mutex's key).
std::string v3lock_key(const std::string& name, std::uint64_t lease);

/// The lease lock client's world in a client process: protocols/raft/lease_algorithm.hpp's LeaseLink over
/// etcd's v3 gateway, so the real client runs the simulated client's own algorithm (LeaseAlgorithm):
///  - grant: /v3/lease/grant with the attempt's grant key as the lease ID (a retry of an ambiguous grant
///    meets "lease already exists": that lease is this attempt's);
///  - lock: /v3/lock/lock (etcd's v3lock service: concurrency.Mutex on the server), which blocks until the
///    key name/<lease hex> holds, sent without waiting through libcurl's multi interface, so the algorithm
///    keeps its lease alive while it waits, as it does in the simulator; the answer's value is the key's
///    create revision (read with /v3/kv/range), the token;
///  - keepalive, revoke: /v3/lease/keepalive, /v3/lease/revoke; unlock: /v3/lock/unlock.
/// Requests go to the member that answered last and to the next one when a member does not answer within
/// the rpc timeout (a killed or cut-off member) or says it has no leader.
class EtcdLink final : public raft::LeaseLink {
 public:
  /// `note(label, detail)` reports a note to the parent (and waits for its ack). `t0`: the run's start on
  /// CLOCK_MONOTONIC. `ports`: the members' client ports, as this client reaches them.
  using Note = std::function<void(const std::string&, const std::string&)>;
  EtcdLink(std::vector<std::uint16_t> ports, Duration rpc_timeout, std::int64_t t0, std::uint64_t seed,
           Note note);
  ~EtcdLink() override;
  EtcdLink(const EtcdLink&) = delete;
  EtcdLink& operator=(const EtcdLink&) = delete;

  Time now() override;
  void sleep(Duration d) override;
  Rng& rng() override { return rng_; }
  void note(std::string_view label, std::string detail) override;
  Duration rpc_timeout() const override { return rpc_timeout_; }
  std::optional<raft::ClientReply> submit(const raft::Command& c, Time deadline) override;
  std::uint64_t send(const raft::Command& c) override;
  std::optional<raft::ClientReply> wait(const std::set<std::uint64_t>& reqs, Time until) override;
  bool follow(const raft::ClientReply& r) override;
  struct Impl;  ///< libcurl's multi handle and the lock requests in flight

 private:
  /// The reply to `c` that `answer` (nullopt: none came) means, in the lock service's words.
  raft::ClientReply reply_of(const raft::Command& c, const std::optional<nlohmann::json>& answer,
                             std::uint16_t port);
  std::vector<std::uint16_t> ports_;
  Duration rpc_timeout_;
  std::int64_t t0_;
  Rng rng_;
  Note note_;
  std::size_t current_ = 0;
  std::uint64_t next_req_ = 1;
  Impl* impl_ = nullptr;
};

}  // namespace locksim::reality
