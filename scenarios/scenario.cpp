#include "locksim/scenarios/scenario.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace locksim {

std::string_view to_string(Verdict v) {
  return v == Verdict::safe ? "safe" : "unsafe";
}

ResourceSpec Scenario::first_resource() const {
  return ResourceSpec{.name = resource_name,
                      .key = resource_key,
                      .mode = resource_mode,
                      .variant = resource_variant,
                      .kind = resource_kind,
                      .idempotency_keys = idempotency_keys,
                      .idempotency_retention = idempotency_retention,
                      .cas_max_retries = cas_max_retries,
                      .job_period = job_period,
                      .job_name = job_name};
}

std::vector<ResourceSpec> Scenario::all_resources() const {
  std::vector<ResourceSpec> out{first_resource()};
  out.insert(out.end(), more_resources.begin(), more_resources.end());
  return out;
}

void Scenario::set_first_resource(const ResourceSpec& r) {
  resource_name = r.name;
  resource_key = r.key;
  resource_mode = r.mode;
  resource_variant = r.variant;
  resource_kind = r.kind;
  idempotency_keys = r.idempotency_keys;
  idempotency_retention = r.idempotency_retention;
  cas_max_retries = r.cas_max_retries;
  job_period = r.job_period;
  job_name = r.job_name;
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
