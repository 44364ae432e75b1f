#include "locksim/sim/time.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstring>

namespace locksim {

std::string format_time(Duration d) {
  // "[-]<seconds>[.<fraction without trailing zeros>]s", built in place: the trace's details call this for
  // every Redis command (two fmt::format calls and three string concatenations took ~480 instructions).
  const std::int64_t ns = d.count();
  const bool neg = ns < 0;
  const std::uint64_t a = neg ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  std::uint64_t sec = a / 1'000'000'000ULL, frac = a % 1'000'000'000ULL;
  char buf[32];  // '-', 11 digits (2^63 ns is 9,223,372,036 s), '.', 9 digits, 's'
  char* p = buf;
  if (neg) *p++ = '-';
  p = std::to_chars(p, buf + sizeof buf, sec).ptr;
  if (frac != 0) {
    *p++ = '.';
    char digits[9];
    for (int i = 8; i >= 0; --i, frac /= 10) digits[i] = static_cast<char>('0' + frac % 10);
    int len = 9;
    while (digits[len - 1] == '0') --len;  // frac != 0: a non-zero digit stops it
    std::memcpy(p, digits, static_cast<std::size_t>(len));
    p += len;
  }
  *p++ = 's';
  return std::string(buf, p);
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
