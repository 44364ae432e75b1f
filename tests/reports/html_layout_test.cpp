// The HTML report as a person sees it: rendered by headless Chromium at three window widths, at "fit" and
// zoomed in, and checked on what was drawn (the page's script reports the boxes it laid out): every story
// event sits where the axis's tick labels say its time is (within one pixel's worth), every squeezed gap
// is drawn with its label, no two labels overlap and the violation banner is inside the window.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "locksim/reports/report.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/runner.hpp"
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
  struct Box {
    double x0, y0, x1, y1;
    std::string text;
  };
  std::vector<Box> boxes;
  for (const auto& t : lay["texts"]) {
    const auto& b = t["box"];
    const double x = b[0].get<double>(), y = b[1].get<double>();
    boxes.push_back({x, y, x + b[2].get<double>(), y + b[3].get<double>(), t["text"].get<std::string>()});
  }
  // By left edge: a box can only overlap the ones that start before it ends.
  std::sort(boxes.begin(), boxes.end(), [](const Box& a, const Box& b) { return a.x0 < b.x0; });
  for (std::size_t i = 0; i < boxes.size(); ++i)
    for (std::size_t j = i + 1; j < boxes.size() && boxes[j].x0 < boxes[i].x1 - 0.5; ++j) {
      const Box &a = boxes[i], &b = boxes[j];
      const double ox = std::min(a.x1, b.x1) - b.x0, oy = std::min(a.y1, b.y1) - std::max(a.y0, b.y0);
      EXPECT_FALSE(ox > 0.5 && oy > 0.5)
          << where << ": labels overlap: \"" << a.text << "\" and \"" << b.text << "\"";
    }
}

/// Nothing cut off: the diagram's visible area ends inside the window; at fit the whole diagram is in it (no
/// scrolling); no label runs past the diagram's edges (at any zoom: what is off screen is a scroll away, not
/// cut); lane names stay in their column.
void check_unclipped(const json& lay, const std::string& where) {
  const double page = lay["page_width"].get<double>();
  const auto& sc = lay["scroller"];
  EXPECT_LE(sc["right"].get<double>(), page + 0.5) << where << ": the diagram's area runs past the window";
  const double client = sc["client_width"].get<double>();
  if (lay["zoom"].get<double>() == 1.0) {
    EXPECT_LE(sc["scroll_width"].get<double>(), client + 0.5)
        << where << ": at fit the diagram is wider than its area (" << sc["scroll_width"] << " px in "
        << client << " px): its right edge is cut off";
  }
  const double w = lay["diagram"][0].get<double>(), h = lay["diagram"][1].get<double>();
  for (const auto& t : lay["texts"]) {
    const auto& b = t["box"];
    const double x = b[0].get<double>(), y = b[1].get<double>(), bw = b[2].get<double>(),
                 bh = b[3].get<double>();
    EXPECT_TRUE(x >= -0.5 && x + bw <= w + 0.5 && y >= -0.5 && y + bh <= h + 0.5)
        << where << ": \"" << t["text"].get<std::string>() << "\" at [" << x << ", " << x + bw << "] × [" << y
        << ", " << y + bh << "] is cut by the diagram's edge (" << w << " × " << h << " px)";
  }
  const double column = lay["lane_column"].get<double>();
  for (const auto& t : lay["lane_texts"])
    EXPECT_LE(t["box"][0].get<double>() + t["box"][2].get<double>(), column + 0.5)
        << where << ": lane name \"" << t["text"].get<std::string>() << "\" is cut";
}

