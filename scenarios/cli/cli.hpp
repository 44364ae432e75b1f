#pragma once
/// The locksim command line's shared pieces: exit codes, option checks, how a scenario × protocol cell is run
/// and judged, and the commands (scenarios/cli/*.cpp). Only the command line reads the terminal, stdin and
/// the wall clock.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "locksim/reports/report.hpp"
#include "locksim/scenarios/expectation.hpp"
#include "locksim/scenarios/explore.hpp"
#include "locksim/scenarios/runner.hpp"

namespace locksim::cli {

/// Exit codes: 0 as expected (for `run`: the verdict is safe), 1 a safety violation or an expectation not
/// met, 2 a usage or input error.
constexpr int kOk = 0, kFail = 1, kInput = 2;

/// Prints "locksim: error: MSG" and exits 2.
[[noreturn]] void input_error(const std::string& msg);

/// An integer option's check: decimal digits only, within [lo, hi] (CLI11 2.1 would wrap "-1", read "010"
/// as octal and saturate silently).
CLI::Validator whole_number(std::uint64_t lo, std::uint64_t hi);
/// A word option's check: one of `words`, with the nearest for a typo.
CLI::Validator one_of(std::vector<std::string> words);

std::vector<std::string> protocol_names();
/// Exits 2 naming an unknown protocol, with the nearest known one.
void validate_protocols(const std::vector<std::string>& ps);
/// Protocols to run for a scenario: the ones asked for, else the scenario's own list, else all registered.
std::vector<std::string> protocols_for(const Scenario& sc, const std::vector<std::string>& asked);

bool use_color(bool no_color);
/// Columns for the terminal: $COLUMNS, else the terminal's width, else 0 (the report's default, 100).
int term_width();
TextStyle text_style(bool no_color, bool to_file = false);

/// Writes `text` to stdout, or to `out_file` (exit 2 if it cannot).
void emit(const std::string& text, const std::string& out_file);
/// Every .toml under the given paths (files or directories, recursively), sorted; the catalog when empty.
std::vector<std::string> scenario_inputs(const std::vector<std::string>& paths);

/// The text of a catalog scenario or a file, and the file name messages use (exit 2 via InputError when
/// neither exists).
std::pair<std::string, std::string> scenario_text(const std::string& name_or_path);
/// Writes a file; throws InputError naming `option` when it cannot.
void write_file(const std::string& path, const std::string& text, const char* option);
/// --jobs: 0 is one per core; above ExploreArgs::kMaxJobs an InputError.
std::uint32_t jobs_of(std::uint32_t j);

/// One scenario × protocol judged against its expectation (over its seeds, when it names a range).
struct Cell {
  std::string scenario, protocol;
  Verdict got = Verdict::safe;  ///< unsafe if any run was
  std::string got_text;         ///< "unsafe", or "unsafe in 3 of 20 seed(s) run"
  std::optional<Expectation> expected;
  bool met = true;
  std::string why;  ///< when not met
  std::uint64_t seed = 0;
  std::string story;  ///< the stories of the run that did not meet the expectation (empty otherwise)
  /// run_warnings() of the runs (each warning once, in the order first seen): unbacked grants, ...
  std::vector<std::string> warnings;
  bool ok() const { return met; }
};

/// A run that stopped at a limit with no anomaly recorded is inconclusive: throws InputError ("FILE: limit:
/// ...", exit 2). A recorded anomaly is a verdict wherever the run stopped.
void require_within_limits(const RunOutput& r, const Scenario& sc);
Cell run_cell(const Scenario& sc, const std::string& p);

/// Whether stderr is a terminal (the progress bar draws only there).
bool stderr_is_terminal();

/// A one-line progress bar with a rate and an ETA on stderr (when `on`). Real time is used here and only
/// here: for people.
class ProgressBar {
 public:
  explicit ProgressBar(bool on);
  void update(std::size_t done, std::size_t total);
  void finish();

