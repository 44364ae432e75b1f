// JUnit XML: structure CI tools rely on (one suite, one case per scenario × protocol, counts) and escaping.
#include <gtest/gtest.h>

#include "locksim/reports/report.hpp"

using namespace locksim;

namespace {

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

}  // namespace

TEST(JUnit, OneSuiteOneCasePerScenarioAndProtocolWithCounts) {
  std::vector<JUnitCase> cases = {
      {"kleppmann-gc-pause", "redis", "unsafe", "unsafe", 0.25, ""},
      {"kleppmann-gc-pause", "lease+fence", "safe", "safe", 0.5, ""},
      {"clock-jump", "redlock", "unsafe", "safe", 1.0, "seed 1: no anomaly", std::nullopt,
       "client1 acquired the lock...\nreplay: locksim run clock-jump -p redlock --seed 1", "clock-jump.toml"},
      {"broken-file", "redis", "safe", "", 0.0, "broken-file.toml:3: unknown field 'ttll'"},
  };
  const std::string x = junit_report(cases);
  EXPECT_EQ(x.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 0), 0u) << x;
  // <testsuites> around one suite, both with the counts.
  EXPECT_EQ(x.find("<testsuites name=\"locksim\" tests=\"4\" failures=\"1\" errors=\"1\""),
            std::string("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n").size())
      << x;
  EXPECT_EQ(count(x, "</testsuites>"), 1u);
  EXPECT_EQ(count(x, "<testsuite "), 1u);
  EXPECT_EQ(count(x, "</testsuite>"), 1u);
  EXPECT_NE(x.find("<testsuite name=\"locksim\" tests=\"4\" failures=\"1\" errors=\"1\""), std::string::npos)
      << x;
  EXPECT_NE(x.find("time=\"1.750\""), std::string::npos) << x;
  EXPECT_EQ(count(x, "<testcase "), 4u);
  EXPECT_NE(x.find("<testcase classname=\"kleppmann-gc-pause\" name=\"redis\" time=\"0.250\"/>"),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("<testcase classname=\"clock-jump\" name=\"redlock\" file=\"clock-jump.toml\""),
            std::string::npos)
      << x;
  // A failure: the one-line message in the attribute, the details (story, replay) as its text, once each.
  EXPECT_EQ(count(x, "<failure "), 1u);
  EXPECT_NE(
      x.find("<failure message=\"expected unsafe, got safe: seed 1: no anomaly\" type=\"expectation\">"
             "client1 acquired the lock...\nreplay: locksim run clock-jump -p redlock --seed 1</failure>"),
      std::string::npos)
      << x;
  EXPECT_EQ(count(x, "replay: locksim run clock-jump"), 1u) << x;
  EXPECT_EQ(count(x, "<error "), 1u);
  EXPECT_NE(x.find("<error message=\"broken-file.toml:3: unknown field &apos;ttll&apos;\""),
            std::string::npos)
      << x;
  // Every opened test case that is not self-closing is closed.
  std::size_t self_closing = 0;
  for (std::size_t p = x.find("<testcase "); p != std::string::npos; p = x.find("<testcase ", p + 1))
    self_closing += x.compare(x.find('>', p) - 1, 2, "/>") == 0;
  EXPECT_EQ(count(x, "<testcase ") - self_closing, count(x, "</testcase>"));
}

TEST(JUnit, NoExpectationMeansPassWhateverTheVerdict) {
  const std::string x = junit_report({{"custom", "toylock", "", "unsafe", 0.1, ""}});
  EXPECT_NE(x.find("tests=\"1\" failures=\"0\" errors=\"0\""), std::string::npos) << x;
  EXPECT_EQ(x.find("<failure"), std::string::npos);
}

TEST(JUnit, EscapesMarkupQuotesAndStripsControlCharacters) {
  const std::string text = "line1\nstory \x1b[1;31mUNSAFE\x1b[0m <x>\x01";
  JUnitCase c{"a<b>&\"c\"", "p'q", "safe", "unsafe", 0.0, text, std::nullopt, text};
  const std::string x = junit_report({c});
  EXPECT_NE(x.find("classname=\"a&lt;b&gt;&amp;&quot;c&quot;\" name=\"p&apos;q\""), std::string::npos) << x;
  EXPECT_EQ(x.find("<b>"), std::string::npos);
  EXPECT_EQ(x.find("<x>"), std::string::npos);
  EXPECT_EQ(x.find('\x1b'), std::string::npos);
  EXPECT_EQ(x.find('\x01'), std::string::npos);
  EXPECT_NE(x.find("story UNSAFE &lt;x&gt;"), std::string::npos) << x;
  // Attributes encode the line break; element text keeps it.
  EXPECT_NE(x.find("line1&#10;story"), std::string::npos) << x;
  EXPECT_NE(x.find("line1\nstory"), std::string::npos) << x;
}

TEST(JUnit, EmptyRunIsAValidEmptySuite) {
  const std::string x = junit_report({});
  EXPECT_NE(x.find("tests=\"0\" failures=\"0\" errors=\"0\""), std::string::npos);
  EXPECT_EQ(count(x, "<testcase"), 0u);
}
