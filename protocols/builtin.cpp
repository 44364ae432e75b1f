#include "locksim/protocols/consul/consul.hpp"
#include "locksim/protocols/dblease/dblease.hpp"
#include "locksim/protocols/lock.hpp"
#include "locksim/protocols/raft/lease.hpp"
#include "locksim/protocols/redis/redis.hpp"
#include "locksim/protocols/zookeeper/zookeeper.hpp"

namespace locksim {

void register_builtin_protocols() {
  static bool done = false;
  if (done) return;
  done = true;
  register_lease_protocols(ProtocolRegistry::instance());
  register_redis_protocols(ProtocolRegistry::instance());
  register_dblease_protocols(ProtocolRegistry::instance());
  register_zookeeper_protocols(ProtocolRegistry::instance());
  register_consul_protocols(ProtocolRegistry::instance());
}

}  // namespace locksim
