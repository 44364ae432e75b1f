#pragma once
// Headless Chromium for the HTML report's tests: the page rendered at a window size, its DOM after the
// scripts ran (--dump-dom), and the layout the page's own script reports of what it drew.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace locksim::test {

inline constexpr const char* kChromium = "/usr/bin/chromium";

inline bool have_chromium() {
  return std::filesystem::exists(kChromium);
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void spit(const std::filesystem::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}

/// A fresh directory for one test (pid + name: tests may run in parallel under ctest).
inline std::filesystem::path temp_dir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path d = fs::temp_directory_path() / ("locksim-html-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

inline const std::string& chromium_flags() {
  static const std::string f =
      "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking "
      "--disable-component-update --disable-sync --enable-logging=stderr --v=0 --hide-scrollbars";
  return f;
}

/// The DOM of `page` (opened with `hash`) after its scripts ran, in a window of `width`×`height`; stderr
/// goes to dir/stderr.txt.
inline std::string dump_dom(const std::filesystem::path& dir, const std::filesystem::path& page,
                            const std::string& hash, int width, int height, const std::string& tag) {
  const std::string url = "file://" + std::filesystem::absolute(page).string() + hash;
  const auto out = dir / ("dom-" + tag + ".html");
  const std::string cmd = "timeout 90 " + std::string(kChromium) + " " + chromium_flags() +
                          " --user-data-dir=" + (dir / ("profile-" + tag)).string() +
                          " --window-size=" + std::to_string(width) + "," + std::to_string(height) +
                          " --dump-dom '" + url + "' >" + out.string() + " 2>>" +
                          (dir / "stderr.txt").string();
  if (std::system(cmd.c_str()) != 0) return {};
  return slurp(out);
}

/// Every view of `page` in one Chromium start, through the harness tests/reports/html_views.html: `views` is
/// its list ("1024,1400:zoom=6%26at=15": width[:hash] each), `click` clicks a band of each kind in the first
/// view. Scrollbars are shown (they take width, as in a person's browser). Returns the harness's JSON: per
/// view {width, hash, layout, rendered, js_errors} (the first also `clicks`), or null.
inline nlohmann::json render_views(const std::filesystem::path& dir, const std::filesystem::path& page,
                                   const std::string& views, bool click, const std::string& tag) {
  const std::string harness = std::string(LOCKSIM_SOURCE_DIR) + "/tests/reports/html_views.html";
  const std::string url = "file://" + harness + "#page=file://" + std::filesystem::absolute(page).string() +
                          "&views=" + views + (click ? "&click=1" : "");
  const auto out = dir / ("views-" + tag + ".html");
  const std::string cmd =
      "timeout 120 " + std::string(kChromium) +
      " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking "
      "--disable-component-update --disable-sync --enable-logging=stderr --v=0 "
      "--allow-file-access-from-files "
      "--user-data-dir=" +
      (dir / ("profile-" + tag)).string() + " --window-size=1920,900 --dump-dom '" + url + "' >" +
      out.string() + " 2>>" + (dir / "stderr.txt").string();
  if (std::system(cmd.c_str()) != 0) return {};
  const std::string html = slurp(out);
  const std::string open = "<script type=\"application/json\" id=\"views\">";
  const auto a = html.find(open);
  if (a == std::string::npos) return {};
  const auto b = html.find("</script>", a);
  if (b == std::string::npos) return {};
  return nlohmann::json::parse(html.substr(a + open.size(), b - a - open.size()), nullptr, false);
}

/// The JSON of the script element `id` in `html` (the report's model, or the layout its script wrote).
inline nlohmann::json script_json(const std::string& html, const std::string& id) {
  const std::string open = "<script id=\"" + id + "\" type=\"application/json\">";
  const auto a = html.find(open);
  if (a == std::string::npos) return {};
  const auto b = html.find("</script>", a);
  if (b == std::string::npos) return {};
  return nlohmann::json::parse(html.substr(a + open.size(), b - a - open.size()), nullptr, false);
}

}  // namespace locksim::test
