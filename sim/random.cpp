#include "locksim/sim/random.hpp"

#include <cmath>

namespace locksim {
namespace {
std::int64_t clamp_ns(long double v, Duration cap) {
  if (!(v >= 0)) return 0;
  if (v >= static_cast<long double>(cap.count())) return cap.count();
  return static_cast<std::int64_t>(v);
}
}  // namespace

Rng::Rng(std::uint64_t seed) : seed_(seed) {
  SplitMix64 sm(seed);
  for (auto& w : s_) w = sm.next();
}

Rng Rng::stream(std::string_view name) const {
  return stream(stable_hash(name));
}

Rng Rng::stream(std::uint64_t id) const {
  SplitMix64 sm(seed_ ^ rotl(id, 17) ^ 0x6a09e667f3bcc909ULL);
  sm.next();
  return Rng(sm.next() ^ id);
}

std::uint64_t Rng::below_slow(std::uint64_t bound, unsigned __int128 m) {
  const std::uint64_t threshold = (0 - bound) % bound;
  auto low = static_cast<std::uint64_t>(m);
  while (low < threshold) {
    m = static_cast<unsigned __int128>(next()) * bound;
    low = static_cast<std::uint64_t>(m);
  }
  return static_cast<std::uint64_t>(m >> 64);
}

bool Rng::chance(std::uint64_t num, std::uint64_t den) {
  if (den == 0 || num == 0) return false;
  if (num >= den) return true;
  return below(den) < num;
}

double Rng::unit() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

Duration Rng::exponential(Duration mean, Duration cap) {
  const double u = unit();  // [0,1): 1-u in (0,1], log finite
  return Duration{clamp_ns(-std::log1p(-u) * static_cast<long double>(mean.count()), cap)};
}

Duration Rng::pareto(Duration scale, double alpha, Duration cap) {
  const double u = 1.0 - unit();  // (0,1]
  return Duration{clamp_ns(static_cast<long double>(scale.count()) * std::pow(u, -1.0 / alpha), cap)};
}

}  // namespace locksim
