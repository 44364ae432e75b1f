// docs/workshop.md is run, not just read: every command in its ```console blocks is executed with the built
// `locksim`, its exit code compared with the one the doc states, and the output lines the doc shows looked up
// in the real output. Also the command-line pieces the workshop relies on: `run --step` fed through a pipe,
// `run --report html|junit`, `check --junit`.
//
// The convention (docs/workshop.md says it too):
//  - in a ```console block, a line starting with "$ " is a command, run by `sh -c` in a scratch directory
//  that
//    holds a copy of scenarios/catalog/ (as at the repository root), with `locksim` first on PATH, stdin from
//    /dev/null, COLUMNS=100 and NO_COLOR=1;
//  - the lines after it, up to the next command or the end of the block, are what it prints: every such line
//    must occur, in that order, inside a line of the real output (stdout and stderr; trailing blanks
//    ignored), except "..." lines (elided output) and blank lines;
//  - a line "[exit N]" states the exit code; without one the command must exit 0.
//
// Usage: workshop_tests LOCKSIM_BINARY REPO_SOURCE_DIR [gtest options]
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

namespace fs = std::filesystem;

namespace {

std::string g_locksim;  // path of the built binary
fs::path g_source;      // the repository

struct Command {
  int line = 0;  // in the doc, for messages
  std::string cmd;
  std::vector<std::string> expect;  // output lines shown in the doc
  int exit_code = 0;
};

std::string rtrim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.pop_back();
  return s;
}

