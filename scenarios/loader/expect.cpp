// The [expect] table: the verdict each protocol should get, and the protocols a scenario runs by default.
#include "locksim/scenarios/loader/loader_internal.hpp"

#include "locksim/scenarios/checker/checker.hpp"

namespace locksim::loading {

namespace {
constexpr FieldDoc kExpectFields[] = {
    {"<protocol>", "\"safe\" | \"unsafe\" | table", "",
     "the verdict the protocol should get, or a table of what it should get (expect.<protocol>)"},
    {"protocols", "array of protocol names", "the keys of [expect] in file order",
     "the protocols the scenario runs by default; every protocol with an expectation must be listed"},
};
constexpr FieldDoc kProtocolExpectFields[] = {
    {"verdict", "\"safe\" | \"unsafe\"", "", "the verdict"},
    {"anomalies", "array of anomaly kinds", "",
     "exactly these kinds occur: stale-write-accepted, lost-update, token-regression, fresh-write-rejected, "
     "checkpoint-rewind, duplicate-processing, duplicate-effect, duplicate-enqueue ([] = none)"},
    {"lost_updates", "bound: \"0\", \"> 0\", \">= 3\", \"<= 5%\", \"< 10%\"", "",
     "lost read-modify-write updates, as a count or a percentage of the acknowledged ones"},
    {"tokens", "\"increasing\" | \"regressing\"", "",
     "increasing: every grant has a token and tokens increase strictly in epoch order on each lock; "
     "regressing: not so"},
    {"min_slack", "duration, may be negative", "", "the checker's slack (the nearest miss) is at least this"},
    {"seeds", "\"FIRST..LAST\" (at most 10,000 seeds)", "the scenario's seed",
     "judge over these seeds instead of one"},
    {"over", "\"all\" | \"any\"", "any for verdict = \"unsafe\", else all",
     "with seeds: every seed must meet the expectation, or at least one"},
};

constexpr std::uint64_t kMaxExpectSeeds = 10'000;

/// "0", "> 0", ">= 3", "<= 5%", "< 10%", "== 2".
std::optional<CountBound> parse_bound(std::string_view s) {
  CountBound b;
  b.text = std::string(s);
  auto skip = [&] {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  };
  skip();
  using Op = CountBound::Op;
  for (auto [tok, op] : {std::pair{"<=", Op::le},
                         {">=", Op::ge},
                         {"==", Op::eq},
                         {"<", Op::lt},
                         {">", Op::gt},
                         {"=", Op::eq}}) {
    const std::string_view t(tok);
    if (s.substr(0, t.size()) == t) {
      b.op = op;
      s.remove_prefix(t.size());
      break;
    }
  }
  skip();
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (!s.empty() && s.back() == '%') {
    b.percent = true;
    s.remove_suffix(1);
  }
  if (s.empty() || s.size() > 12) return std::nullopt;
  std::size_t dots = 0;
  for (char c : s) {
    if (c == '.')
      ++dots;
    else if (c < '0' || c > '9')
      return std::nullopt;
  }
  if (dots > 1 || s.front() == '.' || s.back() == '.') return std::nullopt;
  b.value = std::stod(std::string(s));
  if (b.percent && b.value > 100) return std::nullopt;
  if (!b.percent && dots) return std::nullopt;
  return b;
}

}  // namespace

std::vector<TableDoc> expect_tables() {
  return {{"expect", "[expect]: expected verdicts", kExpectFields},
          {"expect.<protocol>", "[expect.<protocol>]: what one protocol should get", kProtocolExpectFields}};
}

Expectation Loader::expectation(const toml::node& v, const std::string& field) const {
  const std::vector<std::pair<std::string, Verdict>> verdicts = {{"safe", Verdict::safe},
                                                                 {"unsafe", Verdict::unsafe}};
  if (v.is_string()) {
    const std::string w = *v.value<std::string>();
    for (const auto& [name, verdict] : verdicts)
      if (name == w) return Expectation(verdict);
    fail(line_of(v), field,
         fmt::format("unknown value '{}'{}", w, suggestion(w, {"safe", "unsafe"}, "one of")));
  }
  if (!v.is_table()) {
    fail(line_of(v), field,
         fmt::format("expected \"safe\", \"unsafe\" or a table {{ verdict = \"unsafe\", ... }}, got {}",
                     type_name(v)));
  }
  const Tab t{v.as_table(), field, line_of(v)};
  only_schema(t, "expect.<protocol>");
  if (t.t->empty()) fail(t.line, field, "an empty expectation checks nothing: give at least a verdict");
  Expectation e;
  e.verdict = enumeration<Verdict>(t, "verdict", verdicts);
  if (const toml::node* a = t.get("anomalies")) {
    if (!a->is_array()) {
      fail(
          line_of(*a), t.field("anomalies"),
          fmt::format("expected an array of anomaly kinds such as [\"lost-update\"], got {}", type_name(*a)));
    }
    const std::vector<std::string> kinds(std::begin(kAnomalyKinds), std::end(kAnomalyKinds));
    std::vector<std::string> got;
    const toml::array& arr = *a->as_array();
    for (std::size_t i = 0; i < arr.size(); ++i) {
      const std::string f = fmt::format("{}[{}]", t.field("anomalies"), i);
      const std::uint32_t l = line_of(arr[i]) ? line_of(arr[i]) : line_of(*a);
      if (!arr[i].is_string()) fail(l, f, fmt::format("expected an anomaly kind, got {}", type_name(arr[i])));
      const std::string k = *arr[i].value<std::string>();
      if (std::find(kinds.begin(), kinds.end(), k) == kinds.end())
        fail(l, f, fmt::format("unknown anomaly kind '{}'{}", k, suggestion(k, kinds, "kinds")));
      if (std::find(got.begin(), got.end(), k) != got.end())
        fail(l, f, fmt::format("'{}' is listed twice", k));
      got.push_back(k);
    }
    e.anomalies = got;
    if (e.verdict && (*e.verdict == Verdict::safe) != got.empty()) {
      fail(line_of(*a), t.field("anomalies"),
           got.empty() ? "verdict = \"unsafe\" with anomalies = [] can never be met: unsafe means an anomaly"
                       : "verdict = \"safe\" with anomalies listed can never be met: any anomaly is unsafe");
    }
  }
  if (auto s = str(t, "lost_updates")) {
    auto b = parse_bound(*s);
    if (!b) {
      fail_at(
          t, "lost_updates",
          fmt::format("'{}' is not a bound: write \"0\", \"> 0\", \">= 3\", \"<= 5%\" (a whole count, or a "
                      "percentage from 0 to 100)",
                      *s));
    }
    e.lost_updates = *b;
  }
  e.tokens = enumeration<Expectation::Tokens>(
      t, "tokens",
      {{"increasing", Expectation::Tokens::increasing}, {"regressing", Expectation::Tokens::regressing}});
  e.min_slack = duration(t, "min_slack", Sign::any);
  if (auto s = str(t, "seeds")) {
    const auto dots = s->find("..");
    std::optional<std::int64_t> a, b;
    auto num = [](std::string_view x) -> std::optional<std::int64_t> {
      if (x.empty() || x.size() > 18) return std::nullopt;
      for (char c : x)
        if (c < '0' || c > '9') return std::nullopt;
      return std::stoll(std::string(x));
    };
    if (dots != std::string::npos) {
      a = num(std::string_view(*s).substr(0, dots));
      b = num(std::string_view(*s).substr(dots + 2));
    }
    if (!a || !b) fail_at(t, "seeds", fmt::format("'{}' is not a seed range: write \"1..20\"", *s));
    if (*b < *a) fail_at(t, "seeds", fmt::format("'{}' is empty: the last seed is below the first", *s));
    if (static_cast<std::uint64_t>(*b - *a) >= kMaxExpectSeeds) {
      fail_at(t, "seeds",
              fmt::format("'{}' is {} seeds: at most {} (use `locksim explore` for more)", *s, *b - *a + 1,
                          kMaxExpectSeeds));
    }
    e.seeds = std::pair<std::uint64_t, std::uint64_t>(*a, *b);
  }
  e.over = enumeration<Expectation::Over>(t, "over",
                                          {{"all", Expectation::Over::all}, {"any", Expectation::Over::any}});
  if (e.over && !e.seeds)
    fail_at(t, "over", "over needs seeds = \"FIRST..LAST\": one run is all and any at once");
  return e;
}

void Loader::expect(const Tab& root, Scenario& s) const {
  if (auto e = sub_table(root, "expect")) {
    std::vector<std::pair<toml::source_position, std::string>> order;
    for (const auto& [k, v] : *e->t) {
      const std::string name(k.str());
      if (name == "protocols") continue;
      const std::uint32_t l =
          k.source().begin.line ? static_cast<std::uint32_t>(k.source().begin.line) : line_of(v);
      protocol_name(name, l, e->field(name));
      s.expect[name] = expectation(v, e->field(name));
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
}

}  // namespace locksim::loading
