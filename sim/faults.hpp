#pragma once
/// Fault plans: timed faults and faults triggered by a trace event ("pause client1 for 15 s right after it
/// logs `acquired`"), so a scenario tells the same story whatever the protocol's latency.
#include <cstdint>
#include <string>
#include <vector>

#include "sim/time.hpp"
#include "sim/trace.hpp"

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
};

std::string_view to_string(Fault::Kind k);

}  // namespace locksim
