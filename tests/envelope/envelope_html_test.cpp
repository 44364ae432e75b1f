// The envelope page as a person sees it, in headless Chromium: every cell sits where the axes' tick labels
// say its values are and shows the status the data says, the refined boundary lies inside the plot, the
// axes are labelled in units, and a click on an unsafe cell shows the command that replays its run.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "locksim/reports/envelope_html.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/command_name.hpp"
#include "locksim/scenarios/envelope.hpp"
#include "tests/reports/chromium.hpp"

using namespace locksim;
using namespace locksim::test;
using nlohmann::json;

namespace {

/// The line value = a + b · px through the tick labels of one axis (centres of their boxes).
struct Scale {
  double a = 0, b = 0;
  double at(double px) const { return a + b * px; }
};

Scale fit_ticks(const json& ticks, const std::string& axis, const std::string& where) {
  std::vector<std::pair<double, double>> pv;  // px, value
  for (const json& t : ticks) {
    if (t["axis"] != axis) continue;
    const auto& b = t["box"];
    const double px = axis == "x" ? b[0].get<double>() + b[2].get<double>() / 2
                                  : b[1].get<double>() + b[3].get<double>() / 2;
    pv.emplace_back(px, t["value"].get<double>());
    EXPECT_TRUE(t["text"].get<std::string>().ends_with(" s"))
        << where << ": tick " << t["text"] << " has no unit";
  }
  EXPECT_GE(pv.size(), 3u) << where << ": axis " << axis;
  Scale s;
  if (pv.size() < 2) return s;
  s.b = (pv.back().second - pv.front().second) / (pv.back().first - pv.front().first);
  s.a = pv.front().second - s.b * pv.front().first;
  for (const auto& [px, v] : pv)
    EXPECT_NEAR(s.at(px), v, 0.01 * std::abs(s.b) * 100) << where << ": ticks not evenly spaced";
  return s;
}

bool inside(const json& box, const json& plot, double slack = 1.0) {
  const double x = box[0].get<double>() + box[2].get<double>() / 2,
               y = box[1].get<double>() + box[3].get<double>() / 2;
  return x >= plot[0].get<double>() - slack && x <= plot[0].get<double>() + plot[2].get<double>() + slack &&
         y >= plot[1].get<double>() - slack && y <= plot[1].get<double>() + plot[3].get<double>() + slack;
}

}  // namespace

TEST(EnvelopeHtml, CellsBoundaryAxesAndClickInChromium) {
  if (!have_chromium()) GTEST_SKIP() << kChromium << " not found: install Debian's `chromium` package";
  EnvelopeSpec s;
  s.scenario = "kleppmann-gc-pause";
  for (const CatalogEntry& e : catalog())
    if (e.name == s.scenario) s.toml = std::string(e.text);
  s.file = "kleppmann-gc-pause.toml";
  s.protocols = {"redis", "lease+fence"};
  s.axes.push_back(parse_vary("lock.ttl=1s..40s", s.toml, s.file));
  s.axes.push_back(parse_vary("fault[0].duration=1s..40s", s.toml, s.file));
  s.steps = 8;
  s.seeds = 2;
  const EnvelopeResult r = run_envelope(s, 2);
  const PointCommand command = [](const std::string& p, const EnvelopePoint& pt) {
    return fmt::format("{} run pts/point-{}.toml -p {} --seed {}", command_name(), pt.index, p,
                       *pt.first_unsafe_seed);
  };
  std::int64_t clicked = -1;
  for (const EnvelopePoint& p : r.protocols[0].grid)
    if (p.is_unsafe() && clicked < 0) clicked = p.index;
  ASSERT_GE(clicked, 0);

  const auto dir = temp_dir("envelope");
  const auto page = dir / "envelope.html";
  spit(page, envelope_html(r, command));
  const std::string dom = dump_dom(dir, page, "#click=redis:" + std::to_string(clicked), 1400, 1000, "click");
  ASSERT_NE(dom.find("data-rendered=\"1\""), std::string::npos) << slurp(dir / "stderr.txt");
  EXPECT_NE(dom.find("data-js-errors=\"0\""), std::string::npos);
  const json lay = script_json(dom, "layout");
  ASSERT_TRUE(lay.is_object());
  ASSERT_EQ(lay["protocols"].size(), 2u);
  for (std::size_t pi = 0; pi < 2; ++pi) {
    const json& p = lay["protocols"][pi];
    const ProtocolEnvelope& pe = r.protocols[pi];
    const std::string where = pe.protocol;
    EXPECT_EQ(p["protocol"], pe.protocol);
    const Scale sx = fit_ticks(p["ticks"], "x", where), sy = fit_ticks(p["ticks"], "y", where);
    const double cell_w = (40.0 - 1.0) / (s.steps - 1);
    ASSERT_EQ(p["cells"].size(), pe.grid.size()) << where;
    for (const json& c : p["cells"]) {
      const EnvelopePoint& pt = pe.grid.at(c["index"].get<std::size_t>());
      const auto& b = c["box"];
      EXPECT_TRUE(inside(b, p["plot"])) << where << ": cell " << c["index"] << " outside the plot";
      // Where the axes say the cell is: its centre read off the tick labels, within a tenth of a cell.
      const double x = sx.at(b[0].get<double>() + b[2].get<double>() / 2);
      const double y = sy.at(b[1].get<double>() + b[3].get<double>() / 2);
      EXPECT_NEAR(x, pt.at[0] / 1e9, cell_w / 10)
          << where << ": cell " << c["index"] << " drawn at ttl " << x;
      EXPECT_NEAR(y, pt.at[1] / 1e9, cell_w / 10)
          << where << ": cell " << c["index"] << " drawn at pause " << y;
      EXPECT_EQ(c["status"].get<std::string>(), std::string(pt.status())) << where;
      EXPECT_DOUBLE_EQ(c["fraction"].get<double>(), pt.fraction()) << where;
      // A cell is a step wide on the axis's scale.
      EXPECT_NEAR(b[2].get<double>() * std::abs(sx.b), cell_w, cell_w / 20) << where;
    }
    ASSERT_EQ(p["crossings"].size(), pe.boundary.size()) << where;
    for (const json& c : p["crossings"])
      EXPECT_TRUE(inside(c["box"], p["plot"])) << where << ": boundary outside the plot";
    const std::vector<std::string> titles = p["titles"].get<std::vector<std::string>>();
    EXPECT_EQ(titles, (std::vector<std::string>{"lock.ttl (s)", "fault[0].duration (s)"})) << where;
  }
  EXPECT_FALSE(lay["protocols"][0]["crossings"].empty());
  EXPECT_TRUE(lay["protocols"][1]["crossings"].empty());  // lease+fence: safe everywhere, no boundary
  EXPECT_EQ(lay["protocols"][0]["command"].get<std::string>(),
            command("redis", r.protocols[0].grid[static_cast<std::size_t>(clicked)]));
  EXPECT_EQ(lay["protocols"][1]["command"].get<std::string>(), "");
  std::filesystem::remove_all(dir);
}
