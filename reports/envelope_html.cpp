// The envelope page (reports/envelope_html.hpp): the SVG is drawn here, so the picture needs no script to be
// seen; reports/envelope/envelope.js only adds the click and the layout report.
#include "locksim/reports/envelope_html.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "locksim/reports/report.hpp"

namespace locksim {

namespace envelope_assets {
extern const std::string_view css;
extern const std::string_view js;
}  // namespace envelope_assets

namespace {

std::string esc(std::string_view s) {
  return html_escape(s);
}

/// Round tick values: steps of 1, 2 or 5 × 10^k, about `want` of them over [lo, hi].
std::vector<double> ticks(double lo, double hi, int want) {
  std::vector<double> out;
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / want;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    out.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return out;
}

std::string tick_text(const EnvelopeAxis& a, double v) {
  return a.kind == AxisKind::duration ? fmt::format("{:g} s", v) : fmt::format("{:g}", v);
}

std::string axis_title(const EnvelopeAxis& a) {
  return a.kind == AxisKind::duration ? a.field + " (s)" : a.field;
}

/// A cell's fill: green for safe, grey for inconclusive, from light to dark red by the unsafe fraction.
std::string fill(const EnvelopePoint& p) {
  if (p.is_safe()) return "#cfe8cf";
  if (!p.is_unsafe()) return "#d0d0d0";
  const double f = p.fraction();
  const auto mix = [&](int a, int b) { return static_cast<int>(std::lround(a + (b - a) * f)); };
  return fmt::format("#{:02x}{:02x}{:02x}", mix(0xf6, 0xb0), mix(0xc0, 0x10), mix(0xb8, 0x18));
}

std::string fraction_text(const EnvelopePoint& p) {
  if (p.fraction() == 0) return "0";
  if (p.fraction() == 1) return "1";
  return fmt::format("{:.2f}", p.fraction()).substr(1);  // ".35"
}

struct Plot {
  double left = 72, top = 16, width = 520, height = 400;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;  // display units
  double px(double x) const { return left + (x - x0) / (x1 - x0) * width; }
  double py(double y) const { return top + height - (y - y0) / (y1 - y0) * height; }
};

std::string protocol_svg(const EnvelopeResult& r, const ProtocolEnvelope& pe, const PointCommand& command) {
  const EnvelopeSpec& s = r.spec;
  const bool two = s.axes.size() == 2;
  const EnvelopeAxis& ax = s.axes[0];
  Plot pl;
  if (!two) pl.height = 60;
  const double sx = ax.display((ax.hi - ax.lo) / (s.steps - 1));
  pl.x0 = ax.display(ax.lo) - sx / 2;
  pl.x1 = ax.display(ax.hi) + sx / 2;
  double sy = 1;
  if (two) {
    const EnvelopeAxis& ay = s.axes[1];
    sy = ay.display((ay.hi - ay.lo) / (s.steps - 1));
    pl.y0 = ay.display(ay.lo) - sy / 2;
    pl.y1 = ay.display(ay.hi) + sy / 2;
  }
  const double W = pl.left + pl.width + 16, H = pl.top + pl.height + 48;
  std::string o = fmt::format(
      "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "viewBox=\"0 0 "
      "{:.0f} {:.0f}\">\n",
      W, H, W, H);
  const double cw = pl.width / s.steps, ch = two ? pl.height / s.steps : pl.height;
  for (const EnvelopePoint& p : pe.grid) {
    const double cx = pl.px(ax.display(p.at[0]));
    const double cy = two ? pl.py(s.axes[1].display(p.at[1])) : pl.top + pl.height / 2;
    std::string where = fmt::format("{} = {}", ax.field, ax.format(p.at[0]));
    std::string at = fmt::format("[{}", ax.display(p.at[0]));
    if (two) {
      where += fmt::format(", {} = {}", s.axes[1].field, s.axes[1].format(p.at[1]));
      at += fmt::format(",{}", s.axes[1].display(p.at[1]));
    }
    at += "]";
    const std::string cmd = p.first_unsafe_seed && command ? command(pe.protocol, p) : "";
    o += fmt::format(
        "<rect class=\"cell\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\" "
        "data-index=\"{}\" data-at=\"{}\" data-fraction=\"{}\" data-status=\"{}\" "
        "data-command=\"{}\"><title>{}: "
        "{} of {} seed(s) unsafe{}</title></rect>\n",
        cx - cw / 2, cy - ch / 2, cw, ch, fill(p), p.index, at, p.fraction(), p.status(), esc(cmd),
        esc(where), p.unsafe + p.errors, p.runs,
        p.inconclusive ? fmt::format(", {} inconclusive", p.inconclusive) : "");
    if (cw >= 16 && ch >= 11)
      o += fmt::format("<text class=\"frac{}\" x=\"{:.2f}\" y=\"{:.2f}\">{}</text>\n",
                       p.fraction() > 0.6 ? " dark" : "", cx, cy, fraction_text(p));
  }
  o += fmt::format("<rect class=\"frame\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\"/>\n",
                   pl.left, pl.top, pl.width, pl.height);
  // The boundary: the refined crossings, joined in order along the independent axis (2 fields), and the fit.
  std::vector<std::pair<double, double>> pts;
  for (const BoundaryPoint& b : pe.boundary)
    pts.emplace_back(pl.px(ax.display(b.at[0])),
                     two ? pl.py(s.axes[1].display(b.at[1])) : pl.top + pl.height / 2);
  if (two && pts.size() >= 2) {
    const bool by_x = pe.fit.dependent == 1;
    std::vector<std::pair<double, double>> sorted = pts;
    std::sort(sorted.begin(), sorted.end(), [&](const auto& a, const auto& b) {
      return by_x ? std::tie(a.first, a.second) < std::tie(b.first, b.second)
                  : std::tie(a.second, a.first) < std::tie(b.second, b.first);
    });
    std::string d;
    for (const auto& [x, y] : sorted) d += fmt::format("{}{:.2f},{:.2f}", d.empty() ? "M" : " L", x, y);
    o += fmt::format("<path class=\"boundary\" d=\"{}\"/>\n", d);
  }
  if (!two)
    for (const auto& [x, y] : pts)
      o += fmt::format("<line class=\"boundary\" x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\"/>\n",
                       x, pl.top, x, pl.top + pl.height);
  for (const auto& [x, y] : pts)
    o += fmt::format("<circle class=\"crossing\" cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"2.5\"/>\n", x, y);
  if (two && pe.fit.points >= 2) {
    // The fitted line, clipped to the plot by sampling its ends on the independent axis.
    const bool y_dep = pe.fit.dependent == 1;
    const double a0 = y_dep ? pl.x0 : pl.y0, a1 = y_dep ? pl.x1 : pl.y1;
    const double lo = y_dep ? pl.y0 : pl.x0, hi = y_dep ? pl.y1 : pl.x1;
    std::string d;
    for (int k = 0; k <= 200; ++k) {
      const double u = a0 + (a1 - a0) * k / 200.0, v = pe.fit.slope * u + pe.fit.intercept;
      if (v < lo || v > hi) continue;
      const double X = y_dep ? pl.px(u) : pl.px(v), Y = y_dep ? pl.py(v) : pl.py(u);
      d += fmt::format("{}{:.2f},{:.2f}", d.empty() ? "M" : " L", X, Y);
    }
    if (!d.empty()) o += fmt::format("<path class=\"fit\" d=\"{}\"/>\n", d);
  }
  // Axes: ticks in the fields' units, and their titles.
  for (double v : ticks(ax.display(ax.lo), ax.display(ax.hi), 8)) {
    const double x = pl.px(v);
    o += fmt::format("<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"#444\"/>\n", x,
                     pl.top + pl.height, x, pl.top + pl.height + 5);
    o += fmt::format(
        "<text class=\"tick\" data-axis=\"x\" data-value=\"{}\" x=\"{:.2f}\" y=\"{:.2f}\" "
        "text-anchor=\"middle\">{}</text>\n",
        v, x, pl.top + pl.height + 18, esc(tick_text(ax, v)));
  }
  o += fmt::format("<text class=\"axis-title\" x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\">{}</text>\n",
                   pl.left + pl.width / 2, pl.top + pl.height + 40, esc(axis_title(ax)));
  if (two) {
    const EnvelopeAxis& ay = s.axes[1];
    for (double v : ticks(ay.display(ay.lo), ay.display(ay.hi), 8)) {
      const double y = pl.py(v);
      o += fmt::format("<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"#444\"/>\n",
                       pl.left - 5, y, pl.left, y);
      o += fmt::format(
          "<text class=\"tick\" data-axis=\"y\" data-value=\"{}\" x=\"{:.2f}\" y=\"{:.2f}\" "
          "text-anchor=\"end\" dominant-baseline=\"central\">{}</text>\n",
          v, pl.left - 8, y, esc(tick_text(ay, v)));
    }
    o += fmt::format(
        "<text class=\"axis-title\" transform=\"translate(16 {:.2f}) rotate(-90)\" "
        "text-anchor=\"middle\">{}</text>\n",
        pl.top + pl.height / 2, esc(axis_title(ay)));
  }
  return o + "</svg>\n";
}

}  // namespace

std::string envelope_html(const EnvelopeResult& r, const PointCommand& command) {
  const EnvelopeSpec& s = r.spec;
  std::vector<std::string> fields;
  for (const EnvelopeAxis& a : s.axes)
    fields.push_back(fmt::format("{} from {} to {}", a.field, a.format(a.lo), a.format(a.hi)));
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  o += fmt::format("<title>envelope: {}</title>\n<style>\n{}</style>\n</head>\n<body>\n", esc(s.scenario),
                   envelope_assets::css);
  o += fmt::format("<h1>Safety envelope of {}</h1>\n", esc(s.scenario));
  o += fmt::format(
      "<p class=\"meta\">{}; {} step(s) a field, {} seed(s) a point (from seed {}), {} refinement step(s) "
      "at each crossing. A cell is unsafe if any of its seeds is; its number is the unsafe fraction. "
      "Click a cell for the command that replays its first unsafe run.</p>\n",
      esc(fmt::format("{}", fmt::join(fields, " × "))), s.steps, s.seeds, s.first_seed, s.refine);
  o += "<p class=\"legend\"><span style=\"background:#cfe8cf\"></span>safe<span "
       "style=\"background:#f6c0b8\"></span>"
       "some seeds unsafe<span style=\"background:#b01018\"></span>every seed unsafe<span "
       "style=\"background:#d0d0d0\"></span>inconclusive (a limit was hit)<span "
       "style=\"background:#111\"></span>"
       "refined boundary<span style=\"background:#1f5fbf\"></span>least-squares line</p>\n";
  o += "<div class=\"protocols\">\n";
  for (const ProtocolEnvelope& pe : r.protocols) {
    o += fmt::format(
        "<section class=\"protocol\" data-protocol=\"{}\">\n<h2>{}</h2>\n<p class=\"summary\">{}</p>\n",
        esc(pe.protocol), esc(pe.protocol), esc(pe.summary));
    o += protocol_svg(r, pe, command);
    o += "<pre class=\"command\"></pre>\n</section>\n";
  }
  o += "</div>\n";
  o += fmt::format("<script>\n{}</script>\n</body>\n</html>\n", envelope_assets::js);
  return o;
}

}  // namespace locksim
