// The [expect] table: the verdict each protocol should get, and the protocols a scenario runs by default.
#include "scenarios/loader/loader_internal.hpp"

namespace locksim::loading {

namespace {
constexpr FieldDoc kExpectFields[] = {
    {"<protocol>", "\"safe\" | \"unsafe\"", "", "the verdict the protocol should get"},
    {"protocols", "array of protocol names", "the keys of [expect] in file order",
     "the protocols the scenario runs by default; every protocol with an expectation must be listed"},
};
}  // namespace

std::vector<TableDoc> expect_tables() {
  return {{"expect", "[expect]: expected verdicts", kExpectFields}};
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
}

}  // namespace locksim::loading
