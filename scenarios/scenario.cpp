#include "scenarios/scenario.hpp"

#include <fmt/format.h>

namespace locksim {

std::string_view to_string(Verdict v) {
  return v == Verdict::safe ? "safe" : "unsafe";
}

InputError::InputError(std::string file_, std::uint32_t line_, std::string field_, std::string what)
    : std::runtime_error(line_ > 0 ? fmt::format("{}:{}: {}: {}", file_, line_, field_, what)
                                   : fmt::format("{}: {}: {}", file_, field_, what)),
      file(std::move(file_)),
      field(std::move(field_)),
      message(std::move(what)),
      line(line_) {}

}  // namespace locksim
