#pragma once
/// A fixed-point number for sums of likelihood-ratio weights: an unsigned 256-bit integer N standing for
/// N / 2^128, so 128 bits of fraction (a weight of 1e-30 keeps ten digits) and 128 of integer part. Each
/// weight is a double, converted exactly down to a multiple of 2^-128; the sums are integer additions, which
/// are associative: any order of runs, threads, shards and merges gives the same bits.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace locksim {

class Fixed {
 public:
  static constexpr int kFractionBits = 128;
  Fixed() = default;
  /// v truncated to a multiple of 2^-128. Throws std::invalid_argument unless 0 <= v < 2^100 (finite).
  static Fixed of(double v);
  /// From to_hex()'s text; nothing when it is not 64 hexadecimal digits.
  static bool parse_hex(std::string_view hex, Fixed& out);
  Fixed& operator+=(const Fixed& o);
  /// Times a whole number. Throws std::overflow_error past 2^256.
  Fixed times(std::uint64_t k) const;
  /// The value, rounded to long double precision.
  long double value() const;
  /// 64 hexadecimal digits, most significant first.
  std::string to_hex() const;
  bool operator==(const Fixed& o) const = default;
  bool is_zero() const { return (limb_[0] | limb_[1] | limb_[2] | limb_[3]) == 0; }

 private:
  std::array<std::uint64_t, 4> limb_{};  ///< little-endian 64-bit limbs
};

}  // namespace locksim
