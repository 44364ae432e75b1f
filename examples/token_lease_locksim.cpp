// A user's own locksim: the whole command line (run, explore, replay, ...) with the token-lease protocols
// registered, so the replay command a failing property prints works as printed:
//
//   ./token_lease_locksim replay /tmp/replay-kleppmann-gc-pause-token-lease-....toml
//   ./token_lease_locksim run kleppmann-gc-pause -p token-lease-durable
#include <locksim/cli.hpp>

#include "token_lease.hpp"

int main(int argc, char** argv) {
  example::register_token_lease();
  return locksim::cli_main(argc, argv);
}
