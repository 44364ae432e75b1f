#pragma once
/// Reading a distribution of durations (sim/distribution.hpp) from a scenario file, wherever the file accepts
/// a duration (scenarios/loader/*.cpp call parse_dist for such a field). The syntax is documented in
/// docs/scenario-format.md, section "Distributions":
///
///   "15s"                                                        a constant
///   { kind = "uniform", min = "1s", max = "2s" }
///   { kind = "exponential", mean = "200ms", max = "5s" }         (min, an offset, optional)
///   { kind = "lognormal", median = "50ms", sigma = 1.2, max = "10s" }
///   { kind = "pareto", scale = "10ms", alpha = 1.5, max = "30s" }
///   { kind = "long_tail", mean = "5ms", alpha = 1.5, max = "2s" } the network's older name for pareto
///   { kind = "empirical", values = ["12ms", "340ms"] }           or values = [12, 340], unit = "ms"
///   { kind = "empirical", file = "gc-pauses.csv", unit = "ms" }  (column = "pause_ms" for a CSV with a
///   header)
///
/// Every mistake is an InputError naming file, line and field (a CSV's own file and line for a bad value in
/// it), with the nearest valid name for a misspelt kind, key or unit.
#include <cstdint>
#include <string>

#include <toml++/toml.h>

#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/loader/schema.hpp"
#include "locksim/sim/distribution.hpp"

namespace locksim {

/// What a field asks of its distribution, besides being well formed.
struct DistRules {
  enum class Sign : std::uint8_t {
    non_negative,  ///< 0 is a valid value (a network delay)
    positive,      ///< every value must be longer than zero: lower_bound() > 0 (a pause, an interval)
  };
  Sign sign = Sign::non_negative;
  /// No value may exceed this: upper_bound() <= limit.
  Duration limit = kMaxDuration;
  /// The limit in messages: "can reach 2m, beyond <limit_name>".
  std::string limit_name = "a year, the longest duration allowed";
  /// What the field is, in messages: "'mean' does not apply to a uniform <noun>".
  std::string noun = "delay";
};

namespace loading {
/// The schema rows of a distribution table (`locksim explain distribution`); network_tables() lists it.
TableDoc distribution_table();
}  // namespace loading

/// Reads the distribution at node `n` of field `field` ("network.delay", "client[0].work") of the scenario
/// file `file`. A `file = "x.csv"` is read relative to the directory of `file`; a catalog scenario (embedded
/// in the binary, so with no directory of its own) must list its values inline. Throws InputError.
Dist parse_dist(const toml::node& n, const std::string& field, const std::string& file,
                const DistRules& rules = {});

/// The values of an empirical distribution read from CSV text (one value per line, or a header line and the
/// named `column`): `unit` ("ms") is the unit of bare numbers; '#' starts a comment line. `csv_file` names
/// the text in messages, `field` is the scenario field that asked for it. Throws InputError(csv_file, csv
/// line, field, ...).
std::vector<Duration> parse_dist_csv(std::string_view text, const std::string& csv_file,
                                     const std::string& field, const std::string& unit,
                                     const std::string& column);

}  // namespace locksim
