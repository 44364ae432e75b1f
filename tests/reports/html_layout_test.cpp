// The HTML report as a person sees it: rendered by headless Chromium at three window widths, at "fit" and
// zoomed in, and checked on what was drawn (the page's script reports the boxes it laid out): every story
// event sits where the axis's tick labels say its time is (within one pixel's worth), every squeezed gap
// is drawn with its label, no two labels overlap and the violation banner is inside the window.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "reports/report.hpp"
#include "scenarios/catalog.hpp"
#include "scenarios/runner.hpp"
#include "tests/reports/chromium.hpp"
#include "tests/support/toy_protocol.hpp"

using namespace locksim;
using namespace locksim::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Tick {
  double x, t;
};
struct Segment {
  double x0, x1;  ///< a stretch of the axis between squeezed gaps (or the ends)
};

/// "12.5 s" → 12.5 (tick labels are seconds).
bool parse_seconds(const std::string& s, double& t) {
  char* end = nullptr;
  t = std::strtod(s.c_str(), &end);
  return end != s.c_str() && std::string(end) == " s";
}

/// Reads the layout the way a person reads the picture: the squeezed gaps cut the axis into segments; in
/// each, time is read off the tick labels (one scale for the whole axis: the distance between two ticks of a
/// segment over their times). Reports every failure as a gtest failure naming `where`.
void check_axis(const json& lay, const std::string& where) {
  std::vector<Tick> ticks;
  for (const auto& tk : lay["ticks"]) {
    double t = 0;
    ASSERT_TRUE(parse_seconds(tk["text"].get<std::string>(), t)) << where << ": tick " << tk["text"];
    ticks.push_back({tk["x"].get<double>(), t});
  }
  ASSERT_GE(ticks.size(), 2u) << where;
  std::sort(ticks.begin(), ticks.end(), [](const Tick& a, const Tick& b) { return a.x < b.x; });
  std::vector<Segment> segs;
  double from = -1e18;
  std::vector<std::pair<double, double>> breaks;
  for (const auto& b : lay["breaks"]) {
    EXPECT_FALSE(b["label"].get<std::string>().empty()) << where << ": a squeezed gap without its label";
    breaks.emplace_back(b["x0"].get<double>(), b["x1"].get<double>());
  }
  std::sort(breaks.begin(), breaks.end());
  for (auto [a, b] : breaks) {
    segs.push_back({from, a});
    from = b;
  }
  segs.push_back({from, 1e18});
  auto seg_of = [&](double x) -> int {
    for (std::size_t i = 0; i < segs.size(); ++i)
      if (x >= segs[i].x0 - 0.5 && x <= segs[i].x1 + 0.5) return static_cast<int>(i);
    return -1;
  };
  // The scale: from the two ticks furthest apart within one segment; every other pair must agree with it.
  double scale = 0, span = 0;  // px per second
  for (std::size_t i = 0; i < ticks.size(); ++i)
    for (std::size_t j = i + 1; j < ticks.size(); ++j)
      if (seg_of(ticks[i].x) == seg_of(ticks[j].x) && ticks[j].x - ticks[i].x > span &&
          ticks[j].t != ticks[i].t) {
        span = ticks[j].x - ticks[i].x;
        scale = span / (ticks[j].t - ticks[i].t);
      }
  ASSERT_GT(scale, 0) << where << ": no two ticks in one stretch of the axis";
  for (std::size_t i = 0; i + 1 < ticks.size(); ++i) {
    const Tick &a = ticks[i], &b = ticks[i + 1];
    if (seg_of(a.x) != seg_of(b.x)) continue;
    const double px = (b.t - a.t) * scale;
    EXPECT_NEAR(b.x - a.x, px, 1.0 + 0.002 * std::abs(px))
        << where << ": ticks " << a.t << " s and " << b.t << " s are " << b.x - a.x
        << " px apart; the axis's scale says " << px;
  }
  int checked = 0;
  for (const auto& ev : lay["events"]) {
    const double x = ev["x"].get<double>(), t = ev["t"].get<double>();
    const std::string what = ev["what"].get<std::string>();
    const int s = seg_of(x);
    EXPECT_GE(s, 0) << where << ": " << what << " at " << t << " s is drawn inside a squeezed gap";
    if (s < 0) continue;
    const Tick* near = nullptr;
    for (const Tick& tk : ticks)
      if (seg_of(tk.x) == s && (!near || std::abs(tk.x - x) < std::abs(near->x - x))) near = &tk;
    EXPECT_NE(near, nullptr) << where << ": no tick label in the stretch of the axis where " << what;
    if (!near) continue;
    const double read = near->t + (x - near->x) / scale;
    EXPECT_NEAR(read, t, 1.0 / scale)
        << where << ": " << what << " happens at " << t << " s but the axis reads " << read
        << " s (nearest tick " << near->t << " s)";
    ++checked;
  }
  EXPECT_GT(checked, 0) << where << ": no story event drawn";
}

