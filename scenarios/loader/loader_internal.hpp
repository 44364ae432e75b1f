#pragma once
/// The loader's insides, shared by the files that read one table each (scenarios/loader/*.cpp): the table
/// cursor `Tab`, the typed getters that turn every mistake into an InputError naming file, line and field,
/// and the Loader class. Not installed; nothing outside scenarios/loader/ includes it.
#include <fmt/format.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/loader/schema.hpp"
#include "locksim/scenarios/services.hpp"

namespace locksim::loading {

/// The schema rows of each loader file, gathered by scenario_schema() in the documentation's order.
std::vector<TableDoc> root_tables();
std::vector<TableDoc> protocol_tables();
std::vector<TableDoc> network_tables();
std::vector<TableDoc> client_tables();
std::vector<TableDoc> fault_tables();
std::vector<TableDoc> expect_tables();
/// The rows of [protocol] a client may set for itself ([[client]] protocol = { ... }), in [protocol]'s order.
std::span<const FieldDoc> client_protocol_fields();

/// The notes the program steps of client `proc` (of every client when empty) name, in program order
/// (scenarios/loader/client.cpp).
std::vector<std::string> step_notes(const Scenario& s, const std::string& proc);
/// The most times client `c` can log note `label`, and why (for a trigger's nth), if it is bounded.
std::optional<std::pair<std::uint64_t, std::string>> note_bound(const ClientSpec& c, std::string_view label);

inline std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    default:
      return "nothing";
  }
}

inline std::uint32_t line_of(const toml::node& n) {
  return static_cast<std::uint32_t>(n.source().begin.line);
}

inline std::string join(const std::vector<std::string>& v, std::string_view sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += v[i];
  }
  return out;
}

/// "(did you mean 'x'?)" or "(valid: a, b, c)".
inline std::string suggestion(std::string_view word, const std::vector<std::string>& valid,
                              std::string_view what = "valid") {
  const std::string near = nearest_name(word, valid);
  if (!near.empty()) return fmt::format(" (did you mean '{}'?)", near);
  if (valid.empty()) return {};
  if (valid.size() > 24) {
    std::vector<std::string> head(valid.begin(), valid.begin() + 24);
    return fmt::format(" ({}: {}, ...)", what, join(head));
  }
  return fmt::format(" ({}: {})", what, join(valid));
}

inline bool valid_ident(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.' || c == '+';
    if (!ok) return false;
  }
  return true;
}

/// A table being read, with the path used in messages ("fault[2]", "protocols.redlock").
struct Tab {
  const toml::table* t = nullptr;
  std::string path;
  std::uint32_t line = 1;

  std::string field(std::string_view key) const {
    return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
  }
  const toml::node* get(std::string_view key) const { return t->get(key); }
  bool has(std::string_view key) const { return t->contains(key); }
};

class Loader {
 public:
  explicit Loader(std::string file) : file_(std::move(file)) {}

  Scenario load(const toml::table& root);

 private:
  [[noreturn]] void fail(std::uint32_t line, const std::string& field, const std::string& what) const {
    throw InputError(file_, line == 0 ? 1 : line, field, what);
  }
  [[noreturn]] void fail_at(const Tab& t, std::string_view key, const std::string& what) const {
    const toml::node* n = t.get(key);
    fail(n ? line_of(*n) : t.line, t.field(key), what);
  }

  // Key checks --------------------------------------------------------------------------------------------
  void only(const Tab& t, const std::vector<std::string>& keys) const {
    std::optional<std::string> worst;
    std::uint32_t worst_line = 0;
    for (const auto& [k, v] : *t.t) {
      if (std::find(keys.begin(), keys.end(), k.str()) != keys.end()) continue;
      const std::uint32_t l =
          k.source().begin.line != 0 ? static_cast<std::uint32_t>(k.source().begin.line) : line_of(v);
      if (!worst || l < worst_line) {
        worst = std::string(k.str());
        worst_line = l;
      }
    }
    if (worst) {
      fail(worst_line, t.field(*worst),
           fmt::format("unknown key '{}'{}", *worst, suggestion(*worst, keys, "valid keys")));
    }
  }

  /// The keys the schema lists for `table` (scenarios/loader/schema.cpp), plus `extra`.
  void only_schema(const Tab& t, std::string_view table, const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> keys = schema_keys(table);
    keys.insert(keys.end(), extra.begin(), extra.end());
    only(t, keys);
  }