/// The banner is inside the window, nothing in it cut off, and it names each violation as the story tells
/// it: its kind, the epoch that broke the order and the moment.
void check_banner(const json& lay, const RunOutput& r, const std::string& where) {
  ASSERT_TRUE(lay["banner"].is_object()) << where << ": no violation banner";
  const auto& b = lay["banner"];
  const double w = lay["page_width"].get<double>(), h = lay["viewport"][1].get<double>();
  EXPECT_GE(b["left"].get<double>(), -0.5) << where;
  EXPECT_LE(b["right"].get<double>(), w + 0.5) << where << ": the banner runs past the window's right edge";
  EXPECT_GE(b["top"].get<double>(), -0.5) << where;
  EXPECT_LE(b["bottom"].get<double>(), h + 0.5) << where << ": the banner runs past the window's bottom";
  EXPECT_FALSE(b["overflow"].get<bool>()) << where << ": the banner's text is clipped";
  const auto& items = b["items"];
  ASSERT_EQ(items.size(), r.check.violations.size()) << where;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Violation& v = r.check.violations[i];
    const std::string item = items[i].get<std::string>(), told = anomaly_story(r, v);
    std::string kind = v.kind;
    std::replace(kind.begin(), kind.end(), '-', ' ');
    const std::string at = format_seconds(v.time, 3) + " s";
    const std::string epoch =
        fmt::format("epoch {}", v.kind == kTokenRegression ? v.grant_later.epoch : v.later.epoch);
    for (const std::string& words : {kind, at, epoch}) {
      EXPECT_NE(item.find(words), std::string::npos)
          << where << ": banner line " << i + 1 << " \"" << item << "\" does not say \"" << words << "\"";
      if (words != kind) {
        EXPECT_NE(told.find(words), std::string::npos)
            << where << ": the story does not say \"" << words << "\"";
      }
    }
  }
}

/// At 1024, 1400 and 1920 px, at fit and zoomed in ×6 at `at` seconds (all six in one Chromium start).
const std::vector<int> kWidths = {1024, 1400, 1920};

std::string views_at(double at) {
  std::string v;
  for (int w : kWidths) v += fmt::format("{}{},{}:zoom=6%26at={:.3f}", v.empty() ? "" : ",", w, w, at);
  return v;
}

/// Renders the report of `r` at every width and zoom and checks each view: times read off the axis, no
/// overlapping labels, nothing clipped, the banner. Returns the views (the first with its band clicks).
json check_everywhere(const RunOutput& r, const Scenario& sc, const std::string& name, double at,
                      bool click = false) {
  const fs::path dir = temp_dir("layout-" + name);
  const fs::path page = dir / (name + ".html");
  spit(page, html_report(r, sc));
  const json views = render_views(dir, page, views_at(at), click, name);
  EXPECT_TRUE(views.is_array() && views.size() == 2 * kWidths.size())
      << name << ": the harness returned no views\n"
      << slurp(dir / "stderr.txt");
  if (!views.is_array()) return views;
  for (const auto& v : views) {
    const std::string where =
        fmt::format("{} at {} px, {}", name, v["width"].get<int>(),
                    v["hash"].get<std::string>().empty() ? "fit" : v["hash"].get<std::string>());
    EXPECT_TRUE(v["rendered"].get<bool>()) << where << ": the page did not finish drawing";
    EXPECT_EQ(v["js_errors"].get<int>(), 0) << where << "\n" << slurp(dir / "stderr.txt");
    const json& lay = v["layout"];
    if (!lay.is_object()) {
      ADD_FAILURE() << where << ": the page wrote no layout";
      continue;
    }
    EXPECT_EQ(lay["viewport"][0].get<int>(), v["width"].get<int>()) << where;
    check_axis(lay, where);
    check_labels(lay, where);
    check_unclipped(lay, where);
    if (!r.check.safe) check_banner(lay, r, where);
  }
  fs::remove_all(dir);
  return views;
}

/// When the first violation happened (or a third of the way in, when none did): where the zoomed views look.
double moment(const RunOutput& r) {
  const Time t = r.check.violations.empty() ? r.run.end / 3 : r.check.violations[0].time;
  return std::chrono::duration<double>(t).count();
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
  check_everywhere(r, sc, "kleppmann-gc-pause-redlock", 15.0);
}

TEST_F(HtmlLayout, LongPauseReadsTrueTimes) {
  const Scenario sc = toy::gc_pause(45s);
  const RunOutput r = run_scenario(sc, "toylock");
  ASSERT_FALSE(r.check.safe);
  check_everywhere(r, sc, "toy-gc-pause-45s", 45.0);
}

