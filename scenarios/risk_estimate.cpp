// The estimator's arithmetic: likelihood ratios of tilted draws, the fixed-point sums, the estimate and its
// 95% intervals (Wilson's for plain Monte Carlo, the normal one on the weighted mean).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "locksim/scenarios/risk.hpp"

namespace locksim {

namespace {

constexpr double kZ95 = 1.959963984540054;  // the standard normal's 97.5% quantile

/// P(Z > z), Z standard normal.
double normal_tail(double z) {
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

/// The survival function of the part above `min`, at y (nanoseconds), for the kinds risk tilts.
double survival(const Dist& d, double y) {
  switch (d.kind) {
    case Dist::Kind::pareto: {
      const auto scale = static_cast<double>(d.mean.count());
      return y <= scale ? 1.0 : std::pow(scale / y, d.alpha);
    }
    case Dist::Kind::exponential:
      return std::exp(-y / static_cast<double>(d.mean.count()));
    case Dist::Kind::lognormal:
      return y <= 0 ? 1.0 : normal_tail(std::log(y / static_cast<double>(d.median.count())) / d.sigma);
    default:
      return 1.0;
  }
}

}  // namespace

std::optional<std::string> tilt_parameter(const Dist& d) {
  switch (d.kind) {
    case Dist::Kind::pareto:
      return "alpha";
    case Dist::Kind::exponential:
      return "mean";
    case Dist::Kind::lognormal:
      return "median";
    default:
      return std::nullopt;
  }
}

std::string RiskTilt::setting() const {
  if (field.ends_with(".alpha")) return fmt::format("{}={}", field, value);
  return fmt::format("{}={}", field, duration_text(Duration{static_cast<std::int64_t>(value)}));
}

double likelihood_ratio(const Dist& f, const Dist& g, Duration x) {
  const double cap = static_cast<double>((f.max - f.min).count());
  const double y = static_cast<double>((x - f.min).count());
  // A value at the cap stands for every draw past it: the ratio of the masses there.
  if (y >= cap) {
    const double sg = survival(g, cap);
    return sg > 0 ? survival(f, cap) / sg : 1.0;
  }
  // The world floors each draw to whole nanoseconds: the density ratio at the middle of that nanosecond.
  const double v = y + 0.5;
  switch (f.kind) {
    case Dist::Kind::pareto:
      return f.alpha / g.alpha * std::pow(static_cast<double>(f.mean.count()) / v, f.alpha - g.alpha);
    case Dist::Kind::exponential: {
      const auto mf = static_cast<double>(f.mean.count()), mg = static_cast<double>(g.mean.count());
      return mg / mf * std::exp(v / mg - v / mf);
    }
    case Dist::Kind::lognormal: {
      const double zf = std::log(v / static_cast<double>(f.median.count())) / f.sigma;
      const double zg = std::log(v / static_cast<double>(g.median.count())) / g.sigma;
      return g.sigma / f.sigma * std::exp((zg * zg - zf * zf) / 2);
    }
    default:
      return 1.0;
  }
}

void RiskSums::add(const RiskRun& r) {
  ++runs;
  const Fixed w = Fixed::of(r.weight), sq = Fixed::of(r.weight * r.weight);
  this->w += w;
  w2 += sq;
  wg += w.times(r.grants);
  wt += w.times(static_cast<std::uint64_t>(std::max<std::int64_t>(r.simulated.count(), 0)));
  if (r.inconclusive) ++inconclusive;
  if (r.error) ++errors;
  if (!r.unsafe && !r.error) return;
  ++unsafe;
  wu += w;
  w2u += sq;
  auto [it, fresh] = stories.try_emplace(r.story);
  RiskStory& s = it->second;
  if (fresh || r.seed < s.seed) {
    s.seed = r.seed;
    s.trace_hash = r.trace_hash;
  }
  s.story = r.story;
  ++s.runs;
  s.weight += w;
}

void RiskSums::add(const RiskSums& o) {
  runs += o.runs;
  unsafe += o.unsafe;
  inconclusive += o.inconclusive;
  errors += o.errors;
  w += o.w;
  w2 += o.w2;
  wu += o.wu;
  w2u += o.w2u;
  wg += o.wg;
  wt += o.wt;
  for (const auto& [key, s] : o.stories) {
    auto [it, fresh] = stories.try_emplace(key, s);
    if (fresh) continue;
    RiskStory& m = it->second;
    if (s.seed < m.seed) {
      m.seed = s.seed;
      m.trace_hash = s.trace_hash;
    }
    m.runs += s.runs;
    m.weight += s.weight;
  }
}

Interval wilson(std::uint64_t k, std::uint64_t n) {
  if (n == 0) return {0, 1, "Wilson score"};
  const double nn = static_cast<double>(n), p = static_cast<double>(k) / nn, z2 = kZ95 * kZ95;
  const double centre = (p + z2 / (2 * nn)) / (1 + z2 / nn);
  const double half = kZ95 * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn)) / (1 + z2 / nn);
  return {std::max(0.0, centre - half), std::min(1.0, centre + half), "Wilson score"};
}

RiskEstimate estimate(const RiskSums& s, bool weighted) {
  RiskEstimate e;
  if (s.runs == 0) return e;
  const auto n = static_cast<long double>(s.runs);
  const long double wu = s.wu.value(), w2u = s.w2u.value(), w = s.w.value(), w2 = s.w2.value();
  if (weighted) {
    const long double p = wu / n;
    const long double var = s.runs > 1 ? std::max<long double>(0, (w2u - n * p * p) / (n - 1)) : 0;
    const long double se = std::sqrt(var / n);
    e.p_run = static_cast<double>(p);
    e.run = {static_cast<double>(std::max<long double>(0, p - kZ95 * se)), static_cast<double>(p + kZ95 * se),
             "normal, on the weighted mean"};
    if (s.unsafe == 0) e.run = {0, wilson(0, s.runs).hi, "Wilson score under the proposal (no unsafe run)"};
  } else {
    e.p_run = static_cast<double>(s.unsafe) / static_cast<double>(s.runs);
    e.run = wilson(s.unsafe, s.runs);
  }
  e.ess = w2 > 0 ? static_cast<double>(w * w / w2) : 0;
  e.ess_unsafe = w2u > 0 ? static_cast<double>(wu * wu / w2u) : 0;
  // Grants and hours per run: the self-normalised weighted means (the plain means when every weight is 1).
  if (w > 0) {
    e.grants_per_run = static_cast<double>(s.wg.value() / w);
    e.hours_per_run = static_cast<double>(s.wt.value() / w / 3.6e12L);
  }
  auto scaled = [&](double by, double& point, Interval& iv) {
    if (by <= 0) return;
    point = e.p_run / by;
    iv = {e.run.lo / by, e.run.hi / by, e.run.method};
  };
  scaled(e.grants_per_run, e.p_acquisition, e.acquisition);
  scaled(e.hours_per_run, e.per_hour, e.hour);
  return e;
}

}  // namespace locksim
