// `locksim replay`: re-runs a replay file and fails loudly when its trace hash or verdict differ.
#include <fmt/format.h>

#include "locksim/scenarios/cli/cli.hpp"
#include "locksim/scenarios/replay.hpp"

namespace locksim::cli {

int cmd_replay(const std::string& file, const RenderRun& render) {
  const ReplayFile rf = load_replay_file(file);
  const ReplayCheck c = replay(rf);
  if (render) fmt::print("{}", render(c.run, rf.scenario));
  if (c.hash_matches && c.verdict_matches) {
    fmt::print("\nreplay OK: {} × {} seed {} reproduced trace hash {} ({})\n", rf.scenario.name,
               rf.info.protocol, rf.scenario.seed, hash_text(c.run.trace_hash), to_string(c.run.verdict()));
    return 0;
  }
  fmt::print(stderr,
             "\nREPLAY MISMATCH: {}\n  expected trace hash {} ({}), got {} ({})\n  the simulator, the "
             "protocol or the "
             "scenario changed behaviour since this file was written\n",
             file, hash_text(rf.info.expected_trace_hash), to_string(rf.info.verdict),
             hash_text(c.run.trace_hash), to_string(c.run.verdict()));
  return 1;
}

}  // namespace locksim::cli
