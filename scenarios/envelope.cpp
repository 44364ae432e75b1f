// The envelope's engine: the grid, its runs on threads, the bisection of each safe / unsafe crossing, and the
// boundary's line and sentence. Fields and TOML editing: envelope_field.cpp; files: envelope_io.cpp.
#include "locksim/scenarios/envelope.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>

#include "locksim/scenarios/ordered_tasks.hpp"
#include "locksim/scenarios/runner.hpp"

namespace locksim {

std::uint64_t EnvelopeSpec::grid_points() const {
  return axes.size() == 2 ? std::uint64_t{steps} * steps : steps;
}

std::vector<double> EnvelopeSpec::grid_values(std::uint64_t index) const {
  std::vector<double> v;
  for (std::size_t k = 0; k < axes.size(); ++k) {
    const std::uint64_t i = k == 0 ? index % steps : index / steps;
    const EnvelopeAxis& a = axes[k];
    v.push_back(i + 1 == steps ? a.hi : a.snap(a.lo + (a.hi - a.lo) * static_cast<double>(i) / (steps - 1)));
  }
  return v;
}

std::vector<double> EnvelopeResult::resolution() const {
  std::vector<double> out;
  for (const EnvelopeAxis& a : spec.axes)
    out.push_back((a.hi - a.lo) / (spec.steps - 1) / std::ldexp(1.0, static_cast<int>(spec.refine)));
  return out;
}

namespace {

/// One run of a point: the work item the threads share.
struct Task {
  const Scenario* scenario;
  const std::string* protocol;
  std::uint64_t seed;
};
struct Outcome {
  enum class V : std::uint8_t { safe, unsafe, inconclusive, error } v = V::safe;
  std::uint64_t hash = 0;
};

/// Runs every task on `jobs` threads into a vector in task order; `progress(base + done, total)` from the
/// calling thread about five times a second. Rethrows the first InputError (or anything else thrown).
std::vector<Outcome> run_tasks(const std::vector<Task>& tasks, std::uint32_t jobs,
                               const EnvelopeProgress& progress, std::uint64_t base, std::uint64_t total) {
  std::vector<Outcome> out(tasks.size());
  std::function<void(std::size_t)> report;
  if (progress) report = [&](std::size_t done) { progress(base + done, total); };
  run_ordered_tasks(
      tasks.size(), jobs,
      [&](std::size_t i) {
        RunOptions ro;
        ro.seed = tasks[i].seed;
        ro.keep_trace = false;
        try {
          const RunOutput r = run_scenario(*tasks[i].scenario, *tasks[i].protocol, ro);
          out[i].hash = r.trace_hash;
          out[i].v = !r.check.safe      ? Outcome::V::unsafe
                     : r.inconclusive() ? Outcome::V::inconclusive
                                        : Outcome::V::safe;
        } catch (const InputError&) {
          throw;
        } catch (const std::exception&) {
          out[i].v = Outcome::V::error;  // a protocol or the simulator threw: a failure of that run
        }
      },
      report);
  return out;
}

/// Folds a point's K outcomes (in seed order) into it.
void fold(EnvelopePoint& p, const Outcome* o, std::uint32_t k, std::uint64_t first_seed) {
  for (std::uint32_t s = 0; s < k; ++s) {
    ++p.runs;
    switch (o[s].v) {
      case Outcome::V::safe:
        break;
      case Outcome::V::unsafe:
        ++p.unsafe;
        break;
      case Outcome::V::inconclusive:
        ++p.inconclusive;
        break;
      case Outcome::V::error:
        ++p.errors;
        break;
    }
    if ((o[s].v == Outcome::V::unsafe || o[s].v == Outcome::V::error) && !p.first_unsafe_seed) {
      p.first_unsafe_seed = first_seed + s;
      p.first_unsafe_hash = o[s].hash;
    }
  }
}

/// Runs points (each with its own scenario) for one protocol each: returns them filled in.
std::vector<EnvelopePoint> run_points(const EnvelopeSpec& spec, const std::vector<Scenario>& scenarios,
                                      const std::vector<std::pair<std::size_t, std::string>>& which,
                                      std::vector<EnvelopePoint> points, std::uint32_t jobs,
                                      const EnvelopeProgress& progress, std::uint64_t base,
                                      std::uint64_t total) {
  std::vector<Task> tasks;
  tasks.reserve(which.size() * spec.seeds);
  for (const auto& [sc, protocol] : which)
    for (std::uint32_t s = 0; s < spec.seeds; ++s)
      tasks.push_back({&scenarios[sc], &protocol, spec.first_seed + s});
  const std::vector<Outcome> out = run_tasks(tasks, jobs, progress, base, total);
  for (std::size_t i = 0; i < points.size(); ++i)
    fold(points[i], &out[i * spec.seeds], spec.seeds, spec.first_seed);
  return points;
}

void check_spec(const EnvelopeSpec& s) {
  const char* cmd = "<command line>";
  if (s.axes.empty() || s.axes.size() > 2)
    throw InputError(cmd, 0, "--vary", "give one or two --vary FIELD=LO..HI");
  if (s.axes.size() == 2 && s.axes[0].field == s.axes[1].field)
    throw InputError(cmd, 0, "--vary", fmt::format("{} is varied twice", s.axes[0].field));
  if (s.steps < 2 || s.steps > kMaxEnvelopeSteps)
    throw InputError(cmd, 0, "--steps",
                     fmt::format("must be from 2 to {}, not {}", kMaxEnvelopeSteps, s.steps));
  if (s.seeds < 1 || s.seeds > kMaxEnvelopeSeeds)
    throw InputError(cmd, 0, "--seeds",
                     fmt::format("must be from 1 to {}, not {}", kMaxEnvelopeSeeds, s.seeds));
  if (s.refine > kMaxEnvelopeRefine)
    throw InputError(cmd, 0, "--refine",
                     fmt::format("must be from 0 to {}, not {}", kMaxEnvelopeRefine, s.refine));
  if (s.first_seed > Scenario::kMaxSeed || s.seeds - 1 > Scenario::kMaxSeed - s.first_seed)
    throw InputError(cmd, 0, "--first-seed", "the seeds go past the largest seed (2^63 - 1)");
  if (s.protocols.empty()) throw InputError(cmd, 0, "--protocol", "give at least one protocol (-p P[,P...])");
  if (s.shards == 0 || s.shard >= s.shards)
    throw InputError(cmd, 0, "--shard", "the shard must be below the shards");
  for (const EnvelopeAxis& a : s.axes) {
    const double step = (a.hi - a.lo) / (s.steps - 1);
    if (a.kind != AxisKind::number && step < 1.0)
      throw InputError(cmd, 0, "--steps",
                       fmt::format("{} steps over {}..{} are closer than the field can tell apart ({})",
                                   s.steps, a.format(a.lo), a.format(a.hi), a.field));
  }
}

/// The unit-aware text of a value in display units: "0.13 s", "0.01".
std::string amount(const EnvelopeAxis& a, double display_value) {
  return a.kind == AxisKind::duration ? fmt::format("{:.4g} s", display_value)
                                      : fmt::format("{:.4g}", display_value);
}

}  // namespace

EnvelopeResult run_envelope(const EnvelopeSpec& spec, std::uint32_t jobs, const EnvelopeProgress& progress) {
  check_spec(spec);
  register_builtin_protocols();
  (void)ProtocolRegistry::instance();  // not thread-safe to initialise: before any thread
  EnvelopeResult result;
  result.spec = spec;
  // The shard's grid points, each loaded once (every loader error before any run).
  std::vector<std::uint64_t> indices;
  for (std::uint64_t i = spec.shard; i < spec.grid_points(); i += spec.shards) indices.push_back(i);
  std::vector<Scenario> scenarios;
  scenarios.reserve(indices.size());
  for (std::uint64_t i : indices)
    scenarios.push_back(vary_scenario(spec.toml, spec.file, spec.axes, spec.grid_values(i)));
  std::vector<std::pair<std::size_t, std::string>> which;
  std::vector<EnvelopePoint> points;
  for (const std::string& p : spec.protocols)
    for (std::size_t k = 0; k < indices.size(); ++k) {
      which.emplace_back(k, p);
      EnvelopePoint pt;
      pt.at = spec.grid_values(indices[k]);
      pt.index = static_cast<std::int64_t>(indices[k]);
      points.push_back(std::move(pt));
    }
  const std::uint64_t total = which.size() * std::uint64_t{spec.seeds};
  points = run_points(spec, scenarios, which, std::move(points), jobs, progress, 0, total);
  for (std::size_t pi = 0; pi < spec.protocols.size(); ++pi) {
    ProtocolEnvelope pe;
    pe.protocol = spec.protocols[pi];
    pe.grid.assign(points.begin() + static_cast<std::ptrdiff_t>(pi * indices.size()),
                   points.begin() + static_cast<std::ptrdiff_t>((pi + 1) * indices.size()));
    result.protocols.push_back(std::move(pe));
  }
  if (spec.shards == 1)
    refine_envelope(result, jobs,
                    progress ? [&](std::uint64_t d, std::uint64_t t) { progress(total + d, total + t); }
                             : EnvelopeProgress{});
  return result;
}

void refine_envelope(EnvelopeResult& result, std::uint32_t jobs, const EnvelopeProgress& progress) {
  const EnvelopeSpec& spec = result.spec;
  // Every crossing: a grid edge between a safe and an unsafe neighbour, per protocol, bisected along its
  // axis.
  struct Crossing {
    std::size_t protocol;
    std::uint32_t axis;
    std::vector<double> safe, unsafe;
  };
  std::vector<Crossing> crossings;
  for (std::size_t pi = 0; pi < result.protocols.size(); ++pi) {
    const std::vector<EnvelopePoint>& g = result.protocols[pi].grid;
    if (g.size() != spec.grid_points())
      throw InputError("<command line>", 0, "--merge", "the grid is not complete");
    for (std::uint32_t axis = 0; axis < spec.axes.size(); ++axis)
      for (std::uint64_t i = 0; i < g.size(); ++i) {
        const std::uint64_t stride = axis == 0 ? 1 : spec.steps;
        const std::uint64_t coord = axis == 0 ? i % spec.steps : i / spec.steps;
        if (coord + 1 >= spec.steps) continue;
        const EnvelopePoint &a = g[i], &b = g[i + stride];
        if (a.is_safe() && b.is_unsafe()) crossings.push_back({pi, axis, a.at, b.at});
        if (a.is_unsafe() && b.is_safe()) crossings.push_back({pi, axis, b.at, a.at});
      }
  }
  const std::uint64_t total = crossings.size() * std::uint64_t{spec.refine} * spec.seeds;
  for (std::uint32_t round = 0; round < spec.refine && !crossings.empty(); ++round) {
    std::vector<Scenario> scenarios;
    std::vector<std::pair<std::size_t, std::string>> which;
    std::vector<EnvelopePoint> points;
    for (std::size_t c = 0; c < crossings.size(); ++c) {
      Crossing& x = crossings[c];
      std::vector<double> mid = x.safe;
      const EnvelopeAxis& a = spec.axes[x.axis];
      mid[x.axis] = a.snap((x.safe[x.axis] + x.unsafe[x.axis]) / 2);
      scenarios.push_back(vary_scenario(spec.toml, spec.file, spec.axes, mid));
      which.emplace_back(c, result.protocols[x.protocol].protocol);
      EnvelopePoint pt;
      pt.at = mid;
      points.push_back(std::move(pt));
    }
    const std::uint64_t base = std::uint64_t{round} * crossings.size() * spec.seeds;
    points = run_points(spec, scenarios, which, std::move(points), jobs, progress, base, total);
    for (std::size_t c = 0; c < crossings.size(); ++c) {
      Crossing& x = crossings[c];
      const EnvelopePoint& p = points[c];
      // An inconclusive midpoint counts as safe here: it had no anomaly.
      (p.is_unsafe() ? x.unsafe : x.safe) = p.at;
      result.protocols[x.protocol].refined.push_back(p);
    }
  }
  for (const Crossing& x : crossings) {
    BoundaryPoint b;
    b.at = x.safe;
    b.axis = x.axis;
    b.at[x.axis] = (x.safe[x.axis] + x.unsafe[x.axis]) / 2;
    b.half_width = std::abs(x.unsafe[x.axis] - x.safe[x.axis]) / 2;
    result.protocols[x.protocol].boundary.push_back(std::move(b));
  }
  summarize_envelope(result);
}

void summarize_envelope(EnvelopeResult& result) {
  const EnvelopeSpec& spec = result.spec;
  const std::vector<double> res = result.resolution();
  for (ProtocolEnvelope& pe : result.protocols) {
    std::uint64_t unsafe = 0, safe = 0, inconclusive = 0;
    for (const EnvelopePoint& p : pe.grid) (p.is_unsafe() ? unsafe : p.is_safe() ? safe : inconclusive)++;
    const std::string incon =
        inconclusive ? fmt::format(" ({} point(s) inconclusive: a run stopped at a limit)", inconclusive)
                     : "";
    BoundaryFit& f = pe.fit;
    f = {};
    f.points = pe.boundary.size();
    if (unsafe == 0) {
      pe.summary = fmt::format("{}: safe on the whole grid{}", pe.protocol, incon);
      continue;
    }
    if (safe == 0) {
      pe.summary = fmt::format("{}: unsafe on the whole grid{}", pe.protocol, incon);
      continue;
    }
    if (spec.axes.size() == 1) {
      const EnvelopeAxis& a = spec.axes[0];
      double sum = 0, sq = 0;
      for (const BoundaryPoint& b : pe.boundary) sum += a.display(b.at[0]);
      const double mean = sum / static_cast<double>(f.points);
      for (const BoundaryPoint& b : pe.boundary) sq += std::pow(a.display(b.at[0]) - mean, 2);
      f.dependent = 0;
      f.intercept = mean;
      f.rms = std::sqrt(sq / static_cast<double>(f.points));
      f.tolerance = a.display(res[0]);
      f.is_line = f.points == 1;
      f.unsafe_above = pe.grid.back().is_unsafe();
      pe.summary =
          f.is_line
              ? fmt::format("{}: unsafe when {} {} {} (± {}){}", pe.protocol, a.field,
                            f.unsafe_above ? ">" : "<", amount(a, mean), amount(a, f.tolerance / 2), incon)
              : fmt::format("{}: unsafe and safe alternate along {}: {} crossings, not one threshold{}",
                            pe.protocol, a.field, f.points, incon);
      continue;
    }
    // Two axes: the second field as a function of the first, unless the boundary runs along the second
    // (nearly constant in the first: a vertical line in the picture).
    double span[2] = {0, 0};
    for (std::uint32_t k = 0; k < 2; ++k) {
      double lo = 1e300, hi = -1e300;
      for (const BoundaryPoint& b : pe.boundary) {
        const double v = (spec.axes[k].display(b.at[k]) - spec.axes[k].display(spec.axes[k].lo)) /
                         (spec.axes[k].display(spec.axes[k].hi) - spec.axes[k].display(spec.axes[k].lo));
        lo = std::min(lo, v), hi = std::max(hi, v);
      }
      span[k] = hi - lo;
    }
    f.dependent = span[0] * 2 < span[1] ? 0 : 1;
    const std::uint32_t y = f.dependent, x = 1 - y;
    const EnvelopeAxis &ax = spec.axes[x], &ay = spec.axes[y];
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    const double n = static_cast<double>(f.points);
    for (const BoundaryPoint& b : pe.boundary) {
      const double xv = ax.display(b.at[x]), yv = ay.display(b.at[y]);
      sx += xv, sy += yv, sxx += xv * xv, sxy += xv * yv;
    }
    const double den = n * sxx - sx * sx;
    f.slope = f.points >= 2 && den != 0 ? (n * sxy - sx * sy) / den : 0;
    f.intercept = (sy - f.slope * sx) / n;
    double sq = 0;
    for (const BoundaryPoint& b : pe.boundary)
      sq += std::pow(ay.display(b.at[y]) - (f.slope * ax.display(b.at[x]) + f.intercept), 2);
    f.rms = std::sqrt(sq / n);
    // A crossing found along the other axis is off by up to that axis's step times the slope.
    f.tolerance = std::max(ay.display(res[y]), std::abs(f.slope) * ax.display(res[x]));
    f.is_line = f.points >= 3 && f.rms <= f.tolerance;
    // Which side is unsafe: the grid's unsafe points above the line or below.
    std::int64_t vote = 0;
    for (const EnvelopePoint& p : pe.grid) {
      const double d = ay.display(p.at[y]) - (f.slope * ax.display(p.at[x]) + f.intercept);
      if (p.is_unsafe()) vote += d > 0 ? 1 : -1;
      if (p.is_safe()) vote += d > 0 ? -1 : 1;
    }
    f.unsafe_above = vote >= 0;
    std::string rhs;
    if (std::abs(f.slope - 1) < 0.005 && ax.kind == ay.kind)
      rhs = ax.field;
    else if (std::abs(f.slope) < 1e-9)
      rhs = "";
    else
      rhs = fmt::format("{:.3g} × {}", f.slope, ax.field);
    const double c = f.intercept;
    if (rhs.empty())
      rhs = amount(ay, c);
    else if (std::abs(c) >= 0.0005 * std::max(1.0, std::abs(ay.display(ay.hi))))
      rhs += fmt::format(" {} {}", c < 0 ? "−" : "+", amount(ay, std::abs(c)));
    const std::string fit =
        fmt::format("least squares over {} refined crossing(s): rms {} against a step of {}", f.points,
                    amount(ay, f.rms), amount(ay, f.tolerance));
    pe.summary = f.is_line ? fmt::format("{}: unsafe when {} {} {} ({}){}", pe.protocol, ay.field,
                                         f.unsafe_above ? ">" : "<", rhs, fit, incon)
                           : fmt::format(
                                 "{}: the boundary is not a straight line to within a refinement step "
                                 "(nearest line: {} {} {}; {}){}",
                                 pe.protocol, ay.field, f.unsafe_above ? ">" : "<", rhs, fit, incon);
  }
}

}  // namespace locksim
