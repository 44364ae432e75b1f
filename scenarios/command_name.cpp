#include "locksim/scenarios/command_name.hpp"

namespace locksim {
namespace {
std::string& name_storage() {
  static std::string name = "locksim";
  return name;
}
}  // namespace

const std::string& command_name() {
  return name_storage();
}

void set_command_name(std::string_view name) {
  name_storage() = name.empty() ? "locksim" : std::string(name);
}

}  // namespace locksim
