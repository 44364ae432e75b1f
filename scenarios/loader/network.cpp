// The [network] table, its [[network.link]] overrides, and delay distributions.
#include "scenarios/loader/loader_internal.hpp"

namespace locksim::loading {

namespace {
constexpr FieldDoc kNetworkFields[] = {
    {"delay", "duration or distribution table", "\"1ms\"", "one-way delay of every message"},
    {"loss", "probability", "0", "chance a message is lost"},
    {"duplicate", "probability", "0", "chance a message is delivered twice"},
    {"reorder", "probability", "0", "chance a message gets an extra uniform delay in [0, reorder_extra]"},
    {"reorder_extra", "duration", "\"0\"", "required when reorder > 0"},
    {"link", "array of tables", "", "per-link overrides: [[network.link]]"},
};
constexpr FieldDoc kLinkFields[] = {
    {"from", "process name or \"*\"", "required", "the sender"},
    {"to", "process name or \"*\"", "required", "the receiver (not \"*\" when from is \"*\")"},
    {"delay", "duration or distribution table", "[network] delay", "one-way delay on this link"},
    {"loss", "probability", "[network] loss", "chance a message is lost"},
    {"duplicate", "probability", "[network] duplicate", "chance a message is delivered twice"},
    {"reorder", "probability", "[network] reorder", "chance of an extra uniform delay"},
    {"reorder_extra", "duration", "[network] reorder_extra",
     "the largest extra delay of a reordered message"},
};
constexpr FieldDoc kDelayFields[] = {
    {"kind", "\"constant\" | \"uniform\" | \"exponential\" | \"long_tail\"", "required", "the distribution"},
    {"value", "duration", "", "constant: the value"},
    {"min", "duration", "\"0\"",
     "uniform, exponential, long_tail: the lower bound (an offset added to a draw)"},
    {"max", "duration", "required", "uniform: the upper bound; exponential, long_tail: the cap"},
    {"mean", "duration > 0", "", "exponential: the mean; long_tail: the Pareto scale"},
    {"alpha", "number in (0, 100]", "1.5", "long_tail: the Pareto shape"},
};
}  // namespace

std::vector<TableDoc> network_tables() {
  return {{"network", "[network]", kNetworkFields},
          {"network.link", "[[network.link]]: per-link overrides", kLinkFields},
          {"delay", "a distribution table (network delays)", kDelayFields}};
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
  only_schema(t, "delay");
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

void Loader::network(const Tab& root, Scenario& s) const {
  if (auto n = sub_table(root, "network")) {
    only_schema(*n, "network");
    link_options(*n, s.network.defaults);
    for (const Tab& l : table_array(*n, "link")) {
      only_schema(l, "network.link");
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
}

}  // namespace locksim::loading
