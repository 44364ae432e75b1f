#include "locksim/scenarios/shrink.hpp"

#include <algorithm>

namespace locksim {

namespace {

constexpr Duration kGrain = 1ms;

bool names(const FaultSpec& f, const std::string& n) {
  if (f.target == n || f.peer == n || f.trigger_proc == n) return true;
  if (std::find(f.more_targets.begin(), f.more_targets.end(), n) != f.more_targets.end()) return true;
  return std::find(f.side_a.begin(), f.side_a.end(), n) != f.side_a.end() ||
         std::find(f.side_b.begin(), f.side_b.end(), n) != f.side_b.end();
}

/// Anything in the scenario or plan that names process `n` (so removing the client would dangle).
bool referenced(const Scenario& base, const FaultPlan& plan, const std::string& n) {
  for (const FaultSpec& f : plan.faults)
    if (names(f, n)) return true;
  for (const FaultSpec& f : base.faults)
    if (names(f, n)) return true;
  for (const ClockSpec& c : plan.clocks)
    if (c.node == n) return true;
  for (const ClockSpec& c : base.clocks)
    if (c.node == n) return true;
  for (const LinkSpec& l : base.links)
    if (l.from == n || l.to == n) return true;
  return false;
}

class Shrinker {
 public:
  Shrinker(const std::string& protocol, std::uint64_t seed, const ShrinkOptions& opts)
      : protocol_(protocol), seed_(seed), opts_(opts) {}

  /// Runs the candidate; true (and remembers its hash) if it still fails.
  bool fails(const Scenario& base, const FaultPlan& plan) {
    if (runs_ >= opts_.max_runs) return false;
    ++runs_;
    RunOptions ro;
    ro.seed = seed_;
    ro.keep_trace = false;
    RunOutput r = run_scenario(apply_plan(base, plan, opts_.keep_scripted), protocol_, ro);
    const bool f = opts_.fails ? opts_.fails(r) : !r.check.safe;
    if (f) {
      hash_ = r.trace_hash;
      verdict_ = r.verdict();
    }
    return f;
  }
  bool exhausted() const { return runs_ >= opts_.max_runs; }
  std::uint32_t runs() const { return runs_; }
  std::uint64_t hash() const { return hash_; }
  Verdict verdict() const { return verdict_; }