// The catalog's three busiest runs by event count (`locksim run NAME -p P --report json`, "events"; seed 1):
// gc-pause-pareto under redlock (235,578) and under lease+fence (170,510, as many as lease), then
// jepsen-etcd-nemesis-repeat under redlock (55,815).
TEST_F(HtmlLayout, GcPauseParetoUnderRedlockIsReadableEverywhere) {
  const Scenario sc = load_scenario("gc-pause-pareto");
  const RunOutput r = run_scenario(sc, "redlock");
  check_everywhere(r, sc, "gc-pause-pareto-redlock", moment(r));
}

TEST_F(HtmlLayout, GcPauseParetoUnderLeaseFenceIsReadableEverywhere) {
  const Scenario sc = load_scenario("gc-pause-pareto");
  const RunOutput r = run_scenario(sc, "lease+fence");
  check_everywhere(r, sc, "gc-pause-pareto-lease-fence", moment(r));
}

TEST_F(HtmlLayout, BusyRunIsBandedAndBandsOpenOnClick) {
  // Five retrying clients against five Redlock nodes, a pause nemesis, a dozen anomalies: repeated messages,
  // writes and service grants are drawn as bands with counts; clicking one shows its members, clicking again
  // folds it; labels still never overlap, nothing is clipped, the banner stays in the window.
  const Scenario sc = load_scenario("jepsen-etcd-nemesis-repeat");
  const RunOutput r = run_scenario(sc, "redlock");
  ASSERT_FALSE(r.check.safe);
  const json views = check_everywhere(r, sc, "jepsen-etcd-nemesis-repeat-redlock", moment(r), true);
  ASSERT_TRUE(views.is_array() && !views.empty());
  for (const auto& v : views) {
    if (!v["layout"].is_object()) continue;
    std::size_t banded = 0;
    std::set<std::string> kinds;
    for (const auto& b : v["layout"]["bands"]) {
      banded += b["count"].get<std::size_t>();
      const std::string id = b["id"].get<std::string>();
      kinds.insert(id.rfind("w|", 0) == 0   ? "writes"
                   : id.rfind("s|", 0) == 0 ? "service grants"
                                            : "messages");
    }
    if (!v["hash"].get<std::string>().empty()) continue;  // at fit
    const std::string where = fmt::format("at {} px, fit", v["width"].get<int>());
    EXPECT_GT(banded, r.trace.size() / 20) << where << ": repeated messages are not banded";
    if (v["width"].get<int>() != kWidths[0]) continue;  // wider, some grants are far enough apart to show
    for (const char* k : {"messages", "writes", "service grants"})
      EXPECT_EQ(kinds.count(k), 1u) << where << ": no band of repeated " << k;
  }
  const auto& clicks = views[0]["clicks"];
  ASSERT_TRUE(clicks.is_array());
  EXPECT_EQ(clicks.size(), 3u) << "a band of each kind clicked: " << clicks.dump();
  for (const auto& c : clicks) {
    const std::string what = c["kind"].get<std::string>() + " band " + c["id"].get<std::string>();
    const int count = c["count"].get<int>();
    EXPECT_GE(count, 6) << what;
    EXPECT_EQ(c["before"].get<int>(), 0) << what << ": members drawn before it was opened";
    const auto &o = c["opened"], &f = c["folded"];
    EXPECT_EQ(o["target"], c["id"]) << what << ": the click at its middle landed on " << o["target"];
    EXPECT_TRUE(o.value("open", false)) << what << ": not open after a click";
    EXPECT_EQ(o.value("members", -1), count)
        << what << ": " << count << " members, " << o["members"] << " shown";
    EXPECT_EQ(o.value("count", -1), count) << what;
    EXPECT_EQ(f["target"], c["id"]) << what << ": the second click landed on " << f["target"];
    EXPECT_FALSE(f.value("open", true)) << what << ": still open after a second click";
    EXPECT_EQ(f.value("members", -1), 0) << what << ": members still drawn after folding";
  }
}
