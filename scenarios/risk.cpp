// The risk engine: what to tilt and how much (given, or automatic with one cross-entropy step), the pilot
// that sizes the estimate, and the runs themselves, weighted by the likelihood ratio of their tilted draws.
// The arithmetic: risk_estimate.cpp; the report, shards and merge: risk_io.cpp.
#include "locksim/scenarios/risk.hpp"

#include <fmt/format.h>

#include <toml++/toml.h>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "locksim/scenarios/envelope.hpp"
#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/ordered_tasks.hpp"
#include "locksim/scenarios/runner.hpp"

namespace locksim {

namespace {

constexpr const char* kCmd = "<command line>";

bool varies(const Dist& d) {
  return !d.is_constant();
}

bool steps_vary(const std::vector<ClientStep>& steps) {
  return std::any_of(steps.begin(), steps.end(),
                     [](const ClientStep& s) { return varies(s.duration) || steps_vary(s.steps); });
}

/// Whether any of the scenario's distributions draws: its faults, its network, its clients' work and think.
bool has_distribution(const Scenario& sc) {
  for (const FaultSpec& f : sc.faults) {
    const Fault& x = f.fault;
    if (x.duration_dist || x.repeat.every_dist || x.repeat.jitter > 0ns) return true;
  }
  auto link_varies = [](const LinkOptions& l) {
    return varies(l.delay) || l.loss_ppm || l.duplicate_ppm || l.reorder_ppm;
  };
  if (link_varies(sc.network.defaults)) return true;
  for (const LinkSpec& l : sc.links)
    if (link_varies(l.options)) return true;
  for (const ClientSpec& c : sc.clients) {
    if (c.work_min < c.work_max || c.think_min < c.think_max) return true;
    if ((c.work_dist && varies(*c.work_dist)) || (c.think_dist && varies(*c.think_dist))) return true;
    if (steps_vary(c.steps)) return true;
  }
  return false;
}

/// The tilt a --tilt "fault[K].duration.PARAM=VALUE" names (its proposal not loaded yet).
RiskTilt parse_tilt(const std::string& text, const Scenario& sc) {
  const auto eq = text.find('=');
  const std::string field = text.substr(0, eq);
  auto bad = [&](const std::string& what) -> RiskTilt { throw InputError(kCmd, 0, "--tilt " + field, what); };
  if (eq == std::string::npos || eq + 1 == text.size())
    bad("give FIELD=VALUE, e.g. --tilt fault[0].duration.alpha=0.2, or --tilt auto / none");
  std::size_t k = 0;
  std::string param;
  {
    const std::string head = "fault[";
    const auto close = field.find(']');
    const std::string index = close == std::string::npos || !field.starts_with(head)
                                  ? std::string()
                                  : field.substr(head.size(), close - head.size());
    const std::string rest = close == std::string::npos ? std::string() : field.substr(close + 1);
    if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos ||
        !rest.starts_with(".duration."))
      bad("risk tilts a fault's duration distribution: fault[K].duration.alpha (pareto), .mean "
          "(exponential) or .median (lognormal)");
    k = std::stoul(index.substr(0, 9));
    param = rest.substr(std::string(".duration.").size());
  }
  if (k >= sc.faults.size())
    bad(fmt::format("the scenario has {} fault(s): fault[{}] is past the end", sc.faults.size(), k));
  const std::optional<Dist>& d = sc.faults[k].fault.duration_dist;
  const std::optional<std::string> p = d ? tilt_parameter(*d) : std::nullopt;
  if (!p)
    bad(fmt::format(
        "fault[{}]'s duration is {}: only a pareto, exponential or lognormal duration has a tail to "
        "tilt",
        k, d ? d->describe() : "a constant"));
  if (param != *p)
    bad(fmt::format("fault[{}]'s duration is {}: its tilt is fault[{}].duration.{}", k, d->describe(), k,
                    *p));
  RiskTilt t;
  t.fault = k;
  t.field = field;
  t.nominal = *d;
  const std::string value = text.substr(eq + 1);
  if (param == "alpha") {
    const char* end = value.data() + value.size();
    const auto [ptr, ec] = std::from_chars(value.data(), end, t.value);
    if (ec != std::errc{} || ptr != end || !(t.value > 0) || !std::isfinite(t.value))
      bad(fmt::format("'{}' is not a Pareto shape: a number above 0, e.g. 0.2", value));
  } else {
    const std::optional<Duration> v = parse_duration(value);
    if (!v || *v <= 0ns) bad(fmt::format("'{}' is not a duration above 0 with its unit, e.g. 20s", value));
    t.value = static_cast<double>(v->count());
  }
  return t;
}

/// Fills each tilt's proposal from the proposal scenario and checks its tail is no lighter.
void load_proposals(std::vector<RiskTilt>& tilts, const Scenario& proposal) {
  for (RiskTilt& t : tilts) {
    t.proposal = *proposal.faults[t.fault].fault.duration_dist;
    const Dist &f = t.nominal, &g = t.proposal;
    const bool lighter = f.kind == Dist::Kind::pareto        ? g.alpha > f.alpha
                         : f.kind == Dist::Kind::exponential ? g.mean < f.mean
                                                             : g.median < f.median;
    if (lighter)
      throw InputError(
          kCmd, 0, "--tilt " + t.field,
          fmt::format("the proposal {} has a lighter tail than the scenario's {}: the weights of "
                      "long draws would be unbounded; tilt towards the tail",
                      g.describe(), f.describe()));
    t.value = f.kind == Dist::Kind::pareto        ? g.alpha
              : f.kind == Dist::Kind::exponential ? static_cast<double>(g.mean.count())
                                                  : static_cast<double>(g.median.count());
  }
}

/// The scenario text the runs draw from: the tilts written in, with a comment saying what it is.
std::string proposal_text(const RiskSpec& spec, const std::vector<RiskTilt>& tilts) {
  std::vector<std::string> sets;
  std::string head = "# The proposal of `risk`: the scenario with its tilted fault durations";
  for (const RiskTilt& t : tilts) {
    sets.push_back(t.setting());
    head += "\n#   " + t.setting();
  }
  std::string text;
  try {
    text = set_fields(spec.toml, spec.file, sets);
  } catch (const InputError& e) {
    std::string field = e.field;
    if (field.starts_with("--set")) field.replace(0, 5, "--tilt");
    throw InputError(e.file, e.line, field, e.message);
  }
  // Its verdicts are not the scenario's expectations: a replay reports the run as it is.
  toml::table root = toml::parse(text);
  root.erase("expect");
  std::ostringstream os;
  os << root;
  return head + "\n# Replay a run of it: run THIS_FILE -p PROTOCOL --seed SEED\n\n" + os.str() + "\n";
}

/// Rounds to four significant digits (a proposal's parameter: what it is exactly does not matter, only that
/// the weights use the one the world drew from).
double round4(double v) {
  return std::stod(fmt::format("{:.4g}", v));
}

/// The starting proposal: the part above `min` past the TTL as likely as not. Nothing when the scenario's
/// own tail already is, or the cap is below the TTL.
std::optional<double> start_value(const Dist& d, Duration ttl) {
  const double y = static_cast<double>((ttl - d.min).count());
  if (y <= 0 || d.max <= ttl) return std::nullopt;
  switch (d.kind) {
    case Dist::Kind::pareto: {
      const double ratio = y / static_cast<double>(d.mean.count());
      if (ratio <= 1) return std::nullopt;
      const double a = std::log(2.0) / std::log(ratio);
      return a < d.alpha ? std::optional<double>(round4(a)) : std::nullopt;
    }
    case Dist::Kind::exponential: {
      const double m = y / std::log(2.0);
      return m > static_cast<double>(d.mean.count()) ? std::optional<double>(std::round(m / 1e3) * 1e3)
                                                     : std::nullopt;
    }
    case Dist::Kind::lognormal:
      return y > static_cast<double>(d.median.count()) ? std::optional<double>(std::round(y / 1e3) * 1e3)
                                                       : std::nullopt;
    default:
      return std::nullopt;
  }
}

/// One run: its verdict, weight, grants, simulated time and story; `draws` gets the tilted faults' draws.
RiskRun run_one(const Scenario& sc, const Scenario& nominal, const std::string& protocol, std::uint64_t seed,
                const std::vector<RiskTilt>& tilts, std::vector<std::vector<Duration>>* draws) {
  RiskRun out;
  out.seed = seed;
  RunOptions ro;
  ro.seed = seed;
  ro.keep_trace = false;
  try {
    const RunOutput r = run_scenario(sc, protocol, ro);
    out.unsafe = !r.check.safe;
    out.inconclusive = r.inconclusive();
    out.grants = r.history.grants.size();
    out.simulated = r.run.end;
    out.trace_hash = r.trace_hash;
    for (const RiskTilt& t : tilts) {
      const auto at = std::find(r.fault_specs.begin(), r.fault_specs.end(), t.fault);
      if (draws) draws->emplace_back();
      if (at == r.fault_specs.end()) continue;
      for (Duration x : r.fault_draws[static_cast<std::size_t>(at - r.fault_specs.begin())]) {
        out.weight *= likelihood_ratio(t.nominal, t.proposal, x);
        if (draws) draws->back().push_back(x);
      }
    }
    if (out.unsafe) out.story = risk_story(nominal, r);
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    out.error = true;  // a protocol or the simulator threw: a failure of that run
    out.story = fmt::format("the run threw: {}", e.what());
  }
  return out;
}

struct Pilot {
  RiskSums sums;
  std::vector<RiskRun> runs;
  std::vector<std::vector<std::vector<Duration>>> draws;  ///< per run, per tilt
};

Pilot run_pilot(const RiskSpec& spec, const Scenario& sc, const Scenario& nominal,
                const std::vector<RiskTilt>& tilts, std::uint32_t jobs,
                const std::function<void(std::size_t)>& p) {
  Pilot pl;
  pl.runs.resize(spec.pilot);
  pl.draws.resize(spec.pilot);
  run_ordered_tasks(
      spec.pilot, jobs,
      [&](std::size_t j) {
        pl.runs[j] =
            run_one(sc, nominal, spec.protocol, spec.first_seed + kPilotSeedOffset + j, tilts, &pl.draws[j]);
      },
      p);
  for (const RiskRun& r : pl.runs) pl.sums.add(r);
  return pl;
}

/// One cross-entropy step (Rubinstein): the proposal parameter that maximises the weighted likelihood of the
/// unsafe pilot runs' draws of tilt `k`. Nothing when no unsafe run drew from it.
std::optional<double> cross_entropy(const Pilot& pl, std::size_t k, const Dist& f) {
  long double num = 0, den = 0;
  for (std::size_t j = 0; j < pl.runs.size(); ++j) {
    const RiskRun& r = pl.runs[j];
    if (!r.unsafe || pl.draws[j].size() <= k) continue;
    for (Duration x : pl.draws[j][k]) {
      const double y = static_cast<double>((x - f.min).count()) + 0.5;
      const long double w = r.weight;
      den += w;
      if (f.kind == Dist::Kind::pareto) num += w * std::log(y / static_cast<double>(f.mean.count()));
      if (f.kind == Dist::Kind::exponential) num += w * y;
      if (f.kind == Dist::Kind::lognormal) num += w * std::log(y);
    }
  }
  if (den <= 0 || num <= 0) return std::nullopt;
  switch (f.kind) {
    case Dist::Kind::pareto:
      return round4(static_cast<double>(den / num));
    case Dist::Kind::exponential:
      return std::round(static_cast<double>(num / den) / 1e3) * 1e3;
    case Dist::Kind::lognormal:
      return std::round(std::exp(static_cast<double>(num / den)) / 1e3) * 1e3;
    default:
      return std::nullopt;
  }
}

std::uint64_t size_runs(const RiskSpec& spec, const RiskEstimate& e) {
  const RiskBudget& b = spec.budget;
  if (b.runs) return *b.runs;
  double runs = 0;
  const char* option = b.hours ? "--hours" : "--acquisitions";
  if (b.hours) {
    if (e.hours_per_run <= 0) throw InputError(kCmd, 0, option, "the pilot's runs took no simulated time");
    runs = std::ceil(*b.hours / e.hours_per_run);
  } else {
    if (e.grants_per_run <= 0)
      throw InputError(kCmd, 0, option,
                       "no pilot run acquired the lock: there is nothing to count (give --runs or --hours)");
    runs = std::ceil(static_cast<double>(*b.acquisitions) / e.grants_per_run);
  }
  if (!(runs <= static_cast<double>(kMaxRiskRuns)))
    throw InputError(
        kCmd, 0, option,
        fmt::format("that is {:.3g} runs (a run is {:.3g} simulated hours and {:.3g} acquisitions), "
                    "more than {}: ask for less",
                    runs, e.hours_per_run, e.grants_per_run, kMaxRiskRuns));
  return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(runs));
}

}  // namespace

