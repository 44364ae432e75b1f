#pragma once
/// Distributions of durations: what a scenario writes wherever it accepts a duration (a network delay, a GC
/// pause, a work time, a fault interval). Sampled with the world's seeded Rng into integer nanoseconds, by
/// our own inverse-transform code (never std:: distributions, which differ between standard libraries).
///
/// Every kind but `constant` and `empirical` is "min + X, capped at max": `min` is an offset (0 unless given)
/// and `max` the cap on the whole value, so lower_bound() and upper_bound() are finite for every kind.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "locksim/sim/random.hpp"
#include "locksim/sim/time.hpp"

namespace locksim {

struct Dist {
  enum class Kind : std::uint8_t {
    constant,            ///< always `min`; draws nothing
    uniform,             ///< uniform integer nanoseconds in [min, max]
    exponential,         ///< min + Exp(mean), capped at max
    lognormal,           ///< min + median * exp(sigma * Z), Z standard normal; capped at max
    pareto,              ///< min + scale * U^(-1/alpha) (scale is `mean`), capped at max
    empirical,           ///< one of the observed `values`, each equally likely
    long_tail = pareto,  ///< the network's older name for pareto (its `mean` is the Pareto scale)
  };
  // The first five fields are those of the network's older DelayDist, in its order: `Dist{kind, min, max,
  // mean, alpha}` still means what it meant.
  Kind kind = Kind::constant;
  Duration min{1ms};   ///< the constant's value; lower bound (uniform) or offset (unbounded kinds)
  Duration max{1ms};   ///< upper bound (uniform), the cap on the whole value (unbounded kinds)
  Duration mean{1ms};  ///< exponential: the mean; pareto: the scale (the smallest value of the Pareto part)
  double alpha = 1.5;  ///< pareto: the shape (> 0; without the cap the mean is infinite for alpha <= 1)
  Duration median{0};  ///< lognormal: the median of the lognormal part, exp(mu)
  double sigma = 0;    ///< lognormal: the standard deviation of log(X) (> 0)
  /// empirical: the observed values, sorted ascending, never empty; shared (copies of a Dist, and the worlds
  /// of many threads, read the same immutable vector).
  std::shared_ptr<const std::vector<Duration>> values;

  static Dist constant_of(Duration d) { return {Kind::constant, d, d, d, 1.5}; }
  static Dist uniform_of(Duration lo, Duration hi) { return {Kind::uniform, lo, hi, lo, 1.5}; }
  /// min + Exp(mean), capped at max. Throws std::invalid_argument unless 0 <= min <= max and mean > 0.
  static Dist exponential_of(Duration mean, Duration max, Duration min = Duration{0});
  /// min + lognormal(median, sigma), capped at max. Throws unless 0 <= min <= max, median > 0, sigma in (0,
  /// 10].
  static Dist lognormal_of(Duration median, double sigma, Duration max, Duration min = Duration{0});
  /// min + Pareto(scale, alpha), capped at max. Throws unless 0 <= min <= max, scale > 0, alpha in (0, 100].
  static Dist pareto_of(Duration scale, double alpha, Duration max, Duration min = Duration{0});
  /// One of `observed` (any order; sorted here), each equally likely. Throws if empty or a value is negative.
  static Dist empirical_of(std::vector<Duration> observed);

  /// Always the same value and draws nothing from the Rng (a constant, a uniform of zero width, an empirical
  /// whose values are all equal).
  bool is_constant() const;
  /// One value. Constant and uniform inline (the network's message path); the others out of line. A constant
  /// draws nothing from the Rng; the existing kinds draw exactly as the network's DelayDist always did.
  Duration sample(Rng& rng) const {
    if (kind == Kind::constant) return min;
    if (kind == Kind::uniform) return rng.uniform(min, max);
    return sample_other(rng);
  }
  /// The range sample() can produce: every value v has lower_bound() <= v <= upper_bound().
  Duration lower_bound() const;
  Duration upper_bound() const;
  /// The mean of what sample() produces, cap included (closed forms; the empirical values' average). For docs
  /// and reports, not for the simulation.
  Duration mean_estimate() const;
  /// "pareto(scale=10ms, alpha=1.5, max=2s)", "uniform(min=1s, max=2s)", "15s" for a constant: for traces,
  /// reports and `locksim explain`.
  std::string describe() const;

 private:
  Duration sample_other(Rng& rng) const;
};

/// The inverse of the standard normal CDF, Phi^-1(p) for p in (0, 1); -inf at 0, +inf at 1. Acklam's rational
/// approximation, without the refinement step: relative error about 1.15e-9 (1.13e-9 at worst on a grid of
/// 200,000 points), i.e. a lognormal value off by a few parts per billion. Plain arithmetic, log and sqrt in
/// a fixed order: the same bits on every run.
double normal_quantile(double p);

/// A duration as a scenario file writes it, shortest exact form: "0", "15s", "1.5s", "250ms", "12.5us",
/// "7ns".
std::string duration_text(Duration d);

}  // namespace locksim
