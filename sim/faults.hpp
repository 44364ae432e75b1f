#pragma once
/// Fault plans: timed faults and faults triggered by a trace event ("pause client1 for 15 s right after it
/// logs `acquired`"), so a scenario tells the same story whatever the protocol's latency.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "locksim/sim/distribution.hpp"
#include "locksim/sim/random.hpp"
#include "locksim/sim/time.hpp"
#include "locksim/sim/trace.hpp"

namespace locksim {

struct Trigger {
  enum class Kind : std::uint8_t {
    at,       ///< at true time `at`
    note,     ///< when `proc` (or any process if invalid) logs a note labelled `label`
    send,     ///< when `proc` sends a message of type `label`
    receive,  ///< when `proc` takes a message of type `label` from its mailbox
  };
  Kind kind = Kind::at;
  Time at{0};
  ProcId proc{};
  std::string label;
  std::uint32_t nth = 1;  ///< fire on the nth matching event (1 = first)
  Duration delay{0};      ///< fire this long after the triggering event

  static Trigger at_time(Time t) { return {Kind::at, t, {}, {}, 1, 0ns}; }
  static Trigger on_note(ProcId p, std::string label, std::uint32_t nth = 1, Duration delay = 0ns) {
    return {Kind::note, 0ns, p, std::move(label), nth, delay};
  }
};

/// A fault that fires more than once: the first firing at its trigger (`at`, or the trigger's event plus its
/// delay), then one every `every` after that, until `times` firings or the first one past `until`. Firing k
/// (from 0) comes at first + k * every + a jitter drawn for it, uniform in [0, jitter], from the fault's own
/// seeded stream: the nominal times do not drift with the jitter. A firing whose time with its jitter is
/// past `until` does not happen, and ends the repetition.
///
/// With `every_dist`, the period is drawn anew before each firing after the first, from the fault's own
/// stream "fault-period" (exponential periods: Poisson arrivals): nominal time k = nominal time k-1 + a
/// draw. With `jitter_dist`, each firing's delay is drawn from it instead of uniform in [0, jitter] (from
/// the same stream as that uniform draw). A constant period or jitter draws nothing of the kind.
struct Repeat {
  /// The period (0: the fault fires once; then `times` and `until` do not apply). With every_dist, the
  /// shortest period it can draw (> 0), which bounds the firings.
  Duration every{0};
  std::uint32_t times = 0;  ///< firings in all, the first included (0: as many as `until` allows)
  Time until = kTimeMax;    ///< no firing after this true time
  /// Each firing, the first included, comes up to this much later. With jitter_dist, its longest draw.
  Duration jitter{0};
  std::optional<Dist> every_dist;   ///< a period drawn per firing (never a constant: that is `every`)
  std::optional<Dist> jitter_dist;  ///< a jitter drawn per firing (instead of uniform in [0, jitter])
  /// The most firings one fault may have: a plan that could fire more is refused (World::add_fault).
  static constexpr std::uint32_t kMaxFirings = 10'000;
  /// The number of firings this repetition allows at most when the first comes at `first` (kMaxFirings + 1
  /// when unbounded or above the limit, without overflow). 1 when `every` is 0.
  std::uint64_t bound(Time first) const;
  /// Why this repetition is refused (empty: it is fine): a negative period or jitter, no bound, more than
  /// kMaxFirings firings from `first` on.
  std::string check(Time first) const;
  bool repeats() const { return every > 0ns; }
};

struct Fault;

/// What a target callback found when the fault fired: fire it (with `detail` appended to the trace record:
/// which role resolved to the processes named), or skip this firing because nobody has the role now (`detail`
/// says so, in the trace).
struct Resolution {
  bool fire = true;
  std::string detail;
};

/// Computes a fault's targets when it fires, from what holds at that instant: fills `f` (a copy of the
/// planned fault) with target, more_targets, side_a, side_b. `rng` is the fault's own stream for picks (one
/// stream per fault, derived from the world's seed: a pick never moves any other draw). The kernel knows
/// nothing of what the targets mean; a scenario runner gives the callback (roles such as "the leader").
using TargetCallback = std::function<Resolution(Fault& f, Rng& rng)>;

struct Fault {
  enum class Kind : std::uint8_t {
    pause,        ///< target stops for `duration` (a GC pause, SIGSTOP)
    crash,        ///< target crashes; restarts after `duration` if > 0. `power_loss` drops unsynced storage
    restart,      ///< a crashed target starts again
    clock_jump,   ///< target's wall clock jumps by `duration` (negative = back)
    clock_drift,  ///< target's clock drift becomes `ppm`
    partition,  ///< links between `side_a` and `side_b` cut (only a→b if `one_way`); heals after `duration`
                ///< if > 0
    heal,       ///< all partitions heal
    delay_spike,  ///< messages from `target` (any if invalid) to `peer` (any if invalid) get `extra` delay
  };
  Kind kind = Kind::pause;
  Trigger when;
  ProcId target{};
  ProcId peer{};
  Duration duration{0};
  Duration extra{0};
  std::int64_t ppm = 0;
  bool power_loss = false;
  bool one_way = false;
  std::uint32_t count = 0;  ///< delay_spike: number of messages to delay (0 = all within `duration`)
  std::vector<ProcId> side_a, side_b;
  /// The fault hits each of these too, after `target`, in order (one trace record per process). Kinds
  /// without a target (partition, heal) ignore it.
  std::vector<ProcId> more_targets;
  Repeat repeat;
  /// When set, every firing draws its `duration` from this, from the fault's own seeded stream (a
  /// heavy-tailed GC pause; a crash's downtime; a partition's length; a clock jump's size; a delay spike's
  /// window); `duration` is then only the plan's description.
  std::optional<Dist> duration_dist;
  /// clock_jump with duration_dist: the drawn jump goes back (the wall clock is set earlier by the draw).
  bool jump_back = false;
  /// delay_spike: when set, every firing draws its `extra` from this (a stream of its own).
  std::optional<Dist> extra_dist;
  /// When set, called at every firing to compute the targets (TargetCallback); the planned targets are then
  /// what the callback starts from.
  TargetCallback targets_at_fire;
};

std::string_view to_string(Fault::Kind k);

}  // namespace locksim
