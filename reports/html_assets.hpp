#pragma once
/// The HTML report's stylesheet and scripts, embedded at build time from reports/html/ (see
/// reports/embed_assets.cmake): the report is one self-contained page, its CSS and JavaScript real files.
#include <string_view>

namespace locksim::html_assets {
extern const std::string_view css;        ///< reports/html/report.css
extern const std::string_view layout_js;  ///< reports/html/layout.js: the pure layout functions
extern const std::string_view report_js;  ///< reports/html/report.js: draws the page with them
}  // namespace locksim::html_assets
