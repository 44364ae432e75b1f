// Fixed-point weights: 256-bit integers with 128 bits of fraction.
#include "locksim/scenarios/risk_sum.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace locksim {

Fixed Fixed::of(double v) {
  if (!(v >= 0) || !(v < 0x1p100))
    throw std::invalid_argument(fmt::format("a weight of {} is out of range", v));
  Fixed f;
  if (v == 0) return f;
  int e = 0;
  const double m = std::frexp(v, &e);                         // v = m * 2^e, m in [0.5, 1)
  auto mant = static_cast<std::uint64_t>(std::ldexp(m, 53));  // exact: v = mant * 2^(e - 53)
  const int shift = e - 53 + kFractionBits;                   // N = mant * 2^shift
  if (shift < 0) {
    if (shift <= -64) return f;
    f.limb_[0] = mant >> -shift;
    return f;
  }
  const int word = shift / 64, bit = shift % 64;
  f.limb_[word] = mant << bit;
  if (bit != 0 && word + 1 < 4) f.limb_[word + 1] = mant >> (64 - bit);
  return f;
}

bool Fixed::parse_hex(std::string_view hex, Fixed& out) {
  if (hex.size() != 64) return false;
  Fixed f;
  for (std::size_t i = 0; i < 64; ++i) {
    const char c = hex[i];
    std::uint64_t d = 0;
    if (c >= '0' && c <= '9')
      d = static_cast<std::uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      d = static_cast<std::uint64_t>(c - 'a' + 10);
    else
      return false;
    const std::size_t nibble = 63 - i;  // from the least significant
    f.limb_[nibble / 16] |= d << (4 * (nibble % 16));
  }
  out = f;
  return true;
}

Fixed& Fixed::operator+=(const Fixed& o) {
  unsigned carry = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    const unsigned __int128 s = static_cast<unsigned __int128>(limb_[i]) + o.limb_[i] + carry;
    limb_[i] = static_cast<std::uint64_t>(s);
    carry = static_cast<unsigned>(s >> 64);
  }
  if (carry) throw std::overflow_error("a sum of weights passed 2^128");
  return *this;
}

Fixed Fixed::times(std::uint64_t k) const {
  Fixed f;
  std::uint64_t carry = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    const unsigned __int128 p = static_cast<unsigned __int128>(limb_[i]) * k + carry;
    f.limb_[i] = static_cast<std::uint64_t>(p);
    carry = static_cast<std::uint64_t>(p >> 64);
  }
  if (carry) throw std::overflow_error("a weighted sum passed 2^128");
  return f;
}

long double Fixed::value() const {
  long double v = 0;
  for (int i = 3; i >= 0; --i) v = v * 0x1p64L + static_cast<long double>(limb_[static_cast<std::size_t>(i)]);
  return std::ldexp(v, -kFractionBits);
}

std::string Fixed::to_hex() const {
  return fmt::format("{:016x}{:016x}{:016x}{:016x}", limb_[3], limb_[2], limb_[1], limb_[0]);
}

}  // namespace locksim
