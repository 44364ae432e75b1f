#include "locksim/sim/distribution.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

namespace locksim {
namespace {

/// Nanoseconds of a non-negative real value, floored, capped at `cap` (NaN and negatives give 0).
Duration clamp_to(double v, Duration cap) {
  if (!(v >= 0)) return Duration{0};
  if (v >= static_cast<double>(cap.count())) return cap;
  return Duration{static_cast<std::int64_t>(v)};
}

/// The standard normal CDF (for mean_estimate only: the simulation never calls it).
double normal_cdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(what);
}

std::string num(double v) {
  return fmt::format("{}", v);
}

}  // namespace

double normal_quantile(double p) {
  // Peter J. Acklam, "An algorithm for computing the inverse normal cumulative distribution function" (2003):
  // a rational approximation in a central region and one in each tail. Horner's scheme, fixed order of
  // operations, no fused multiply-add on this machine's x86-64 baseline: the same bits on every run.
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01, -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  constexpr double p_low = 0.02425;
  if (!(p > 0)) return -HUGE_VAL;
  if (!(p < 1)) return HUGE_VAL;
  auto tail = [&](double q) {
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  };
  if (p < p_low) return tail(std::sqrt(-2 * std::log(p)));
  if (p > 1 - p_low) return -tail(std::sqrt(-2 * std::log(1 - p)));
  const double q = p - 0.5;
  const double r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

std::string duration_text(Duration d) {
  const std::int64_t ns = d.count();
  if (ns == 0) return "0";
  if (ns < 0) {
    if (ns == std::numeric_limits<std::int64_t>::min()) return fmt::format("{}ns", ns);
    return "-" + duration_text(Duration{-ns});
  }
  static constexpr std::pair<std::int64_t, const char*> units[] = {
      {1'000'000'000, "s"}, {1'000'000, "ms"}, {1'000, "us"}, {1, "ns"}};
  for (const auto& [per, name] : units) {
    if (ns < per && per != 1) continue;
    std::string out = fmt::format("{}", ns / per);
    std::int64_t frac = ns % per;
    if (frac != 0) {
      std::string digits = fmt::format("{:0{}}", frac, per == 1'000'000'000 ? 9 : per == 1'000'000 ? 6 : 3);
      while (digits.back() == '0') digits.pop_back();
      out += "." + digits;
    }
    return out + name;
  }
  return fmt::format("{}ns", ns);
}

Dist Dist::exponential_of(Duration mean, Duration max, Duration min) {
  require(min >= Duration{0} && min <= max, "Dist::exponential_of: needs 0 <= min <= max");
  require(mean > Duration{0}, "Dist::exponential_of: the mean must be positive");
  return {Kind::exponential, min, max, mean, 1.5};
}

Dist Dist::lognormal_of(Duration median, double sigma, Duration max, Duration min) {
  require(min >= Duration{0} && min <= max, "Dist::lognormal_of: needs 0 <= min <= max");
  require(median > Duration{0}, "Dist::lognormal_of: the median must be positive");
  require(sigma > 0 && sigma <= 10, "Dist::lognormal_of: sigma must be in (0, 10]");
  Dist d{Kind::lognormal, min, max, Duration{0}, 1.5};
  d.median = median;
  d.sigma = sigma;
  return d;
}

Dist Dist::pareto_of(Duration scale, double alpha, Duration max, Duration min) {
  require(min >= Duration{0} && min <= max, "Dist::pareto_of: needs 0 <= min <= max");
  require(scale > Duration{0}, "Dist::pareto_of: the scale must be positive");
  require(alpha > 0 && alpha <= 100, "Dist::pareto_of: alpha must be in (0, 100]");
  return {Kind::pareto, min, max, scale, alpha};
}

Dist Dist::empirical_of(std::vector<Duration> observed) {
  require(!observed.empty(), "Dist::empirical_of: needs at least one value");
  std::sort(observed.begin(), observed.end());
  require(observed.front() >= Duration{0}, "Dist::empirical_of: values must not be negative");
  Dist d{Kind::empirical, observed.front(), observed.back(), observed.front(), 1.5};
  d.values = std::make_shared<const std::vector<Duration>>(std::move(observed));
  return d;
}

bool Dist::is_constant() const {
  switch (kind) {
    case Kind::constant:
      return true;
    case Kind::uniform:
      return max <= min;  // Rng::between(lo, hi) with hi <= lo gives lo without drawing
    case Kind::empirical:
      return values && values->front() == values->back();
    default:
      return false;  // they draw even when min == max (the network always did)
  }
}

Duration Dist::sample_other(Rng& rng) const {
  switch (kind) {
    case Kind::constant:
      return min;
    case Kind::uniform:
      return rng.uniform(min, max);
    case Kind::exponential:
      return min + rng.exponential(mean, max - min);
    case Kind::pareto:
      return min + rng.pareto(mean, alpha, max - min);
    case Kind::lognormal: {
      const double z = normal_quantile(rng.open_unit());
      return min + clamp_to(static_cast<double>(median.count()) * std::exp(sigma * z), max - min);
    }
    case Kind::empirical: {
      if (!values || values->empty()) return min;
      const std::vector<Duration>& v = *values;
      if (v.front() == v.back()) return v.front();
      return v[static_cast<std::size_t>(rng.below(v.size()))];
    }
  }
  return min;
}

Duration Dist::lower_bound() const {
  switch (kind) {
    case Kind::uniform:
      return std::min(min, max);
    case Kind::pareto:
      return min + std::min(mean, max - min);  // U^(-1/alpha) >= 1: never below the scale
    case Kind::empirical:
      return values && !values->empty() ? values->front() : min;
    default:
      return min;
  }
}

Duration Dist::upper_bound() const {
  switch (kind) {
    case Kind::constant:
      return min;
    case Kind::uniform:
      return std::max(min, max);
    case Kind::empirical:
      return values && !values->empty() ? values->back() : min;
    default:
      return max;
  }
}

Duration Dist::mean_estimate() const {
  const double cap = static_cast<double>((max - min).count());
  double part = 0;  // the mean of the part above `min`, capped
  switch (kind) {
    case Kind::constant:
      return min;
    case Kind::uniform:
      return Duration{static_cast<std::int64_t>((static_cast<__int128>(min.count()) + max.count()) / 2)};
    case Kind::empirical: {
      if (!values || values->empty()) return min;
      __int128 sum = 0;
      for (Duration v : *values) sum += v.count();
      return Duration{static_cast<std::int64_t>(sum / static_cast<__int128>(values->size()))};
    }
    case Kind::exponential: {
      // E[min(X, c)] = m (1 - e^(-c/m))
      const double m = static_cast<double>(mean.count());
      part = m * -std::expm1(-cap / m);
      break;
    }
    case Kind::pareto: {
      // E[min(X, c)] = s + integral from s to c of (s/x)^alpha dx
      const double s = static_cast<double>(mean.count());
      if (cap <= s) {
        part = cap;
      } else if (std::fabs(alpha - 1) < 1e-12) {
        part = s + s * std::log(cap / s);
      } else {
        part = s + s * (std::pow(cap / s, 1 - alpha) - 1) / (1 - alpha);
      }
      break;
    }
    case Kind::lognormal: {
      // E[min(X, c)] = m e^(s^2/2) Phi((ln(c/m) - s^2) / s) + c (1 - Phi(ln(c/m) / s))
      const double m = static_cast<double>(median.count());
      if (cap <= 0) break;
      const double l = std::log(cap / m);
      part = m * std::exp(sigma * sigma / 2) * normal_cdf((l - sigma * sigma) / sigma) +
             cap * (1 - normal_cdf(l / sigma));
      break;
    }
  }
  return min + clamp_to(std::round(part), max - min);
}

std::string Dist::describe() const {
  const std::string lo = min == Duration{0} ? "" : fmt::format("min={}, ", duration_text(min));
  switch (kind) {
    case Kind::constant:
      return duration_text(min);
    case Kind::uniform:
      return fmt::format("uniform(min={}, max={})", duration_text(min), duration_text(max));
    case Kind::exponential:
      return fmt::format("exponential({}mean={}, max={})", lo, duration_text(mean), duration_text(max));
    case Kind::lognormal:
      return fmt::format("lognormal({}median={}, sigma={}, max={})", lo, duration_text(median), num(sigma),
                         duration_text(max));
    case Kind::pareto:
      return fmt::format("pareto({}scale={}, alpha={}, max={})", lo, duration_text(mean), num(alpha),
                         duration_text(max));
    case Kind::empirical: {
      if (!values || values->empty()) return "empirical(no values)";
      const std::vector<Duration>& v = *values;
      if (v.size() == 1) return fmt::format("empirical(1 value: {})", duration_text(v.front()));
      return fmt::format("empirical({} values, min={}, median={}, max={})", v.size(),
                         duration_text(v.front()), duration_text(v[(v.size() - 1) / 2]),
                         duration_text(v.back()));
    }
  }
  return duration_text(min);
}

}  // namespace locksim
