// The HTML report: structure and escaping from the string, the model against the run, and a real render in
// headless Chromium (DOM after the script ran, no script errors, a screenshot) when /usr/bin/chromium exists.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "locksim/reports/report.hpp"
#include "locksim/scenarios/runner.hpp"
#include "tests/support/toy_protocol.hpp"

using namespace locksim;
namespace fs = std::filesystem;

namespace {

constexpr const char* kChromium = "/usr/bin/chromium";

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}

/// The embedded model (the JSON the page's script draws from).
nlohmann::json model_of(const std::string& html) {
  const std::string open = "<script id=\"model\" type=\"application/json\">";
  const auto a = html.find(open);
  const auto b = html.find("</script>", a);
  if (a == std::string::npos || b == std::string::npos) return {};
  return nlohmann::json::parse(html.substr(a + open.size(), b - a - open.size()));
}

/// A fresh directory for one test (pid + name: tests may run in parallel under ctest).
fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("locksim-html-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

struct Chromium {
  std::string dom;  ///< --dump-dom output
  std::string log;  ///< stderr of both runs
  bool screenshot = false;
};

/// Renders `html_file` twice in headless Chromium: once to dump the DOM after the scripts ran (with the
/// page's #selftest, which hovers marks, zooms, scrolls and toggles the axis before the dump), once to
/// screenshot.
Chromium chromium(const fs::path& dir, const fs::path& html_file, const fs::path& png) {
  const std::string flags =
      "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking "
      "--disable-component-update --disable-sync --enable-logging=stderr --v=0";
  Chromium r;
  const std::string url = "file://" + fs::absolute(html_file).string();
  auto run = [&](const std::string& profile, const std::string& extra, const fs::path& out,
                 const std::string& hash) {
    const std::string cmd = "timeout 90 " + std::string(kChromium) + " " + flags +
                            " --user-data-dir=" + (dir / profile).string() + " " + extra + " '" + url + hash +
                            "' >" + out.string() + " 2>>" + (dir / "stderr.txt").string();
    return std::system(cmd.c_str());
  };
  run("profile-dom", "--dump-dom", dir / "dom.html", "#selftest");
  run("profile-shot", "--screenshot=" + png.string() + " --window-size=1400,900 --hide-scrollbars",
      dir / "shot.txt", "");
  r.dom = slurp(dir / "dom.html");
  r.log = slurp(dir / "stderr.txt");
  r.screenshot = fs::exists(png) && fs::file_size(png) > 10000;
  return r;
}

/// When LOCKSIM_KEEP_HTML names a directory, a copy of the rendered page and screenshot stays there
/// (docs/make-screenshot.sh makes the docs picture from such a page).
void keep(const fs::path& file) {
  if (const char* d = std::getenv("LOCKSIM_KEEP_HTML"); d && *d) {
    fs::create_directories(d);
    fs::copy_file(file, fs::path(d) / file.filename(), fs::copy_options::overwrite_existing);
  }
}

void keep_text(const std::string& name, const std::string& text) {
  if (const char* d = std::getenv("LOCKSIM_KEEP_HTML"); d && *d) {
    fs::create_directories(d);
    spit(fs::path(d) / name, text);
  }
}

/// Many clients contending for one toy lock: a few thousand events, to show the page copes with big runs.
Scenario busy(std::uint32_t clients, std::uint32_t acquisitions) {
  Scenario sc;
  sc.name = "toy-busy";
  sc.title = "many clients, one lock";
  sc.file = "test";
  sc.config.ttl = 2s;
  sc.network.defaults.delay = DelayDist::uniform_of(1ms, 5ms);
  for (std::uint32_t i = 0; i < clients; ++i) {
    ClientSpec c{
        .name = "client" + std::to_string(i + 1), .start = Time{i * 7ms}, .acquisitions = acquisitions};
    c.writes_per_hold = 2;
    c.work_min = 5ms;
    c.work_max = 20ms;
    c.think_min = 10ms;
    c.think_max = 50ms;
    c.retry_delay = 20ms;
    sc.clients.push_back(c);
  }
  sc.max_time = 600s;
  return sc;
}

class HtmlReport : public ::testing::Test {
 protected:
  void SetUp() override { toy::register_toy(); }
};

}  // namespace

TEST_F(HtmlReport, GcPauseHasOneLanePerProcessAndTheViolationMarker) {
  const Scenario sc = toy::gc_pause(15s);
  const RunOutput r = run_scenario(sc, "toylock");
  ASSERT_FALSE(r.check.safe);
  const std::string html = html_report(r, sc);
  ASSERT_EQ(r.process_names.size(), 4u);  // client1, client2, toy1, store
  EXPECT_EQ(count(html, "class=\"lane\""), r.process_names.size());
  for (const auto& p : r.process_names) EXPECT_EQ(count(html, "data-process=\"" + p + "\""), 1u) << p;
  EXPECT_EQ(count(html, "class=\"violation\""), r.check.violations.size());
  const Violation& v = r.check.violations[0];
  EXPECT_NE(html.find(fmt::format("data-writes=\"{} {}\"", v.earlier.write, v.later.write)),
            std::string::npos);
  // The story is in the page, and the verdict.
  EXPECT_NE(html.find("paused from"), std::string::npos);
  EXPECT_NE(html.find("UNSAFE"), std::string::npos);
  EXPECT_NE(html.find("class=\"legend\""), std::string::npos);
}

