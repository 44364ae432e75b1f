#include "locksim/scenarios/loader/dist.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/loader/loader_internal.hpp"

namespace locksim {
namespace {

using K = Dist::Kind;
using loading::join;
using loading::line_of;
using loading::suggestion;
using loading::type_name;

constexpr std::size_t kMaxValues = 1'000'000;    // observed values of one empirical distribution
constexpr std::size_t kMaxCsvBytes = 16u << 20;  // a CSV of values, like a scenario file

struct KindInfo {
  std::string name;
  K kind;
  std::vector<std::string> keys;
};

const std::vector<KindInfo>& kinds() {
  static const std::vector<KindInfo> k = {
      {"constant", K::constant, {"kind", "value"}},
      {"uniform", K::uniform, {"kind", "min", "max"}},
      {"exponential", K::exponential, {"kind", "min", "max", "mean"}},
      {"lognormal", K::lognormal, {"kind", "min", "max", "median", "sigma"}},
      {"pareto", K::pareto, {"kind", "min", "max", "scale", "alpha"}},
      {"long_tail", K::pareto, {"kind", "min", "max", "mean", "alpha"}},
      {"empirical", K::empirical, {"kind", "values", "file", "unit", "column"}},
  };
  return k;
}

/// The keys of any kind: the schema's rows (distribution_table() below), which drive the did-you-mean.
const std::vector<std::string>& all_keys() {
  static const std::vector<std::string> k = schema_keys("distribution");
  return k;
}

const std::vector<std::string>& unit_names() {
  static const std::vector<std::string> u = {"ns", "us", "ms", "s", "m", "h", "d"};
  return u;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::string quoted(std::string_view s) {
  return fmt::format("'{}'", s.size() > 60 ? std::string(s.substr(0, 60)) + "..." : std::string(s));
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

/// A value written as a bare number ("12", "12.5", "-3") or in exponent notation ("1.2e-3").
enum class Bare : std::uint8_t { no, number, exponent };
Bare bare_number(std::string_view s) {
  std::size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  const std::size_t start = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  if (i == start) return Bare::no;
  if (i == s.size()) return Bare::number;
  if (s[i] != 'e' && s[i] != 'E') return Bare::no;
  ++i;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  const std::size_t exp_start = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  return i == s.size() && i > exp_start ? Bare::exponent : Bare::no;
}

/// One observed value written as text: a duration ("12ms"), or a bare number in `unit`.
std::optional<Duration> value_of(std::string_view text, const std::string& unit, std::string* why) {
  switch (bare_number(text)) {
    case Bare::exponent:
      *why = fmt::format("{} is in exponent notation: write it as a decimal number", quoted(text));
      return std::nullopt;
    case Bare::number:
      if (unit.empty() && text == "0") return Duration{0};  // "0" needs no unit, as everywhere in a file
      if (unit.empty()) {
        *why = fmt::format(
            "{} has no unit: give the unit of bare numbers with unit = \"ms\" (or write \"{}ms\")",
            quoted(text), text);
        return std::nullopt;
      }
      return parse_duration(fmt::format("{}{}", text, unit), false, why);
    case Bare::no:
      break;
  }
  return parse_duration(text, false, why);
}

/// Splits a CSV line on commas; a cell in double quotes loses them (values never hold commas).
std::vector<std::string_view> cells_of(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    std::string_view cell = trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"')
      cell = trim(cell.substr(1, cell.size() - 2));
    out.push_back(cell);
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

/// Reads one distribution table. Messages follow the loader's: "file:line: field: what".
class Reader {
 public:
  Reader(const toml::table& t, std::uint32_t line, std::string field, const std::string& file,
         const DistRules& rules)
      : t_(t), line_(line), field_(std::move(field)), file_(file), rules_(rules) {}

  Dist read();

 private:
  [[noreturn]] void fail(std::uint32_t line, const std::string& field, const std::string& what) const {
    throw InputError(file_, line == 0 ? 1 : line, field, what);
  }
  std::string sub(std::string_view key) const { return fmt::format("{}.{}", field_, key); }
  std::uint32_t line_at(std::string_view key) const {
    const toml::node* n = t_.get(key);
    return n ? line_of(*n) : line_;
  }
  [[noreturn]] void fail_at(std::string_view key, const std::string& what) const {
    fail(line_at(key), sub(key), what);
  }
  void need(std::string_view key, std::string_view what) const {
    if (!t_.contains(key)) fail(line_, sub(key), fmt::format("missing: {}", what));
  }
  std::optional<Duration> duration(std::string_view key, bool positive) const;
  double number(std::string_view key, double hi, std::string_view what) const;
  std::optional<std::string> string(std::string_view key) const;
  void check_keys(const KindInfo& kind) const;
  std::vector<Duration> inline_values(const std::string& unit) const;
  std::vector<Duration> file_values(const std::string& unit, const std::string& column) const;
  void check_rules(const Dist& d, const KindInfo& kind) const;

  const toml::table& t_;
  std::uint32_t line_;
  std::string field_;
  const std::string& file_;
  const DistRules& rules_;
};

std::optional<Duration> Reader::duration(std::string_view key, bool positive) const {
  const toml::node* n = t_.get(key);
  if (!n) return std::nullopt;
  if (!n->is_string()) {
    fail(line_of(*n), sub(key),
         fmt::format("expected a duration string with a unit such as \"15s\" or \"250ms\", got {}",
                     type_name(*n)));
  }
  const std::string text = *n->value<std::string>();
  std::string why;
  const auto d = parse_duration(text, false, &why);
  if (!d) fail(line_of(*n), sub(key), why);
  if (positive && *d <= Duration{0})
    fail(line_of(*n), sub(key), fmt::format("'{}' must be greater than zero", text));
  return d;
}

double Reader::number(std::string_view key, double hi, std::string_view what) const {
  const toml::node* n = t_.get(key);
  if (!n->is_number())
    fail(line_of(*n), sub(key), fmt::format("expected a number such as 1.5, got {}", type_name(*n)));
  const double v = *n->value<double>();
  if (!std::isfinite(v) || v <= 0 || v > hi)
    fail(line_of(*n), sub(key), fmt::format("{} is out of range: {} must be in (0, {}]", v, what, hi));
  return v;
}

std::optional<std::string> Reader::string(std::string_view key) const {
  const toml::node* n = t_.get(key);
  if (!n) return std::nullopt;
  if (!n->is_string()) fail(line_of(*n), sub(key), fmt::format("expected a string, got {}", type_name(*n)));
  std::string v = *n->value<std::string>();
  if (v.empty()) fail(line_of(*n), sub(key), "must not be empty");
  return v;
}

void Reader::check_keys(const KindInfo& kind) const {
  // The key on the earliest line that this kind does not take.
  std::optional<std::string> worst;
  std::uint32_t worst_line = 0;
  for (const auto& [k, v] : t_) {
    if (std::find(kind.keys.begin(), kind.keys.end(), k.str()) != kind.keys.end()) continue;
    const std::uint32_t l =
        k.source().begin.line != 0 ? static_cast<std::uint32_t>(k.source().begin.line) : line_of(v);
    if (!worst || l < worst_line) worst = std::string(k.str()), worst_line = l;
  }
  if (!worst) return;
  std::string hint;
  if (kind.kind == K::lognormal && *worst == "mean") hint = "; a lognormal is given by its median and sigma";
  if (kind.name == "pareto" && *worst == "mean")
    hint = "; pareto calls its scale 'scale' (long_tail calls it 'mean')";
  if (kind.name == "long_tail" && *worst == "scale")
    hint = "; long_tail calls its scale 'mean' (or write kind = \"pareto\")";
  if (kind.kind != K::empirical && (*worst == "values" || *worst == "file"))
    hint = "; observed values need kind = \"empirical\"";
  fail(worst_line, sub(*worst),
       fmt::format("'{}' does not apply to a {} {} (it takes: {}){}", *worst, kind.name, rules_.noun,
                   join(kind.keys), hint));
}

std::vector<Duration> Reader::inline_values(const std::string& unit) const {
  const toml::node& n = *t_.get("values");
  if (!n.is_array()) {
    fail(line_of(n), sub("values"),
         fmt::format("expected an array of durations such as [\"12ms\", \"340ms\"], got {}", type_name(n)));
  }
  const toml::array& a = *n.as_array();
  if (a.empty()) fail(line_of(n), sub("values"), "must list at least one value");
  if (a.size() > kMaxValues) fail(line_of(n), sub("values"), fmt::format("more than {} values", kMaxValues));
  std::vector<Duration> out;
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const toml::node& e = a[i];
    const std::string f = fmt::format("{}.values[{}]", field_, i);
    const std::uint32_t l = line_of(e) != 0 ? line_of(e) : line_of(n);
    std::string why;
    std::optional<Duration> d;
    if (e.is_string()) {
      d = value_of(*e.value<std::string>(), unit, &why);
    } else if (e.is_integer()) {
      d = value_of(fmt::format("{}", *e.value<std::int64_t>()), unit, &why);
    } else if (e.is_floating_point()) {
      // A float in `unit`, rounded to the nearest nanosecond (a float is not an exact decimal).
      const double v = *e.value<double>();
      if (unit.empty()) {
        why = fmt::format("{} has no unit: give the unit of bare numbers with unit = \"ms\"", v);
      } else if (!std::isfinite(v) || v < 0) {
        why = fmt::format("{} is not a duration: it must be a number not below zero", v);
      } else {
        const double ns = v * static_cast<double>(parse_duration("1" + unit)->count());
        if (ns > static_cast<double>(kMaxDuration.count()))
          why = fmt::format("{}{} is longer than a year, the longest duration allowed", v, unit);
        else
          d = Duration{std::llround(ns)};
      }
    } else {
      why =
          fmt::format("expected a duration such as \"12ms\" (or a number, with unit), got {}", type_name(e));
    }
    if (!d) fail(l, f, why);
    out.push_back(*d);
  }
  return out;
}

std::vector<Duration> Reader::file_values(const std::string& unit, const std::string& column) const {
  const toml::node& n = *t_.get("file");
  const std::string name = *string("file");
  for (const CatalogEntry& e : catalog()) {
    if (e.path == file_) {
      fail(line_of(n), sub("file"),
           fmt::format("a catalog scenario is embedded in the locksim binary, with no directory to read '{}' "
                       "from: list the values inline (values = [\"12ms\", \"340ms\", ...])",
                       name));
    }
  }
  std::filesystem::path p(name);
  if (p.is_relative()) p = std::filesystem::path(file_).parent_path() / p;
  p = p.lexically_normal();
  const std::string shown = p.string();
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec))
    fail(line_of(n), sub("file"), fmt::format("'{}' is a directory", shown));
  std::ifstream in(p, std::ios::binary);
  if (!in) fail(line_of(n), sub("file"), fmt::format("cannot open '{}': {}", shown, std::strerror(errno)));
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxCsvBytes)
      fail(line_of(n), sub("file"), fmt::format("'{}' is larger than 16 MiB: not a file of values", shown));
  }
  return parse_dist_csv(text, shown, sub("file"), unit, column);
}

