#pragma once
/// The scenario format as data: every table a scenario file may hold and every key of it, with its type,
/// range, default and meaning. The loader checks keys against it (unknown key → the nearest valid one),
/// `locksim explain FIELD` prints it, and a test checks the field reference in docs/scenario-format.md
/// against it, so the parser, the help and the documentation cannot drift apart.
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace locksim {

/// One key of a table.
struct FieldDoc {
  std::string_view name;  ///< the key as written in a file
  std::string_view type;  ///< "duration > 0", "integer 1..99", "bool", "\"never\" | \"always\"", ...
  std::string_view def;   ///< its default as written in a file, or "required", or "" when it has none
  std::string_view doc;   ///< what it means, one or two sentences
};

/// One table: `path` is how messages and `explain` name it ("client", "fault.after", "network.link").
struct TableDoc {
  std::string_view path;
  std::string_view title;  ///< "[[client]]: clients and their workload"
  std::span<const FieldDoc> fields;
};

/// Every table, in the order the documentation presents them.
const std::vector<TableDoc>& scenario_schema();

/// The table at `path`, or nullptr.
const TableDoc* schema_table(std::string_view path);

/// The keys of the table at `path` (empty for an unknown path).
std::vector<std::string> schema_keys(std::string_view path);

/// `locksim explain` text for a table ("client"), a field ("client.work", "fault.after.nth"), or the list of
/// tables (empty query). Unknown names throw std::invalid_argument with a did-you-mean.
std::string explain_schema(std::string_view query);

}  // namespace locksim
