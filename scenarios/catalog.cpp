#include "locksim/scenarios/catalog.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "locksim/scenarios/loader.hpp"

namespace locksim {

std::vector<std::string> catalog_names() {
  std::vector<std::string> out;
  for (const auto& e : catalog()) out.emplace_back(e.name);
  return out;
}

std::string nearest(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = ~std::size_t{0};
  for (const auto& c : candidates) {
    std::vector<std::size_t> prev(c.size() + 1), cur(c.size() + 1);
    for (std::size_t j = 0; j <= c.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= word.size(); ++i) {
      cur[0] = i;
      for (std::size_t j = 1; j <= c.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (word[i - 1] == c[j - 1] ? 0 : 1)});
      std::swap(prev, cur);
    }
    if (prev[c.size()] < best_d) {
      best_d = prev[c.size()];
      best = c;
    }
  }
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 2);
  return best_d <= limit ? best : std::string{};
}

Scenario load_scenario(const std::string& name_or_path) {
  for (const auto& e : catalog())
    if (e.name == name_or_path) return load_scenario_text(e.text, std::string(e.path));
  const bool looks_like_path = name_or_path.find('/') != std::string::npos ||
                               name_or_path.ends_with(".toml") || std::filesystem::exists(name_or_path);
  if (looks_like_path) {
    if (std::filesystem::is_directory(name_or_path))
      throw InputError(name_or_path, 0, "scenario",
                       fmt::format("a directory, not a scenario file (`locksim check {}` judges every "
                                   "scenario in it)",
                                   name_or_path));
    if (!std::filesystem::is_regular_file(name_or_path))
      throw InputError(name_or_path, 0, "scenario", "no such file");
    return load_scenario_file(name_or_path);
  }
  const std::string near = nearest(name_or_path, catalog_names());
  throw InputError(
      "command line", 0, "SCENARIO",
      fmt::format("'{}' is neither a catalog scenario nor a file{}", name_or_path,
                  near.empty() ? " (see `locksim list`)" : fmt::format(" (did you mean '{}'?)", near)));
}

}  // namespace locksim