std::vector<Command> parse_doc(const std::string& text) {
  std::vector<Command> out;
  std::istringstream in(text);
  bool in_console = false, in_other = false;
  int n = 0;
  static const std::regex exit_re(R"(^\[exit (\d+)\]$)");
  for (std::string raw; std::getline(in, raw);) {
    ++n;
    const std::string l = rtrim(raw);
    if (!in_console && !in_other && l.rfind("```", 0) == 0) {
      (l == "```console" ? in_console : in_other) = true;
      continue;
    }
    if (l == "```") {
      in_console = in_other = false;
      continue;
    }
    if (!in_console) continue;
    std::smatch m;
    if (l.rfind("$ ", 0) == 0) {
      out.push_back(Command{n, l.substr(2), {}, 0});
    } else if (out.empty()) {
      continue;
    } else if (std::regex_match(l, m, exit_re)) {
      out.back().exit_code = std::stoi(m[1]);
    } else if (!l.empty() && l != "...") {
      out.back().expect.push_back(l);
    }
  }
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Result {
  int code = -1;
  std::string output;
};

/// Runs `cmd` with sh in `dir`, stdout and stderr together.
Result shell(const std::string& cmd, const fs::path& dir, const std::string& stdin_from = "/dev/null") {
  const fs::path bin = fs::path(g_locksim).parent_path();
  const std::string full = "cd '" + dir.string() + "' && PATH='" + bin.string() +
                           "':\"$PATH\" COLUMNS=100 NO_COLOR=1 sh -c '" +
                           std::regex_replace(cmd, std::regex("'"), "'\\''") + "' 2>&1 < " + stdin_from;
  Result r;
  FILE* p = ::popen(full.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (std::size_t k; (k = std::fread(buf, 1, sizeof buf, p)) > 0;) r.output.append(buf, k);
  const int st = ::pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

fs::path scratch(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("locksim-workshop-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d / "scenarios");
  fs::copy(g_source / "scenarios" / "catalog", d / "scenarios" / "catalog", fs::copy_options::recursive);
  return d;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(rtrim(l));
  return out;
}

/// The index of the first expected line not found in order (or expect.size() when all were found).
std::size_t match_in_order(const std::vector<std::string>& expect, const std::string& output) {
  const auto got = lines_of(output);
  std::size_t e = 0;
  for (std::size_t g = 0; g < got.size() && e < expect.size(); ++g)
    if (got[g].find(expect[e]) != std::string::npos) ++e;
  return e;
}

/// Whether `file` validates against the JUnit schema the CI readers accept (tests/reports/junit-report.xsd),
/// with xmllint's words when it does not; nothing when xmllint is not installed.
std::optional<Result> validate_junit(const fs::path& file) {
  if (shell("command -v xmllint", file.parent_path()).code != 0) return std::nullopt;
  return shell("xmllint --noout --schema '" + (g_source / "tests" / "reports" / "junit-report.xsd").string() +
                   "' '" + file.string() + "'",
               file.parent_path());
}

}  // namespace

TEST(WorkshopDoc, ParsesIntoEnoughCommands) {
  const auto cmds = parse_doc(slurp(g_source / "docs" / "workshop.md"));
  int locksim = 0, unsafe = 0, with_output = 0;
  for (const auto& c : cmds) {
    locksim += c.cmd.rfind("locksim ", 0) == 0;
    unsafe += c.exit_code == 1;
    with_output += !c.expect.empty();
  }
  EXPECT_GE(locksim, 8);
  EXPECT_GE(unsafe, 2);  // the workshop shows unsafe runs
  EXPECT_GE(with_output, 6);
  // The parser itself: a made-up doc.
  const auto t = parse_doc(
      "text\n```console\n$ locksim a\nline one\n...\n[exit 1]\n$ locksim b\n```\n```sh\n$ no\n```\n");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].cmd, "locksim a");
  EXPECT_EQ(t[0].exit_code, 1);
  EXPECT_EQ(t[0].expect, std::vector<std::string>{"line one"});
  EXPECT_EQ(t[1].exit_code, 0);
  EXPECT_TRUE(t[1].expect.empty());
}

TEST(WorkshopDoc, EveryCommandRunsAsTheDocSays) {
  const auto cmds = parse_doc(slurp(g_source / "docs" / "workshop.md"));
  ASSERT_FALSE(cmds.empty());
  const fs::path dir = scratch("doc");
  for (const auto& c : cmds) {
    SCOPED_TRACE("docs/workshop.md:" + std::to_string(c.line) + ": $ " + c.cmd);
    const Result r = shell(c.cmd, dir);
    EXPECT_EQ(r.code, c.exit_code) << r.output;
    const std::size_t e = match_in_order(c.expect, r.output);
    if (e < c.expect.size())
      ADD_FAILURE() << "the doc shows this line (in this order) but the output has none like it:\n  "
                    << c.expect[e] << "\noutput:\n"
                    << r.output;
  }
  fs::remove_all(dir);
}

TEST(Step, EnterAdvancesAndQQuits) {
  const fs::path dir = scratch("step");
  std::ofstream(dir / "keys") << "\n\nq\n";
  const Result r = shell("locksim run kleppmann-gc-pause -p redis --step", dir, "keys");
  EXPECT_EQ(r.code, 1) << r.output;  // the run is unsafe whether or not one watched it all
  int events = 0;
  for (const auto& l : lines_of(r.output))
    events += l.rfind("[", 0) == 0 && l.find("] t=") != std::string::npos;
  EXPECT_EQ(events, 3) << r.output;  // event 1, Enter, event 2, Enter, event 3, q
  EXPECT_NE(r.output.find("stopped after event 3 of"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("what happened:"), std::string::npos);  // quit: no report
  fs::remove_all(dir);
}

TEST(Step, CommandsJumpToTheStoryTheViolationAndBack) {
  const fs::path dir = scratch("step-commands");
  std::ofstream(dir / "keys") << "s\nv\nb\nn 2\nwhat\nq\n";
  const Result r = shell("locksim run kleppmann-gc-pause -p redis --step", dir, "keys");
  EXPECT_EQ(r.code, 1) << r.output;
  std::vector<int> shown;
  for (const auto& l : lines_of(r.output)) {
    std::smatch m;
    if (std::regex_search(l, m, std::regex(R"(^\[\s*(\d+)/\d+\] t=)"))) shown.push_back(std::stoi(m[1]));
  }
  ASSERT_EQ(shown.size(), 5u) << r.output;  // the first, then s, v, b, n 2 (the unknown word shows none)
  EXPECT_EQ(shown[0], 1);
  EXPECT_GT(shown[1], 2) << r.output;               // s skipped the servers' start-up to the story
  EXPECT_GT(shown[2], shown[1] + 100) << r.output;  // v: at the stale write, 15 s later
  EXPECT_EQ(shown[3], shown[2] - 1);
  EXPECT_EQ(shown[4], shown[3] + 2);
  EXPECT_NE(r.output.find("acquired"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("t = 15.00"), std::string::npos) << r.output;  // the position line of the jump
  EXPECT_NE(r.output.find("(commands: Enter = next"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopped after event"), std::string::npos) << r.output;
  fs::remove_all(dir);
}

TEST(Step, EndOfInputRunsToTheEndThenReports) {
  const fs::path dir = scratch("step-eof");
  const Result r = shell("locksim run kleppmann-gc-pause -p redis --step", dir, "/dev/null");
  EXPECT_EQ(r.code, 1);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(: (\d+) events\. Enter = next event)")))
      << r.output;
  const int total = std::stoi(m[1]);
  int events = 0;
  for (const auto& l : lines_of(r.output))
    events += l.rfind("[", 0) == 0 && l.find("] t=") != std::string::npos;
  EXPECT_EQ(events, total);
  EXPECT_GT(total, 10);
  EXPECT_NE(r.output.find("PAUSED"), std::string::npos);
  EXPECT_NE(r.output.find("monotonic"), std::string::npos);
  EXPECT_NE(r.output.find("what happened:"), std::string::npos);
  EXPECT_NE(r.output.find("verdict: UNSAFE"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Step, ThroughARealPipe) {
  const fs::path dir = scratch("step-pipe");
  const Result r =
      shell("printf '\\n\\n\\n\\nq\\n' | locksim run kleppmann-gc-pause -p lease+fence --step", dir);
  EXPECT_EQ(r.code, 0) << r.output;  // fenced: safe
  EXPECT_NE(r.output.find("stopped after event 5 of"), std::string::npos) << r.output;
  fs::remove_all(dir);
}

TEST(RunReports, HtmlAndJunitFiles) {
  const fs::path dir = scratch("reports");
  Result r = shell("locksim run kleppmann-gc-pause -p redis --report html -o k.html", dir);
  EXPECT_EQ(r.code, 1) << r.output;
  const std::string html = slurp(dir / "k.html");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u) << html.substr(0, 80);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  r = shell("locksim run kleppmann-gc-pause --report html -o all.html", dir);
  EXPECT_EQ(r.code, 2) << r.output;  // four protocols, one diagram: a usage error
  EXPECT_NE(r.output.find("choose one protocol with -p"), std::string::npos) << r.output;
  r = shell("locksim run kleppmann-gc-pause --report junit", dir);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("<testsuite"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("name=\"lease+fence\""), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("<failure"), std::string::npos) << r.output;  // every verdict is as expected
  fs::remove_all(dir);
}

TEST(Check, JunitOneCasePerScenarioAndProtocol) {
  const fs::path dir = scratch("check");
  const Result r = shell(
      "locksim check scenarios/catalog/kleppmann-gc-pause.toml "
      "scenarios/catalog/no-faults.toml --junit out.xml",
      dir);
  EXPECT_EQ(r.code, 0) << r.output;
  const std::string xml = slurp(dir / "out.xml");
  int passes = 0;
  for (const auto& l : lines_of(r.output)) passes += l.rfind("PASS ", 0) == 0;
  std::size_t cases = 0;
  for (std::size_t p = xml.find("<testcase"); p != std::string::npos; p = xml.find("<testcase", p + 1))
    ++cases;
  EXPECT_EQ(cases, static_cast<std::size_t>(passes)) << xml;
  EXPECT_GE(cases, 5u);
  EXPECT_NE(xml.find("classname=\"kleppmann-gc-pause\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("classname=\"no-faults\""), std::string::npos) << xml;
  if (auto v = validate_junit(dir / "out.xml")) {
    EXPECT_EQ(v->code, 0) << v->output;
  }
  fs::remove_all(dir);
}

TEST(Check, JunitIsWrittenWhenAFileIsBadAndSaysWhatFailed) {
  // One malformed file, one scenario whose expectation is wrong, one that passes: every case is in the file,
  // the bad one as an <error>, the wrong one as a <failure> carrying its story, and the exit code is 2.
  const fs::path dir = scratch("check-bad");
  std::ofstream(dir / "bad.toml") << "[[client]]\nname = \"client1\"\nacquisitions = -3\n";
  std::string k = slurp(g_source / "scenarios" / "catalog" / "kleppmann-gc-pause.toml");
  const auto at = k.find("\nredis = \"unsafe\"");
  ASSERT_NE(at, std::string::npos);
  k.replace(at, 17, "\nredis = \"safe\"");
  std::ofstream(dir / "wrong.toml") << k;
  const Result r =
      shell("locksim check bad.toml wrong.toml scenarios/catalog/no-faults.toml --junit out.xml", dir);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("ERROR"), std::string::npos) << r.output;
  const std::string xml = slurp(dir / "out.xml");
  ASSERT_FALSE(xml.empty()) << r.output;
  EXPECT_EQ(xml.find("<testsuites"), xml.find("<?xml version") + 39) << xml;
  auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (std::size_t p = xml.find(what); p != std::string::npos; p = xml.find(what, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<error "), 1u) << xml;
  EXPECT_EQ(count("<failure "), 1u) << xml;
  // bad.toml's one case, then a case per protocol each catalog file expects: 10 each (redis, redlock, lease,
  // lease+fence, db-lease, db-lease+fence, zookeeper, zookeeper+fence, consul, consul+fence).
  EXPECT_EQ(count("<testcase "), 1u + 10u + 10u) << xml;
  EXPECT_NE(xml.find("file=\"bad.toml\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("file=\"wrong.toml\""), std::string::npos) << xml;
  // The failure's text is the story and the replay command; its message is one line that says neither.
  const std::string failure = xml.substr(xml.find("<failure "));
  const std::string message = failure.substr(0, failure.find('>'));
  EXPECT_EQ(message.find("ACCEPTED"), std::string::npos) << message;
  EXPECT_EQ(message.find("&#10;"), std::string::npos) << message;
  EXPECT_NE(failure.find("the unfenced store ACCEPTED it"), std::string::npos) << failure;
  EXPECT_NE(failure.find("replay: locksim run wrong.toml -p redis --seed 1"), std::string::npos) << failure;
  if (auto v = validate_junit(dir / "out.xml")) {
    EXPECT_EQ(v->code, 0) << v->output;
  } else {
    std::fprintf(stderr, "note: xmllint not installed, the JUnit schema was not checked\n");
  }
  fs::remove_all(dir);
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s LOCKSIM_BINARY REPO_SOURCE_DIR [gtest options]\n", argv[0]);
    return 2;
  }
  g_locksim = fs::absolute(argv[1]).string();
  g_source = fs::absolute(argv[2]);
  return RUN_ALL_TESTS();
}
