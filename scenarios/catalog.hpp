#pragma once
/// The built-in catalog: the scenario files of scenarios/catalog/, embedded in the binary at build time.
#include <span>
#include <string>
#include <string_view>

#include "locksim/scenarios/scenario.hpp"

namespace locksim {

struct CatalogEntry {
  std::string_view name;  ///< file name without .toml, e.g. "kleppmann-gc-pause"
  std::string_view path;  ///< path in the source tree, for messages
  std::string_view text;  ///< the TOML text
};

/// Every catalog entry, sorted by name.
std::span<const CatalogEntry> catalog();

/// A catalog name, or a path to a .toml file. Throws InputError (with the nearest catalog name for a typo).
Scenario load_scenario(const std::string& name_or_path);

/// The catalog names, sorted.
std::vector<std::string> catalog_names();

/// The nearest of `candidates` to `word` by edit distance (empty if none is reasonably close).
std::string nearest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace locksim
