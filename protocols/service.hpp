#pragma once
/// A protocol's declared service: the processes its build() spawns, named and with their roles, known before
/// the run from the ProtocolConfig alone (Protocol::declare). The scenario loader, the nemesis and the replay
/// loader check process names against the declarations; the runner checks that build() spawned exactly the
/// declared processes; servers record what they grant through a ServiceRecorder bound to one of them.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "locksim/sim/time.hpp"

namespace locksim {

class World;
struct History;

/// What a declared service process is.
enum class ProcessRole : std::uint8_t {
  server,          ///< holds lock state and records the grants it makes: its records back client grants
  replica,         ///< a copy of a server that may take over (a Redis replica)
  sentinel,        ///< watches the servers and fails over; holds no lock state, records no grants
  leader_capable,  ///< reports its role (leader / follower): `leader` and `primary` fault targets pick one
  primary,         ///< the member configured to lead first (Redis's master)
};
/// "server", "replica", "sentinel", "leader-capable", "primary".
std::string_view to_string(ProcessRole r);

/// One process of a declared service.
struct ServiceProcess {
  std::string name;
  std::vector<ProcessRole> roles;
  bool is(ProcessRole r) const;
  bool operator==(const ServiceProcess&) const = default;
};

/// Everything a protocol says about its service before the run.
struct ServiceDecl {
  /// In the order build() spawns them (fault roles such as `any-server` and partition splits use it).
  std::vector<ServiceProcess> processes;
  /// How many distinct server processes must have recorded a value before the service as a whole granted it
  /// (1 for a single server or a consensus service that records only committed grants; a majority for
  /// Redlock). 0 counts as 1.
  std::uint32_t quorum = 1;
  /// How the configuration changes these names, for a message about a name that is not declared
  /// ("[protocol] nodes sets the count").
  std::string names_hint;

  /// Nothing declared: a protocol that has not said what it spawns (ServiceInfo and History::service_set
  /// by hand, as before declarations; deprecated).
  bool empty() const { return processes.empty(); }
  std::vector<std::string> names() const;
  /// The process named `name`, or nullptr.
  const ServiceProcess* find(std::string_view name) const;
  bool operator==(const ServiceDecl&) const = default;
};

/// Records service-side facts for one declared service process into the history, at the world's true time.
/// Obtained from History::recorder; recording what the declaration does not allow (a grant by a sentinel, a
/// role by a member not declared leader-capable) throws std::logic_error naming the protocol and process.
class ServiceRecorder {
 public:
  ServiceRecorder(History& history, const World& world, std::string node);
  /// This process made `value` the holder of `key` now (SET NX applied, a lock key committed...).
  void grant(const std::string& key, const std::string& value) const;
  /// This process leads from now on (a Raft leader of `term`, a Redis master); `term` ranks leaders (see
  /// ServiceRole::term).
  void leader(std::uint64_t term) const;
  /// This process follows from now on (it started, stepped down, a Redis replica or demoted master).
  void follower(std::uint64_t term) const;
  const std::string& node() const { return node_; }

 private:
  History* history_;
  const World* world_;
  std::string node_;
  bool may_grant_ = true;
  bool may_role_ = true;
};

/// "lockd1..lockd3, lockd-witness": names compactly, runs of a prefix with consecutive numbers folded.
std::string compact_names(const std::vector<std::string>& names);

}  // namespace locksim
