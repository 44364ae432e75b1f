#include "protocols/lock.hpp"

namespace locksim {

void register_builtin_protocols() {
  static bool done = false;
  if (done) return;
  done = true;
}

}  // namespace locksim