std::string risk_story(const Scenario& sc, const RunOutput& r) {
  std::string kinds;
  for (const auto& [kind, n] : r.check.anomaly_counts) kinds += (kinds.empty() ? "" : "+") + kind;
  if (kinds.empty()) kinds = "unsafe";
  std::string faults;
  for (std::size_t j = 0; j < r.faults.size(); ++j) {
    if (r.fault_firings[j] == 0) continue;
    const FaultSpec& fs = sc.faults[r.fault_specs[j]];
    std::string what = fmt::format("fault[{}] {}", r.fault_specs[j], to_string(fs.fault.kind));
    if (!fs.target.empty()) what += " " + fs.target;
    faults += (faults.empty() ? "" : ", ") + what;
  }
  return faults.empty() ? kinds + " with no fault firing" : kinds + " after " + faults;
}

RiskResult run_risk(const RiskSpec& spec, std::uint32_t jobs, const RiskProgress& progress) {
  RiskResult res;
  res.spec = spec;
  const Scenario nominal = load_scenario_text(spec.toml, spec.file);
  if (!ProtocolRegistry::instance().has(spec.protocol)) {
    const std::vector<std::string> names = ProtocolRegistry::instance().names();
    const std::string near = nearest_name(spec.protocol, names);
    throw InputError(
        kCmd, 0, "--protocol",
        fmt::format("unknown protocol '{}'{}; known: {}", spec.protocol,
                    near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), fmt::join(names, ", ")));
  }
  if (!has_distribution(nominal))
    throw InputError(
        spec.file, 0, "fault.duration",
        "the scenario has no distribution to sample: every run would draw the same pauses, delays "
        "and work times. Give a fault's duration one (duration = { kind = \"pareto\", scale = "
        "\"20ms\", alpha = 1.5, max = \"60s\" }), or the network's delay, or a client's work or "
        "think time");
  const int budgets =
      (spec.budget.hours ? 1 : 0) + (spec.budget.acquisitions ? 1 : 0) + (spec.budget.runs ? 1 : 0);
  if (budgets != 1)
    throw InputError(kCmd, 0, "--hours",
                     budgets == 0 ? "give one of --hours H, --acquisitions N or --runs N"
                                  : "give only one of --hours, --acquisitions and --runs");
  if (spec.budget.hours && !(*spec.budget.hours > 0 && *spec.budget.hours <= 1e9))
    throw InputError(kCmd, 0, "--hours",
                     fmt::format("must be more than 0 and at most 1e9 hours, not {}", *spec.budget.hours));
  if (spec.budget.acquisitions && *spec.budget.acquisitions == 0)
    throw InputError(kCmd, 0, "--acquisitions", "must be at least 1");
  if (spec.budget.runs && (*spec.budget.runs == 0 || *spec.budget.runs > kMaxRiskRuns))
    throw InputError(kCmd, 0, "--runs", fmt::format("must be from 1 to {}", kMaxRiskRuns));
  if (spec.shards == 0 || spec.shard >= spec.shards)
    throw InputError(kCmd, 0, "--shard", "K must be below N");
  (void)ProtocolRegistry::instance();  // not thread-safe to initialise: before any thread

  // The tilts: given, or the starting proposal of the automatic choice.
  std::vector<RiskTilt> tilts;
  if (spec.mode == TiltMode::given)
    for (const std::string& t : spec.tilts) tilts.push_back(parse_tilt(t, nominal));
  if (spec.mode == TiltMode::automatic) {
    const Duration ttl = nominal.config_for(spec.protocol).ttl;
    for (std::size_t k = 0; k < nominal.faults.size(); ++k) {
      const std::optional<Dist>& d = nominal.faults[k].fault.duration_dist;
      const std::optional<std::string> p = d ? tilt_parameter(*d) : std::nullopt;
      if (!p) continue;
      const std::optional<double> v = start_value(*d, ttl);
      if (!v) continue;
      RiskTilt t;
      t.fault = k;
      t.field = fmt::format("fault[{}].duration.{}", k, *p);
      t.nominal = *d;
      t.value = *v;
      tilts.push_back(t);
    }
  }
  std::uint64_t done = 0, total = 0;
  auto report = [&](std::uint64_t base) -> std::function<void(std::size_t)> {
    if (!progress) return {};
    return [&, base](std::size_t d) { progress(base + d, total); };
  };
  auto make_proposal = [&](Scenario& out) {
    res.proposal_toml = tilts.empty() ? spec.toml : proposal_text(spec, tilts);
    out = tilts.empty() ? nominal : load_scenario_text(res.proposal_toml, spec.file);
    load_proposals(tilts, out);
  };
  Scenario proposal;
  make_proposal(proposal);
  const bool need_pilot = !spec.budget.runs || (spec.mode == TiltMode::automatic && !tilts.empty());
  std::optional<Pilot> pilot;
  if (need_pilot) {
    total = spec.pilot + (spec.budget.runs ? *spec.budget.runs / spec.shards : spec.pilot * 10);
    pilot = run_pilot(spec, proposal, nominal, tilts, jobs, report(0));
    done = spec.pilot;
    const RiskEstimate pe = estimate(pilot->sums, !tilts.empty());
    res.pilot_grants_per_run = pe.grants_per_run;
    res.pilot_hours_per_run = pe.hours_per_run;
  }
  if (spec.mode == TiltMode::automatic && !tilts.empty()) {
    std::string steps;
    for (std::size_t k = 0; k < tilts.size(); ++k) {
      const std::string start = tilts[k].setting();
      if (const std::optional<double> ce = cross_entropy(*pilot, k, tilts[k].nominal)) {
        tilts[k].value = *ce;
        steps += fmt::format("; {} from the start {} by one cross-entropy step over {} unsafe pilot run(s)",
                             tilts[k].setting(), start, pilot->sums.unsafe);
      } else {
        steps += fmt::format("; {} (no unsafe pilot run: no cross-entropy step)", start);
      }
    }
    // The CE step never makes a tail lighter than the scenario's own; if it would, that fault is not tilted.
    std::vector<RiskTilt> kept;
    for (RiskTilt& t : tilts) {
      const Dist& f = t.nominal;
      const bool heavier = f.kind == Dist::Kind::pareto ? t.value < f.alpha
                           : f.kind == Dist::Kind::exponential
                               ? t.value > static_cast<double>(f.mean.count())
                               : t.value > static_cast<double>(f.median.count());
      if (heavier) kept.push_back(t);
    }
    tilts = kept;
    res.note = fmt::format("automatic: the tail past the TTL made as likely as not{}", steps);
    make_proposal(proposal);
  } else if (spec.mode == TiltMode::automatic) {
    res.note = "automatic: no fault duration has a tail past the TTL to tilt: plain Monte Carlo";
  } else {
    res.note = tilts.empty() ? "none: plain Monte Carlo" : "given by --tilt";
  }
  res.tilts = tilts;
  for (const RiskTilt& t : tilts) {
    res.tilt_settings.push_back(t.setting());
    res.tilt_nominals.push_back(t.nominal.describe());
  }

  res.runs = size_runs(spec, pilot ? estimate(pilot->sums, true) : RiskEstimate{});
  std::vector<std::uint64_t> mine;
  for (std::uint64_t i = spec.shard; i < res.runs; i += spec.shards) mine.push_back(i);
  total = done + mine.size();
  std::vector<RiskRun> runs(mine.size());
  run_ordered_tasks(
      mine.size(), jobs,
      [&](std::size_t j) {
        runs[j] = run_one(proposal, nominal, spec.protocol, spec.first_seed + mine[j], tilts, nullptr);
      },
      report(done));
  for (const RiskRun& r : runs) res.sums.add(r);
  if (progress) progress(total, total);
  return res;
}

}  // namespace locksim
