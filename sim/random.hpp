#pragma once
/// Seeded randomness. One seed per world; SplitMix64 derives an independent xoshiro256++ stream per
/// component. Every distribution is our own: std:: distributions differ between standard libraries and would
/// break replay.
#include <array>
#include <cstdint>
#include <string_view>

#include "locksim/sim/time.hpp"

namespace locksim {

/// SplitMix64 (Steele, Lea, Flood 2014): used to expand one 64-bit seed into generator state.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_;
};

/// FNV-1a over a name: a stable way to turn a stream name into a number (never std::hash).
constexpr std::uint64_t stable_hash(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

/// xoshiro256++ (Blackman, Vigna) with our own distributions.
class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0);

  /// An independent stream derived from this generator's seed and a name, e.g. rng.stream("network").
  /// Deriving does not advance this generator, so adding a stream never changes the others.
  [[nodiscard]] Rng stream(std::string_view name) const;
  [[nodiscard]] Rng stream(std::uint64_t id) const;

  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[0] + s_[3], 23) + s_[0];
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  std::uint64_t seed() const { return seed_; }

  /// Uniform integer in [0, bound), unbiased (Lemire's multiply-and-reject). bound == 0 gives 0. Inline: the
  /// first draw is accepted unless its low word is below bound (the rare case goes out of line).
  std::uint64_t below(std::uint64_t bound) {
    if (bound == 0) return 0;
    const unsigned __int128 m = static_cast<unsigned __int128>(next()) * bound;
    if (static_cast<std::uint64_t>(m) < bound) [[unlikely]]
      return below_slow(bound, m);
    return static_cast<std::uint64_t>(m >> 64);
  }
  /// Uniform integer in [lo, hi], inclusive; lo > hi is treated as lo.
  std::int64_t between(std::int64_t lo, std::int64_t hi) {
    if (hi <= lo) return lo;
    const std::uint64_t span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
    if (span == ~std::uint64_t{0}) [[unlikely]]
      return static_cast<std::int64_t>(next());
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + below(span + 1));
  }
  /// Uniform duration in [lo, hi], inclusive.
  Duration uniform(Duration lo, Duration hi) { return Duration{between(lo.count(), hi.count())}; }
  /// True with probability num/den (integer ratio: exact and portable).
  bool chance(std::uint64_t num, std::uint64_t den);
  /// Uniform double in [0, 1) with 53 random bits.
  double unit();
  /// Uniform double in (0, 1), never 0 nor 1: (2k + 1) / 2^53 for a uniform 52-bit k, so 1 - open_unit() is
  /// exact too (for quantile functions that are infinite at both ends).
  double open_unit() { return static_cast<double>(((next() >> 12) << 1) | 1) * 0x1.0p-53; }
  /// Exponentially distributed duration with the given mean, capped at cap.
  Duration exponential(Duration mean, Duration cap = kTimeMax);
  /// Pareto-distributed (long-tailed) duration: scale * U^(-1/alpha), capped at cap. alpha > 0.
  Duration pareto(Duration scale, double alpha, Duration cap);

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  /// below()'s rejection loop, given the first product m (its low word is below bound).
  std::uint64_t below_slow(std::uint64_t bound, unsigned __int128 m);
  std::uint64_t seed_;
  std::array<std::uint64_t, 4> s_{};
};

}  // namespace locksim
