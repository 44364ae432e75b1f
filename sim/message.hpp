#pragma once
/// A message between processes, and its two pieces of text: the type (a short name, stored inline) and the
/// optional detail (a summary for the trace, stored out of line). Messages are what the kernel moves most:
/// each sits in a slot of the world's slab from send to receive, and is moved in and out of it. At 96 bytes
/// (from 144 with two std::strings) a message spans two cache lines instead of three, and moving one copies
/// plain words instead of running two small-string moves.
#include <fmt/format.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "locksim/sim/any.hpp"
#include "locksim/sim/inline.hpp"
#include "locksim/sim/trace.hpp"

namespace locksim {

/// A message type: a name of at most 23 characters, stored inline (no allocation, trivially copyable).
/// Converts from and compares with any string; a longer name throws std::length_error where it is built.
class MsgType {
 public:
  static constexpr std::size_t kMax = 23;

  constexpr MsgType() noexcept = default;
  /// Forced inline, with the two below: a literal's name then folds into two stores (GCC kept them out of
  /// line in the kernel benchmark's body: +8% instructions per event).
  LOCKSIM_ALWAYS_INLINE MsgType(std::string_view s) {  // NOLINT(google-explicit-constructor): text
    if (s.size() > kMax) throw std::length_error("message type longer than 23 characters: " + std::string(s));
    // Built in three words, in registers, and stored whole (a runtime name: one 16-byte and one 8-byte
    // store; a literal: GCC may split its first 16 bytes into two 8-byte immediates). The copies that
    // follow load it in 16- and 8-byte pieces, and a load can take its bytes from the store buffer only when
    // one store wrote them all. Otherwise it waits for the stores to reach the cache, and at 100,000
    // processes for older stores' cold lines too (perf: two thirds of the churn benchmark's client body when
    // a literal was stored byte-wise; 77% of its servers' reply builder when a runtime name went through an
    // array on the stack, 8-byte stores then a 16-byte load). The split literal measured harmless: see
    // bench/README.md, the twelfth session.
    const std::size_t n = s.size();
    const char* p = s.data();
    std::uint64_t w0 = 0, w1 = 0, w2 = 0;
    if constexpr (std::endian::native == std::endian::little) {
      if (n <= 8) {
        w0 = short_word(p, n);
      } else if (n <= 16) {
        w0 = word(p);
        w1 = short_word(p + 8, n - 8);
      } else {
        w0 = word(p);
        w1 = word(p + 8);
        w2 = short_word(p + 16, n - 16);
      }
      w2 |= std::uint64_t{n} << 56;  // size_ is the object's last byte
    } else {
      std::uint64_t w[3] = {0, 0, 0};
      std::memcpy(w, p, n);
      w[2] |= std::uint64_t{n};
      w0 = w[0], w1 = w[1], w2 = w[2];
    }
    using Pair = std::uint64_t __attribute__((vector_size(16)));
    const Pair first = {w0, w1};
    std::memcpy(static_cast<void*>(this), &first, sizeof first);
    std::memcpy(reinterpret_cast<char*>(this) + sizeof first, &w2, sizeof w2);
  }
  LOCKSIM_ALWAYS_INLINE MsgType(const char* s)  // NOLINT(google-explicit-constructor)
      : MsgType(std::string_view(s)) {}
  LOCKSIM_ALWAYS_INLINE MsgType(const std::string& s)  // NOLINT(google-explicit-constructor)
      : MsgType(std::string_view(s)) {}

  constexpr std::string_view view() const noexcept { return {buf_, size_}; }
  /// The name's bytes, then the rest of the 24-byte object (readable: what the trace copies as whole
  /// words).
  const void* bytes() const noexcept { return this; }
  constexpr operator std::string_view() const noexcept { return view(); }  // NOLINT: reads as text
  std::string str() const { return std::string(view()); }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }

  friend constexpr bool operator==(const MsgType& a, const MsgType& b) noexcept {
    return a.view() == b.view();
  }
  friend constexpr bool operator==(const MsgType& a, std::string_view b) noexcept { return a.view() == b; }
  friend bool operator==(const MsgType& a, const char* b) noexcept { return a.view() == std::string_view(b); }
  friend bool operator==(const MsgType& a, const std::string& b) noexcept { return a.view() == b; }

 private:
  static std::uint64_t word(const char* p) {
    std::uint64_t w = 0;
    std::memcpy(&w, p, sizeof w);
    return w;
  }
  /// The n <= 8 bytes at p as a little-endian word, reading nothing outside them: two overlapping 4-byte
  /// loads, or for 1 to 3 bytes the first, middle and last.
  static std::uint64_t short_word(const char* p, std::size_t n) {
    if (n >= 4) {
      std::uint32_t lo = 0, hi = 0;
      std::memcpy(&lo, p, 4);
      std::memcpy(&hi, p + n - 4, 4);
      return lo | (std::uint64_t{hi} << (8 * (n - 4)));
    }
    if (n == 0) return 0;
    const auto byte = [p](std::size_t i) {
      return std::uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
    };
    return byte(0) | byte(n / 2) | byte(n - 1);
  }

