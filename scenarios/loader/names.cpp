// Names and durations as a person writes them: duration syntax, edit distance for did-you-mean, the protocol
// names a file may use (the service process names are the protocols' declarations: scenarios/services.hpp).
#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "locksim/scenarios/loader.hpp"

namespace locksim {

// ------------------------------------------------------------------------------------------------ helpers

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Levenshtein distance with adjacent transpositions counted as one edit (optimal string alignment), so that
  // "fsnyc" is one typo away from "fsync".
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1, 0));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

std::string nearest_name(std::string_view word, const std::vector<std::string>& candidates) {
  if (word.size() > 200) return {};  // not a typo; keep the quadratic distance cheap
  const std::string w = lower(word);
  const std::size_t limit = std::max<std::size_t>(1, (w.size() + 1) / 3);
  std::string best;
  std::size_t best_d = limit + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(w, lower(c));
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::optional<Duration> parse_duration(std::string_view s, bool allow_negative, std::string* why) {
  auto fail = [&](std::string m) -> std::optional<Duration> {
    if (why) *why = std::move(m);
    return std::nullopt;
  };
  const auto quoted = [&] {
    return fmt::format("'{}'", s.size() > 60 ? std::string(s.substr(0, 60)) + "..." : s);
  };
  const char* hint =
      "write a number and a unit, e.g. \"15s\", \"250ms\", \"1.5s\", \"1m30s\" (units: ns, us, ms, s, m, h, "
      "d)";
  if (s.empty()) return fail(fmt::format("empty duration; {}", hint));
  std::size_t i = 0;
  bool neg = false;
  if (s[0] == '-' || s[0] == '+') {
    neg = s[0] == '-';
    i = 1;
  }
  if (s.substr(i) == "0") return Duration{0};
  if (i == s.size()) return fail(fmt::format("{} is not a duration; {}", quoted(), hint));
  const __int128 cap = kMaxDuration.count();
  __int128 total = 0;
  while (i < s.size()) {
    std::uint64_t ip = 0;
    int int_digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (int_digits >= 18)
        return fail(fmt::format("{} is longer than a year, the longest duration allowed", quoted()));
      ip = ip * 10 + static_cast<std::uint64_t>(s[i] - '0');
      ++int_digits;
      ++i;
    }
    std::string frac;
    bool dot = false;
    if (i < s.size() && s[i] == '.') {
      dot = true;
      ++i;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        if (frac.size() >= 40) return fail(fmt::format("{} has more digits than any clock", quoted()));
        frac.push_back(s[i]);
        ++i;
      }
    }
    if (int_digits == 0 && frac.empty()) return fail(fmt::format("{} is not a duration; {}", quoted(), hint));
    if (dot && frac.empty()) return fail(fmt::format("{} is not a duration; {}", quoted(), hint));
    const std::size_t unit_start = i;
    while (i < s.size() && !(s[i] >= '0' && s[i] <= '9') && s[i] != '.') ++i;
    const std::string_view unit = s.substr(unit_start, i - unit_start);
    __int128 unit_ns = 0;
    if (unit == "ns")
      unit_ns = 1;
    else if (unit == "us" || unit == "\xc2\xb5s")
      unit_ns = 1'000;
    else if (unit == "ms")
      unit_ns = 1'000'000;
    else if (unit == "s")
      unit_ns = 1'000'000'000;
    else if (unit == "m")
      unit_ns = 60'000'000'000LL;
    else if (unit == "h")
      unit_ns = 3'600'000'000'000LL;
    else if (unit == "d")
      unit_ns = 86'400'000'000'000LL;
    else if (unit.empty())
      return fail(fmt::format("{} has no unit; {}", quoted(), hint));
    else
      return fail(fmt::format("{} has an unknown unit '{}'; {}", quoted(), unit, hint));
    while (!frac.empty() && frac.back() == '0') frac.pop_back();
    if (frac.size() > 18) return fail(fmt::format("{} is not a whole number of nanoseconds", quoted()));
    __int128 fv = 0, pow10 = 1;
    for (char c : frac) {
      fv = fv * 10 + (c - '0');
      pow10 *= 10;
    }
    if ((fv * unit_ns) % pow10 != 0)
      return fail(fmt::format("{} is not a whole number of nanoseconds", quoted()));
    total += static_cast<__int128>(ip) * unit_ns + fv * unit_ns / pow10;
    if (total > cap)
      return fail(fmt::format("{} is longer than a year, the longest duration allowed", quoted()));
  }
  if (neg && total != 0 && !allow_negative) return fail(fmt::format("{} must not be negative", quoted()));
  return Duration{static_cast<std::int64_t>(neg ? -total : total)};
}

std::vector<std::string> valid_protocol_names() {
  register_builtin_protocols();
  std::set<std::string> names(kKnownProtocolNames.begin(), kKnownProtocolNames.end());
  for (auto& n : ProtocolRegistry::instance().names()) names.insert(n);
  return {names.begin(), names.end()};
}

}  // namespace locksim