  // Typed getters ----------------------------------------------------------------------------------------
  const toml::node* need(const Tab& t, std::string_view key, std::string_view what) const {
    const toml::node* n = t.get(key);
    if (!n) fail(t.line, t.field(key), fmt::format("missing: {}", what));
    return n;
  }
  std::optional<std::string> str(const Tab& t, std::string_view key, bool allow_empty = false) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (!n->is_string())
      fail(line_of(*n), t.field(key), fmt::format("expected a string, got {}", type_name(*n)));
    std::string v = *n->value<std::string>();
    if (!allow_empty && v.empty()) fail(line_of(*n), t.field(key), "must not be empty");
    return v;
  }
  std::optional<bool> boolean(const Tab& t, std::string_view key) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (!n->is_boolean()) {
      fail(line_of(*n), t.field(key), fmt::format("expected true or false, got {}", type_name(*n)));
    }
    return *n->value<bool>();
  }
  std::optional<std::int64_t> integer(const Tab& t, std::string_view key, std::int64_t lo,
                                      std::int64_t hi) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (!n->is_integer()) {
      fail(line_of(*n), t.field(key), fmt::format("expected an integer, got {}", type_name(*n)));
    }
    const std::int64_t v = *n->value<std::int64_t>();
    if (v < lo || v > hi) {
      fail(line_of(*n), t.field(key),
           fmt::format("{} is out of range: must be between {} and {}", v, lo, hi));
    }
    return v;
  }
  enum class Sign { positive, non_negative, any, non_zero };
  std::optional<Duration> duration(const Tab& t, std::string_view key, Sign sign) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    return duration_node(*n, t.field(key), sign);
  }
  Duration duration_node(const toml::node& n, const std::string& field, Sign sign) const {
    if (!n.is_string()) {
      fail(line_of(n), field,
           fmt::format("expected a duration string with a unit such as \"15s\" or \"250ms\", got {}",
                       type_name(n)));
    }
    std::string why;
    const std::string text = *n.value<std::string>();
    auto d = parse_duration(text, sign == Sign::any || sign == Sign::non_zero, &why);
    if (!d) fail(line_of(n), field, why);
    if (sign == Sign::positive && *d <= 0ns)
      fail(line_of(n), field, fmt::format("'{}' must be greater than zero", text));
    if (sign == Sign::non_zero && *d == 0ns)
      fail(line_of(n), field, fmt::format("'{}' must not be zero", text));
    return *d;
  }
  /// A fraction in [0, max] written as a float (0.01) or an integer (0, 1), converted exactly to parts per
  /// million.
  std::optional<std::int64_t> fraction_ppm(const Tab& t, std::string_view key, double max) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    double v = 0;
    if (n->is_integer()) {
      v = static_cast<double>(*n->value<std::int64_t>());
    } else if (n->is_floating_point()) {
      v = *n->value<double>();
    } else {
      fail(line_of(*n), t.field(key), fmt::format("expected a number such as 0.01, got {}", type_name(*n)));
    }
    if (!std::isfinite(v) || v < 0 || v > max) {
      fail(line_of(*n), t.field(key), fmt::format("{} is out of range: must be between 0 and {}", v, max));
    }
    const double scaled = v * 1e6;
    const double rounded = std::round(scaled);
    if (std::fabs(scaled - rounded) > 1e-3) {
      fail(line_of(*n), t.field(key), fmt::format("{} is finer than one part per million (0.000001)", v));
    }
    return static_cast<std::int64_t>(rounded);
  }
  std::optional<Tab> sub_table(const Tab& t, std::string_view key) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (!n->is_table())
      fail(line_of(*n), t.field(key),
           fmt::format("expected a table [{}], got {}", t.field(key), type_name(*n)));
    return Tab{n->as_table(), t.field(key), line_of(*n)};
  }
  std::vector<Tab> table_array(const Tab& t, std::string_view key) const {
    std::vector<Tab> out;
    const toml::node* n = t.get(key);
    if (!n) return out;
    const std::string f = t.field(key);
    if (!n->is_array()) {
      fail(line_of(*n), f, fmt::format("expected an array of tables [[{}]], got {}", f, type_name(*n)));
    }
    const toml::array& a = *n->as_array();
    for (std::size_t i = 0; i < a.size(); ++i) {
      const toml::node& e = a[i];
      if (!e.is_table()) {
        fail(line_of(e), fmt::format("{}[{}]", f, i),
             fmt::format("expected a table [[{}]], got {}", f, type_name(e)));
      }
      out.push_back(Tab{e.as_table(), fmt::format("{}[{}]", f, i), line_of(e)});
    }
    return out;
  }
  template <typename E>
  std::optional<E> enumeration(const Tab& t, std::string_view key,
                               const std::vector<std::pair<std::string, E>>& opts) const {
    auto s = str(t, key);
    if (!s) return std::nullopt;
    std::vector<std::string> names;
    for (const auto& [name, e] : opts) {
      if (name == *s) return e;
      names.push_back(name);
    }
    fail_at(t, key, fmt::format("unknown value '{}'{}", *s, suggestion(*s, names, "one of")));
  }

  /// An fsync policy by name ("never", "periodic", "always").
  std::optional<FsyncPolicy> fsync_policy(const Tab& t, std::string_view key) const {
    return enumeration<FsyncPolicy>(t, key,
                                    {{"never", FsyncPolicy::never},
                                     {"periodic", FsyncPolicy::periodic},
                                     {"always", FsyncPolicy::always}});
  }
  /// A clock's `offset` and `drift_ppm` ([[clock]], and a [[node]]'s own clock).
  ClockOptions clock_options(const Tab& t) const {
    ClockOptions o;
    if (auto v = duration(t, "offset", Sign::any)) o.offset = *v;
    if (auto v = integer(t, "drift_ppm", -NodeClock::kMaxDriftPpm, NodeClock::kMaxDriftPpm)) o.drift_ppm = *v;
    return o;
  }

  // Sections -------------------------------------------------------------------------------------------
  void protocol_config(const Tab& t, ProtocolConfig& c, bool allow_ttl) const;
  /// The client-side keys of a [protocol] table (scenarios/loader/protocol.cpp), unset where not given.
  ClientSettings client_settings(const Tab& t) const;
  /// A client's own protocol table: only client-side keys (a service key is refused as such).
  ClientSettings client_protocol(const Tab& t) const;
  DelayDist delay(const toml::node& n, const std::string& field) const;
  void link_options(const Tab& t, LinkOptions& o) const;
  void clients(const Tab& root, Scenario& s);
  /// A client's `steps` (scenarios/loader/client.cpp): the program, its steps, its renewal keys.
  void program(const Tab& c, ClientSpec& spec, ResourceKind kind) const;
  std::vector<ClientStep> steps(const toml::node& n, const std::string& field, int depth,
                                std::size_t& total) const;
  ClientStep step(const toml::node& n, const std::string& field, int depth, std::size_t& total) const;
  void renewal(const Tab& c, const Scenario& s, ClientSpec& spec) const;
  void check_process(const std::string& name, std::uint32_t line, const std::string& field,
                     bool allow_any) const;
  void network(const Tab& root, Scenario& s) const;
  void clocks(const Tab& root, Scenario& s) const;
  /// [resource]'s fields that belong to one kind (max_retries; period, job).
  ResourceSpec resource_table(const Tab& r) const;
  void kind_fields(const Tab& r, ResourceSpec& s) const;
  void expect(const Tab& root, Scenario& s) const;
  Expectation expectation(const toml::node& v, const std::string& field) const;
  void variants(const Tab& root, const Scenario& s) const;
  /// Every protocol the file names (in `protocols`, [protocols.<name>] or [expect]) must accept its config
  /// (Protocol::config_problem), reported at the TTL that config took.
  void protocol_limits(const Tab& root, const Scenario& s) const;
  FaultSpec fault(const Tab& t, const Scenario& s) const;
  Trigger trigger(const Tab& t, const Scenario& s, std::string& proc) const;
  /// A fault's `target`: a process name or role, or an array of them.
  void targets(const Tab& f, Fault::Kind kind, FaultSpec& spec) const;
  /// A process name or a role (scenarios/runner.hpp), as a fault target or partition side names it.
  void target_name(const std::string& name, std::uint32_t line, const std::string& field,
                   bool allow_any) const;
  /// every, times, until, jitter.
  void repetition(const Tab& f, FaultSpec& spec) const;
  std::string protocol_name(const std::string& name, std::uint32_t line, const std::string& field) const;

  std::string file_;
  std::vector<std::string> processes_;  ///< every valid process name, in a stable order
  std::set<std::string> process_set_;
  std::vector<std::string> resource_names_;   ///< every resource, in file order (the first is the default)
  std::vector<std::string> service_summary_;  ///< every process, "redis1..redis5" style, for messages
  DeclaredServices services_;                 ///< what the protocols the file may run declare
  std::vector<std::string> protocol_names_;
  Duration max_time_{60s};
};

}  // namespace locksim::loading