TEST_F(HtmlReport, IsSelfContained) {
  const Scenario sc = toy::gc_pause(15s);
  const std::string html = html_report(run_scenario(sc, "toylock"), sc);
  static const std::regex external(R"((src|href|xlink:href|action)\s*=\s*["']?\s*(https?:)?//)",
                                   std::regex::icase);
  EXPECT_FALSE(std::regex_search(html, external));
  EXPECT_EQ(html.find("url(http"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_EQ(html.find("fetch("), std::string::npos);
  EXPECT_EQ(html.find("XMLHttpRequest"), std::string::npos);
  EXPECT_EQ(count(html, "<script"), 2u);  // the model and the code, both inline
}

TEST_F(HtmlReport, EscapesTextFromTheScenario) {
  Scenario sc = toy::gc_pause(15s);
  sc.name = "evil<script>alert(1)</script>";
  sc.title = "\"quoted\" & <b>bold</b>";
  sc.teaches = "</script><img src=x onerror=alert(2)>";
  const std::string html = html_report(run_scenario(sc, "toylock"), sc);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_EQ(html.find("<b>bold"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("evil&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("&quot;quoted&quot; &amp; &lt;b&gt;bold&lt;/b&gt;"), std::string::npos);
  EXPECT_EQ(count(html, "</script>"), 2u);  // nothing in the model closed its script element early
  EXPECT_EQ(model_of(html)["scenario"], sc.name);
}

TEST_F(HtmlReport, ModelFollowsTheRun) {
  const Scenario sc = toy::gc_pause(15s);
  const RunOutput r = run_scenario(sc, "toylock");
  const auto m = model_of(html_report(r, sc));
  ASSERT_TRUE(m.is_object());
  const auto& ev = m["ev"];
  auto lane = [&](const std::string& n) {
    for (std::size_t i = 0; i < m["lanes"].size(); ++i)
      if (m["lanes"][i]["name"] == n) return static_cast<int>(i);
    return -1;
  };
  EXPECT_EQ(m["lanes"][0]["kind"], "client");
  EXPECT_EQ(m["lanes"][lane("toy1")]["kind"], "server");
  EXPECT_EQ(m["lanes"][lane("store")]["kind"], "store");
  // One 15 s pause on client1.
  ASSERT_EQ(m["pauses"].size(), 1u);
  const auto& p = m["pauses"][0];
  EXPECT_EQ(p[0], lane("client1"));
  EXPECT_EQ(ev[p[2].get<int>()][0].get<std::int64_t>() - ev[p[1].get<int>()][0].get<std::int64_t>(),
            std::int64_t{15'000'000'000});
  // Every message goes from its sender's lane to its receiver's, and is delivered no earlier than sent.
  ASSERT_GT(m["msgs"].size(), 10u);
  for (const auto& msg : m["msgs"]) {
    const auto& s = ev[msg[0].get<int>()];
    const auto& d = ev[msg[1].get<int>()];
    EXPECT_EQ(s[3], msg[2]);
    EXPECT_LE(s[0].get<std::int64_t>(), d[0].get<std::int64_t>());
    EXPECT_NE(msg[2], msg[3]);
  }
  // Writes: as many as the history, and the stale one is accepted after the newer epoch's.
  ASSERT_EQ(m["writes"].size(), r.history.writes.size());
  ASSERT_EQ(m["violations"].size(), 1u);
  EXPECT_EQ(m["violations"][0]["later_client"], "client1");
  // client1's belief ends when its validity ran out, before the pause ended; it wrote after it (the stale
  // bar).
  bool stale = false;
  for (const auto& g : m["grants"]) {
    if (g["lane"] != lane("client1")) continue;
    EXPECT_LT(ev[g["b1"].get<int>()][0].get<std::int64_t>(), ev[p[2].get<int>()][0].get<std::int64_t>());
    stale = stale || g.contains("stale");
    // The service's view of client1 ends when client2 is granted.
    EXPECT_GT(ev[g["s1"].get<int>()][0].get<std::int64_t>(), std::int64_t{10'000'000'000});
  }
  EXPECT_TRUE(stale);
  // Tooltip rows carry node clocks: the pause's rows are client1 trace events with exact clock readings.
  EXPECT_EQ(ev[p[1].get<int>()][7], 0);
}

TEST_F(HtmlReport, FencedRunShowsRejectedWritesAndNoViolation) {
  const Scenario sc = toy::gc_pause(15s);
  const RunOutput r = run_scenario(sc, "toylock+fence");
  ASSERT_TRUE(r.check.safe);
  const std::string html = html_report(r, sc);
  EXPECT_EQ(count(html, "class=\"violation\""), 0u);
  EXPECT_NE(html.find("SAFE"), std::string::npos);
  bool rejected = false;
  const auto m = model_of(html);  // kept alive: a range-for over a temporary's member would dangle
  for (const auto& w : m["writes"]) rejected = rejected || !w["accepted"].get<bool>();
  EXPECT_TRUE(rejected);
  keep_text("toy-gc-pause-fenced.html", html);
}

TEST_F(HtmlReport, RunWithoutTraceStillShowsHistory) {
  const Scenario sc = toy::gc_pause(15s);
  RunOptions ro;
  ro.keep_trace = false;
  const RunOutput r = run_scenario(sc, "toylock", ro);
  ASSERT_TRUE(r.trace.empty());
  const std::string html = html_report(r, sc);
  EXPECT_EQ(count(html, "class=\"lane\""), r.process_names.size());
  const auto m = model_of(html);
  EXPECT_EQ(m["writes"].size(), r.history.writes.size());
  EXPECT_EQ(m["msgs"].size(), 0u);
  EXPECT_EQ(m["violations"].size(), 1u);
}

TEST_F(HtmlReport, SameRunSameBytes) {
  const Scenario sc = toy::gc_pause(15s);
  EXPECT_EQ(html_report(run_scenario(sc, "toylock"), sc), html_report(run_scenario(sc, "toylock"), sc));
}

TEST_F(HtmlReport, ChromiumRendersGcPauseWithoutErrors) {
  if (!fs::exists(kChromium))
    GTEST_SKIP() << kChromium << " not found: install Debian's `chromium` package to render the HTML report "
                 << "(.ci/run does)";
  const Scenario sc = toy::gc_pause(15s);
  const RunOutput r = run_scenario(sc, "toylock");
  const fs::path dir = temp_dir("gc");
  const fs::path page = dir / "toy-gc-pause.html", png = dir / "toy-gc-pause.png";
  spit(page, html_report(r, sc));
  const Chromium c = chromium(dir, page, png);
  keep(page);
  keep(png);
  ASSERT_NE(c.dom.find("<body"), std::string::npos) << c.log;
  EXPECT_NE(c.dom.find("data-rendered=\"1\""), std::string::npos) << "the script did not finish";
  EXPECT_NE(c.dom.find("data-selftest=\"done\""), std::string::npos) << "hover/zoom self test did not finish";
  EXPECT_NE(c.dom.find("data-js-errors=\"0\""), std::string::npos) << c.log;
  // Hovering showed tooltips with the true time and the node's clocks.
  EXPECT_EQ(c.dom.find("data-selftest-tips=\"0\""), std::string::npos);
  EXPECT_NE(c.dom.find("clocks: monotonic"), std::string::npos);
  EXPECT_EQ(c.log.find("Uncaught"), std::string::npos) << c.log;
  EXPECT_EQ(c.log.find("CONSOLE"), std::string::npos) << c.log;
  EXPECT_EQ(count(c.dom, "class=\"lane\""), r.process_names.size());
  for (const auto& p : r.process_names)
    EXPECT_NE(c.dom.find("data-process=\"" + p + "\""), std::string::npos);
  EXPECT_EQ(count(c.dom, "class=\"violation\""), 1u);
  // Drawn by the script: both writes ringed, the pause bar, message arrows, write dots, hover targets.
  EXPECT_EQ(count(c.dom, "class=\"violation-ring\""), 2u);
  EXPECT_EQ(count(c.dom, "class=\"pause\""), 1u);
  EXPECT_GE(count(c.dom, "class=\"msg\""), 10u);
  EXPECT_EQ(count(c.dom, "class=\"wdot ok\""), r.history.writes.size());
  EXPECT_GT(count(c.dom, "data-ev=\""), 20u);
  EXPECT_TRUE(c.screenshot) << "no screenshot at " << png;
  fs::remove_all(dir);
}

TEST_F(HtmlReport, ChromiumCopesWithTenThousandEvents) {
  if (!fs::exists(kChromium)) GTEST_SKIP() << kChromium << " not found: install Debian's `chromium` package";
  const Scenario sc = busy(10, 18);
  const RunOutput r = run_scenario(sc, "toylock");
  ASSERT_GE(r.trace.size(), 10000u);
  const std::string html = html_report(r, sc);
  EXPECT_EQ(count(html, "class=\"lane\""), r.process_names.size());
  const fs::path dir = temp_dir("busy");
  const fs::path page = dir / "toy-busy.html", png = dir / "toy-busy.png";
  spit(page, html);
  const auto t0 = std::chrono::steady_clock::now();
  const Chromium c = chromium(dir, page, png);
  const auto took =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  keep(page);
  keep(png);
  EXPECT_NE(c.dom.find("data-rendered=\"1\""), std::string::npos) << c.log;
  EXPECT_NE(c.dom.find("data-selftest=\"done\""), std::string::npos);
  EXPECT_NE(c.dom.find("data-js-errors=\"0\""), std::string::npos) << c.log;
  EXPECT_EQ(c.log.find("Uncaught"), std::string::npos) << c.log;
  EXPECT_TRUE(c.screenshot);
  std::cout << "busy run: " << r.trace.size() << " trace events, " << html.size() / 1024 << " KiB of HTML, "
            << "two Chromium renders in " << took.count() << " ms\n";
  fs::remove_all(dir);
}
