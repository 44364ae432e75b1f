#pragma once
/// The workload a client process runs, and the ground-truth recording around it. This is oracle-side code: it
/// may see the world (true time) and the history; the protocol's LockClient it drives may not.
#include <memory>

#include "protocols/history.hpp"
#include "protocols/lock.hpp"
#include "scenarios/scenario.hpp"

namespace locksim {

struct WorkloadEnv {
  World* world = nullptr;
  History* history = nullptr;
  Protocol* protocol = nullptr;
  const ProtocolConfig* config = nullptr;
  ProcId resource{};
  std::string lock_key;
  std::string resource_key;
  Time give_up_at{0};
};

/// The body of a client process running `spec` against the protocol in `env`.
Body client_body(const WorkloadEnv& env, const ClientSpec& spec);

}  // namespace locksim
