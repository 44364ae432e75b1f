#pragma once
/// The service processes a scenario may name: the union of the declarations (Protocol::declare) of every
/// protocol the file may run, each for the scenario's config for that protocol. A world only has the
/// processes of the protocol it runs; the runner skips faults, clocks and links naming the others, so one
/// file can describe Redlock's nodes A–E and still run against single-node Redis or a Raft lease.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "locksim/protocols/service.hpp"
#include "locksim/scenarios/scenario.hpp"

namespace locksim {

struct DeclaredServices {
  /// Every declared name once, sorted by prefix, then number ("raft1", "raft2", "redis1", "replica1").
  std::vector<std::string> names;
  /// Each registered protocol that declares a service, with its declaration (registry order).
  std::vector<std::pair<std::string, ServiceDecl>> by_protocol;

  bool has(std::string_view name) const;
  /// Whether `name` is a numbered name of a declared family ("redis7" when redis1.. are declared): a name
  /// the configuration could have declared.
  bool in_family(std::string_view name) const;
  /// "raft1..raft3, redis1..redis5", for messages.
  std::string summary() const;
  /// The protocols' hints on how the configuration changes the names, each once ("[protocol] nodes sets
  /// the count; replica1 and sentinel1 need replica = true").
  std::string hints() const;
  /// The protocols that declare `name`, for messages.
  std::vector<std::string> protocols_of(std::string_view name) const;
};

/// The declared services of every registered protocol (built-ins and the user's), each for
/// `scenario.config_for(protocol)`.
DeclaredServices declared_services(const Scenario& scenario);

}  // namespace locksim