void check_labels(const json& lay, const std::string& where) {
  const auto& texts = lay["texts"];
  for (std::size_t i = 0; i < texts.size(); ++i)
    for (std::size_t j = i + 1; j < texts.size(); ++j) {
      const auto &a = texts[i]["box"], &b = texts[j]["box"];
      const double ox =
          std::min(a[0].get<double>() + a[2].get<double>(), b[0].get<double>() + b[2].get<double>()) -
          std::max(a[0].get<double>(), b[0].get<double>());
      const double oy =
          std::min(a[1].get<double>() + a[3].get<double>(), b[1].get<double>() + b[3].get<double>()) -
          std::max(a[1].get<double>(), b[1].get<double>());
      EXPECT_FALSE(ox > 0.5 && oy > 0.5)
          << where << ": labels overlap: \"" << texts[i]["text"].get<std::string>() << "\" and \""
          << texts[j]["text"].get<std::string>() << "\"";
    }
}

void check_banner(const json& lay, const std::string& where) {
  ASSERT_TRUE(lay["banner"].is_object()) << where << ": no violation banner";
  const auto& b = lay["banner"];
  const double w = lay["viewport"][0].get<double>();
  EXPECT_GE(b["left"].get<double>(), -0.5) << where;
  EXPECT_LE(b["right"].get<double>(), w + 0.5) << where << ": the banner runs past the window's right edge";
  EXPECT_FALSE(b["overflow"].get<bool>()) << where << ": the banner's text is clipped";
}

struct View {
  int width;
  std::string hash, name;
};

/// Renders `html` at every width × (fit, zoomed in at `at` seconds) and checks each layout.
void check_everywhere(const std::string& html, const std::string& name, double at, bool unsafe) {
  const fs::path dir = temp_dir("layout-" + name);
  const fs::path page = dir / (name + ".html");
  spit(page, html);
  for (int width : {1024, 1400, 1920})
    for (const std::string& hash : {std::string(), "#zoom=6&at=" + std::to_string(at)}) {
      const std::string where =
          name + " at " + std::to_string(width) + " px, " + (hash.empty() ? "fit" : hash);
      const std::string tag = std::to_string(width) + (hash.empty() ? "fit" : "zoom");
      const std::string dom = dump_dom(dir, page, hash, width, 900, tag);
      ASSERT_NE(dom.find("data-rendered=\"1\""), std::string::npos) << where << "\n"
                                                                    << slurp(dir / "stderr.txt");
      EXPECT_NE(dom.find("data-js-errors=\"0\""), std::string::npos) << where;
      const json lay = script_json(dom, "layout");
      ASSERT_TRUE(lay.is_object()) << where << ": the page wrote no layout";
      check_axis(lay, where);
      check_labels(lay, where);
      if (unsafe) check_banner(lay, where);
    }
  fs::remove_all(dir);
}

class HtmlLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_chromium())
      GTEST_SKIP() << kChromium
                   << " not found: install Debian's `chromium` package to check the HTML report's "
                   << "layout (.ci/run does)";
    toy::register_toy();
  }
};

}  // namespace

TEST_F(HtmlLayout, KleppmannGcPauseUnderRedlockReadsTrueTimes) {
  const Scenario sc = load_scenario("kleppmann-gc-pause");
  const RunOutput r = run_scenario(sc, "redlock");
  ASSERT_FALSE(r.check.safe);
  check_everywhere(html_report(r, sc), "kleppmann-gc-pause-redlock", 15.0, true);
}

TEST_F(HtmlLayout, LongPauseReadsTrueTimes) {
  const Scenario sc = toy::gc_pause(45s);
  const RunOutput r = run_scenario(sc, "toylock");
  ASSERT_FALSE(r.check.safe);
  check_everywhere(html_report(r, sc), "toy-gc-pause-45s", 45.0, true);
}

TEST_F(HtmlLayout, BusyRunIsBandedAndUncluttered) {
  // Five retrying clients against five Redlock nodes, a pause nemesis, a dozen anomalies: repeated messages
  // and writes are drawn as bands with counts, labels still never overlap, the banner stays in the window.
  const Scenario sc = load_scenario("jepsen-etcd-nemesis-repeat");
  const RunOutput r = run_scenario(sc, "redlock");
  ASSERT_FALSE(r.check.safe);
  const fs::path dir = temp_dir("layout-busy");
  const fs::path page = dir / "busy.html";
  spit(page, html_report(r, sc));
  for (int width : {1024, 1400}) {
    const std::string where = "jepsen-etcd-nemesis-repeat-redlock at " + std::to_string(width) + " px, fit";
    const std::string dom = dump_dom(dir, page, "", width, 900, std::to_string(width));
    ASSERT_NE(dom.find("data-rendered=\"1\""), std::string::npos) << where << "\n"
                                                                  << slurp(dir / "stderr.txt");
    EXPECT_NE(dom.find("data-js-errors=\"0\""), std::string::npos) << where;
    const json lay = script_json(dom, "layout");
    ASSERT_TRUE(lay.is_object()) << where;
    check_axis(lay, where);
    check_labels(lay, where);
    check_banner(lay, where);
    std::size_t banded = 0;
    for (const auto& b : lay["bands"]) banded += b["count"].get<std::size_t>();
    EXPECT_GT(banded, r.trace.size() / 20) << where << ": repeated messages are not banded";
  }
  fs::remove_all(dir);
}
