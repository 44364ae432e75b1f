#include "locksim/scenarios/scenario.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

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

namespace locksim {

bool CountBound::holds(std::uint64_t count, double percentage) const {
  const double x = percent ? percentage : static_cast<double>(count);
  switch (op) {
    case Op::eq:
      return x == value;
    case Op::lt:
      return x < value;
    case Op::le:
      return x <= value;
    case Op::gt:
      return x > value;
    case Op::ge:
      return x >= value;
  }
  return false;
}

std::string Expectation::describe() const {
  std::vector<std::string> parts;
  if (verdict) parts.emplace_back(to_string(*verdict));
  if (anomalies) parts.push_back(fmt::format("anomalies = [{}]", fmt::join(*anomalies, ", ")));
  if (lost_updates) parts.push_back(fmt::format("lost_updates {}", lost_updates->text));
  if (tokens) parts.push_back(*tokens == Tokens::increasing ? "tokens increasing" : "tokens regressing");
  if (min_slack) parts.push_back(fmt::format("min_slack {}", format_time(*min_slack)));
  if (seeds) {
    parts.push_back(fmt::format("{} seed in {}..{}", quantifier() == Over::all ? "every" : "at least one",
                                seeds->first, seeds->second));
  }
  return parts.empty() ? std::string("anything") : fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace locksim
