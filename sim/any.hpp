#pragma once
/// A copyable type-erased value with a 32-byte inline buffer: a message body. Like std::any, but libstdc++'s
/// std::any stores inline only what fits in one pointer, so every body of two words or more (most protocol
/// requests) cost a malloc and a free per message. Bodies that fit here never allocate.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace locksim {

class AnyValue {
 public:
  static constexpr std::size_t kInline = 32;

  AnyValue() noexcept = default;
  template <class T, class D = std::decay_t<T>,
            class = std::enable_if_t<!std::is_same_v<D, AnyValue> && std::is_copy_constructible_v<D>>>
  AnyValue(T&& v) {  // NOLINT(google-explicit-constructor): assignable from any body, as std::any is
    emplace<D>(std::forward<T>(v));
  }
  AnyValue(const AnyValue& o) {
    if (o.ops_ != nullptr) o.ops_->copy(o, *this);
  }
  AnyValue(AnyValue&& o) noexcept {
    if (o.ops_ != nullptr) o.ops_->move(o, *this);
  }
  AnyValue& operator=(const AnyValue& o) {
    if (this != &o) {
      AnyValue tmp(o);
      reset();
      if (tmp.ops_ != nullptr) tmp.ops_->move(tmp, *this);
    }
    return *this;
  }
  AnyValue& operator=(AnyValue&& o) noexcept {
    if (this != &o) {
      reset();
      if (o.ops_ != nullptr) o.ops_->move(o, *this);
    }
    return *this;
  }
  template <class T, class D = std::decay_t<T>,
            class = std::enable_if_t<!std::is_same_v<D, AnyValue> && std::is_copy_constructible_v<D>>>
  AnyValue& operator=(T&& v) {
    reset();
    emplace<D>(std::forward<T>(v));
    return *this;
  }
  ~AnyValue() { reset(); }

  bool has_value() const noexcept { return ops_ != nullptr; }
  void reset() noexcept {
    if (ops_ != nullptr) {
      ops_->destroy(*this);
      ops_ = nullptr;
    }
  }

  /// The value if it holds a T, else nullptr (as std::any_cast on a pointer).
  template <class T>
  const T* get() const noexcept {
    using D = std::remove_cv_t<T>;
    if (ops_ != &Model<D>::ops) return nullptr;
    return Model<D>::ptr(*this);
  }
  template <class T>
  T* get() noexcept {
    using D = std::remove_cv_t<T>;
    if (ops_ != &Model<D>::ops) return nullptr;
    return const_cast<D*>(Model<D>::ptr(*this));
  }

 private:
  struct Ops {
    void (*copy)(const AnyValue& from, AnyValue& to);
    void (*move)(AnyValue& from, AnyValue& to) noexcept;  // leaves `from` empty
    void (*destroy)(AnyValue& self) noexcept;
  };

  template <class T>
  struct Model {
    static constexpr bool kInlined = sizeof(T) <= kInline && alignof(T) <= alignof(std::uint64_t) &&
                                     std::is_nothrow_move_constructible_v<T>;
    static const T* ptr(const AnyValue& a) noexcept {
      if constexpr (kInlined) {
        return std::launder(reinterpret_cast<const T*>(a.buf_));
      } else {
        return static_cast<const T*>(a.heap_);
      }
    }
    static void copy(const AnyValue& from, AnyValue& to) { to.template emplace<T>(*ptr(from)); }
    static void move(AnyValue& from, AnyValue& to) noexcept {
      if constexpr (kInlined && std::is_trivially_copyable_v<T>) {
        copy_words<(sizeof(T) + 7) / 8>(to.buf_, from.buf_);
      } else if constexpr (kInlined) {
        T* src = const_cast<T*>(ptr(from));
        ::new (static_cast<void*>(to.buf_)) T(std::move(*src));
        src->~T();
      } else {
        to.heap_ = from.heap_;
      }
      to.ops_ = &ops;
      from.ops_ = nullptr;
    }
    static void destroy(AnyValue& self) noexcept {
      if constexpr (kInlined) {
        const_cast<T*>(ptr(self))->~T();
      } else {
        delete static_cast<T*>(self.heap_);
      }
    }
    static constexpr Ops ops{&copy, &move, &destroy};
  };

  /// N words from one buffer to another, one at a time through a register. A body was usually written field
  /// by field just before (a request built, then sent): a load can take its bytes from the store buffer only
  /// when one store wrote them all, and a 16-byte load of two 8-byte fields waits instead for the stores to
  /// reach the cache, at 100,000 processes for older stores' cold lines too (perf: 92% of this move's samples
  /// in the churn benchmark, on the instruction after such a load). A word-sized load of a word-sized field
  /// is always forwarded. (The bytes past a small T's end are the buffer's own: copied, never read as T.)
  template <std::size_t N>
  static void copy_words(unsigned char* to, const unsigned char* from) noexcept {
    static_assert(N * sizeof(std::uint64_t) <= kInline);
    for (std::size_t i = 0; i < N; ++i) {
      std::uint64_t w;
      std::memcpy(&w, from + i * sizeof w, sizeof w);
#if defined(__GNUC__) || defined(__clang__)
      asm("" : "+r"(w));  // keeps the compiler from merging two words into one vector load
#endif
      std::memcpy(to + i * sizeof w, &w, sizeof w);
    }
  }

  template <class T, class... A>
  void emplace(A&&... a) {
    if constexpr (Model<T>::kInlined) {
      ::new (static_cast<void*>(buf_)) T(std::forward<A>(a)...);
    } else {
      heap_ = new T(std::forward<A>(a)...);
    }
    ops_ = &Model<T>::ops;
  }

  union {
    alignas(std::uint64_t) unsigned char buf_[kInline];  // 8-aligned: 40 bytes in all, not 48
    void* heap_;
  };
  const Ops* ops_ = nullptr;
};

}  // namespace locksim
