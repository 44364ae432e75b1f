#include "scenarios/explore.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <unordered_map>

#include "scenarios/catalog.hpp"
#include "scenarios/replay.hpp"
#include "scenarios/shrink.hpp"

namespace locksim {

using ojson = nlohmann::ordered_json;

// ------------------------------------------------------------------------------------------------ records

std::string RunRecord::to_json() const {
  ojson j;
  j["seed"] = seed;
  j["scenario"] = scenario;
  j["protocol"] = protocol;
  j["mode"] = mode;
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

namespace {

bool stderr_is_terminal() {
  return isatty(fileno(stderr)) != 0;
}

std::string sanitize(std::string s) {
  for (char& c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.' || c == '+'))
      c = '_';
  return s;
}

std::string eta_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<std::uint64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

/// A one-line progress bar on stderr (terminals only). Real time is used here and only here: for people.
class ProgressBar {
 public:
  explicit ProgressBar(bool on)
      : on_(on), start_(std::chrono::steady_clock::now()) {}  // wall time: progress bar
  void update(std::size_t done, std::size_t total) {
    if (!on_ || total == 0) return;
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();  // wall time: ETA
    const double rate = secs > 0 ? static_cast<double>(done) / secs : 0.0;
    const double eta = rate > 0 ? static_cast<double>(total - done) / rate : NAN;
    constexpr std::size_t kWidth = 30;
    const std::size_t fill = done * kWidth / total;
    fmt::print(stderr, "\r[{}{}] {}/{} {:3}%  {:.0f} runs/s  ETA {}   ", std::string(fill, '#'),
               std::string(kWidth - fill, '.'), done, total, done * 100 / total, rate, eta_text(eta));
    std::fflush(stderr);
    drawn_ = true;
  }
  void finish() {
    if (drawn_) fmt::print(stderr, "\r{}\r", std::string(90, ' '));
  }

 private:
  bool on_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;  // wall time: progress bar
};

/// A shard number: decimal digits only (no sign, no spaces), at most 2^32 - 1.
std::optional<std::uint32_t> shard_number(std::string_view s) {
  std::uint32_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || s.front() < '0' || s.front() > '9' || ec != std::errc{} || end != s.data() + s.size())
    return std::nullopt;
  return v;
}

std::pair<std::uint32_t, std::uint32_t> parse_shard(const ExploreArgs& a) {
  if (!a.shard.empty() + !a.shard_number.empty() + (a.shards > 0) > 1)
    throw InputError("<command line>", 0, "--shard",
                     "give one of --shard K/N (0-based), --shard-number K/N (1-based) or --shards N");
  if (!a.shard_number.empty()) {
    const std::string_view spec = a.shard_number;
    const auto slash = spec.find('/');
    const auto k = slash == std::string_view::npos ? std::nullopt : shard_number(spec.substr(0, slash));
    const auto n = slash == std::string_view::npos ? std::nullopt : shard_number(spec.substr(slash + 1));
    if (!k || !n || *n == 0 || *k == 0 || *k > *n) {
      throw InputError(
          "<command line>", 0, "--shard-number",
          fmt::format("'{}' is not K/N with 1 <= K <= N (e.g. --shard-number 1/4)", a.shard_number));
    }
    return {*k - 1, *n};
  }
  if (!a.shard.empty()) {
    const std::string_view spec = a.shard;
    const auto slash = spec.find('/');
    const auto k = slash == std::string_view::npos ? std::nullopt : shard_number(spec.substr(0, slash));
    const auto n = slash == std::string_view::npos ? std::nullopt : shard_number(spec.substr(slash + 1));
    if (!k || !n || *n == 0 || *k >= *n) {
      throw InputError("<command line>", 0, "--shard",
                       fmt::format("'{}' is not K/N with 0 <= K < N (e.g. --shard 0/4)", a.shard));
    }
    return {*k, *n};
  }
  if (a.shards > 0) {
    const char* env = std::getenv("JOB_COMPLETION_INDEX");
    if (!env) {
      if (const char* gl = std::getenv("CI_NODE_INDEX")) {  // GitLab parallel: 1..CI_NODE_TOTAL
        const auto k = shard_number(gl);
        if (!k || *k == 0 || *k > a.shards)
          throw InputError("<environment>", 0, "CI_NODE_INDEX",
                           fmt::format("'{}' is not a node index from 1 to {}", gl, a.shards));
        if (const char* total = std::getenv("CI_NODE_TOTAL"); total && shard_number(total) != a.shards)
          throw InputError(
              "<environment>", 0, "CI_NODE_TOTAL",
              fmt::format("'{}' is not --shards {}: the jobs would not cover the seeds", total, a.shards));
        return {*k - 1, a.shards};
      }
      throw InputError("<command line>", 0, "--shards",
                       "--shards N takes the shard index from JOB_COMPLETION_INDEX (Kubernetes, 0-based) or "
                       "CI_NODE_INDEX (GitLab, 1-based), and neither is set (use --shard K/N)");
    }
    const auto k = shard_number(env);
    if (!k || *k >= a.shards) {
      throw InputError("<environment>", 0, "JOB_COMPLETION_INDEX",
                       fmt::format("'{}' is not a shard index below {}", env, a.shards));
    }
    return {*k, a.shards};
  }
  return {0, 1};
}

std::string replace_all(std::string s, std::string_view from, const std::string& to) {
  for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

}  // namespace

int cmd_explore(const ExploreArgs& a) {
  const auto mode = parse_nemesis_mode(a.mode);
  if (!mode)
    throw InputError("<command line>", 0, "--mode", fmt::format("'{}' is not within or anything", a.mode));
  if (a.seeds == 0) throw InputError("<command line>", 0, "--seeds", "must be at least 1");
  if (a.first_seed > Scenario::kMaxSeed || a.seeds - 1 > Scenario::kMaxSeed - a.first_seed)
    throw InputError("<command line>", 0, a.first_seed > Scenario::kMaxSeed ? "--first-seed" : "--seeds",
                     fmt::format("--first-seed {} and --seeds {} go past the largest seed, {} (2^63 - 1: "
                                 "replay files hold seeds as TOML integers)",
                                 a.first_seed, a.seeds, Scenario::kMaxSeed));
  if (a.max_faults == 0 || a.max_faults > ExploreArgs::kMaxFaults)
    throw InputError("<command line>", 0, "--max-faults",
                     fmt::format("must be from 1 to {}, not {}", ExploreArgs::kMaxFaults, a.max_faults));
  if (a.jobs > ExploreArgs::kMaxJobs)
    throw InputError(
        "<command line>", 0, "--jobs",
        fmt::format("must be from 0 (one per core) to {}, not {}", ExploreArgs::kMaxJobs, a.jobs));
  if (a.resume && a.out.empty()) throw InputError("<command line>", 0, "--resume", "needs --out FILE.jsonl");
  const auto [shard, shards] = parse_shard(a);

  Scenario sc = load_scenario(a.scenario);
  register_builtin_protocols();
  const auto names = ProtocolRegistry::instance().names();
  if (std::find(names.begin(), names.end(), a.protocol) == names.end()) {
    const std::string near = nearest(a.protocol, names);
    throw InputError(
        "<command line>", 0, "--protocol",
        fmt::format("unknown protocol '{}'{}; known: {}", a.protocol,
                    near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), fmt::join(names, ", ")));
  }
  ExploreOptions opts;
  opts.protocol = a.protocol;
  opts.nemesis.mode = *mode;
  opts.nemesis.max_faults = a.max_faults;
  opts.keep_scripted = a.keep_scripted;

  ExploreSummary summary;
  const std::string out_path = replace_all(a.out, "{shard}", std::to_string(shard));
  std::vector<std::uint64_t> done;  // seeds already in a resumed --out file
  if (a.resume && std::filesystem::exists(out_path)) {
    // One line at a time: a file of millions of runs is not held in memory. Its seeds come in ascending
    // order (lines are written in seed order), so a duplicate is found in the sorted list; a file that is
    // not in order (concatenated by hand) costs a set for the seeds out of order.
    std::optional<std::uint64_t> cut;
    std::set<std::uint64_t> unordered;
    for_each_jsonl(
        out_path,
        [&](const RunRecord& r) {
          if (r.scenario != sc.name || r.protocol != a.protocol || r.mode != a.mode) {
            throw InputError(out_path, 0, "--resume",
                             fmt::format("the file holds runs of {} × {} (mode {}), not {} × {} (mode {})",
                                         r.scenario, r.protocol, r.mode, sc.name, a.protocol, a.mode));
          }
          if (done.empty() || r.seed > done.back()) {
            done.push_back(r.seed);
          } else if (std::binary_search(done.begin(), done.end(), r.seed) ||
                     !unordered.insert(r.seed).second) {
            return;  // counted once
          }
          summary.add(r);
        },
        &cut);
    if (!unordered.empty()) {
      done.insert(done.end(), unordered.begin(), unordered.end());
      std::sort(done.begin(), done.end());
    }
    if (cut) {
      // Drop a half-written last line (or finish a complete one) so appended lines start on a line of their
      // own.
      const auto size = std::filesystem::file_size(out_path);
      if (*cut < size) {
        std::filesystem::resize_file(out_path, *cut);
        fmt::print(stderr, "locksim: {}: dropped a partial last line (a killed run); that seed runs again\n",
                   out_path);
      } else {
        std::ofstream(out_path, std::ios::app | std::ios::binary) << "\n";
      }
    }
  }
  const std::uint64_t resumed = done.size();
  const SeedSequence seeds(a.first_seed, a.seeds, shard, shards, std::move(done));

  FILE* out = nullptr;
  if (!out_path.empty()) {
    out = std::fopen(out_path.c_str(), a.resume ? "ab" : "wb");
    if (!out)
      throw InputError(out_path, 0, "--out",
                       fmt::format("cannot open for writing: {}", std::strerror(errno)));
  }
  const std::uint32_t jobs = a.jobs ? a.jobs : std::max(1u, std::thread::hardware_concurrency());
  fmt::print(stderr, "locksim explore {} -p {} --mode {}: {} run(s) on {} thread(s){}{}\n", sc.name,
             a.protocol, a.mode, seeds.size(), jobs,
             shards > 1 ? fmt::format(", shard {}/{}", shard, shards) : "",
             resumed ? fmt::format(", {} already in {}", resumed, out_path) : "");

  ProgressBar bar(!a.no_progress && stderr_is_terminal());
  const auto t0 = std::chrono::steady_clock::now();  // wall time: the throughput line, outside every world
  try {
    explore_seeds(
        sc, opts, seeds, jobs,
        [&](const RunRecord& r) {
          summary.add(r);
          if (out) {
            const std::string line = r.to_json() + "\n";
            if (std::fwrite(line.data(), 1, line.size(), out) != line.size() || std::fflush(out) != 0) {
              throw InputError(out_path, 0, "--out", fmt::format("write failed: {}", std::strerror(errno)));
            }
          }
        },
        [&](std::uint64_t done_runs, std::uint64_t total) { bar.update(done_runs, total); });
  } catch (...) {
    bar.finish();
    if (out) std::fclose(out);
    throw;
  }
  bar.finish();
  if (out) std::fclose(out);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();  // wall time: throughput

  fmt::print("{}", summary.render());
  if (seeds.size() > 0) {
    fmt::print(stderr, "  throughput  {:.0f} runs/s ({} runs in {:.1f}s wall, {} thread(s))\n",
               static_cast<double>(seeds.size()) / std::max(secs, 1e-9), seeds.size(), secs, jobs);
  }
  if (summary.failures() == 0) return 0;

  const std::uint64_t first = *summary.failing.begin();
  const std::string again = fmt::format("locksim explore {} -p {} --mode {} --first-seed {} --seeds 1",
                                        a.scenario, a.protocol, a.mode, first);
  fmt::print("  reproduce   {}\n", again);
  if (a.shrink) {
    const NemesisTargets targets = nemesis_targets(sc, a.protocol);
    const FaultPlan plan = make_fault_plan(sc, targets, first, opts.nemesis);
    ShrinkOptions so;
    so.max_runs = a.shrink_runs;
    so.keep_scripted = a.keep_scripted;
    ShrinkResult sr = shrink_failure(sc, a.protocol, plan, first, so);
    if (!sr.failed_at_start) {
      fmt::print("  shrink      seed {} did not fail again (a run that threw?): nothing to shrink\n", first);
      return 1;
    }
    Scenario rs = sr.scenario;
    rs.seed = first;
    rs.name = sanitize(fmt::format("{}-{}-seed{}", sc.name, a.protocol, first));
    rs.expect.clear();
    rs.protocols.clear();
    ReplayInfo info;
    info.protocol = a.protocol;
    info.expected_trace_hash = sr.trace_hash;
    info.verdict = sr.verdict;
    info.found_by = again;
    info.story = describe(sr.plan);
    std::string path = replace_all(a.replay_out, "{shard}", std::to_string(shard));
    if (path.empty()) {
      const std::filesystem::path dir =
          out_path.empty() ? std::filesystem::path(".") : std::filesystem::path(out_path).parent_path();
      path = (dir.empty() ? std::filesystem::path(".") : dir) / fmt::format("replay-{}.toml", rs.name);
      path = std::filesystem::path(path).lexically_normal().string();
    }
    write_text_file(path, scenario_to_toml(rs, &info));
    fmt::print("  shrunk      {} ingredient(s) and {} client(s) -> {} and {} ({} runs):\n", sr.size_before,
               sr.clients_before, sr.plan.size(), sr.base.clients.size(), sr.runs);
    std::string story = describe(sr.plan);
    for (std::size_t p = 0, nl; p < story.size(); p = nl + 1) {
      nl = story.find('\n', p);
      if (nl == std::string::npos) nl = story.size();
      fmt::print("                {}\n", story.substr(p, nl - p));
    }
    fmt::print("  replay      locksim replay {}\n", path);
  }
  return 1;
}

int cmd_replay(const std::string& file, const RenderRun& render) {
  const ReplayFile rf = load_replay_file(file);
  const ReplayCheck c = replay(rf);
  if (render) fmt::print("{}", render(c.run, rf.scenario));
  if (c.hash_matches && c.verdict_matches) {
    fmt::print("\nreplay OK: {} × {} seed {} reproduced trace hash {} ({})\n", rf.scenario.name,
               rf.info.protocol, rf.scenario.seed, hash_text(c.run.trace_hash), to_string(c.run.verdict()));
    return 0;
  }
  fmt::print(stderr,
             "\nREPLAY MISMATCH: {}\n  expected trace hash {} ({}), got {} ({})\n  the simulator, the "
             "protocol or the "
             "scenario changed behaviour since this file was written\n",
             file, hash_text(rf.info.expected_trace_hash), to_string(rf.info.verdict),
             hash_text(c.run.trace_hash), to_string(c.run.verdict()));
  return 1;
}

int cmd_merge(const std::vector<std::string>& files) {
  if (files.empty()) throw InputError("<command line>", 0, "FILES", "no JSONL files given");
  // Files are read one line at a time; what stays in memory is each group's summary and, to find seeds
  // that come twice, one (seed, trace hash) entry per run (looked up only: its order never reaches output).
  struct Group {
    ExploreSummary summary;
    std::unordered_map<std::uint64_t, std::uint64_t> seen;  // seed -> trace hash
  };
  std::map<std::string, Group> groups;
  std::uint64_t duplicates = 0, conflicts = 0;
  for (const std::string& f : files) {
    std::optional<std::uint64_t> cut;
    for_each_jsonl(
        f,
        [&](const RunRecord& r) {
          Group& g = groups[fmt::format("{}\x1f{}\x1f{}", r.scenario, r.protocol, r.mode)];
          auto [it, fresh] = g.seen.emplace(r.seed, r.trace_hash);
          if (!fresh) {
            ++duplicates;
            if (it->second != r.trace_hash) {
              ++conflicts;
              fmt::print(stderr,
                         "locksim: seed {} of {} × {} has two different trace hashes ({} and {}): not "
                         "deterministic\n",
                         r.seed, r.scenario, r.protocol, hash_text(it->second), hash_text(r.trace_hash));
            }
            return;
          }
          g.summary.add(r);
        },
        &cut);
    if (cut && *cut < std::filesystem::file_size(f))
      fmt::print(stderr, "locksim: {}: skipped a partial last line (a killed run)\n", f);
  }
  if (groups.empty()) {
    // Nothing was checked: a CI job that merges the output of shards that all died must not pass.
    throw InputError(files.front(), 0, "FILES",
                     files.size() == 1 ? "no runs in this file"
                                       : fmt::format("no runs in any of the {} files", files.size()));
  }
  std::uint64_t failures = 0, runs = 0;
  for (const auto& [key, g] : groups) {
    fmt::print("{}", g.summary.render());
    failures += g.summary.failures();
    runs += g.summary.runs;
  }
  if (groups.size() > 1)
    fmt::print("total: {} run(s), {} failing, in {} group(s)\n", runs, failures, groups.size());
  if (duplicates) fmt::print("{} duplicate seed(s) counted once\n", duplicates);
  return failures || conflicts ? 1 : 0;
}

}  // namespace locksim