void Reader::check_rules(const Dist& d, const KindInfo& kind) const {
  const std::string where = kind.kind == K::empirical  ? (t_.contains("file") ? "file" : "values")
                            : kind.kind == K::constant ? "value"
                                                       : "max";
  if (rules_.sign == DistRules::Sign::positive && d.lower_bound() <= Duration{0}) {
    if (kind.kind == K::empirical)
      fail_at(where, fmt::format("a value is 0: a {} must be longer than zero", rules_.noun));
    if (kind.kind == K::constant) fail_at(where, "'0' must be greater than zero");
    fail(
        t_.contains("min") ? line_at("min") : line_, sub("min"),
        fmt::format("the {} can be 0 (min is 0): a {} must be longer than zero; set min (e.g. min = \"1ms\")",
                    kind.name, rules_.noun));
  }
  if (d.upper_bound() > rules_.limit) {
    fail_at(where, fmt::format("can reach {}, beyond {}", duration_text(d.upper_bound()), rules_.limit_name));
  }
}

Dist Reader::read() {
  // Unknown keys first (a typo of any kind's key), then the kind, then the keys of other kinds.
  std::optional<std::string> unknown;
  std::uint32_t unknown_line = 0;
  for (const auto& [k, v] : t_) {
    const auto& keys = all_keys();
    if (std::find(keys.begin(), keys.end(), k.str()) != keys.end()) continue;
    const std::uint32_t l =
        k.source().begin.line != 0 ? static_cast<std::uint32_t>(k.source().begin.line) : line_of(v);
    if (!unknown || l < unknown_line) unknown = std::string(k.str()), unknown_line = l;
  }
  if (unknown)
    fail(unknown_line, sub(*unknown),
         fmt::format("unknown key '{}'{}", *unknown, suggestion(*unknown, all_keys(), "valid keys")));
  std::vector<std::string> names;
  for (const auto& k : kinds()) names.push_back(k.name);
  std::vector<std::string> quoted_names;
  for (const auto& k : names) quoted_names.push_back(fmt::format("\"{}\"", k));
  need("kind", fmt::format("kind = {}", join(quoted_names, " | ")));
  const std::string kind_name = *string("kind");
  const auto it =
      std::find_if(kinds().begin(), kinds().end(), [&](const KindInfo& k) { return k.name == kind_name; });
  if (it == kinds().end())
    fail_at("kind", fmt::format("unknown distribution kind '{}'{}", kind_name,
                                suggestion(kind_name, names, "one of")));
  const KindInfo& kind = *it;
  check_keys(kind);

  Dist d;
  switch (kind.kind) {
    case K::constant:
      need("value", "value = \"2ms\"");
      d = Dist::constant_of(*duration("value", false));
      break;
    case K::empirical: {
      const bool has_values = t_.contains("values"), has_file = t_.contains("file");
      if (has_values == has_file) {
        if (has_values) fail_at("file", "give either values or file, not both");
        fail(line_, sub("values"),
             "missing: values = [\"12ms\", \"340ms\", ...] or file = \"pauses.csv\" (one value per line)");
      }
      const std::string unit = string("unit").value_or("");
      if (!unit.empty() && std::find(unit_names().begin(), unit_names().end(), unit) == unit_names().end())
        fail_at("unit", fmt::format("unknown unit '{}'{}", unit, suggestion(unit, unit_names(), "one of")));
      const std::optional<std::string> column = string("column");
      if (column && !has_file)
        fail_at("column", "'column' names a column of a CSV file: it needs file = \"...\"");
      d = Dist::empirical_of(has_values ? inline_values(unit) : file_values(unit, column.value_or("")));
      break;
    }
    default: {
      // min (offset or lower bound) and max (upper bound or cap), then the kind's own parameters.
      const Duration min = duration("min", false).value_or(Duration{0});
      need("max", kind.kind == K::uniform
                      ? "max (upper bound)"
                      : "max (the cap on one value: this kind has no upper bound of its own)");
      const Duration max = *duration("max", false);
      if (max < min)
        fail_at("max", fmt::format("max ({}) is below min ({})", duration_text(max), duration_text(min)));
      if (kind.kind == K::uniform) {
        d = Dist::uniform_of(min, max);
      } else if (kind.kind == K::exponential) {
        need("mean", "mean (of the exponential part)");
        d = Dist::exponential_of(*duration("mean", true), max, min);
      } else if (kind.kind == K::lognormal) {
        need("median", "median (of the lognormal part, e.g. median = \"50ms\")");
        need("sigma", "sigma (the standard deviation of the log of a value, e.g. sigma = 1.2)");
        const Duration median = *duration("median", true);
        d = Dist::lognormal_of(median, number("sigma", 10, "sigma"), max, min);
      } else if (kind.name == "long_tail") {
        need("mean", "mean (the Pareto scale)");
        const Duration scale = *duration("mean", true);
        const double alpha = t_.contains("alpha") ? number("alpha", 100, "the Pareto shape") : 1.5;
        d = Dist::pareto_of(scale, alpha, max, min);
      } else {
        need("scale", "scale (the smallest value of the Pareto part, e.g. scale = \"10ms\")");
        need("alpha", "alpha (the Pareto shape, e.g. alpha = 1.5; smaller is a heavier tail)");
        const Duration scale = *duration("scale", true);
        const double alpha = number("alpha", 100, "the Pareto shape");
        if (max - min < scale) {
          fail_at("max", fmt::format("max ({}) is below min + scale ({}): every value would be the cap",
                                     duration_text(max), duration_text(min + scale)));
        }
        d = Dist::pareto_of(scale, alpha, max, min);
      }
    }
  }
  check_rules(d, kind);
  return d;
}

