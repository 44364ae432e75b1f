// The envelope's fields: a path such as `fault[0].duration` resolved against the schema and the scenario's
// TOML, its range parsed in the field's units, and the TOML text with the field set to a value.
#include <fmt/format.h>

#include <toml++/toml.h>
#include <charconv>
#include <cmath>
#include <sstream>

#include "locksim/scenarios/envelope.hpp"
#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/loader/schema.hpp"

namespace locksim {

namespace {

constexpr const char* kCmd = "<command line>";

[[noreturn]] void fail(const std::string& field, const std::string& what) {
  throw InputError(kCmd, 0, "--vary " + field, what);
}

struct Segment {
  std::string name;
  std::optional<std::size_t> index;
};

std::vector<Segment> split_path(const std::string& path) {
  std::vector<Segment> out;
  std::size_t p = 0;
  while (p <= path.size()) {
    std::size_t dot = path.find('.', p);
    if (dot == std::string::npos) dot = path.size();
    std::string part = path.substr(p, dot - p);
    Segment s;
    if (const auto br = part.find('['); br != std::string::npos) {
      const std::string idx = part.substr(br + 1, part.size() - br - 2);
      std::size_t v = 0;
      const auto [end, ec] = std::from_chars(idx.data(), idx.data() + idx.size(), v);
      if (part.back() != ']' || idx.empty() || ec != std::errc{} || end != idx.data() + idx.size())
        fail(path, fmt::format("'{}' is not NAME[INDEX] with a whole number index (e.g. fault[0])", part));
      s.index = v;
      part.resize(br);
    }
    if (part.empty()) fail(path, "an empty name in the path (fields are separated by single dots)");
    s.name = part;
    out.push_back(std::move(s));
    p = dot + 1;
  }
  return out;
}

bool is_array_type(std::string_view type) {
  return type.starts_with("array of tables");
}

/// The value kind of a schema type, or nothing when the field is not numeric.
std::optional<AxisKind> numeric_kind(std::string_view type) {
  if (type.starts_with("duration") || type == "time") return AxisKind::duration;
  if (type.starts_with("integer")) return AxisKind::integer;
  if (type.starts_with("number") || type.starts_with("probability")) return AxisKind::number;
  return std::nullopt;
}

/// Where a path leads: the schema row of its last key, the table holding it (created when `create`), and the
/// node there now (null when absent).
struct Resolved {
  const FieldDoc* doc = nullptr;
  toml::table* parent = nullptr;
  std::string key;
};

/// Resolves `path` in `root`. With `create`, missing tables on the way are added (so a value can be set);
/// without it, `parent` is null when a table on the way is missing.
Resolved resolve(toml::table& root, const std::string& path, bool create) {
  const std::vector<Segment> segs = split_path(path);
  std::string schema = "";  // the schema table the current segment is a key of
  toml::table* node = &root;
  std::string walked;  // the path so far, for messages
  for (std::size_t k = 0; k < segs.size(); ++k) {
    const Segment& s = segs[k];
    const bool last = k + 1 == segs.size();
    const TableDoc* t = schema_table(schema);
    const FieldDoc* f = nullptr;
    if (t)
      for (const FieldDoc& fd : t->fields)
        if (fd.name == s.name) f = &fd;
    const std::string here = walked.empty() ? s.name : walked + "." + s.name;
    if (!f) {
      std::vector<std::string> keys = schema_keys(schema);
      std::vector<std::string> full;
      for (const std::string& key : keys) full.push_back(walked.empty() ? key : walked + "." + key);
      const std::string near = nearest_name(here, full);
      fail(path, fmt::format("unknown field '{}'{}", here,
                             near.empty() ? fmt::format(" (`locksim explain {}` lists the fields)", schema)
                                          : fmt::format(" (did you mean '{}'?)", near)));
    }
    const std::string_view type = f->type;
    const std::string sub = schema.empty() ? s.name : fmt::format("{}.{}", schema, s.name);
    if (last) {
      if (s.index) fail(path, fmt::format("'{}' is not an array of tables: no index", here));
      Resolved r;
      r.doc = f;
      r.parent = node;
      r.key = s.name;
      return r;
    }
    toml::node* child = node ? node->get(s.name) : nullptr;
    walked = here;
    // [resource] may be one table or an array of them: an index, or an array in the file, makes it an array.
    const bool either = type == "table, or array of tables";
    if (either && s.index && child && child->is_table()) {  // [resource] as one table: resource[0] is it
      if (*s.index != 0)
        fail(path, fmt::format("index {} is past the end: the scenario has one [{}] table ({} or {}[0])",
                               *s.index, s.name, here, here));
      node = child->as_table();
      walked = fmt::format("{}[0]", here);
      schema = sub;
      continue;
    }
    if (is_array_type(type) || (either && (s.index || (child && child->is_array())))) {
      const std::string table_name = std::string(s.name);
      if (!s.index)
        fail(path,
             fmt::format("'{}' is an array of [[{}]] tables: say which, e.g. {}[0]", here, table_name, here));
      toml::array* arr = child ? child->as_array() : nullptr;  // an array absent is an empty one
      const std::size_t n = arr ? arr->size() : 0;
      if (either && !child)
        fail(path, fmt::format("the scenario has no [{}] table: vary {}.FIELD (it is added)", s.name, here));
      if (*s.index >= n)
        fail(path, fmt::format("index {} is past the end: the scenario has {} [[{}]] table(s){}", *s.index, n,
                               table_name, n ? fmt::format(" ({}[0]..{}[{}])", here, here, n - 1) : ""));
      node = (*arr)[*s.index].as_table();
      if (!node) fail(path, fmt::format("{}[{}] is not a table", here, *s.index));
      walked = fmt::format("{}[{}]", here, *s.index);
      schema = sub;
      continue;
    }
    if (s.index) fail(path, fmt::format("'{}' is not an array of tables: no index", here));
    if ((type == "table" || either) && schema_table(sub)) {
      schema = sub;
    } else if (type.find("distribution") != std::string_view::npos) {
      schema = "distribution";
      if (child && !child->is_table())
        fail(path, fmt::format("{} is a single duration in this scenario, not a distribution table: vary {} "
                               "itself",
                               here, here));
    } else {
      fail(path, fmt::format("'{}' is {}, not a table: '{}' goes no further", here, type, here));
    }
    if (!child) {
      // Absent in the file: created to set a value, or (checking a path) followed in the schema alone.
      node =
          create && node ? node->insert_or_assign(s.name, toml::table{}).first->second.as_table() : nullptr;
    } else {
      node = child->as_table();
    }
  }
  fail(path, "an empty path");
}

/// A duration as exact text in the largest unit that divides it: "10s", "1500ms", "7ns".
std::string duration_text(std::int64_t ns) {
  struct U {
    std::int64_t n;
    const char* s;
  };
  for (const U u : {U{3'600'000'000'000, "h"}, U{60'000'000'000, "m"}, U{1'000'000'000, "s"},
                    U{1'000'000, "ms"}, U{1'000, "us"}})
    if (ns != 0 && ns % u.n == 0) return fmt::format("{}{}", ns / u.n, u.s);
  return fmt::format("{}ns", ns);
}

std::optional<double> plain_number(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

toml::table parse_toml(std::string_view toml, const std::string& file) {
  try {
    return toml::parse(toml, file);
  } catch (const toml::parse_error& e) {
    throw InputError(file, static_cast<std::uint32_t>(e.source().begin.line), "syntax",
                     fmt::format("not valid TOML: {}", e.description()));
  }
}

}  // namespace

std::string EnvelopeAxis::format(double v) const {
  switch (kind) {
    case AxisKind::duration: {
      const std::int64_t ns = static_cast<std::int64_t>(std::llround(v));
      if (ns != 0 && std::abs(ns) < 1'000'000) return duration_text(ns);
      return format_time(Duration{ns});
    }
    case AxisKind::integer:
      return fmt::format("{}", static_cast<std::int64_t>(std::llround(v)));
    case AxisKind::number:
      break;
  }
  return fmt::format("{:.6g}", v);
}

double EnvelopeAxis::snap(double v) const {
  return kind == AxisKind::number ? v : std::round(v);
}

namespace {

/// A field and its range (LO..HI), or with `single` one value (LO and HI both that value).
EnvelopeAxis parse_field(std::string_view spec, std::string_view toml, const std::string& file, bool single) {
  const auto eq = spec.find('=');
  const std::string field(spec.substr(0, eq));
  if (eq == std::string_view::npos || field.empty())
    throw InputError(kCmd, 0, single ? "--set" : "--vary",
                     single ? fmt::format("'{}' is not FIELD=VALUE (e.g. --set limits.max_time=200s)", spec)
                            : fmt::format("'{}' is not FIELD=LO..HI (e.g. --vary lock.ttl=1s..60s)", spec));
  std::string range(spec.substr(eq + 1));
  if (single) range = range + ".." + range;
  toml::table root = parse_toml(toml, file);
  const Resolved r = resolve(root, field, false);
  EnvelopeAxis a;
  a.field = field;
  a.type = std::string(r.doc->type);
  const auto kind = numeric_kind(r.doc->type);
  if (!kind)
    fail(field, fmt::format("{} is not a numeric field (its type: {}); --vary takes a duration or a number",
                            field, r.doc->type));
  a.kind = *kind;
  if (r.parent)
    if (const toml::node* now = r.parent->get(r.key); now && now->is_table())
      fail(field, fmt::format("{} is a distribution table in this scenario: vary one of its parameters "
                              "({}.mean, {}.max, ...)",
                              field, field, field));
  const auto dots = single ? range.size() / 2 - 1 : range.find("..");
  if (dots == std::string::npos)
    fail(field, fmt::format("'{}' is not a range LO..HI (e.g. {})", range,
                            a.kind == AxisKind::duration ? "1s..60s" : "0..0.1"));
  const std::string lo_s = range.substr(0, dots), hi_s = range.substr(dots + 2);
  if (a.kind == AxisKind::duration) {
    const bool neg = a.type.find("negative") != std::string::npos;
    for (const std::string* s : {&lo_s, &hi_s}) {
      std::string why;
      const auto d = parse_duration(*s, neg, &why);
      if (!d) {
        if (plain_number(*s) && *s != "0")
          fail(field, fmt::format("{} is a duration: give the range with units, e.g. {}s..{}s (not '{}')",
                                  field, lo_s, hi_s, range));
        fail(field, fmt::format("'{}' is not a duration{}", *s, why.empty() ? "" : ": " + why));
      }
      (s == &lo_s ? a.lo : a.hi) = static_cast<double>(d->count());
    }
  } else {
    for (const std::string* s : {&lo_s, &hi_s}) {
      const auto v = plain_number(*s);
      if (!v)
        fail(field, fmt::format("'{}' is not a plain number ({} takes no units: {})", *s, field, a.type));
      if (a.kind == AxisKind::integer && *v != std::floor(*v))
        fail(field, fmt::format("'{}' is not a whole number ({} is {})", *s, field, a.type));
      (s == &lo_s ? a.lo : a.hi) = *v;
    }
  }
  if (a.lo > a.hi)
    fail(field, fmt::format("LO > HI: {} is above {} (give the range low to high)", lo_s, hi_s));
  if (a.lo == a.hi && !single) fail(field, fmt::format("an empty range: LO and HI are both {}", lo_s));
  return a;
}

}  // namespace

EnvelopeAxis parse_vary(std::string_view spec, std::string_view toml, const std::string& file) {
  return parse_field(spec, toml, file, false);
}

std::string set_fields(std::string_view toml, const std::string& file, const std::vector<std::string>& sets) {
  std::string text(toml);
  for (const std::string& s : sets) {
    EnvelopeAxis a;
    try {
      a = parse_field(s, text, file, true);
    } catch (const InputError& e) {
      std::string field = e.field;
      if (field.starts_with("--vary")) field.replace(0, 6, "--set");
      throw InputError(e.file, e.line, field, e.message);
    }
    text = vary_text(text, file, {a}, {a.lo});
  }
  return text;
}

std::string vary_text(std::string_view toml, const std::string& file, const std::vector<EnvelopeAxis>& axes,
                      const std::vector<double>& values) {
  toml::table root = parse_toml(toml, file);
  // A varied point is a new experiment: the file's expected verdicts were written for its own values, and a
  // protocol named only there must not stop the point from loading (Consul refuses a TTL under 10 s).
  root.erase("expect");
  for (std::size_t k = 0; k < axes.size(); ++k) {
    const EnvelopeAxis& a = axes[k];
    const Resolved r = resolve(root, a.field, true);
    const double v = a.snap(values[k]);
    switch (a.kind) {
      case AxisKind::duration:
        r.parent->insert_or_assign(r.key, duration_text(static_cast<std::int64_t>(v)));
        break;
      case AxisKind::integer:
        r.parent->insert_or_assign(r.key, static_cast<std::int64_t>(v));
        break;
      case AxisKind::number:
        r.parent->insert_or_assign(r.key, v);
        break;
    }
  }
  std::ostringstream out;
  out << root << "\n";
  return out.str();
}

Scenario vary_scenario(std::string_view toml, const std::string& file, const std::vector<EnvelopeAxis>& axes,
                       const std::vector<double>& values) {
  const std::string text = vary_text(toml, file, axes, values);
  try {
    return load_scenario_text(text, file);
  } catch (const InputError& e) {
    std::vector<std::string> at;
    for (std::size_t k = 0; k < axes.size(); ++k)
      at.push_back(fmt::format("{} = {}", axes[k].field, axes[k].format(values[k])));
    // Name the varied field the loader complained of, if it is one of them.
    std::string field = axes.front().field;
    for (const EnvelopeAxis& a : axes)
      if (e.field == a.field || e.field.starts_with(a.field + ".")) field = a.field;
    throw InputError(
        kCmd, 0, "--vary " + field,
        fmt::format("at {} the scenario does not load: {}: {}", fmt::join(at, ", "), e.field, e.message));
  }
}

}  // namespace locksim
