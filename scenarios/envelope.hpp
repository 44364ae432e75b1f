#pragma once
/// The safety envelope: where in the space of one or two numeric scenario fields (`lock.ttl`,
/// `fault[0].duration`, `network.delay.mean`, ...) a protocol goes from safe to unsafe. A grid of points, K
/// seeds at each (a point is unsafe if any seed is; the fraction is kept), then bisection between every safe
/// and unsafe neighbour so the boundary is sharp without a huge grid, and a least-squares line through the
/// refined boundary with a sentence saying where it lies and how well a line fits it.
///
/// A field is varied by editing the scenario's TOML and loading it again, so the loader's validation, units
/// and messages apply to every point. The command (`locksim envelope`, scenarios/cli/envelope.cpp) and the
/// picture (reports/envelope_html.cpp) are elsewhere: the engine holds no terminal code and never reads the
/// wall clock. Results do not depend on the number of threads: every run depends on its point and seed only,
/// and results are stored by index.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "locksim/scenarios/scenario.hpp"

namespace locksim {

/// What kind of value a field holds: durations carry units ("10s"), numbers do not.
enum class AxisKind : std::uint8_t { duration, number, integer };

/// One varied field and its range. Durations are held in nanoseconds.
struct EnvelopeAxis {
  std::string field;  ///< the path as given: "fault[0].duration"
  AxisKind kind = AxisKind::number;
  double lo = 0, hi = 0;
  std::string type;  ///< the schema's type text ("duration > 0")
  /// The value as a person reads it ("10.5s", "0.01").
  std::string format(double v) const;
  /// The value in the unit the picture and the fit use (seconds for durations).
  double display(double v) const { return kind == AxisKind::duration ? v / 1e9 : v; }
  /// "s" for durations, "" for numbers.
  std::string_view unit() const { return kind == AxisKind::duration ? "s" : ""; }
  /// A value of the axis rounded to what the field can hold (whole nanoseconds, whole numbers).
  double snap(double v) const;
};

/// The largest number of grid steps along one axis.
inline constexpr std::uint32_t kMaxEnvelopeSteps = 200;
/// The largest number of seeds per point.
inline constexpr std::uint32_t kMaxEnvelopeSeeds = 10'000;
/// The most refinement steps (bisections) per boundary crossing.
inline constexpr std::uint32_t kMaxEnvelopeRefine = 30;

/// Parses "FIELD=LO..HI" against the scenario text: the path must name a numeric field of the schema that the
/// scenario has (an array index within its tables), durations with units, LO <= HI. Throws InputError naming
/// the field (with the nearest valid name for a typo).
EnvelopeAxis parse_vary(std::string_view spec, std::string_view toml, const std::string& file);

/// The scenario text with fields fixed for a whole envelope: each of `sets` is "FIELD=VALUE", checked as
/// --vary checks a field (a duration with units, ...). Throws InputError naming the field.
std::string set_fields(std::string_view toml, const std::string& file, const std::vector<std::string>& sets);

/// The scenario text with each axis's field set to the value of `values` (same order). Throws InputError
/// naming the field when the path does not fit the text.
std::string vary_text(std::string_view toml, const std::string& file, const std::vector<EnvelopeAxis>& axes,
                      const std::vector<double>& values);

/// vary_text, loaded and validated. A loader error is rethrown naming the varied fields and values.
Scenario vary_scenario(std::string_view toml, const std::string& file, const std::vector<EnvelopeAxis>& axes,
                       const std::vector<double>& values);

struct EnvelopeSpec {
  std::string scenario;  ///< as given on the command line (catalog name or path): printed commands use it
  std::string toml;      ///< the scenario's text
  std::string file;      ///< its file name (messages)
  std::vector<std::string> sets;  ///< "FIELD=VALUE" fixed for the whole envelope (already applied to `toml`)
  std::vector<std::string> protocols;
  std::vector<EnvelopeAxis> axes;       ///< one or two
  std::uint32_t steps = 11;             ///< grid points along each axis (>= 2)
  std::uint32_t seeds = 1;              ///< seeds per point
  std::uint64_t first_seed = 1;         ///< seeds first_seed .. first_seed + seeds - 1 at every point
  std::uint32_t refine = 4;             ///< bisections per boundary crossing
  std::uint32_t shard = 0, shards = 1;  ///< the grid points of one shard (i % shards == shard); no refining
  /// Grid points in all (steps, or steps²).
  std::uint64_t grid_points() const;
  /// The values of grid point `index` (index = i + j * steps).
  std::vector<double> grid_values(std::uint64_t index) const;
};

/// One point × one protocol: its K runs.
struct EnvelopePoint {
  std::vector<double> at;   ///< the axis values
  std::int64_t index = -1;  ///< grid index (i + j * steps), or -1 for a point of the refinement
  std::uint32_t runs = 0, unsafe = 0, inconclusive = 0, errors = 0;
  std::optional<std::uint64_t> first_unsafe_seed;  ///< the smallest seed that was unsafe (or threw)
  std::uint64_t first_unsafe_hash = 0;             ///< its trace hash
  bool is_unsafe() const { return unsafe + errors > 0; }
  /// Every run finished safe.
  bool is_safe() const { return !is_unsafe() && inconclusive == 0; }
  double fraction() const { return runs ? static_cast<double>(unsafe + errors) / runs : 0.0; }
  std::string_view status() const { return is_unsafe() ? "unsafe" : is_safe() ? "safe" : "inconclusive"; }
};

/// A boundary crossing after refinement: the midpoint of the last safe / unsafe pair and half its gap, along
/// the axis that was bisected.
struct BoundaryPoint {
  std::vector<double> at;
  std::uint32_t axis = 0;
  double half_width = 0;  ///< in the axis's own value (ns for durations)
};

/// The least-squares line through the boundary: 1 axis, a threshold (the mean of the crossings); 2 axes,
/// `dependent` = slope × other + intercept, in display units (seconds for durations).
struct BoundaryFit {
  std::size_t points = 0;
  std::uint32_t dependent = 1;  ///< the axis written as a function of the other
  double slope = 0, intercept = 0;
  double rms = 0;            ///< root-mean-square distance of the crossings from the line (dependent's units)
  double tolerance = 0;      ///< what a straight line may be off by: one refinement step (dependent's units)
  bool is_line = false;      ///< rms <= tolerance and enough points
  bool unsafe_above = true;  ///< unsafe where dependent > the line
};

struct ProtocolEnvelope {
  std::string protocol;
  std::vector<EnvelopePoint> grid;     ///< in index order (the shard's points only, when sharded)
  std::vector<EnvelopePoint> refined;  ///< the refinement's points, in the order they were run
  std::vector<BoundaryPoint> boundary;
  BoundaryFit fit;
  std::string summary;  ///< one sentence: "redlock: unsafe when fault[0].duration > lock.ttl + 0.13 s (...)"
};

struct EnvelopeResult {
  EnvelopeSpec spec;
  std::vector<ProtocolEnvelope> protocols;
  /// The smallest refinement step along each axis (the grid step / 2^refine), in the axis's value.
  std::vector<double> resolution() const;
};

/// Progress: runs done of runs planned so far (the total grows when refinement starts).
using EnvelopeProgress = std::function<void(std::uint64_t done, std::uint64_t total)>;

/// Checks the spec (steps, seeds, refine, protocols, every grid point loads) and runs the grid and then,
/// unless sharded, the refinement, on `jobs` threads. Throws InputError naming the field or option.
EnvelopeResult run_envelope(const EnvelopeSpec& spec, std::uint32_t jobs,
                            const EnvelopeProgress& progress = {});

/// Refines and fits a result whose grid is complete (a merge of shards, or run_envelope's own grid).
void refine_envelope(EnvelopeResult& result, std::uint32_t jobs, const EnvelopeProgress& progress = {});

/// The boundary line and the sentence of each protocol (refine_envelope calls it).
void summarize_envelope(EnvelopeResult& result);

/// A file name for the scenario of a point: "<name>-lock.ttl=10s-fault0.duration=10.5s.toml".
std::string point_file_name(const EnvelopeSpec& spec, const std::vector<double>& at);

/// CSV: one line per point (grid and refinement) per protocol. JSON: the spec, every point, the boundary and
/// its fit. `command` gives the replay command of a point's first unsafe run ("" for none).
using PointCommand = std::function<std::string(const std::string& protocol, const EnvelopePoint&)>;
std::string envelope_csv(const EnvelopeResult& r, const PointCommand& command);
std::string envelope_json(const EnvelopeResult& r, const PointCommand& command);

/// JSONL of a shard's grid points: each line one point × protocol with the grid and the shard it belongs to.
std::string envelope_jsonl(const EnvelopeResult& r);
/// The grid's identity in a JSONL line (scenario, its text's hash, axes, steps, seeds, protocols): lines of
/// one envelope share it.
std::string envelope_grid_key(const EnvelopeSpec& spec);

/// What merging JSONL files found: the spec (shard fields reset) and the points, or what is missing.
struct EnvelopeMerge {
  std::optional<EnvelopeResult> result;  ///< set when every point of the grid is present
  std::vector<std::string> missing;      ///< one line per missing shard or point range
  std::uint64_t points = 0, duplicates = 0;
};
/// Reads JSONL files written by envelope_jsonl. `load_text(scenario)` returns the scenario's text and file
/// name (to check it is the text the shards ran). Throws InputError for a bad line or lines of different
/// envelopes.
EnvelopeMerge merge_envelope_jsonl(
    const std::vector<std::string>& files,
    const std::function<std::pair<std::string, std::string>(const std::string&)>& load_text);

}  // namespace locksim