[[noreturn]] void csv_fail(const std::string& csv_file, std::uint32_t line, const std::string& field,
                           const std::string& what) {
  throw InputError(csv_file, line == 0 ? 1 : line, field, what);
}

constexpr FieldDoc kDistributionFields[] = {
    {"kind",
     "\"constant\" | \"uniform\" | \"exponential\" | \"lognormal\" | \"pareto\" | \"long_tail\" | "
     "\"empirical\"",
     "required", "the distribution (a duration written instead of a table is a constant)"},
    {"value", "duration", "", "constant: the value (required)"},
    {"min", "duration", "\"0\"",
     "uniform: the lower bound; exponential, lognormal, pareto, long_tail: an offset added to every value"},
    {"max", "duration", "",
     "uniform: the upper bound; exponential, lognormal, pareto, long_tail: the cap on the whole value "
     "(required)"},
    {"mean", "duration > 0", "", "exponential: the mean; long_tail: the Pareto scale (required)"},
    {"median", "duration > 0", "", "lognormal: the median, half the values below it (required)"},
    {"sigma", "number in (0, 10]", "", "lognormal: the standard deviation of the log of a value (required)"},
    {"scale", "duration > 0", "", "pareto: the smallest value of the Pareto part (required)"},
    {"alpha", "number in (0, 100]", "",
     "pareto (required), long_tail (default 1.5): the shape; the smaller, the heavier the tail"},
    {"values", "array of durations, or of numbers with unit", "",
     "empirical: the observed values, each drawn equally often (values or file)"},
    {"file", "path of a CSV file", "",
     "empirical: the observed values, one per line or in a named column, relative to the scenario file"},
    {"unit", "\"ns\" | \"us\" | \"ms\" | \"s\" | \"m\" | \"h\" | \"d\"", "",
     "empirical: the unit of bare numbers"},
    {"column", "string", "", "empirical: the CSV column to read (the file then starts with a header line)"},
};

}  // namespace

