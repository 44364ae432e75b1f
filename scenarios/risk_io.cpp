// The risk estimate's words and files: the text report, a shard's JSONL line and the merge of shards.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "locksim/scenarios/risk.hpp"
#include "locksim/sim/random.hpp"

namespace locksim {

namespace {

using ojson = nlohmann::ordered_json;

std::string sci(double v) {
  return v == 0 ? "0" : fmt::format("{:.3e}", v);
}

std::string interval_text(const Interval& iv) {
  return fmt::format("95% [{}, {}]", sci(iv.lo), sci(iv.hi));
}

/// The stories by their share of the probability (ties: more runs, then the story's text).
std::vector<const RiskStory*> ranked(const RiskSums& s) {
  std::vector<const RiskStory*> out;
  for (const auto& [key, st] : s.stories) out.push_back(&st);
  std::stable_sort(out.begin(), out.end(), [](const RiskStory* a, const RiskStory* b) {
    const long double wa = a->weight.value(), wb = b->weight.value();
    if (wa != wb) return wa > wb;
    return a->runs > b->runs;
  });
  return out;
}

}  // namespace

std::string risk_report(const RiskResult& r, const std::function<std::string(std::uint64_t)>& replay) {
  const RiskSums& s = r.sums;
  const RiskEstimate e = estimate(s, r.tilted());
  std::string out;
  out += fmt::format("{}: {} runs of {}{}\n", r.spec.protocol, s.runs, r.spec.scenario,
                     s.runs == r.runs
                         ? fmt::format(" (seeds {}..{})", r.spec.first_seed, r.spec.first_seed + r.runs - 1)
                         : fmt::format(" (of {} planned: shards are missing)", r.runs));
  out += fmt::format("proposal: {}\n", r.note);
  for (std::size_t k = 0; k < r.tilt_settings.size(); ++k)
    out += fmt::format("  {} instead of the scenario's {}\n", r.tilt_settings[k], r.tilt_nominals[k]);
  out += fmt::format("unsafe runs: {} of {}{}; {} inconclusive (stopped at a limit), {} error(s)\n", s.unsafe,
                     s.runs,
                     r.tilted() ? " (drawn from the proposal, each weighted by its likelihood ratio)" : "",
                     s.inconclusive, s.errors);
  out += fmt::format("per run:          {}  {}  ({}", sci(e.p_run), interval_text(e.run), e.run.method);
  if (r.tilted())
    out +=
        fmt::format("; effective sample size {:.1f} of the unsafe runs, {:.1f} of all", e.ess_unsafe, e.ess);
  out += ")\n";
  out += fmt::format("per acquisition:  {}  {}  (a run has {:.4g} acquisitions: the grants in its history)\n",
                     sci(e.p_acquisition), interval_text(e.acquisition), e.grants_per_run);
  const double runs_per_hour = e.hours_per_run > 0 ? 1 / e.hours_per_run : 0;
  out += fmt::format(
      "per hour:         {}  {}  (unsafe runs per hour of operation: a run is {:.4g} s of simulated time, "
      "{:.4g} runs an hour)\n",
      sci(e.per_hour), interval_text(e.hour), e.hours_per_run * 3600, runs_per_hour);
  if (r.tilted() && s.unsafe > 0 && e.ess_unsafe < 30)
    out += "warning: fewer than 30 effective unsafe runs: the normal interval is rough; run more\n";
  if (s.inconclusive > 0)
    out += fmt::format("warning: {} run(s) stopped at a limit with no verdict; they count as safe\n",
                       s.inconclusive);
  if (s.unsafe == 0) {
    out += "no unsafe run\n";
    return out;
  }
  const std::vector<const RiskStory*> st = ranked(s);
  const long double total = s.wu.value();
  out += fmt::format("most common stories among the unsafe runs (share of the probability):\n");
  for (std::size_t i = 0; i < st.size() && i < 3; ++i) {
    const long double share = total > 0 ? st[i]->weight.value() / total : 0;
    out += fmt::format("  {}. {:5.1f}%  {}  ({} run(s))\n     replay: {}   (trace hash {:016x})\n", i + 1,
                       static_cast<double>(share * 100), st[i]->story, st[i]->runs, replay(st[i]->seed),
                       st[i]->trace_hash);
  }
  return out;
}

std::string risk_key(const RiskResult& r) {
  ojson k;
  k["scenario"] = r.spec.scenario;
  k["text_hash"] = fmt::format("{:016x}", stable_hash(r.spec.toml));
  k["protocol"] = r.spec.protocol;
  k["tilts"] = r.tilt_settings;
  k["runs"] = r.runs;
  k["first_seed"] = r.spec.first_seed;
  k["shards"] = r.spec.shards;
  return k.dump();
}

std::string risk_jsonl(const RiskResult& r) {
  ojson j;
  j["risk"] = ojson::parse(risk_key(r));
  j["shard"] = r.spec.shard;
  j["note"] = r.note;
  j["nominals"] = r.tilt_nominals;
  j["proposal_toml"] = r.proposal_toml;
  const RiskSums& s = r.sums;
  ojson sums;
  sums["runs"] = s.runs;
  sums["unsafe"] = s.unsafe;
  sums["inconclusive"] = s.inconclusive;
  sums["errors"] = s.errors;
  sums["w"] = s.w.to_hex();
  sums["w2"] = s.w2.to_hex();
  sums["wu"] = s.wu.to_hex();
  sums["w2u"] = s.w2u.to_hex();
  sums["wg"] = s.wg.to_hex();
  sums["wt"] = s.wt.to_hex();
  j["sums"] = sums;
  ojson stories = ojson::array();
  for (const auto& [key, st] : s.stories)
    stories.push_back({{"story", st.story},
                       {"runs", st.runs},
                       {"weight", st.weight.to_hex()},
                       {"seed", st.seed},
                       {"trace_hash", fmt::format("{:016x}", st.trace_hash)}});
  j["stories"] = stories;
  return j.dump() + "\n";
}

RiskMerge merge_risk_jsonl(const std::vector<std::string>& files) {
  RiskMerge m;
  std::optional<std::string> key;
  std::set<std::uint32_t> seen;
  RiskResult res;
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw InputError(file, 0, "FILES", "cannot open");
    std::string line;
    std::uint32_t ln = 0;
    while (std::getline(in, line)) {
      ++ln;
      if (line.empty()) continue;
      auto bad = [&](const std::string& what) { throw InputError(file, ln, "risk", what); };
      try {
        const ojson j = ojson::parse(line);
        if (!j.contains("risk")) bad("not a line of `risk --jsonl` (no \"risk\" object)");
        const std::string k = j.at("risk").dump();
        if (key && *key != k) bad(fmt::format("a line of another estimate: {} (the first was {})", k, *key));
        const ojson& id = j.at("risk");
        const auto shard = j.at("shard").get<std::uint32_t>();
        const auto shards = id.at("shards").get<std::uint32_t>();
        if (shard >= shards) bad(fmt::format("shard {} of {}", shard, shards));
        if (!key) {
          key = k;
          res.spec.scenario = id.at("scenario").get<std::string>();
          res.spec.protocol = id.at("protocol").get<std::string>();
          res.spec.first_seed = id.at("first_seed").get<std::uint64_t>();
          res.spec.shards = shards;
          res.runs = id.at("runs").get<std::uint64_t>();
          res.tilt_settings = id.at("tilts").get<std::vector<std::string>>();
          res.tilt_nominals = j.at("nominals").get<std::vector<std::string>>();
          res.note = j.at("note").get<std::string>();
          res.proposal_toml = j.at("proposal_toml").get<std::string>();
        }
        if (!seen.insert(shard).second) {
          ++m.duplicates;
          continue;
        }
        RiskSums s;
        const ojson& js = j.at("sums");
        s.runs = js.at("runs").get<std::uint64_t>();
        s.unsafe = js.at("unsafe").get<std::uint64_t>();
        s.inconclusive = js.at("inconclusive").get<std::uint64_t>();
        s.errors = js.at("errors").get<std::uint64_t>();
        auto fixed = [&](const ojson& o, const char* name, Fixed& f) {
          if (!Fixed::parse_hex(o.at(name).get<std::string>(), f))
            bad(fmt::format("'{}' is not a fixed-point sum", name));
        };
        fixed(js, "w", s.w);
        fixed(js, "w2", s.w2);
        fixed(js, "wu", s.wu);
        fixed(js, "w2u", s.w2u);
        fixed(js, "wg", s.wg);
        fixed(js, "wt", s.wt);
        for (const ojson& o : j.at("stories")) {
          RiskStory st;
          st.story = o.at("story").get<std::string>();
          st.runs = o.at("runs").get<std::uint64_t>();
          fixed(o, "weight", st.weight);
          st.seed = o.at("seed").get<std::uint64_t>();
          st.trace_hash = std::stoull(o.at("trace_hash").get<std::string>(), nullptr, 16);
          s.stories.emplace(st.story, st);
        }
        res.sums.add(s);
      } catch (const nlohmann::json::exception& e) {
        bad(fmt::format("not a risk line: {}", e.what()));
      } catch (const std::logic_error& e) {
        bad(fmt::format("not a risk line: {}", e.what()));
      }
    }
  }
  if (!key)
    throw InputError(files.empty() ? "<command line>" : files.front(), 0, "FILES",
                     "no risk line in the files");
  for (std::uint32_t k = 0; k < res.spec.shards; ++k)
    if (!seen.count(k))
      m.missing.push_back(fmt::format("shard {} of {} is missing: run it with --shard {}/{} --jsonl FILE", k,
                                      res.spec.shards, k, res.spec.shards));
  m.result = res;
  return m;
}

}  // namespace locksim
