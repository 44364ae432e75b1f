// libFuzzer target: the scenario loader on arbitrary bytes. Any input must either load or be rejected with an
// InputError (exit 2 in the CLI); any other exception, a crash, a hang or a leak is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "locksim/scenarios/loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const locksim::Scenario sc = locksim::load_scenario_text(text, "fuzz.toml");
    (void)sc;
  } catch (const locksim::InputError&) {
  }
  return 0;
}
