#pragma once
/// The nemesis: random fault plans from a seed, swarm-style (Groce et al., "Swarm testing", ISSTA 2012). Each
/// seed first draws its own *mix* (which fault kinds are on at all) and *intensity* (how many faults, how
/// long, how far), then the faults themselves. A uniform mix of everything tends to average faults out; swarm
/// plans put many runs in the corners (only long pauses; only clock jumps; a lossy network and one crash)
/// where bugs live.
///
/// Every draw goes through locksim::Rng (never std:: distributions), so the same seed gives the same plan on
/// every machine, and the world of a run is seeded with the same number: one integer reproduces the whole
/// run.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "locksim/scenarios/scenario.hpp"
#include "locksim/sim/random.hpp"

namespace locksim {

/// How hard the nemesis may hit.
enum class NemesisMode : std::uint8_t {
  /// Inside the timing assumptions lock protocols state: pauses and delay spikes far below the lock's
  /// validity
  /// (at most ttl/20), clock drift at most 1 %, no clock jumps, no crashes. Loss, duplication and partitions
  /// are
  /// allowed (an asynchronous network may do all of them). A violation here is a bug in the protocol's own
  /// terms.
  within,
  /// Anything goes: pauses of any length, delay spikes longer than the TTL, clock jumps either way, drift up
  /// to
  /// 50 %, crashes with and without power loss, restarts, one-way partitions.
  anything,
};
std::string_view to_string(NemesisMode m);
/// Parses "within" / "anything"; nothing otherwise.
std::optional<NemesisMode> parse_nemesis_mode(std::string_view s);

/// The process names a fault can aim at in a world running `protocol`, by role.
struct NemesisTargets {
  std::vector<std::string> clients;  ///< the scenario's clients, in order
  std::vector<std::string> servers;  ///< the protocol's service processes, in spawn order
  std::string resource;              ///< the protected store
};

/// The names of every process a world for `scenario` × `protocol` has, in spawn order (servers, resource,
/// clients): the service as the protocol declares it for the scenario's config (Protocol::declare; the runner
/// checks that build() spawns exactly that), never a naming convention. A protocol that declares nothing
/// has its world built, not run, and the answer read from it. Throws InputError for an unknown protocol.
std::vector<std::string> world_process_names(const Scenario& scenario, const std::string& protocol);

/// The targets of `scenario` × `protocol` (see world_process_names).
NemesisTargets nemesis_targets(const Scenario& scenario, const std::string& protocol);

/// A fault plan with everything that is not a timed fault: network noise and initial clock settings too.
struct FaultPlan {
  std::vector<FaultSpec> faults;
  /// Replaces the scenario's default link loss / duplication / reordering (delay stays the scenario's).
  std::optional<LinkOptions> network;
  /// Extra initial clock settings (offset, drift), replacing the scenario's for the same node.
  std::vector<ClockSpec> clocks;

  /// Number of separate ingredients (faults + network noise + clock settings): what shrinking minimizes.
  std::size_t size() const { return faults.size() + (network ? 1 : 0) + clocks.size(); }
};

struct NemesisOptions {
  NemesisMode mode = NemesisMode::anything;
  std::uint32_t max_faults = 6;  ///< upper bound of the per-seed fault count (≥ 1)
};

/// The swarm configuration a seed drew: which kinds are on and how hard they hit. Exposed for tests and for
/// the JSONL record (so a person can filter runs by mix).
struct SwarmMix {
  bool pause = false, delay_spike = false, network_noise = false, partition = false, drift = false,
       clock_jump = false, crash = false;
  std::uint32_t faults = 0;     ///< how many timed faults to draw
  std::uint32_t intensity = 0;  ///< 0 (gentle) .. 4 (brutal): scales durations and magnitudes
  std::string describe() const;
};

/// Draws the plan for one seed. Same (scenario, targets, seed, options) → same plan, bit for bit. Every time,
/// trigger delay and duration is within the scenario's max_time, and every note trigger is one the loader
/// accepts (so a replay file of the plan loads again).
FaultPlan make_fault_plan(const Scenario& scenario, const NemesisTargets& targets, std::uint64_t seed,
                          const NemesisOptions& opts, SwarmMix* mix = nullptr);

/// The scenario with the plan applied: its scripted faults replaced by the plan's (or kept before them when
/// `keep_scripted`), network noise and clocks applied.
Scenario apply_plan(const Scenario& scenario, const FaultPlan& plan, bool keep_scripted = false);

/// One line per fault, for people: "pause client1 for 15s after client1 logs 'acquired' #1".
std::string describe(const FaultSpec& f);
/// The whole plan, one fault per line.
std::string describe(const FaultPlan& plan);

}  // namespace locksim