  char buf_[kMax]{};
  unsigned char size_ = 0;
};
static_assert(sizeof(MsgType) == 24 && std::is_trivially_copyable_v<MsgType> &&
              std::is_standard_layout_v<MsgType>);  // the name's bytes first: bytes()
static_assert(sizeof(MsgType) >= Trace::kLabelRoom);

/// A message's detail: optional human-readable text for the trace. Most messages on hot paths have none, so
/// it is one pointer (null when empty) rather than an inline string; a copy copies the text.
class Detail {
 public:
  // User-provided (not "= default"): a defaulted one made every Message{.type = ...} value-initialize its
  // detail by zeroing, and GCC then cleared the whole 96-byte message with `rep stosq` before setting its
  // fields: the instruction's start-up cost and the failed store forwarding after it were ~8% of the kernel
  // benchmark's sending code (perf). Now a few vector stores.
  Detail() noexcept {}   // NOLINT(modernize-use-equals-default)
  Detail(std::string s)  // NOLINT(google-explicit-constructor): a detail is written as text
      : text_(s.empty() ? nullptr : std::make_unique<std::string>(std::move(s))) {}
  Detail(std::string_view s) : Detail(std::string(s)) {}  // NOLINT(google-explicit-constructor)
  Detail(const char* s) : Detail(std::string(s)) {}       // NOLINT(google-explicit-constructor)
  Detail(const Detail& o) : text_(o.text_ ? std::make_unique<std::string>(*o.text_) : nullptr) {}
  Detail(Detail&&) noexcept = default;
  Detail& operator=(const Detail& o) {
    if (this != &o) text_ = o.text_ ? std::make_unique<std::string>(*o.text_) : nullptr;
    return *this;
  }
  Detail& operator=(Detail&&) noexcept = default;
  ~Detail() = default;

  std::string_view view() const noexcept { return text_ ? std::string_view(*text_) : std::string_view(); }
  operator std::string_view() const noexcept { return view(); }  // NOLINT: reads as text
  std::string str() const { return std::string(view()); }
  bool empty() const noexcept { return !text_; }

  friend bool operator==(const Detail& a, const Detail& b) noexcept { return a.view() == b.view(); }
  friend bool operator==(const Detail& a, std::string_view b) noexcept { return a.view() == b; }
  friend bool operator==(const Detail& a, const char* b) noexcept { return a.view() == std::string_view(b); }
  friend bool operator==(const Detail& a, const std::string& b) noexcept { return a.view() == b; }

 private:
  std::unique_ptr<std::string> text_;
};

/// A message between processes. `type` names it in the trace; `body` carries any copyable value.
struct Message {               // 96 bytes: in the world's slab (64-byte aligned), always two cache lines
  std::uint64_t id = 0;        ///< unique per send, set by the world
  std::uint64_t reply_to = 0;  ///< for a reply: the id of the request it answers
  ProcId from{}, to{};
  MsgType type;   ///< up to 23 characters, inline
  AnyValue body;  ///< any copyable value; up to 32 bytes stored inline (no allocation)
  Detail detail;  ///< optional human-readable summary for the trace (canonical text only)

  template <class T>
  const T* as() const {
    return body.get<T>();
  }

  /// A message of `type` carrying `body`.
  template <class T>
  static Message of(MsgType type, T body, Detail detail = {}) {
    Message m;
    m.type = type;
    m.body = std::move(body);
    m.detail = std::move(detail);
    return m;
  }
};

/// The body of the message a host sends back for a process that is not running (NetworkOptions::
/// refuse_when_down): `reply_to` names the refused message, `from` the process that was not there.
struct ConnectionRefused {
  MsgType refused_type;  ///< the refused message's type
};
inline constexpr std::string_view kConnectionRefusedType = "conn-refused";

/// Whether `m` is a host's refusal rather than an answer from the process itself.
inline bool is_refusal(const Message& m) {
  return m.as<ConnectionRefused>() != nullptr;
}

}  // namespace locksim

/// Both format as their text: fmt::format("{}", m.type), fmt::format("{:>8}", m.detail).
template <>
struct fmt::formatter<locksim::MsgType> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(const locksim::MsgType& t, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(t.view(), ctx);
  }
};
template <>
struct fmt::formatter<locksim::Detail> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(const locksim::Detail& d, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(d.view(), ctx);
  }
};
