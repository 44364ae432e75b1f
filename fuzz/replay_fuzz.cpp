// libFuzzer target: the replay-file loader (the [replay] table, then the scenario) on arbitrary bytes. Any
// input must either load or be rejected with an InputError; anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "locksim/scenarios/replay.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const locksim::ReplayFile f = locksim::load_replay_text(text, "fuzz.replay.toml");
    (void)f;
  } catch (const locksim::InputError&) {
  }
  return 0;
}
