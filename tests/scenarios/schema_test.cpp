// The scenario schema against its two readers: the field reference in docs/scenario-format.md (every table's
// keys, no more and no fewer) and `locksim explain`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/loader/schema.hpp"

using namespace locksim;
namespace fs = std::filesystem;

namespace {

const fs::path kRepo = LOCKSIM_SOURCE_DIR;

std::string doc_text() {
  std::ifstream in(kRepo / "docs" / "scenario-format.md", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_subtable(const FieldDoc& f) {
  return f.type == "table" || f.type == "array of tables" || f.type == "table of tables" ||
         f.type == "table, or array of tables";
}

/// The keys in the first column of the markdown table that follows `<!-- schema: PATH -->`: every `code span`
/// of that column ("`work_min`, `work_max`" names two keys).
std::set<std::string> documented_keys(const std::string& doc, const std::string& path, bool* found) {
  std::set<std::string> keys;
  const std::string marker = "<!-- schema: " + (path.empty() ? std::string("top") : path) + " -->";
  const auto at = doc.find(marker);
  *found = at != std::string::npos;
  if (!*found) return keys;
  std::istringstream lines(doc.substr(at + marker.size()));
  std::string line;
  bool in_table = false;
  while (std::getline(lines, line)) {
    if (line.empty()) {
      if (in_table) break;
      continue;
    }
    if (line[0] != '|') break;
    in_table = true;
    const auto end = line.find('|', 1);
    const std::string cell = line.substr(1, end - 1);
    for (std::size_t p = cell.find('`'); p != std::string::npos; p = cell.find('`', p + 1)) {
      const auto q = cell.find('`', p + 1);
      if (q == std::string::npos) break;
      keys.insert(cell.substr(p + 1, q - p - 1));
      p = q;
    }
  }
  return keys;
}

}  // namespace

TEST(Schema, EveryTableIsDocumentedWithExactlyItsKeys) {
  const std::string doc = doc_text();
  ASSERT_FALSE(doc.empty());
  for (const TableDoc& t : scenario_schema()) {
    std::set<std::string> want, any;  // sub-tables have their own sections: their row is optional
    for (const FieldDoc& f : t.fields) {
      any.insert(std::string(f.name));
      if (!is_subtable(f)) want.insert(std::string(f.name));
    }
    bool found = false;
    const std::set<std::string> have = documented_keys(doc, std::string(t.path), &found);
    EXPECT_TRUE(found) << "docs/scenario-format.md has no '<!-- schema: " << (t.path.empty() ? "top" : t.path)
                       << " -->' table";
    for (const auto& k : want) EXPECT_TRUE(have.count(k)) << t.path << "." << k << " is not documented";
    for (const auto& k : have)
      EXPECT_TRUE(any.count(k)) << t.path << "." << k << " is documented but not in the schema";
  }
}

TEST(Schema, EveryFieldHasATypeAndADocAndNoDuplicates) {
  for (const TableDoc& t : scenario_schema()) {
    std::set<std::string_view> seen;
    for (const FieldDoc& f : t.fields) {
      EXPECT_FALSE(f.type.empty()) << t.path << "." << f.name;
      EXPECT_FALSE(f.doc.empty()) << t.path << "." << f.name;
      EXPECT_TRUE(seen.insert(f.name).second) << t.path << "." << f.name << " is listed twice";
    }
  }
}

TEST(Schema, ExplainNamesEveryFieldAndSuggestsForATypo) {
  for (const TableDoc& t : scenario_schema()) {
    EXPECT_NE(explain_schema(t.path).find(t.title), std::string::npos);
    for (const FieldDoc& f : t.fields) {
      if (is_subtable(f)) continue;  // `explain lock` explains the table [lock]
      const std::string q =
          t.path.empty() ? std::string(f.name) : std::string(t.path) + "." + std::string(f.name);
      if (schema_table(q)) continue;  // `explain expect.<protocol>` explains that table
      const std::string text = explain_schema(q);
      EXPECT_NE(text.find(std::string(f.doc)), std::string::npos) << q;
    }
  }
  try {
    (void)explain_schema("client.wrok");
    ADD_FAILURE() << "no error for a misspelled field";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'client.work'"), std::string::npos) << e.what();
  }
}

TEST(Schema, TheLoaderRejectsKeysOutsideTheSchemaWithTheNearestOne) {
  try {
    (void)load_scenario_text("[[client]]\nname = \"c\"\nwrok = \"1s\"\n", "t.toml");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'work'"), std::string::npos) << e.what();
  }
}