namespace loading {
TableDoc distribution_table() {
  return {"distribution", "a distribution of durations (network delays, ...): a duration, or a table",
          kDistributionFields};
}
}  // namespace loading

std::vector<Duration> parse_dist_csv(std::string_view text, const std::string& csv_file,
                                     const std::string& field, const std::string& unit,
                                     const std::string& column) {
  auto fail = [&](std::uint32_t line, const std::string& what) { csv_fail(csv_file, line, field, what); };
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte order mark
  std::vector<Duration> out;
  std::optional<std::size_t> col;  // the cell to read, once the first line has been seen
  std::uint32_t line = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::string_view raw = text.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line;
    const std::string_view l = trim(raw);
    if (l.empty() || l.front() == '#') continue;
    const std::vector<std::string_view> cells = cells_of(l);
    if (!col) {
      std::vector<std::string> header(cells.begin(), cells.end());
      if (!column.empty()) {
        const auto it = std::find(header.begin(), header.end(), column);
        if (it == header.end())
          fail(line, fmt::format("no column '{}' in the header line{}", column,
                                 suggestion(column, header, "columns")));
        col = static_cast<std::size_t>(it - header.begin());
        continue;
      }
      const bool is_header = !is_digit(cells[0].empty() ? '0' : cells[0][0]) && cells[0][0] != '.' &&
                             cells[0][0] != '-' && cells[0][0] != '+';
      if (cells.size() > 1) {
        fail(line, is_header ? fmt::format("has {} columns ({}): name the one to read with column = \"{}\"",
                                           cells.size(), join(header), header[0])
                             : fmt::format("has {} values on one line: write one value per line, or a header "
                                           "line and column = \"...\"",
                                           cells.size()));
      }
      col = 0;
      if (is_header) continue;
    }
    if (column.empty() && cells.size() > 1)
      fail(line, fmt::format("has {} values on one line: write one value per line", cells.size()));
    if (cells.size() <= *col)
      fail(line, fmt::format("has {} cells; column '{}' is cell {}", cells.size(), column, *col + 1));
    const std::string_view cell = cells[*col];
    if (cell.empty())
      fail(line, column.empty() ? "empty value" : fmt::format("empty value in column '{}'", column));
    std::string why;
    const auto d = value_of(cell, unit, &why);
    if (!d) fail(line, why);
    if (out.size() == kMaxValues) fail(line, fmt::format("more than {} values", kMaxValues));
    out.push_back(*d);
  }
  if (out.empty())
    fail(line, "has no values (one value per line, e.g. 12ms, or a bare number with unit = \"ms\")");
  return out;
}

Dist parse_dist(const toml::node& n, const std::string& field, const std::string& file,
                const DistRules& rules) {
  if (n.is_string()) {
    std::string why;
    const std::string text = *n.value<std::string>();
    const auto d = parse_duration(text, false, &why);
    const std::uint32_t line = line_of(n) == 0 ? 1 : line_of(n);
    if (!d) throw InputError(file, line, field, why);
    if (rules.sign == DistRules::Sign::positive && *d <= Duration{0})
      throw InputError(file, line, field, fmt::format("'{}' must be greater than zero", text));
    if (*d > rules.limit)
      throw InputError(file, line, field, fmt::format("'{}' is beyond {}", text, rules.limit_name));
    return Dist::constant_of(*d);
  }
  if (!n.is_table()) {
    throw InputError(
        file, line_of(n) == 0 ? 1 : line_of(n), field,
        fmt::format(
            "expected a duration (\"2ms\") or a table {{ kind = \"uniform\", min = ..., max = ... }}, got {}",
            type_name(n)));
  }
  return Reader(*n.as_table(), line_of(n), field, file, rules).read();
}

}  // namespace locksim
