#include "locksim/sim/clock.hpp"

#include <algorithm>

namespace locksim {

NodeClock::NodeClock(ClockOptions opts)
    : ppm_(std::clamp(opts.drift_ppm, -kMaxDriftPpm, kMaxDriftPpm)), wall_offset_(opts.offset) {}

Time NodeClock::monotonic_drifting(Time t) const {
  const __int128 dt = (t - base_true_).count();
  const __int128 local = dt + (dt * ppm_) / 1'000'000;
  return base_local_ + Duration{static_cast<std::int64_t>(local)};
}

Time NodeClock::true_time_at(Time local) const {
  if (local <= base_local_) return base_true_;
  if (ppm_ == 0) {  // no drift: no 128-bit division
    const Duration dl = local - base_local_;
    return dl > kTimeMax - base_true_ ? kTimeMax : base_true_ + dl;
  }
  const __int128 dl = (local - base_local_).count();
  // dt + dt*ppm/1e6 >= dl  <=>  dt >= dl*1e6/(1e6+ppm); start from the floor and step up (exact, integer
  // only).
  __int128 dt = (dl * 1'000'000) / (1'000'000 + ppm_);
  while (dt + (dt * ppm_) / 1'000'000 < dl) ++dt;
  while (dt > 0 && (dt - 1) + ((dt - 1) * ppm_) / 1'000'000 >= dl) --dt;
  const __int128 t = base_true_.count() + dt;
  if (t > kTimeMax.count()) return kTimeMax;
  return Time{static_cast<std::int64_t>(t)};
}

void NodeClock::set_drift(Time t, std::int64_t ppm) {
  base_local_ = monotonic(t);
  base_true_ = t;
  ppm_ = std::clamp(ppm, -kMaxDriftPpm, kMaxDriftPpm);
}

}  // namespace locksim
