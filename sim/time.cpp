#include "sim/time.hpp"

#include <fmt/format.h>

namespace locksim {

std::string format_time(Duration d) {
  std::int64_t ns = d.count();
  bool neg = ns < 0;
  std::uint64_t a = neg ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  std::uint64_t sec = a / 1'000'000'000ULL, frac = a % 1'000'000'000ULL;
  std::string s = fmt::format("{}{}", neg ? "-" : "", sec);
  if (frac != 0) {
    std::string f = fmt::format("{:09}", frac);
    while (!f.empty() && f.back() == '0') f.pop_back();
    s += "." + f;
  }
  return s + "s";
}

std::string format_seconds(Duration d, int decimals) {
  std::int64_t ns = d.count();
  bool neg = ns < 0;
  std::uint64_t a = neg ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  std::uint64_t div = 1;
  for (int i = decimals; i < 9; ++i) div *= 10;
  std::uint64_t scaled = (a + div / 2) / div;  // round half up, integer-only
  std::uint64_t unit = 1;
  for (int i = 0; i < decimals; ++i) unit *= 10;
  if (decimals == 0) return fmt::format("{}{}", neg ? "-" : "", scaled);
  return fmt::format("{}{}.{:0{}}", neg ? "-" : "", scaled / unit, scaled % unit, decimals);
}

}  // namespace locksim
