// How many notes of one label a client's program can log at most (scenarios/workload.hpp: most_notes), for
// the loader's check that a fault's `after = { note, nth }` can ever happen.
#include <algorithm>
#include <iterator>

#include "locksim/scenarios/workload.hpp"

namespace locksim {

namespace {

/// "No bound" in the arithmetic of most_notes.
constexpr std::uint64_t kUnbounded = ~std::uint64_t{0};

std::uint64_t times(std::uint64_t a, std::uint64_t b) {
  if (a == 0 || b == 0) return 0;
  if (a == kUnbounded || b == kUnbounded || a > kUnbounded / b) return kUnbounded;
  return a * b;
}
std::uint64_t plus(std::uint64_t a, std::uint64_t b) {
  return a > kUnbounded - b ? kUnbounded : a + b;
}

bool names_note(const ClientStep& s, std::string_view label) {
  if (s.note == label) return true;
  for (const ClientStep& c : s.steps)
    if (names_note(c, label)) return true;
  return false;
}

/// The notes one run of step `s` logs at most, of label `label`.
std::uint64_t most_in(const ClientStep& s, std::string_view label) {
  std::uint64_t n = s.note == label ? 1 : 0;
  auto is = [&](std::initializer_list<std::string_view> ls) {
    for (auto l : ls)
      if (l == label) return true;
    return false;
  };
  switch (s.kind) {
    case ClientStep::Kind::acquire:
      if (is({"acquire", "acquire-failed"})) return kUnbounded;  // its retries
      if (is({"acquired", "gave-up"})) n = plus(n, 1);
      break;
    case ClientStep::Kind::read:
      if (is({"read-timeout", "read-rejected", "read-refused"})) n = plus(n, 1);
      break;
    case ClientStep::Kind::write:
      if (is({"write", "write-accepted", "write-rejected", "write-timeout", "write-refused"})) n = plus(n, 1);
      break;
    case ClientStep::Kind::increment:
      if (is({"read-timeout", "read-rejected", "read-refused", "write", "write-accepted", "write-rejected",
              "write-timeout", "write-refused"}))
        n = plus(n, 1);
      break;
    case ClientStep::Kind::check:
      if (is({"lease-check", "expired"})) n = plus(n, 1);
      break;
    case ClientStep::Kind::extend:
      if (is({"extended", "extend-failed"})) n = plus(n, 1);
      break;
    case ClientStep::Kind::release:
      if (is({"released"})) n = plus(n, 1);
      break;
    case ClientStep::Kind::work:
    case ClientStep::Kind::sleep:
      break;
    case ClientStep::Kind::repeat: {
      std::uint64_t body = 0;
      for (const ClientStep& c : s.steps) body = plus(body, most_in(c, label));
      n = plus(n, times(s.count, body));
    } break;
    case ClientStep::Kind::loop: {
      std::uint64_t body = 0;
      for (const ClientStep& c : s.steps) body = plus(body, most_in(c, label));
      n = plus(n, times(kUnbounded, body));
    } break;
  }
  return n;
}

}  // namespace

std::optional<std::uint64_t> most_notes(const ClientSpec& spec, std::string_view label) {
  // The renewal thread's notes: as long as the run lasts, or never without renewal.
  if (label == "renewed" || label == "renew-failed" || label == "renewal-lost")
    return spec.renewal.on ? std::nullopt : std::optional<std::uint64_t>(0);
  if (label == "aborted") return spec.renewal.on ? most_notes(spec, "acquired") : 0;  // once a hold at most
  static constexpr std::string_view kSteps[] = {
      "acquire",  "acquire-failed", "acquired",       "gave-up",       "read-timeout", "read-rejected",
      "write",    "write-accepted", "write-rejected", "write-timeout", "lease-check",  "expired",
      "extended", "extend-failed",  "released",       "read-refused",  "write-refused"};
  bool ours = std::find(std::begin(kSteps), std::end(kSteps), label) != std::end(kSteps);
  for (const ClientStep& s : program_of(spec)) ours = ours || names_note(s, label);
  if (!ours) return std::nullopt;  // a protocol's note (acquire-sent...): no bound known here
  std::uint64_t n = 0;
  for (const ClientStep& s : program_of(spec)) n = plus(n, most_in(s, label));
  if (n == kUnbounded) return std::nullopt;
  return n;
}

}  // namespace locksim
