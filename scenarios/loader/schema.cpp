#include "locksim/scenarios/loader/schema.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "locksim/scenarios/loader/loader_internal.hpp"

namespace locksim {

const std::vector<TableDoc>& scenario_schema() {
  static const std::vector<TableDoc> all = [] {
    std::vector<TableDoc> order;
    auto take = [&](std::vector<TableDoc> part) { order.insert(order.end(), part.begin(), part.end()); };
    auto root = loading::root_tables();  // top level, lock, resource, clock, node, limits
    order.push_back(root[0]);
    order.push_back(root[1]);
    order.push_back(root[2]);
    take(loading::protocol_tables());
    take(loading::network_tables());
    order.push_back(root[3]);  // clock
    order.push_back(root[4]);  // node
    take(loading::client_tables());
    take(loading::fault_tables());
    order.push_back(root[5]);  // limits
    take(loading::expect_tables());
    return order;
  }();
  return all;
}

const TableDoc* schema_table(std::string_view path) {
  for (const TableDoc& t : scenario_schema())
    if (t.path == path) return &t;
  return nullptr;
}

std::vector<std::string> schema_keys(std::string_view path) {
  std::vector<std::string> keys;
  if (const TableDoc* t = schema_table(path))
    for (const FieldDoc& f : t->fields) keys.emplace_back(f.name);
  return keys;
}

namespace {

std::string table_name(const TableDoc& t) {
  return t.path.empty() ? std::string("(top level)") : std::string(t.path);
}

std::string field_text(const TableDoc& t, const FieldDoc& f) {
  std::string out = fmt::format("{}{}{}\n  type:    {}\n", t.path, t.path.empty() ? "" : ".", f.name, f.type);
  if (!f.def.empty()) out += fmt::format("  default: {}\n", f.def);
  out += fmt::format("  {}\n", f.doc);
  return out;
}

}  // namespace

std::string explain_schema(std::string_view query) {
  const auto& all = scenario_schema();
  if (query.empty()) {
    std::string out = "Tables of a scenario file (locksim explain TABLE or TABLE.FIELD for more):\n";
    for (const TableDoc& t : all) out += fmt::format("  {:<14} {}\n", table_name(t), t.title);
    return out;
  }
  if (const TableDoc* t = schema_table(query)) {
    std::string out = fmt::format("{}\n", t->title);
    for (const FieldDoc& f : t->fields) {
      const std::string def = f.def.empty()         ? std::string()
                              : f.def == "required" ? std::string("required")
                                                    : "default " + std::string(f.def);
      out += fmt::format("  {:<22} {:<34} {}\n", f.name, f.type, def);
    }
    return out;
  }
  // TABLE.FIELD: the longest table path that prefixes the query, then the field.
  std::vector<std::string> every;
  const TableDoc* best = nullptr;
  for (const TableDoc& t : all) {
    for (const FieldDoc& f : t.fields)
      every.push_back(t.path.empty() ? std::string(f.name) : fmt::format("{}.{}", t.path, f.name));
    if (t.path.empty() || (query.size() > t.path.size() && query.substr(0, t.path.size()) == t.path &&
                           query[t.path.size()] == '.')) {
      if (!best || t.path.size() > best->path.size()) best = &t;
    }
  }
  for (const TableDoc& t : all) every.emplace_back(t.path);
  if (best) {
    const std::string_view key = best->path.empty() ? query : query.substr(best->path.size() + 1);
    for (const FieldDoc& f : best->fields)
      if (f.name == key) return field_text(*best, f);
  }
  const std::string near = nearest_name(query, every);
  throw std::invalid_argument(
      near.empty() ? fmt::format("unknown field '{}' (locksim explain lists the tables)", query)
                   : fmt::format("unknown field '{}' (did you mean '{}'?)", query, near));
}

}  // namespace locksim