 private:
  bool on_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;  // wall time: progress bar
};

/// How a sweep is cut into shards on the command line: one of --shard K/N (0-based), --shard-number K/N
/// (1-based), --shards N (K from JOB_COMPLETION_INDEX, else CI_NODE_INDEX checked against CI_NODE_TOTAL).
struct ShardArgs {
  std::string shard, shard_number;
  std::uint32_t shards = 0;
};
/// {K (0-based), N}; {0, 1} when none is given. Throws InputError naming the option or variable.
std::pair<std::uint32_t, std::uint32_t> parse_shard(const ShardArgs& a);

// The commands.
/// `locksim explore` arguments (the command line fills them).
struct ExploreArgs {
  std::string scenario;
  std::string protocol;
  std::uint64_t seeds = 100;
  std::uint64_t first_seed = 1;
  static constexpr std::uint32_t kMaxJobs = 1024;      ///< --jobs at most (a thread each)
  static constexpr std::uint32_t kMaxFaults = 10'000;  ///< --max-faults at most (a plan's faults are built)
  std::uint32_t jobs = 0;                              ///< 0: one per hardware thread
  std::string shard;                                   ///< "K/N", 0-based K
  std::string shard_number;                            ///< "K/N", 1-based K (a GitHub matrix, GitLab)
  /// N, with K from JOB_COMPLETION_INDEX (0-based: a Kubernetes Indexed Job), else from CI_NODE_INDEX
  /// (1-based: GitLab's `parallel:`, whose CI_NODE_TOTAL must then be N)
  std::uint32_t shards = 0;
  std::string out;  ///< JSONL file; "{shard}" is replaced by the shard index
  bool resume = false;
  std::string mode = "anything";
  std::uint32_t max_faults = 6;
  bool keep_scripted = false;
  bool shrink = true;
  std::uint32_t shrink_runs = 400;
  std::string
      replay_out;  ///< replay file of the first failure ("{shard}": the shard index; default: beside --out)
  bool no_progress = false;
};

/// Runs a sweep. Exit code: 0 no violation, 1 violations (or errors), 2 input error (thrown as InputError).
int cmd_explore(const ExploreArgs& args);

/// `locksim envelope` arguments (the command line fills them; scenarios/cli/envelope.cpp).
struct EnvelopeArgs {
  std::vector<std::string> inputs;  ///< SCENARIO, or with --merge the JSONL files
  std::vector<std::string> protocols, vary, set;
  std::uint32_t steps = 11, seeds = 1, refine = 4, jobs = 0;
  std::optional<std::uint64_t> first_seed;
  std::string html, csv, json, jsonl, points_dir;
  ShardArgs shard;
  bool merge = false, no_progress = false;
};
/// The options of `locksim envelope` (beside the command in scenarios/cli/envelope.cpp).
void add_envelope_options(CLI::App& cmd, EnvelopeArgs& a);
/// The safety envelope. 0 safe at every point, 1 some point unsafe (or an incomplete merge), 2 input errors.
int cmd_envelope(const EnvelopeArgs& args);

/// `locksim risk` arguments (the command line fills them; scenarios/cli/risk.cpp).
struct RiskArgs {
  std::vector<std::string> inputs;  ///< SCENARIO, or with --merge the JSONL files
  std::string protocol;
  std::optional<double> hours;
  std::optional<std::uint64_t> acquisitions, runs, first_seed;
  std::vector<std::string> tilt;
  std::uint32_t pilot = 400, jobs = 0;
  std::string jsonl, proposal;
  ShardArgs shard;
  bool merge = false, allow_partial = false, no_progress = false;
};
/// The options of `locksim risk`.
void add_risk_options(CLI::App& cmd, RiskArgs& a);
/// How often it breaks. 0 no unsafe run, 1 some unsafe run (or an incomplete merge), 2 input errors.
int cmd_risk(const RiskArgs& args);

/// Renders a finished run for `locksim replay` (the CLI passes the text report; scenarios/ cannot see
/// reports/).
using RenderRun = std::function<std::string(const RunOutput&, const Scenario&)>;

/// Re-runs a replay file. 0 when the trace hash (and verdict) match, 1 otherwise (loudly), 2 on input errors.
int cmd_replay(const std::string& file, const RenderRun& render);

/// The combined summary of JSONL files (one block per scenario × protocol × mode) and whether each sweep is
/// complete (every shard, every seed of its range, no file cut short). 0 no failure and complete (or
/// `allow_partial`), 1 failures, the same seed with two different results, or an incomplete sweep, 2 input
/// errors (a directory, a bad line, no run at all).
int cmd_merge(const std::vector<std::string>& files, bool allow_partial = false);

int cmd_list();
int cmd_compare(const std::string& scenario, const std::vector<std::string>& ps,
                std::optional<std::uint64_t> seed, const std::string& out_file, bool no_color);
int cmd_run(const std::string& scenario, const std::vector<std::string>& ps_in,
            std::optional<std::uint64_t> seed, const std::string& report, const std::string& out_file,
            bool no_color, bool trace, bool step);
int cmd_matrix(const std::vector<std::string>& scenarios_in, const std::vector<std::string>& ps_in,
               const std::string& format, bool by_resource);
int cmd_check(const std::vector<std::string>& paths, const std::string& junit_file, bool no_color);
int cmd_demo(bool no_color);

}  // namespace locksim::cli
