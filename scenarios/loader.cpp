#include "scenarios/loader.hpp"

#include <fmt/format.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

namespace locksim {

// ------------------------------------------------------------------------------------------------ helpers

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Levenshtein distance with adjacent transpositions counted as one edit (optimal string alignment), so that
  // "fsnyc" is one typo away from "fsync".
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1, 0));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

std::string nearest_name(std::string_view word, const std::vector<std::string>& candidates) {
  if (word.size() > 200) return {};  // not a typo; keep the quadratic distance cheap
  const std::string w = lower(word);
  const std::size_t limit = std::max<std::size_t>(1, (w.size() + 1) / 3);
  std::string best;
  std::size_t best_d = limit + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(w, lower(c));
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::optional<Duration> parse_duration(std::string_view s, bool allow_negative, std::string* why) {
  auto fail = [&](std::string m) -> std::optional<Duration> {
    if (why) *why = std::move(m);
    return std::nullopt;
  };
  const auto quoted = [&] {
    return fmt::format("'{}'", s.size() > 60 ? std::string(s.substr(0, 60)) + "..." : s);
  };
  const char* hint =
      "write a number and a unit, e.g. \"15s\", \"250ms\", \"1.5s\", \"1m30s\" (units: ns, us, ms, s, m, h, "
      "d)";
  if (s.empty()) return fail(fmt::format("empty duration; {}", hint));
  std::size_t i = 0;
  bool neg = false;
  if (s[0] == '-' || s[0] == '+') {
    neg = s[0] == '-';
    i = 1;
  }
  if (s.substr(i) == "0") return Duration{0};
  if (i == s.size()) return fail(fmt::format("{} is not a duration; {}", quoted(), hint));
  const __int128 cap = kMaxDuration.count();
  __int128 total = 0;
  while (i < s.size()) {
    std::uint64_t ip = 0;
    int int_digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (int_digits >= 18)
        return fail(fmt::format("{} is longer than a year, the longest duration allowed", quoted()));
      ip = ip * 10 + static_cast<std::uint64_t>(s[i] - '0');
      ++int_digits;
      ++i;
    }
    std::string frac;
    bool dot = false;
    if (i < s.size() && s[i] == '.') {
      dot = true;
      ++i;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        if (frac.size() >= 40) return fail(fmt::format("{} has more digits than any clock", quoted()));
        frac.push_back(s[i]);
        ++i;
      }
    }
    if (int_digits == 0 && frac.empty()) return fail(fmt::format("{} is not a duration; {}", quoted(), hint));
    if (dot && frac.empty()) return fail(fmt::format("{} is not a duration; {}", quoted(), hint));
    const std::size_t unit_start = i;
    while (i < s.size() && !(s[i] >= '0' && s[i] <= '9') && s[i] != '.') ++i;
    const std::string_view unit = s.substr(unit_start, i - unit_start);
    __int128 unit_ns = 0;
    if (unit == "ns")
      unit_ns = 1;
    else if (unit == "us" || unit == "\xc2\xb5s")
      unit_ns = 1'000;
    else if (unit == "ms")
      unit_ns = 1'000'000;
    else if (unit == "s")
      unit_ns = 1'000'000'000;
    else if (unit == "m")
      unit_ns = 60'000'000'000LL;
    else if (unit == "h")
      unit_ns = 3'600'000'000'000LL;
    else if (unit == "d")
      unit_ns = 86'400'000'000'000LL;
    else if (unit.empty())
      return fail(fmt::format("{} has no unit; {}", quoted(), hint));
    else
      return fail(fmt::format("{} has an unknown unit '{}'; {}", quoted(), unit, hint));
    while (!frac.empty() && frac.back() == '0') frac.pop_back();
    if (frac.size() > 18) return fail(fmt::format("{} is not a whole number of nanoseconds", quoted()));
    __int128 fv = 0, pow10 = 1;
    for (char c : frac) {
      fv = fv * 10 + (c - '0');
      pow10 *= 10;
    }
    if ((fv * unit_ns) % pow10 != 0)
      return fail(fmt::format("{} is not a whole number of nanoseconds", quoted()));
    total += static_cast<__int128>(ip) * unit_ns + fv * unit_ns / pow10;
    if (total > cap)
      return fail(fmt::format("{} is longer than a year, the longest duration allowed", quoted()));
  }
  if (neg && total != 0 && !allow_negative) return fail(fmt::format("{} must not be negative", quoted()));
  return Duration{static_cast<std::int64_t>(neg ? -total : total)};
}

bool is_service_process_name(std::string_view name) {
  for (std::string_view prefix : {"redis", "replica", "sentinel", "raft"}) {
    if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) continue;
    const std::string_view digits = name.substr(prefix.size());
    if (digits[0] == '0') return false;
    return std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  }
  return false;
}

std::vector<std::string> valid_protocol_names() {
  register_builtin_protocols();
  std::set<std::string> names(kKnownProtocolNames.begin(), kKnownProtocolNames.end());
  for (auto& n : ProtocolRegistry::instance().names()) names.insert(n);
  return {names.begin(), names.end()};
}

