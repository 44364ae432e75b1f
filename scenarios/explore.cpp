#include "locksim/scenarios/explore.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "locksim/scenarios/replay.hpp"

namespace locksim {

using ojson = nlohmann::ordered_json;

// ------------------------------------------------------------------------------------------------ records

std::string RunRecord::to_json() const {
  ojson j;
  j["seed"] = seed;
  j["scenario"] = scenario;
  j["protocol"] = protocol;
  j["mode"] = mode;
  if (sweep) {
    j["shard"] = sweep->shard;
    j["shards"] = sweep->shards;
    j["first_seed"] = sweep->first_seed;
    j["last_seed"] = sweep->last_seed;
  }
  j["verdict"] = !error.empty() ? "error" : !safe ? "unsafe" : inconclusive ? "inconclusive" : "safe";
  j["violations"] = violations;
  if (!anomalies.empty()) j["anomalies"] = anomalies;
  j["overlaps"] = overlaps;
  j["slack_ns"] = slack_ns ? ojson(*slack_ns) : ojson(nullptr);
  j["trace_hash"] = hash_text(trace_hash);
  j["events"] = events;
  j["end_ns"] = end_ns;
  j["stop"] = stop;
  j["faults"] = faults;
  j["mix"] = mix;
  if (!error.empty()) j["error"] = error;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

RunRecord RunRecord::from_json(std::string_view line) {
  ojson j;
  try {
    j = ojson::parse(line);
  } catch (const std::exception& e) {
    throw std::invalid_argument(fmt::format("not JSON: {}", e.what()));
  }
  if (!j.is_object()) throw std::invalid_argument("not a JSON object");
  if (j.contains("envelope"))
    throw std::invalid_argument(
        "a grid point of `envelope --jsonl`, not a run of explore: `envelope --merge` merges it");
  auto need = [&](const char* k) -> const ojson& {
    if (!j.contains(k)) throw std::invalid_argument(fmt::format("missing '{}'", k));
    return j.at(k);
  };
  RunRecord r;
  try {
    r.seed = need("seed").get<std::uint64_t>();
    r.scenario = need("scenario").get<std::string>();
    r.protocol = need("protocol").get<std::string>();
    r.mode = need("mode").get<std::string>();
    const std::string v = need("verdict").get<std::string>();
    if (v != "safe" && v != "unsafe" && v != "inconclusive" && v != "error")
      throw std::invalid_argument("verdict must be safe/unsafe/inconclusive/error");
    r.safe = v == "safe" || v == "inconclusive";
    r.inconclusive = v == "inconclusive";
    if (j.contains("anomalies")) r.anomalies = j.at("anomalies").get<std::map<std::string, std::uint32_t>>();
    if (v == "error") r.error = j.value("error", std::string("error"));
    r.violations = need("violations").get<std::uint32_t>();
    r.overlaps = j.value("overlaps", 0u);
    if (j.contains("slack_ns") && !j.at("slack_ns").is_null())
      r.slack_ns = j.at("slack_ns").get<std::int64_t>();
    auto h = parse_hash(need("trace_hash").get<std::string>());
    if (!h) throw std::invalid_argument("trace_hash is not a hex hash");
    r.trace_hash = *h;
    r.events = j.value("events", std::uint64_t{0});
    r.end_ns = j.value("end_ns", std::int64_t{0});
    r.stop = j.value("stop", std::string());
    r.faults = j.value("faults", 0u);
    r.mix = j.value("mix", std::string());
    const int has =
        j.contains("shard") + j.contains("shards") + j.contains("first_seed") + j.contains("last_seed");
    if (has != 0 && has != 4)
      throw std::invalid_argument(
          "shard, shards, first_seed and last_seed come together (the sweep of the run)");
    if (has == 4) {
      SweepInfo w;
      w.shard = j.at("shard").get<std::uint32_t>();
      w.shards = j.at("shards").get<std::uint32_t>();
      w.first_seed = j.at("first_seed").get<std::uint64_t>();
      w.last_seed = j.at("last_seed").get<std::uint64_t>();
      if (w.shards == 0 || w.shard >= w.shards) throw std::invalid_argument("shard must be below shards");
      if (w.first_seed > w.last_seed || r.seed < w.first_seed || r.seed > w.last_seed)
        throw std::invalid_argument("seed must lie within first_seed..last_seed");
      if (w.shard_of(r.seed) != w.shard)
        throw std::invalid_argument(
            fmt::format("seed {} is not in shard {} of {}", r.seed, w.shard, w.shards));
      r.sweep = w;
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(fmt::format("wrong type: {}", e.what()));
  }
  return r;
}

// ------------------------------------------------------------------------------------------------ running

RunRecord explore_one(const Scenario& sc, const NemesisTargets& targets, std::uint64_t seed,
                      const ExploreOptions& opts) {
  SwarmMix mix;
  const FaultPlan plan = make_fault_plan(sc, targets, seed, opts.nemesis, &mix);
  RunRecord rec;
  rec.scenario = sc.name;
  rec.protocol = opts.protocol;
  rec.mode = std::string(to_string(opts.nemesis.mode));
  rec.seed = seed;
  rec.faults = static_cast<std::uint32_t>(plan.faults.size());
  rec.mix = mix.describe();
  RunOptions ro;
  ro.seed = seed;
  ro.keep_trace = false;
  try {
    const RunOutput r = run_scenario(apply_plan(sc, plan, opts.keep_scripted), opts.protocol, ro);
    rec.safe = r.check.safe;
    rec.inconclusive = r.inconclusive();
    rec.violations = static_cast<std::uint32_t>(r.check.violations.size());
    rec.anomalies = r.check.anomaly_counts;
    rec.overlaps = static_cast<std::uint32_t>(r.check.overlaps.size());
    if (r.check.slack) rec.slack_ns = r.check.slack->count();
    rec.trace_hash = r.trace_hash;
    rec.events = r.events;
    rec.end_ns = r.run.end.count();
    rec.stop = std::string(to_string(r.run.reason));
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    // A protocol or the simulator threw: a finding in its own right, recorded and counted as a failure.
    rec.safe = false;
    rec.error = e.what();
  }
  return rec;
}

SeedSequence::SeedSequence(std::uint64_t first, std::uint64_t count, std::uint32_t shard,
                           std::uint32_t shards, std::vector<std::uint64_t> done)
    : first_(first + shard), step_(shards == 0 ? 1 : shards), all_(0) {
  if (shard < count) all_ = (count - shard - 1) / step_ + 1;
  // The done seeds as indices into the shard, ascending and unique, then s_k - k.
  std::vector<std::uint64_t> idx;
  for (std::uint64_t s : done) {
    if (s < first_ || (s - first_) % step_ != 0) continue;
    const std::uint64_t j = (s - first_) / step_;
    if (j < all_) idx.push_back(j);
  }
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  for (std::size_t k = 0; k < idx.size(); ++k) idx[k] -= k;
  skipped_ = std::move(idx);
}

std::uint64_t SeedSequence::operator[](std::uint64_t i) const {
  const auto k =
      static_cast<std::uint64_t>(std::upper_bound(skipped_.begin(), skipped_.end(), i) - skipped_.begin());
  return first_ + (i + k) * step_;
}

void explore_seeds(const Scenario& sc, const ExploreOptions& opts, const SeedSequence& seeds,
                   std::uint32_t jobs, const std::function<void(const RunRecord&)>& sink,
                   const std::function<void(std::uint64_t, std::uint64_t)>& progress, std::uint64_t window) {
  // The registry is not thread-safe to initialise: do it here, before any thread starts.
  register_builtin_protocols();
  (void)ProtocolRegistry::instance();
  const NemesisTargets targets = nemesis_targets(sc, opts.protocol);
  const std::uint64_t n = seeds.size();
  if (jobs == 0) jobs = 1;
  jobs = static_cast<std::uint32_t>(std::min<std::uint64_t>(jobs, std::max<std::uint64_t>(n, 1)));

  // Finished runs wait in a ring until every run before them is written: at most `window` runs ahead of
  // the oldest unwritten one, so memory does not grow with the number of seeds.
  if (window == 0) window = 256u * jobs;
  window = std::min<std::uint64_t>(std::max<std::uint64_t>(n, 1), window);
  std::vector<std::optional<RunRecord>> ring(static_cast<std::size_t>(window));
  std::atomic<std::uint64_t> next{0};
  std::atomic<std::uint64_t> written{0};  // changed under mu only
  std::atomic<bool> abort{false};
  std::mutex mu;                 // guards ring, error, waiting, and the sink
  std::condition_variable cv;    // the watcher: the end of the sweep
  std::condition_variable room;  // workers too far ahead: the window moved
  std::size_t waiting = 0;
  std::exception_ptr error;

  const auto fail = [&](std::exception_ptr e) {  // under mu
    if (!error) error = std::move(e);
    abort = true;
    cv.notify_all();
    room.notify_all();
  };
  auto worker = [&] {
    while (!abort.load()) {
      const std::uint64_t i = next.fetch_add(1);
      if (i >= n) break;
      // (i - written, not written + window: no overflow even at the top of the seed range. Run i is not
      // written yet, so written <= i.)
      if (i - written.load() >= window) {
        std::unique_lock<std::mutex> lock(mu);
        ++waiting;
        room.wait(lock, [&] { return i - written.load() < window || abort.load(); });
        --waiting;
        if (abort.load()) break;
      }
      std::optional<RunRecord> rec;
      try {
        rec = explore_one(sc, targets, seeds[i], opts);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        fail(std::current_exception());
        break;
      }
      std::lock_guard<std::mutex> lock(mu);
      ring[i % window] = std::move(rec);
      const std::uint64_t before = written.load();
      for (std::uint64_t w = before; w < n && ring[w % window]; w = written.load()) {
        std::optional<RunRecord>& slot = ring[w % window];
        if (!abort.load()) {
          try {
            sink(*slot);
          } catch (...) {
            fail(std::current_exception());
          }
        }
        slot.reset();
        written.store(w + 1);
      }
      if (written.load() != before && waiting > 0) room.notify_all();
      // The watcher only needs waking at the end: it shows progress on its own 200 ms timeout. A wake per
      // run cost a futex call and a switch of threads per run (11% of a --jobs 1 exploration's time).
      if (written.load() == n) cv.notify_all();
    }
  };

  std::vector<std::thread> threads;
  for (std::uint32_t t = 1; t < jobs; ++t) threads.emplace_back(worker);
  if (progress) {
    // With a progress callback the calling thread watches; otherwise it works too.
    threads.emplace_back(worker);
    std::unique_lock<std::mutex> lock(mu);
    while (written.load() < n && !abort.load()) {
      cv.wait_for(lock, std::chrono::milliseconds(200));
      const std::uint64_t done = written.load();
      lock.unlock();
      progress(done, n);
      lock.lock();
    }
  } else {
    worker();
  }
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

// ------------------------------------------------------------------------------------------------ summary

std::pair<double, double> wilson_interval(std::uint64_t k, std::uint64_t n, double z) {
  if (n == 0) return {0.0, 0.0};
  const double nn = static_cast<double>(n);
  const double p = static_cast<double>(k) / nn;
  const double z2 = z * z;
  const double denom = 1.0 + z2 / nn;
  const double center = (p + z2 / (2.0 * nn)) / denom;
  const double half = z / denom * std::sqrt(p * (1.0 - p) / nn + z2 / (4.0 * nn * nn));
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

void ExploreSummary::add(const RunRecord& r) {
  if (runs == 0) {
    scenario = r.scenario;
    protocol = r.protocol;
    mode = r.mode;
  }
  ++runs;
  if (!r.error.empty())
    ++errors;
  else if (!r.safe)
    ++unsafe;
  else if (r.inconclusive)
    ++inconclusive;
  for (const auto& [kind, n] : r.anomalies) anomalies[kind] += n;
  if (r.slack_ns && (!min_slack_ns || *r.slack_ns < *min_slack_ns ||
                     (*r.slack_ns == *min_slack_ns && r.seed < min_slack_seed))) {
    min_slack_ns = r.slack_ns;
    min_slack_seed = r.seed;
    min_slack_unsafe = r.error.empty() && !r.safe;
  }
  if (r.failed()) {
    failing.insert(r.seed);
    if (failing.size() > kKeepFailing) failing.erase(std::prev(failing.end()));
  }
  seed_min = seed_min ? std::min(*seed_min, r.seed) : r.seed;
  seed_max = seed_max ? std::max(*seed_max, r.seed) : r.seed;
}

std::string ExploreSummary::render() const {
  std::string s = fmt::format("{} × {} (mode: {})\n", scenario.empty() ? "-" : scenario,
                              protocol.empty() ? "-" : protocol, mode.empty() ? "-" : mode);
  if (runs == 0) return s + "  no runs\n";
  const auto [lo, hi] = wilson_interval(failures(), runs);
  s += fmt::format("  runs        {}  (seeds {}..{})\n", runs, *seed_min, *seed_max);
  s += fmt::format("  violations  {} unsafe run(s){}\n", unsafe,
                   errors ? fmt::format(", {} run(s) threw", errors) : "");
  if (!anomalies.empty()) {
    std::vector<std::string> kinds;
    for (const auto& [kind, n] : anomalies) kinds.push_back(fmt::format("{} {}", n, kind));
    s += fmt::format("  anomalies   {}\n", fmt::join(kinds, ", "));
  }
  if (inconclusive)
    s += fmt::format("  inconclusive {} run(s) stopped at a limit with no anomaly (no verdict)\n",
                     inconclusive);
  s += fmt::format("  rate        {:.3f}%  (95% Wilson interval {:.3f}%–{:.3f}%)\n",
                   100.0 * static_cast<double>(failures()) / static_cast<double>(runs), 100.0 * lo,
                   100.0 * hi);
  if (min_slack_ns) {
    // Every violation has a write margin of at most 0: negative when the stale write arrived after the first
    // newer write, 0 when at the same instant (the resource took it second, by record order).
    std::string_view remark;
    if (*min_slack_ns < 0)
      remark = "  negative: a line was crossed";
    else if (*min_slack_ns == 0 && min_slack_unsafe)
      remark = "  zero: a stale write tied with a newer one and was taken after it: a line was crossed";
    if (slack_is_unbounded(Duration{*min_slack_ns}))
      s += fmt::format("  min slack   unbounded (seed {})  {}\n", min_slack_seed, kUnboundedSlackMeaning);
    else
      s += fmt::format("  min slack   {} (seed {}){}\n", format_time(Duration{*min_slack_ns}), min_slack_seed,
                       remark);
  } else {
    s += "  min slack   - (no run had two grants)\n";
  }
  if (!failing.empty()) {
    s += fmt::format("  first failing seeds: {}{}\n", fmt::join(failing, ", "),
                     failures() > failing.size() ? ", ..." : "");
  }
  return s;
}

// ------------------------------------------------------------------------------------------------ files

void for_each_jsonl(const std::string& path, const std::function<void(const RunRecord&)>& fn,
                    std::optional<std::uint64_t>* truncated_at) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(path, 0, "file", "is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, 0, "file", fmt::format("cannot open: {}", std::strerror(errno)));
  if (truncated_at) truncated_at->reset();
  std::uint64_t pos = 0;  // byte offset of the line
  std::uint64_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    const bool complete = !in.eof();  // getline stopped at a newline, not at the end of the file
    ++line_no;
    const std::uint64_t next = pos + line.size() + (complete ? 1 : 0);
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      pos = next;
      continue;
    }
    RunRecord r;
    try {
      r = RunRecord::from_json(line);
    } catch (const std::invalid_argument& e) {
      if (!complete) {
        // The last line of a run that was killed mid-write.
        if (truncated_at) *truncated_at = pos;
        return;
      }
      throw InputError(path, static_cast<std::uint32_t>(std::min<std::uint64_t>(line_no, UINT32_MAX)),
                       "jsonl", e.what());
    }
    if (!complete && truncated_at) *truncated_at = next;  // parsable but no newline: complete it
    fn(r);
    pos = next;
  }
  if (in.bad()) throw InputError(path, 0, "file", fmt::format("read error: {}", std::strerror(errno)));
}

std::vector<RunRecord> read_jsonl(const std::string& path, std::optional<std::uint64_t>* truncated_at) {
  std::vector<RunRecord> out;
  for_each_jsonl(
      path, [&](const RunRecord& r) { out.push_back(r); }, truncated_at);
  return out;
}

}  // namespace locksim
