// What a reader must know before trusting a verdict, said the same way by every report.
#include <fmt/format.h>

#include "locksim/reports/report.hpp"

namespace locksim {

namespace {

std::string reason_text(const UnbackedGrant& u) {
  switch (u.why) {
    case UnbackedGrant::Why::no_record:
      return "no record by a declared service process";
    case UnbackedGrant::Why::value_mismatch:
      return "value mismatch";
    case UnbackedGrant::Why::quorum_not_met:
      return "quorum not met";
    case UnbackedGrant::Why::undeclared_process:
      return "recorded by an undeclared process";
  }
  return "?";
}

}  // namespace

std::vector<std::string> run_warnings(const RunOutput& run) {
  std::vector<std::string> out;
  const CheckResult& c = run.check;
  if (c.unbacked.empty()) return out;
  const std::size_t n = run.history.grants.size();
  constexpr std::size_t kListed = 4;
  std::string which;
  for (std::size_t i = 0; i < c.unbacked.size() && i < kListed; ++i) {
    const UnbackedGrant& u = c.unbacked[i];
    const GrantRecord& g = run.history.grants.at(u.grant);
    which += fmt::format("{}{} at {} s: {} ({})", i ? "; " : "", g.client, format_seconds(g.granted, 3),
                         reason_text(u), u.detail);
  }
  if (c.unbacked.size() > kListed) which += fmt::format("; and {} more", c.unbacked.size() - kListed);
  const std::string head =
      c.unbacked.size() == n
          ? fmt::format("none of the {} grants has a backing service record", n)
          : fmt::format("{} of {} grants have no backing service record", c.unbacked.size(), n);
  out.push_back(fmt::format(
      "{} [{}]: safety cannot be judged from service records for those grants (their epochs follow when "
      "the client heard; protocol '{}' records its grants through History::recorder, quorum {})",
      head, which, run.protocol, std::max<std::uint32_t>(run.history.service_quorum, 1)));
  return out;
}

}  // namespace locksim