namespace {

std::string type_name(const toml::node& n) {
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

std::uint32_t line_of(const toml::node& n) {
  return static_cast<std::uint32_t>(n.source().begin.line);
}

std::string join(const std::vector<std::string>& v, std::string_view sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += v[i];
  }
  return out;
}

/// "(did you mean 'x'?)" or "(valid: a, b, c)".
std::string suggestion(std::string_view word, const std::vector<std::string>& valid,
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

bool valid_ident(std::string_view s) {
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

  // Sections -------------------------------------------------------------------------------------------
  void protocol_config(const Tab& t, ProtocolConfig& c, bool allow_ttl) const;
  DelayDist delay(const toml::node& n, const std::string& field) const;
  void link_options(const Tab& t, LinkOptions& o) const;
  void clients(const Tab& root, Scenario& s);
  void check_process(const std::string& name, std::uint32_t line, const std::string& field,
                     bool allow_any) const;
  FaultSpec fault(const Tab& t, const Scenario& s) const;
  Trigger trigger(const Tab& t, const Scenario& s, std::string& proc) const;
  std::string protocol_name(const std::string& name, std::uint32_t line, const std::string& field) const;

  std::string file_;
  std::vector<std::string> processes_;  ///< every valid process name, in a stable order
  std::set<std::string> process_set_;
  std::vector<std::string> service_summary_;  ///< every process, "redis1..redis5" style, for messages
  std::string services_;                      ///< the lock-service processes only, for messages
  std::vector<std::string> protocol_names_;
  Duration max_time_{60s};
};

std::string Loader::protocol_name(const std::string& name, std::uint32_t line,
                                  const std::string& field) const {
  if (std::find(protocol_names_.begin(), protocol_names_.end(), name) == protocol_names_.end()) {
    fail(line, field,
         fmt::format("unknown protocol '{}'{}", name, suggestion(name, protocol_names_, "protocols")));
  }
  return name;
}

void Loader::protocol_config(const Tab& t, ProtocolConfig& c, bool allow_ttl) const {
  std::vector<std::string> keys = {"nodes",
                                   "fsync",
                                   "aof",
                                   "fsync_period",
                                   "replica",
                                   "replication_delay",
                                   "failover_after",
                                   "incr_token",
                                   "drift_factor",
                                   "clock_drift_allowance",
                                   "node_timeout",
                                   "retry_count",
                                   "retry_delay",
                                   "retry_jitter",
                                   "elapsed_recheck",
                                   "keepalive_interval",
                                   "election_timeout_min",
                                   "election_timeout_max",
                                   "heartbeat",
                                   "variant",
                                   "extra"};
  if (allow_ttl) keys.push_back("ttl");
  if (!allow_ttl && t.has("ttl")) {
    fail_at(t, "ttl", "the TTL is set in [lock] (ttl = \"10s\"), or per protocol in [protocols.<name>]");
  }
  only(t, keys);
  if (auto v = duration(t, "ttl", Sign::positive)) c.ttl = *v;
  if (auto v = integer(t, "nodes", 1, 99)) c.nodes = static_cast<std::uint32_t>(*v);
  if (auto v = enumeration<FsyncPolicy>(t, "fsync",
                                        {{"never", FsyncPolicy::never},
                                         {"periodic", FsyncPolicy::periodic},
                                         {"always", FsyncPolicy::always}})) {
    c.fsync = *v;
  }
  if (auto v = boolean(t, "aof")) c.aof = *v;
  if (t.has("fsync") && c.fsync != FsyncPolicy::never && !c.aof) {
    fail_at(t, "fsync", "fsync has no effect without persistence: add aof = true");
  }
  if (auto v = duration(t, "fsync_period", Sign::positive)) c.fsync_period = *v;
  if (auto v = boolean(t, "replica")) c.replica = *v;
  if (auto v = duration(t, "replication_delay", Sign::non_negative)) c.replication_delay = *v;
  if (auto v = duration(t, "failover_after", Sign::non_negative)) c.failover_after = *v;
  if (auto v = boolean(t, "incr_token")) c.incr_token = *v;
  if (auto v = fraction_ppm(t, "drift_factor", 1.0)) c.drift_factor_ppm = *v;
  if (auto v = duration(t, "clock_drift_allowance", Sign::non_negative)) c.clock_drift_allowance = *v;
  if (auto v = duration(t, "node_timeout", Sign::positive)) c.node_timeout = *v;
  if (auto v = integer(t, "retry_count", 0, 1'000'000)) c.retry_count = static_cast<std::uint32_t>(*v);
  if (auto v = duration(t, "retry_delay", Sign::non_negative)) c.retry_delay = *v;
  if (auto v = duration(t, "retry_jitter", Sign::non_negative)) c.retry_jitter = *v;
  if (auto v = boolean(t, "elapsed_recheck")) c.elapsed_recheck = *v;
  if (auto v = duration(t, "keepalive_interval", Sign::non_negative)) c.keepalive_interval = *v;
  if (auto v = duration(t, "election_timeout_min", Sign::positive)) c.election_timeout_min = *v;
  if (auto v = duration(t, "election_timeout_max", Sign::positive)) c.election_timeout_max = *v;
  if (auto v = duration(t, "heartbeat", Sign::positive)) c.heartbeat = *v;
  if (c.election_timeout_min > c.election_timeout_max) {
    const char* k = t.has("election_timeout_max") ? "election_timeout_max" : "election_timeout_min";
    fail_at(t, k,
            fmt::format("election_timeout_min ({}) is greater than election_timeout_max ({})",
                        format_time(c.election_timeout_min), format_time(c.election_timeout_max)));
  }
  if (c.heartbeat >= c.election_timeout_min && (t.has("heartbeat") || t.has("election_timeout_min"))) {
    const char* k = t.has("heartbeat") ? "heartbeat" : "election_timeout_min";
    fail_at(t, k,
            fmt::format(
                "heartbeat ({}) must be shorter than election_timeout_min ({}), or followers start elections "
                "against a live leader",
                format_time(c.heartbeat), format_time(c.election_timeout_min)));
  }
  if (auto v = str(t, "variant", true)) c.variant = *v;
  if (auto x = sub_table(t, "extra")) {
    for (const auto& [k, v] : *x->t) {
      if (!v.is_string()) {
        fail(line_of(v), x->field(k.str()),
             fmt::format("extra parameters are strings (write it in quotes), got {}", type_name(v)));
      }
      c.extra[std::string(k.str())] = *v.value<std::string>();
    }
  }
}

DelayDist Loader::delay(const toml::node& n, const std::string& field) const {
  if (n.is_string()) return DelayDist::constant_of(duration_node(n, field, Sign::non_negative));
  if (!n.is_table()) {
    fail(
        line_of(n), field,
        fmt::format(
            "expected a duration (\"2ms\") or a table {{ kind = \"uniform\", min = ..., max = ... }}, got {}",
            type_name(n)));
  }
  Tab t{n.as_table(), field, line_of(n)};
  only(t, {"kind", "value", "min", "max", "mean", "alpha"});
  need(t, "kind", "kind = \"constant\" | \"uniform\" | \"exponential\" | \"long_tail\"");
  using K = DelayDist::Kind;
  const K kind = *enumeration<K>(t, "kind",
                                 {{"constant", K::constant},
                                  {"uniform", K::uniform},
                                  {"exponential", K::exponential},
                                  {"long_tail", K::long_tail}});
  const std::map<K, std::vector<std::string>> applies = {
      {K::constant, {"kind", "value"}},
      {K::uniform, {"kind", "min", "max"}},
      {K::exponential, {"kind", "min", "max", "mean"}},
      {K::long_tail, {"kind", "min", "max", "mean", "alpha"}}};
  const auto& ok = applies.at(kind);
  for (const auto& [k, v] : *t.t) {
    if (std::find(ok.begin(), ok.end(), k.str()) == ok.end()) {
      fail(line_of(v), t.field(k.str()),
           fmt::format("'{}' does not apply to a {} delay (it takes: {})", k.str(), *str(t, "kind"),
                       join(ok)));
    }
  }
  DelayDist d;
  d.kind = kind;
  if (kind == K::constant) {
    need(t, "value", "value = \"2ms\"");
    return DelayDist::constant_of(*duration(t, "value", Sign::non_negative));
  }
  d.min = duration(t, "min", Sign::non_negative).value_or(0ns);
  need(t, "max", kind == K::uniform ? "max (upper bound)" : "max (the cap on one delay)");
  d.max = *duration(t, "max", Sign::non_negative);
  if (d.max < d.min)
    fail_at(t, "max", fmt::format("max ({}) is below min ({})", format_time(d.max), format_time(d.min)));
  if (kind == K::uniform) {
    d.mean = d.min;
    return d;
  }
  need(t, "mean", kind == K::exponential ? "mean (of the exponential part)" : "mean (the Pareto scale)");
  d.mean = *duration(t, "mean", Sign::positive);
  if (kind == K::long_tail) {
    if (const toml::node* a = t.get("alpha")) {
      if (!a->is_number())
        fail(line_of(*a), t.field("alpha"), fmt::format("expected a number, got {}", type_name(*a)));
      const double alpha = *a->value<double>();
      if (!std::isfinite(alpha) || alpha <= 0 || alpha > 100) {
        fail(line_of(*a), t.field("alpha"),
             fmt::format("{} is out of range: the Pareto shape must be in (0, 100]", alpha));
      }
      d.alpha = alpha;
    }
  }
  return d;
}

void Loader::link_options(const Tab& t, LinkOptions& o) const {
  if (const toml::node* n = t.get("delay")) o.delay = delay(*n, t.field("delay"));
  if (auto v = fraction_ppm(t, "loss", 1.0)) o.loss_ppm = static_cast<std::uint32_t>(*v);
  if (auto v = fraction_ppm(t, "duplicate", 1.0)) o.duplicate_ppm = static_cast<std::uint32_t>(*v);
  if (auto v = fraction_ppm(t, "reorder", 1.0)) o.reorder_ppm = static_cast<std::uint32_t>(*v);
  if (auto v = duration(t, "reorder_extra", Sign::non_negative)) o.reorder_extra = *v;
  if (t.has("reorder") && o.reorder_ppm != 0 && o.reorder_extra == 0ns) {
    fail_at(t, "reorder", "reorder needs reorder_extra (the largest extra delay of a reordered message)");
  }
}

void Loader::check_process(const std::string& name, std::uint32_t line, const std::string& field,
                           bool allow_any) const {
  if (allow_any && name == "*") return;
  if (process_set_.count(name)) return;
  if (is_service_process_name(name)) {
    fail(line, field,
         fmt::format(
             "unknown process '{}': this file's lock services have {} ([protocol] nodes sets the count; "
             "replica1 and sentinel1 need replica = true)",
             name, services_));
  }
  const std::string near = nearest_name(name, processes_);
  if (!near.empty()) fail(line, field, fmt::format("unknown process '{}' (did you mean '{}'?)", name, near));
  fail(line, field,
       fmt::format("unknown process '{}' (processes: {}{})", name, join(service_summary_),
                   allow_any ? ", or \"*\" for any" : ""));
}

void Loader::clients(const Tab& root, Scenario& s) {
  std::map<std::string, std::uint32_t> seen;  // name -> line
  for (const Tab& c : table_array(root, "client")) {
    only(c, {"name", "count", "stagger", "start", "acquisitions", "writes_per_hold", "work", "work_min",
             "work_max", "think", "think_min", "think_max", "retry_delay", "give_up_at", "read_modify_write",
             "check_before_write", "extend_before_write", "release"});
    ClientSpec spec;
    const auto count = integer(c, "count", 1, kMaxClients);
    const std::string name =
        str(c, "name").value_or(count ? "client" : fmt::format("client{}", s.clients.size() + 1));
    if (!valid_ident(name)) {
      fail_at(c, "name", fmt::format("'{}' is not a valid name: use letters, digits, '_', '-', '.'", name));
    }
    if (auto v = duration(c, "start", Sign::non_negative)) spec.start = *v;
    if (auto v = integer(c, "acquisitions", 1, kMaxAcquisitions))
      spec.acquisitions = static_cast<std::uint32_t>(*v);
    if (auto v = integer(c, "writes_per_hold", 0, 1'000'000))
      spec.writes_per_hold = static_cast<std::uint32_t>(*v);
    auto range = [&](const char* both, const char* lo, const char* hi, Duration& out_lo, Duration& out_hi) {
      if (c.has(both) && (c.has(lo) || c.has(hi))) {
        fail_at(c, both, fmt::format("give either {} or {}/{}, not both", both, lo, hi));
      }
      if (auto v = duration(c, both, Sign::non_negative)) out_lo = out_hi = *v;
      auto l = duration(c, lo, Sign::non_negative);
      auto h = duration(c, hi, Sign::non_negative);
      if (l) out_lo = *l;
      out_hi = h ? *h : (l ? *l : out_hi);
      if (out_lo > out_hi) {
        fail_at(c, hi,
                fmt::format("{} ({}) is below {} ({})", hi, format_time(out_hi), lo, format_time(out_lo)));
      }
    };
    range("work", "work_min", "work_max", spec.work_min, spec.work_max);
    range("think", "think_min", "think_max", spec.think_min, spec.think_max);
    if (auto v = duration(c, "retry_delay", Sign::non_negative)) spec.retry_delay = *v;
    if (auto v = duration(c, "give_up_at", Sign::non_negative)) spec.give_up_at = *v;
    if (auto v = boolean(c, "read_modify_write")) spec.read_modify_write = *v;
    if (auto v = boolean(c, "check_before_write")) spec.check_before_write = *v;
    if (auto v = boolean(c, "extend_before_write")) spec.extend_before_write = *v;
    if (auto v = boolean(c, "release")) spec.release = *v;
    Duration stagger{0};
    if (auto v = duration(c, "stagger", Sign::non_negative)) {
      if (!count) fail_at(c, "stagger", "stagger spaces out the starts of `count` clients: add count = N");
      stagger = *v;
    }
    const std::uint32_t n = count ? static_cast<std::uint32_t>(*count) : 1;
    if (s.clients.size() + n > kMaxClients) {
      fail_at(c, count ? "count" : "name",
              fmt::format("too many clients: at most {} in a scenario", kMaxClients));
    }
    for (std::uint32_t k = 1; k <= n; ++k) {
      ClientSpec one = spec;
      one.name = count ? fmt::format("{}{}", name, k) : name;
      // start + stagger * (k - 1) >= max_time, computed without overflow.
      const bool late =
          spec.start >= max_time_ ||
          (k > 1 && stagger.count() > (max_time_ - spec.start).count() / static_cast<std::int64_t>(k - 1));
      one.start = late ? max_time_ : spec.start + stagger * (k - 1);
      if (late || one.start >= max_time_) {
        fail_at(c, c.has("stagger") ? "stagger" : "start",
                fmt::format("client '{}' would not start before limits.max_time ({}): it would never run",
                            one.name, format_time(max_time_)));
      }
      if (auto it = seen.find(one.name); it != seen.end()) {
        fail_at(c, c.has("name") ? "name" : "count",
                fmt::format("duplicate client name '{}' (already defined at line {})", one.name, it->second));
      }
      if (process_set_.count(one.name)) {
        fail_at(c, c.has("name") ? "name" : "count",
                fmt::format("client name '{}' is already the name of a service process", one.name));
      }
      seen.emplace(one.name, c.line);
      s.clients.push_back(std::move(one));
    }
  }
}

Trigger Loader::trigger(const Tab& f, const Scenario& s, std::string& proc) const {
  const bool has_at = f.has("at"), has_after = f.has("after");
  if (has_at && has_after) fail_at(f, "after", "a fault has one trigger: `at` or `after`, not both");
  if (!has_at && !has_after) {
    fail(f.line, f.field("at"),
         "missing trigger: at = \"2s\", or after = { process = \"client1\", note = \"acquired\" }");
  }
  if (has_at) {
    const Duration at = *duration(f, "at", Sign::non_negative);
    if (at > max_time_) {
      fail_at(f, "at",
              fmt::format("the fault at {} comes after limits.max_time ({}): it would never fire",
                          format_time(at), format_time(max_time_)));
    }
    return Trigger::at_time(at);
  }
  const toml::node* an = f.get("after");
  if (!an->is_table()) {
    fail(line_of(*an), f.field("after"),
         fmt::format("expected a table {{ process = \"client1\", note = \"acquired\" }}, got {}",
                     type_name(*an)));
  }
  Tab a{an->as_table(), f.field("after"), line_of(*an)};
  only(a, {"process", "note", "send", "receive", "nth", "delay"});
  Trigger t;
  need(a, "process", "process = \"client1\" (or \"*\" for any process)");
  proc = *str(a, "process");
  check_process(proc, line_of(*a.get("process")), a.field("process"), true);
  if (proc == "*") proc.clear();
  const int kinds = int(a.has("note")) + int(a.has("send")) + int(a.has("receive"));
  if (kinds == 0)
    fail(a.line, a.field("note"),
         "missing event: note = \"acquired\", send = \"TYPE\" or receive = \"TYPE\"");
  if (kinds > 1) fail(a.line, a.field("note"), "give one event: note, send or receive");
  if (a.has("note")) {
    t.kind = Trigger::Kind::note;
    t.label = *str(a, "note");
    std::vector<std::string> labels(note::all.begin(), note::all.end());
    if (std::find(labels.begin(), labels.end(), t.label) == labels.end()) {
      fail_at(a, "note",
              fmt::format("no process ever logs the note '{}', so the fault would never fire{}", t.label,
                          suggestion(t.label, labels, "notes")));
    }
  } else {
    t.kind = a.has("send") ? Trigger::Kind::send : Trigger::Kind::receive;
    t.label = *str(a, a.has("send") ? "send" : "receive");
  }
  t.nth = 1;
  if (const toml::node* nn = a.get("nth")) {
    if (nn->is_integer() && *nn->value<std::int64_t>() == 0) {
      fail(line_of(*nn), a.field("nth"), "nth = 0 can never fire: the first matching event is nth = 1");
    }
    t.nth = static_cast<std::uint32_t>(*integer(a, "nth", 1, kMaxAcquisitions));
  }
  if (auto d = duration(a, "delay", Sign::non_negative)) {
    if (*d > max_time_) {
      fail_at(a, "delay",
              fmt::format("a delay of {} is beyond limits.max_time ({}): the fault would never fire",
                          format_time(*d), format_time(max_time_)));
    }
    t.delay = *d;
  }
  // Client notes happen a bounded number of times: a trigger waiting for more can never fire.
  if (t.kind == Trigger::Kind::note && !proc.empty()) {
    auto it =
        std::find_if(s.clients.begin(), s.clients.end(), [&](const ClientSpec& c) { return c.name == proc; });
    if (it != s.clients.end()) {
      const std::uint64_t holds = it->acquisitions;
      const std::uint64_t writes = holds * it->writes_per_hold;
      std::optional<std::uint64_t> most;
      std::string why;
      if (t.label == note::acquired) most = holds, why = "acquisitions";
      if (t.label == note::released) most = it->release ? holds : 0, why = "acquisitions with release = true";
      if (t.label == note::write) most = writes, why = "acquisitions × writes_per_hold";
      if (t.label == note::lease_check) {
        most = it->check_before_write ? writes : 0, why = "writes with check_before_write = true";
      }

      if (most && t.nth > *most) {
        fail(a.get("nth") ? line_of(*a.get("nth")) : line_of(*a.get("note")),
             a.field(a.get("nth") ? "nth" : "note"),
             fmt::format("{} logs '{}' at most {} time(s) ({}), so nth = {} can never fire", proc, t.label,
                         *most, why, t.nth));
      }
    }
  }
  return t;
}

FaultSpec Loader::fault(const Tab& f, const Scenario& s) const {
  const std::vector<std::string> all = {"kind",     "at",     "after", "target",     "peer",
                                        "duration", "extra",  "ppm",   "power_loss", "one_way",
                                        "count",    "side_a", "side_b"};
  only(f, all);
  need(f, "kind",
       "kind = \"pause\" | \"crash\" | \"restart\" | \"clock_jump\" | \"clock_drift\" | \"partition\" | "
       "\"heal\" | \"delay_spike\"");
  using K = Fault::Kind;
  const K kind = *enumeration<K>(f, "kind",
                                 {{"pause", K::pause},
                                  {"crash", K::crash},
                                  {"restart", K::restart},
                                  {"clock_jump", K::clock_jump},
                                  {"clock_drift", K::clock_drift},
                                  {"partition", K::partition},
                                  {"heal", K::heal},
                                  {"delay_spike", K::delay_spike}});
  const std::string kind_name = *str(f, "kind");
  const std::map<K, std::vector<std::string>> applies = {
      {K::pause, {"target", "duration"}},
      {K::crash, {"target", "duration", "power_loss"}},
      {K::restart, {"target"}},
      {K::clock_jump, {"target", "duration"}},
      {K::clock_drift, {"target", "ppm"}},
      {K::partition, {"side_a", "side_b", "duration", "one_way"}},
      {K::heal, {}},
      {K::delay_spike, {"target", "peer", "extra", "duration", "count"}}};
  const auto& ok = applies.at(kind);
  for (const auto& [k, v] : *f.t) {
    const std::string key(k.str());
    if (key == "kind" || key == "at" || key == "after") continue;
    if (std::find(ok.begin(), ok.end(), key) == ok.end()) {
      fail(line_of(v), f.field(key),
           fmt::format("'{}' does not apply to a {} fault{}", key, kind_name,
                       ok.empty() ? std::string(" (it takes no parameters)")
                                  : fmt::format(" (it takes: {})", join(ok))));
    }
  }
  FaultSpec spec;
  spec.line = f.line;
  spec.fault.kind = kind;
  spec.fault.when = trigger(f, s, spec.trigger_proc);

  const bool needs_target = kind != K::partition && kind != K::heal && kind != K::delay_spike;
  if (needs_target)
    need(f, "target", fmt::format("target = \"<process>\" (the process the {} hits)", kind_name));
  if (auto t = str(f, "target")) {
    check_process(*t, line_of(*f.get("target")), f.field("target"), kind == K::delay_spike);
    spec.target = *t == "*" ? "" : *t;
  }
  if (auto p = str(f, "peer")) {
    check_process(*p, line_of(*f.get("peer")), f.field("peer"), true);
    spec.peer = *p == "*" ? "" : *p;
  }
  switch (kind) {
    case K::pause:
      need(f, "duration", "duration = \"15s\" (how long the process stops)");
      spec.fault.duration = *duration(f, "duration", Sign::positive);
      break;
    case K::crash:
      spec.fault.duration = duration(f, "duration", Sign::non_negative).value_or(0ns);
      spec.fault.power_loss = boolean(f, "power_loss").value_or(false);
      break;
    case K::clock_jump:
      need(f, "duration", "duration = \"15s\" (how far the wall clock jumps; negative = back)");
      spec.fault.duration = *duration(f, "duration", Sign::non_zero);
      break;
    case K::clock_drift:
      need(f, "ppm", "ppm = 100 (the new drift in parts per million)");
      spec.fault.ppm = *integer(f, "ppm", -NodeClock::kMaxDriftPpm, NodeClock::kMaxDriftPpm);
      break;
    case K::partition: {
      need(f, "side_a", "side_a = [\"client1\", ...]");
      need(f, "side_b", "side_b = [\"redis4\", ...]");
      std::map<std::string, char> side_of;
      for (const char* key : {"side_a", "side_b"}) {
        const toml::node* n = f.get(key);
        if (!n->is_array()) {
          fail(line_of(*n), f.field(key),
               fmt::format("expected an array of process names, got {}", type_name(*n)));
        }
        const toml::array& a = *n->as_array();
        if (a.empty()) fail(line_of(*n), f.field(key), "a partition side must name at least one process");
        auto& out = key[5] == 'a' ? spec.side_a : spec.side_b;
        for (std::size_t i = 0; i < a.size(); ++i) {
          const std::string field = fmt::format("{}[{}]", f.field(key), i);
          const toml::node& e = a[i];
          const std::uint32_t l = line_of(e) ? line_of(e) : line_of(*n);
          if (!e.is_string()) fail(l, field, fmt::format("expected a process name, got {}", type_name(e)));
          const std::string name = *e.value<std::string>();
          check_process(name, l, field, false);
          if (auto it = side_of.find(name); it != side_of.end()) {
            fail(l, field,
                 it->second == key[5] ? fmt::format("'{}' is listed twice", name)
                                      : fmt::format("'{}' is on both sides of the partition", name));
          }
          side_of.emplace(name, key[5]);
          out.push_back(name);
        }
      }
      spec.fault.duration = duration(f, "duration", Sign::non_negative).value_or(0ns);
      spec.fault.one_way = boolean(f, "one_way").value_or(false);
      break;
    }
    case K::delay_spike:
      need(f, "extra", "extra = \"15s\" (the delay added to each matching message)");
      spec.fault.extra = *duration(f, "extra", Sign::positive);
      spec.fault.duration = duration(f, "duration", Sign::non_negative).value_or(0ns);
      spec.fault.count = static_cast<std::uint32_t>(integer(f, "count", 0, kMaxAcquisitions).value_or(0));
      break;
    case K::restart:
    case K::heal:
      break;
  }
  return spec;
}

Scenario Loader::load(const toml::table& root_table) {
  Scenario s;
  s.file = file_;
  Tab root{&root_table, "", 1};
  only(root, {"name", "title", "source", "teaches", "seed", "lock", "resource", "protocol", "protocols",
              "network", "clock", "client", "fault", "limits", "expect", "replay"});
  protocol_names_ = valid_protocol_names();

  s.name = str(root, "name").value_or(std::filesystem::path(file_).stem().string());
  if (!valid_ident(s.name)) {
    if (root.has("name"))
      fail_at(root, "name",
              fmt::format("'{}' is not a valid name: use letters, digits, '_', '-', '.'", s.name));
    s.name = "scenario";
  }
  s.title = str(root, "title").value_or("");
  s.source = str(root, "source").value_or("");
  s.teaches = str(root, "teaches").value_or("");
  if (auto v = integer(root, "seed", 0, static_cast<std::int64_t>(Scenario::kMaxSeed)))
    s.seed = static_cast<std::uint64_t>(*v);

  if (auto l = sub_table(root, "limits")) {
    only(*l, {"max_time", "max_events", "max_mailbox"});
    if (auto v = duration(*l, "max_time", Sign::positive)) s.max_time = *v;
    // At most the kernel's own default: a file cannot ask for more events (and so more trace memory) than
    // that.
    if (auto v = integer(*l, "max_events", 1, 50'000'000LL)) s.max_events = static_cast<std::uint64_t>(*v);
    if (auto v = integer(*l, "max_mailbox", 1, 1'000'000LL)) s.max_mailbox = static_cast<std::size_t>(*v);
  }
  max_time_ = s.max_time;

  if (auto l = sub_table(root, "lock")) {
    only(*l, {"key", "ttl"});
    if (auto v = str(*l, "key")) s.lock_key = *v;
    if (auto v = duration(*l, "ttl", Sign::positive)) s.config.ttl = *v;
  }
  if (auto r = sub_table(root, "resource")) {
    only(*r, {"name", "key", "mode", "variant"});
    if (auto v = str(*r, "name")) {
      if (!valid_ident(*v)) fail_at(*r, "name", fmt::format("'{}' is not a valid process name", *v));
      s.resource_name = *v;
    }
    if (auto v = str(*r, "key")) s.resource_key = *v;
    if (r->has("mode")) {
      const auto m = *enumeration<int>(*r, "mode", {{"auto", 0}, {"unfenced", 1}, {"fenced", 2}});
      if (m == 1) s.resource_mode = ResourceMode::unfenced;
      if (m == 2) s.resource_mode = ResourceMode::fenced;
    }
    if (auto v = str(*r, "variant", true)) s.resource_variant = *v;
  }

  if (auto p = sub_table(root, "protocol")) protocol_config(*p, s.config, false);
  if (auto ps = sub_table(root, "protocols")) {
    for (const auto& [k, v] : *ps->t) {
      const std::string name(k.str());
      const std::string field = ps->field(name);
      protocol_name(name,
                    k.source().begin.line ? static_cast<std::uint32_t>(k.source().begin.line) : line_of(v),
                    field);
      if (!v.is_table())
        fail(line_of(v), field,
             fmt::format("expected a table [protocols.\"{}\"], got {}", name, type_name(v)));
      ProtocolConfig c = s.config;
      protocol_config(Tab{v.as_table(), fmt::format("protocols.\"{}\"", name), line_of(v)}, c, true);
      s.per_protocol[name] = std::move(c);
    }
  }

  // Service process names: the union over every protocol the file may run (redis 1 node, redlock 5, raft 3
  // unless `nodes` says otherwise). A world only has some of them; the builder ignores names its protocol
  // lacks.
  std::uint32_t redis_n = s.config.nodes ? s.config.nodes : 5;
  std::uint32_t raft_n = s.config.nodes ? s.config.nodes : 3;
  bool replica = s.config.replica;
  for (const auto& [name, c] : s.per_protocol) {
    if (name == "redis" || name == "redis+incr") redis_n = std::max(redis_n, c.nodes ? c.nodes : 1u);
    if (name == "redlock") redis_n = std::max(redis_n, c.nodes ? c.nodes : 5u);
    if (name == "lease" || name == "lease+fence") raft_n = std::max(raft_n, c.nodes ? c.nodes : 3u);
    replica = replica || c.replica;
  }
  auto add = [&](const std::string& n) {
    if (process_set_.insert(n).second) processes_.push_back(n);
  };
  add(s.resource_name);
  for (std::uint32_t i = 1; i <= redis_n; ++i) add(fmt::format("redis{}", i));
  if (replica) add("replica1");
  if (replica) add("sentinel1");
  for (std::uint32_t i = 1; i <= raft_n; ++i) add(fmt::format("raft{}", i));

  clients(root, s);
  if (s.clients.empty()) fail(1, "client", "a scenario needs at least one [[client]] (name = \"client1\")");
  for (const auto& c : s.clients) add(c.name);
  // For messages: clients first (what people mostly target), then the services compactly.
  if (s.clients.size() <= 6) {
    for (const auto& c : s.clients) service_summary_.push_back(c.name);
  } else {
    service_summary_.push_back(fmt::format("{}..{}", s.clients.front().name, s.clients.back().name));
  }
  services_ =
      fmt::format("{}{}, raft1..raft{}", redis_n == 1 ? "redis1" : fmt::format("redis1..redis{}", redis_n),
                  replica ? ", replica1, sentinel1" : "", raft_n);
  service_summary_.push_back(s.resource_name);
  service_summary_.push_back(services_);

  if (auto n = sub_table(root, "network")) {
    only(*n, {"delay", "loss", "duplicate", "reorder", "reorder_extra", "link"});
    link_options(*n, s.network.defaults);
    for (const Tab& l : table_array(*n, "link")) {
      only(l, {"from", "to", "delay", "loss", "duplicate", "reorder", "reorder_extra"});
      LinkSpec spec;
      need(l, "from", "from = \"<process>\" (or \"*\")");
      need(l, "to", "to = \"<process>\" (or \"*\")");
      spec.from = *str(l, "from");
      spec.to = *str(l, "to");
      check_process(spec.from, line_of(*l.get("from")), l.field("from"), true);
      check_process(spec.to, line_of(*l.get("to")), l.field("to"), true);
      if (spec.from == "*" && spec.to == "*") {
        fail_at(l, "to", "a link from \"*\" to \"*\" is every link: set it in [network] instead");
      }
      spec.options = s.network.defaults;
      link_options(l, spec.options);
      s.links.push_back(std::move(spec));
    }
  }

  std::map<std::string, std::uint32_t> clock_nodes;
  for (const Tab& c : table_array(root, "clock")) {
    only(c, {"node", "offset", "drift_ppm"});
    ClockSpec spec;
    need(c, "node", "node = \"<process>\"");
    spec.node = *str(c, "node");
    check_process(spec.node, line_of(*c.get("node")), c.field("node"), false);
    if (auto it = clock_nodes.find(spec.node); it != clock_nodes.end()) {
      fail_at(c, "node", fmt::format("the clock of '{}' is already set at line {}", spec.node, it->second));
    }
    clock_nodes.emplace(spec.node, c.line);
    if (auto v = duration(c, "offset", Sign::any)) spec.clock.offset = *v;
    if (auto v = integer(c, "drift_ppm", -NodeClock::kMaxDriftPpm, NodeClock::kMaxDriftPpm))
      spec.clock.drift_ppm = *v;
    s.clocks.push_back(std::move(spec));
  }

  for (const Tab& f : table_array(root, "fault")) s.faults.push_back(fault(f, s));

  if (auto e = sub_table(root, "expect")) {
    std::vector<std::pair<toml::source_position, std::string>> order;
    for (const auto& [k, v] : *e->t) {
      const std::string name(k.str());
      if (name == "protocols") continue;
      const std::uint32_t l =
          k.source().begin.line ? static_cast<std::uint32_t>(k.source().begin.line) : line_of(v);
      protocol_name(name, l, e->field(name));
      const auto verdict =
          enumeration<Verdict>(*e, name, {{"safe", Verdict::safe}, {"unsafe", Verdict::unsafe}});
      s.expect[name] = *verdict;
      order.emplace_back(k.source().begin, name);
    }
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return std::pair(a.first.line, a.first.column) < std::pair(b.first.line, b.first.column);
    });
    if (const toml::node* pn = e->get("protocols")) {
      if (!pn->is_array()) {
        fail(line_of(*pn), e->field("protocols"),
             fmt::format("expected an array of protocol names, got {}", type_name(*pn)));
      }
      const toml::array& a = *pn->as_array();
      for (std::size_t i = 0; i < a.size(); ++i) {
        const std::string field = fmt::format("{}[{}]", e->field("protocols"), i);
        const std::uint32_t l = line_of(a[i]) ? line_of(a[i]) : line_of(*pn);
        if (!a[i].is_string())
          fail(l, field, fmt::format("expected a protocol name, got {}", type_name(a[i])));
        const std::string name = *a[i].value<std::string>();
        protocol_name(name, l, field);
        if (std::find(s.protocols.begin(), s.protocols.end(), name) != s.protocols.end()) {
          fail(l, field, fmt::format("'{}' is listed twice", name));
        }
        s.protocols.push_back(name);
      }
      for (const auto& [pos, name] : order) {
        if (std::find(s.protocols.begin(), s.protocols.end(), name) == s.protocols.end()) {
          fail(static_cast<std::uint32_t>(pos.line), e->field(name),
               fmt::format(
                   "'{}' has an expectation but is not in expect.protocols, so it would never be checked",
                   name));
        }
      }
    } else {
      for (const auto& [pos, name] : order) s.protocols.push_back(name);
    }
  }
  return s;
}

}  // namespace

Scenario load_scenario_text(std::string_view text, const std::string& filename) {
  toml::table root;
  try {
    root = toml::parse(text, filename);
  } catch (const toml::parse_error& e) {
    const auto line = static_cast<std::uint32_t>(e.source().begin.line);
    throw InputError(filename, line == 0 ? 1 : line, "syntax",
                     fmt::format("not valid TOML: {}", e.description()));
  }
  return Loader(filename).load(root);
}

Scenario load_scenario_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(path, 0, "file", "is a directory, not a scenario file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, 0, "file", fmt::format("cannot open: {}", std::strerror(errno)));
  constexpr std::size_t kMaxBytes = 16u << 20;
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxBytes)
      throw InputError(path, 0, "file", "is larger than 16 MiB: not a scenario file");
  }
  return load_scenario_text(text, path);
}

}  // namespace locksim
