#pragma once
/// Node clocks: a monotonic clock and a wall clock per node, both derived from true time.
/// Drift is in parts per million and applies to both; jumps move only the wall clock (a monotonic clock never
/// goes back, exactly as CLOCK_MONOTONIC vs CLOCK_REALTIME on Linux).
#include <cstdint>

#include "locksim/sim/time.hpp"

namespace locksim {

struct ClockOptions {
  Duration offset{0};          ///< wall clock minus true time at start
  std::int64_t drift_ppm = 0;  ///< +100 = runs 100 µs per second fast; limited to [-500000, 500000]
};

class NodeClock {
 public:
  static constexpr std::int64_t kMaxDriftPpm = 500'000;

  explicit NodeClock(ClockOptions opts = {});

  /// The monotonic clock at true time t (t must not be before the last change).
  Time monotonic(Time t) const {
    if (ppm_ == 0) return base_local_ + (t - base_true_);  // no drift: no 128-bit arithmetic (hot path)
    return monotonic_drifting(t);
  }
  /// The wall clock at true time t.
  Time wall(Time t) const { return monotonic(t) + wall_offset_; }

  /// Earliest true time at which the monotonic clock reads at least `local` (for timers armed on this clock).
  Time true_time_at(Time local) const;

  /// Wall clock jumps by `by` (forward if positive) at true time t.
  void jump(Time t, Duration by) {
    (void)t;
    wall_offset_ += by;
  }
  /// The drift changes at true time t; the clock is continuous across the change.
  void set_drift(Time t, std::int64_t ppm);
  std::int64_t drift_ppm() const { return ppm_; }
  /// Wall clock minus monotonic clock.
  Duration wall_offset() const { return wall_offset_; }

 private:
  Time monotonic_drifting(Time t) const;
  Time base_true_{0};
  Time base_local_{0};
  std::int64_t ppm_ = 0;
  Duration wall_offset_{0};
};

}  // namespace locksim
