#pragma once
/// Replay files: a counterexample as a scenario TOML file (docs/scenario-format.md) with the exact fault plan
/// and seed, plus a `[replay]` table naming the protocol and the trace hash the run must reproduce. The file
/// is plain TOML a person can read, edit and commit; `locksim replay FILE` re-runs it and fails loudly if the
/// hash differs (a change of behaviour: a fix, a regression, or lost determinism).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "locksim/scenarios/runner.hpp"
#include "locksim/scenarios/scenario.hpp"

namespace locksim {

/// What a replay file records beside the scenario.
struct ReplayInfo {
  std::string protocol;
  std::uint64_t expected_trace_hash = 0;
  Verdict verdict = Verdict::unsafe;  ///< the verdict the recorded run had
  std::string found_by;               ///< the command that found it (for people)
  std::string story;                  ///< the shrunk fault plan in words (written as comments)
};

/// A scenario as TOML text the loader reads back to an equal Scenario (every field it knows, durations exact
/// to the nanosecond, probabilities exact in ppm). With `replay`, the file also gets the `[replay]` table and
/// its expectations say `replay->protocol = verdict`. Process names must be ones the loader accepts (clients,
/// the resource, the service processes a registered protocol declares: scenarios/services.hpp).
std::string scenario_to_toml(const Scenario& sc, const ReplayInfo* replay = nullptr);

/// A replay file split in two: the scenario and the replay table.
struct ReplayFile {
  Scenario scenario;
  ReplayInfo info;
};

/// Reads a replay file. The `[replay]` table is taken out before the scenario loader sees the rest (its lines
/// are blanked, so the loader's line numbers still match the file). Throws InputError naming file, line and
/// field.
ReplayFile load_replay_text(std::string_view text, const std::string& filename);
ReplayFile load_replay_file(const std::string& path);

/// Writes `text` to `path` atomically (temporary file + rename). Throws InputError if it cannot.
void write_text_file(const std::string& path, const std::string& text);

/// The outcome of re-running a replay file.
struct ReplayCheck {
  RunOutput run;
  bool hash_matches = false;
  bool verdict_matches = false;
};

/// Runs the replay's scenario against its protocol (full trace kept, for reports).
ReplayCheck replay(const ReplayFile& file);

/// "0x0123456789abcdef": how hashes are written in replay files and JSONL.
std::string hash_text(std::uint64_t h);
std::optional<std::uint64_t> parse_hash(std::string_view s);

}  // namespace locksim