 private:
  std::string protocol_;
  std::uint64_t seed_;
  const ShrinkOptions& opts_;
  std::uint32_t runs_ = 0;
  std::uint64_t hash_ = 0;
  Verdict verdict_ = Verdict::unsafe;
};

/// Finds a small value of a duration field that still fails: halves while it fails, then binary-searches
/// between the last value that passed and the smallest that failed, to the millisecond. Keeps the sign (clock
/// jumps).
template <class Get>
bool shrink_duration(Shrinker& s, const Scenario& base, FaultPlan& plan, Get get, Duration floor) {
  const Duration start = get(plan);
  const bool neg = start < 0ns;
  auto with = [&](Duration mag) {
    FaultPlan cand = plan;
    get(cand) = neg ? -mag : mag;
    return cand;
  };
  Duration fail_mag = neg ? -start : start;  // smallest magnitude known to fail
  Duration pass_mag = floor;                 // largest magnitude known (or assumed) not to fail
  bool passed = false;
  for (int i = 0; i < 24 && !s.exhausted() && fail_mag > floor; ++i) {
    const Duration next = std::max(floor, ((fail_mag / 2) / kGrain) * kGrain);
    if (next == fail_mag) break;
    FaultPlan cand = with(next);
    if (!s.fails(base, cand)) {
      pass_mag = next;
      passed = true;
      break;
    }
    plan = std::move(cand);
    fail_mag = next;
  }
  if (passed) {
    for (int i = 0; i < 16 && !s.exhausted() && fail_mag - pass_mag > kGrain; ++i) {
      const Duration mid = pass_mag + ((fail_mag - pass_mag) / 2 / kGrain) * kGrain;
      if (mid <= pass_mag || mid >= fail_mag) break;
      FaultPlan cand = with(mid);
      if (s.fails(base, cand)) {
        plan = std::move(cand);
        fail_mag = mid;
      } else {
        pass_mag = mid;
      }
    }
  }
  const Duration now = get(plan);
  return now != start;
}

}  // namespace

ShrinkResult shrink_failure(const Scenario& base_in, const std::string& protocol, const FaultPlan& plan_in,
                            std::uint64_t seed, const ShrinkOptions& opts) {
  Shrinker s(protocol, seed, opts);
  ShrinkResult res;
  res.seed = seed;
  res.size_before = plan_in.size();
  res.clients_before = base_in.clients.size();
  Scenario base = base_in;
  FaultPlan plan = plan_in;
  res.failed_at_start = s.fails(base, plan);
  if (!res.failed_at_start) {
    res.base = base;
    res.plan = plan;
    res.scenario = apply_plan(base, plan, opts.keep_scripted);
    res.runs = s.runs();
    return res;
  }
  // Every candidate that still fails is accepted, so the last failing run is always the current plan's.
  auto accept = [&](FaultPlan cand) {
    if (!s.fails(base, cand)) return false;
    plan = std::move(cand);
    return true;
  };

  bool progress = true;
  for (int pass = 0; progress && !s.exhausted(); ++pass) {
    progress = false;
    // 1. Drop faults: first halves (cheap when most are noise), then one at a time from the last.
    for (std::size_t chunk = plan.faults.size() / 2; chunk >= 2; chunk /= 2) {
      for (std::size_t at = 0; at + chunk <= plan.faults.size();) {
        FaultPlan cand = plan;
        cand.faults.erase(cand.faults.begin() + static_cast<std::ptrdiff_t>(at),
                          cand.faults.begin() + static_cast<std::ptrdiff_t>(at + chunk));
        if (accept(std::move(cand)))
          progress = true;
        else
          at += chunk;
      }
    }
    for (std::size_t i = plan.faults.size(); i-- > 0;) {
      FaultPlan cand = plan;
      cand.faults.erase(cand.faults.begin() + static_cast<std::ptrdiff_t>(i));
      if (accept(std::move(cand))) progress = true;
    }
    // 2. Network noise and clock settings.
    if (plan.network) {
      FaultPlan cand = plan;
      cand.network.reset();
      if (accept(std::move(cand))) progress = true;
    }
    for (std::size_t i = plan.clocks.size(); i-- > 0;) {
      FaultPlan cand = plan;
      cand.clocks.erase(cand.clocks.begin() + static_cast<std::ptrdiff_t>(i));
      if (accept(std::move(cand))) progress = true;
    }
    // 3. Fewer clients (only those nothing names).
    for (std::size_t i = base.clients.size(); i-- > 0 && base.clients.size() > 1;) {
      if (referenced(base, plan, base.clients[i].name)) continue;
      Scenario cand = base;
      cand.clients.erase(cand.clients.begin() + static_cast<std::ptrdiff_t>(i));
      if (s.fails(cand, plan)) {
        base = std::move(cand);
        progress = true;
      }
    }
    // 4. Gentler faults.
    for (std::size_t i = 0; i < plan.faults.size(); ++i) {
      // A repeated fault: one firing if that still fails, else fewer; then no jitter. First: one firing is a
      // simpler story than shorter ones.
      if (plan.faults[i].fault.repeat.repeats()) {
        FaultPlan cand = plan;
        cand.faults[i].fault.repeat = Repeat{.jitter = plan.faults[i].fault.repeat.jitter};
        if (accept(std::move(cand))) {
          progress = true;
        } else {
          for (int k = 0; k < 16 && !s.exhausted(); ++k) {
            const Repeat& r = plan.faults[i].fault.repeat;
            const std::uint32_t n = r.times > 0 ? r.times : 0;
            if (n != 0 && n <= 2) break;
            FaultPlan c2 = plan;
            // Unbounded by times (until the scenario's end, or `until`): start from 64, then halve.
            c2.faults[i].fault.repeat.times = n == 0 ? 64 : n / 2;
            if (!accept(std::move(c2))) break;
            progress = true;
          }
        }
      }
      if (plan.faults[i].fault.repeat.jitter > 0ns) {
        FaultPlan cand = plan;
        cand.faults[i].fault.repeat.jitter = 0ns;
        if (accept(std::move(cand))) progress = true;
      }
      auto field = [i](Duration Fault::*m) {
        return [i, m](FaultPlan& p) -> Duration& { return p.faults[i].fault.*m; };
      };
      const Fault f = plan.faults[i].fault;  // a copy: accepting a candidate replaces plan
      using K = Fault::Kind;
      if (f.kind == K::pause || f.kind == K::clock_jump)
        progress |= shrink_duration(s, base, plan, field(&Fault::duration), kGrain);
      if ((f.kind == K::crash || f.kind == K::partition) && f.duration > 0ns)
        progress |= shrink_duration(s, base, plan, field(&Fault::duration), kGrain);
      if (f.kind == K::delay_spike) {
        progress |= shrink_duration(s, base, plan, field(&Fault::extra), kGrain);
        if (plan.faults[i].fault.count > 1) {
          FaultPlan cand = plan;
          cand.faults[i].fault.count = 1;
          if (accept(std::move(cand))) progress = true;
        }
      }
      if (f.kind == K::clock_drift) {
        for (int k = 0; k < 20 && !s.exhausted(); ++k) {
          const std::int64_t p = plan.faults[i].fault.ppm;
          if (p / 2 == 0) break;
          FaultPlan cand = plan;
          cand.faults[i].fault.ppm = p / 2;
          if (!accept(std::move(cand))) break;
          progress = true;
        }
      }
      const Trigger t = plan.faults[i].fault.when;
      if (t.kind != Trigger::Kind::at) {
        if (t.nth > 1) {
          FaultPlan cand = plan;
          cand.faults[i].fault.when.nth = 1;
          if (accept(std::move(cand))) progress = true;
        }
        if (plan.faults[i].fault.when.delay > 0ns) {
          FaultPlan cand = plan;
          cand.faults[i].fault.when.delay = 0ns;
          if (accept(std::move(cand)))
            progress = true;
          else
            progress |= shrink_duration(
                s, base, plan, [i](FaultPlan& p) -> Duration& { return p.faults[i].fault.when.delay; }, 0ns);
        }
      } else if (pass < 2) {
        // Move it as late as it still fails (binary search between now and max_time, to the millisecond).
        // Only in the first passes: later ones would spend the budget on sub-millisecond moves.
        // A repeated fault's first firing stays at or before its `until` (the loader refuses one after it).
        const Repeat& rep = plan.faults[i].fault.repeat;
        Time lo = t.at, hi = rep.repeats() ? std::min(base.max_time, rep.until) : base.max_time;
        for (int k = 0; k < 16 && hi - lo > kGrain && !s.exhausted(); ++k) {
          const Time mid = lo + ((hi - lo) / 2 / kGrain) * kGrain;
          if (mid <= lo) break;
          FaultPlan cand = plan;
          cand.faults[i].fault.when.at = mid;
          if (accept(std::move(cand))) {
            lo = mid;
            progress = true;
          } else {
            hi = mid;
          }
        }
      }
    }
  }
  res.base = base;
  res.plan = plan;
  res.scenario = apply_plan(base, plan, opts.keep_scripted);
  res.trace_hash = s.hash();
  res.verdict = s.verdict();
  res.runs = s.runs();
  return res;
}

}  // namespace locksim
