#pragma once
#include <string>
#include <vector>

namespace locksim {

/// A named variant of a protocol or of the resource, selected with `variant = NAME` in a scenario: a
/// behaviour broken on purpose for teaching, or a mutant the test suite must catch.
struct Variant {
  std::string name;
  std::string doc;  ///< one line: what it changes
};

}  // namespace locksim
