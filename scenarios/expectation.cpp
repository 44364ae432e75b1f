#include "locksim/scenarios/expectation.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

namespace locksim {

bool tokens_increase(const RunOutput& r) {
  const History& h = r.history;
  std::map<std::string, std::uint64_t> last;  // lock key -> the highest token so far, in epoch order
  for (std::uint64_t g : r.check.grant_of_epoch) {
    const GrantRecord& rec = h.grants.at(g);
    if (!rec.token) return false;
    auto [it, fresh] = last.emplace(rec.key, *rec.token);
    if (!fresh) {
      if (*rec.token <= it->second) return false;
      it->second = *rec.token;
    }
  }
  return true;
}

std::vector<std::string> unmet_in_run(const Expectation& e, const RunOutput& r) {
  std::vector<std::string> out;
  if (e.verdict && *e.verdict != r.verdict()) {
    out.push_back(fmt::format("verdict {} (expected {})", to_string(r.verdict()), to_string(*e.verdict)));
  }
  if (e.anomalies) {
    std::vector<std::string> got;
    for (const auto& [kind, n] : r.check.anomaly_counts)
      if (n > 0) got.push_back(kind);
    std::vector<std::string> want = *e.anomalies;
    std::sort(want.begin(), want.end());
    if (got != want) {
      out.push_back(
          fmt::format("anomalies [{}] (expected [{}])", fmt::join(got, ", "), fmt::join(want, ", ")));
    }
  }
  if (e.lost_updates && !e.lost_updates->holds(r.check.lost.lost, r.check.lost.percent)) {
    out.push_back(fmt::format("lost updates {} of {} ({:.1f}%) (expected {})", r.check.lost.lost,
                              r.check.lost.acknowledged, r.check.lost.percent, e.lost_updates->text));
  }
  if (e.tokens) {
    const bool inc = tokens_increase(r);
    if (inc != (*e.tokens == Expectation::Tokens::increasing)) {
      out.push_back(inc ? "tokens increase in epoch order (expected a regression)"
                        : "tokens do not increase in epoch order (expected increasing)");
    }
  }
  if (e.min_slack && r.check.slack && *r.check.slack < *e.min_slack) {
    out.push_back(fmt::format("slack {} (expected at least {})", format_time(*r.check.slack),
                              format_time(*e.min_slack)));
  }
  return out;
}

ExpectationOutcome judge_expectation(const Expectation& e, std::uint64_t default_seed,
                                     const std::function<RunOutput(std::uint64_t)>& run) {
  ExpectationOutcome o;
  const std::uint64_t first = e.seeds ? e.seeds->first : default_seed;
  const std::uint64_t last = e.seeds ? e.seeds->second : default_seed;
  const bool any = e.quantifier() == Expectation::Over::any;
  std::uint32_t unsafe = 0;
  std::string first_failure;
  std::uint64_t first_failure_seed = first;
  std::optional<Verdict> single;
  for (std::uint64_t seed = first;; ++seed) {
    RunOutput r = run(seed);
    ++o.runs;
    single = r.verdict();
    if (r.verdict() == Verdict::unsafe) ++unsafe;
    const auto unmet = unmet_in_run(e, r);
    if (unmet.empty() && any) {
      o.met = true;
      o.first_seed = seed;
      break;
    }
    if (!unmet.empty() && first_failure.empty()) {
      first_failure = fmt::format("seed {}: {}", seed, fmt::join(unmet, "; "));
      first_failure_seed = seed;
      if (!any) break;
    }
    if (seed == last) {
      o.met = !any;
      break;
    }
  }
  if (!o.met) {
    o.first_seed = first_failure_seed;
    o.why = any ? fmt::format("no seed in {}..{} met it; {}", first, last, first_failure) : first_failure;
  } else if (!any) {
    o.first_seed = first;
  }
  if (!e.seeds) {
    o.got = std::string(to_string(*single));
  } else {
    o.got = fmt::format("unsafe in {} of {} seed(s) run", unsafe, o.runs);
  }
  return o;
}

}  // namespace locksim
