#pragma once
/// The world's event queue: a radix heap on time (Ahuja, Mehlhorn, Orlin, Tarjan 1990) with 6-bit digits.
/// Simulated time never goes back: an event is never scheduled before the one being run, which is exactly the
/// monotone case a radix heap needs. An event goes to the bucket named by the highest 6-bit digit in which
/// its time differs from the floor (the time of the current instant) and that digit's value: 11 levels of 64
/// buckets. Pushing is an append; when the current instant's events are all taken, the lowest non-empty
/// bucket is split into lower ones (or, at level 0, where a bucket holds one time, becomes the instant). Each
/// event moves down at most a couple of levels. Every access is sequential, so a world of 100,000 processes
/// with half a million events pending pays no cache miss per heap level, as a binary heap does.
///
/// Order: earliest `at` first; among events at the same time, smallest `key` first. With keys pushed in
/// increasing order (an insertion sequence) the events of one instant are a FIFO; otherwise (seeded random
/// keys) they are a binary heap on the key. Either way the pop order is the total order on (at, key), so it
/// is the same as any other priority queue's on distinct keys.
///
/// Looking at the earliest event (top) moves the floor to its time. An event pushed afterwards before the new
/// floor (the world stopped at run_until's time and is given more work, say) goes to a small binary heap
/// ordered on (at, key) that is always served first: the order stays exact.
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/time.hpp"

namespace locksim {

struct QueuedEvent {
  Time at;
  std::uint64_t key;  ///< order among events at the same time
  std::uint32_t kind;
  std::uint32_t a;
  std::uint64_t b;
};

static_assert(std::is_trivially_copyable_v<QueuedEvent>);

/// A growable array of events for the queue's buckets: what it uses of std::vector, with an append small
/// enough to inline everywhere (GCC keeps std::vector::push_back out of line when it has several call sites,
/// and the queue appends two to four times per event). Events are plain data: growing is a realloc.
class EventVec {
 public:
  EventVec() noexcept = default;
  EventVec(const EventVec&) = delete;
  EventVec& operator=(const EventVec&) = delete;
  ~EventVec() { std::free(data_); }

  void push_back(const QueuedEvent& e) {
    if (size_ == cap_) [[unlikely]]
      grow();
    data_[size_++] = e;
  }
  void pop_back() { --size_; }
  void clear() { size_ = 0; }
  void swap(EventVec& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(cap_, o.cap_);
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  QueuedEvent& operator[](std::size_t i) { return data_[i]; }
  const QueuedEvent& operator[](std::size_t i) const { return data_[i]; }
  QueuedEvent* begin() { return data_; }
  QueuedEvent* end() { return data_ + size_; }
  const QueuedEvent* begin() const { return data_; }
  const QueuedEvent* end() const { return data_ + size_; }
  const QueuedEvent& front() const { return data_[0]; }
  const QueuedEvent& back() const { return data_[size_ - 1]; }

 private:
  void grow() {
    if (cap_ > std::numeric_limits<std::uint32_t>::max() / 2)
      throw std::length_error("event queue bucket full");
    const std::uint32_t cap = cap_ == 0 ? 8 : cap_ * 2;
    void* p = std::realloc(data_, std::size_t{cap} * sizeof(QueuedEvent));
    if (p == nullptr) throw std::bad_alloc();
    data_ = static_cast<QueuedEvent*>(p);
    cap_ = cap;
  }
  QueuedEvent* data_ = nullptr;
  std::uint32_t size_ = 0;
  std::uint32_t cap_ = 0;
};

class EventQueue {
 public:
  /// `increasing_keys`: every key pushed is larger than every key pushed before it (a sequence number).
  explicit EventQueue(bool increasing_keys = true) : fifo_(increasing_keys) {}

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  /// Add an event.
  void push(const QueuedEvent& e) {
    ++size_;
    if (e.at <= last_) [[unlikely]] {
      if (e.at == last_) {
        push_now(e);
      } else {
        early_.push_back(e);
        std::push_heap(early_.begin(), early_.end(), After{});
      }
      return;
    }
    put(e);
  }

  /// A guess at the event `ahead` places after the earliest, without moving the floor (for prefetching):
  /// exact for the current instant's events and for a level-0 bucket (one time, in order) after them;
  /// nullptr if the queue is empty.
  const QueuedEvent* peek_hint(std::size_t ahead) const {
    const std::size_t here = now_.size() - head_;
    if (ahead < here) return &now_[head_ + ahead];
    if (levels_ == 0) return nullptr;
    const EventVec& b = buckets_[lowest()];
    return ahead - here < b.size() ? &b[ahead - here] : &b.back();
  }

  /// The earliest event. The queue must not be empty.
  const QueuedEvent& top() {
    if (!early_.empty()) [[unlikely]]
      return early_.front();
    if (head_ == now_.size()) refill();
    return now_[fifo_ ? head_ : 0];
  }

  /// Take the earliest event out. The queue must not be empty.
  QueuedEvent pop() {
    --size_;
    if (!early_.empty()) [[unlikely]] {
      std::pop_heap(early_.begin(), early_.end(), After{});
      const QueuedEvent e = early_.back();
      early_.pop_back();
      return e;
    }
    if (head_ == now_.size()) refill();
    if (fifo_) return now_[head_++];
    std::pop_heap(now_.begin(), now_.end(), KeyAfter{});
    const QueuedEvent e = now_.back();
    now_.pop_back();
    return e;
  }

 private:
  struct After {
    bool operator()(const QueuedEvent& x, const QueuedEvent& y) const {
      return x.at != y.at ? x.at > y.at : x.key > y.key;
    }
  };
  struct KeyAfter {  // std heaps are max-heaps: "after" makes the smallest key the top
    bool operator()(const QueuedEvent& x, const QueuedEvent& y) const { return x.key > y.key; }
  };

  static constexpr unsigned kDigitBits = 6;
  static constexpr unsigned kLevels = (64 + kDigitBits - 1) / kDigitBits;

  /// Into the bucket of (level, digit) for an event after the floor.
  void put(const QueuedEvent& e) {
    const auto t = static_cast<std::uint64_t>(e.at.count());
    const auto diff = t ^ static_cast<std::uint64_t>(last_.count());
    const unsigned level = (63u - static_cast<unsigned>(std::countl_zero(diff))) / kDigitBits;
    const unsigned digit = static_cast<unsigned>(t >> (level * kDigitBits)) & 63u;
    buckets_[level * 64 + digit].push_back(e);
    digits_[level] |= std::uint64_t{1} << digit;
    levels_ |= 1u << level;
  }

  /// The lowest non-empty bucket: lower levels hold earlier times, and within a level lower digits do.
  unsigned lowest() const {
    const auto level = static_cast<unsigned>(std::countr_zero(levels_));
    return level * 64 + static_cast<unsigned>(std::countr_zero(digits_[level]));
  }

  void push_now(const QueuedEvent& e) {
    now_.push_back(e);
    if (!fifo_) std::push_heap(now_.begin(), now_.end(), KeyAfter{});
  }

  /// The floor's events are all taken: move to the earliest time pending.
  void refill() {
    now_.clear();
    head_ = 0;
    const unsigned i = lowest();
    const unsigned level = i / 64;
    digits_[level] &= ~(std::uint64_t{1} << (i % 64));
    if (digits_[level] == 0) levels_ &= ~(1u << level);
    EventVec& b = buckets_[i];
    if (level == 0) {  // one time, in order: the bucket is the new instant
      last_ = b.front().at;
      now_.swap(b);
    } else {  // the events differ from the new floor below this level: each goes to a lower one
      Time least = b.front().at;
      for (const QueuedEvent& e : b) least = std::min(least, e.at);
      last_ = least;
      for (const QueuedEvent& e : b) {
        if (e.at == last_) {
          now_.push_back(e);
        } else {
          put(e);
        }
      }
      b.clear();
    }
    if (!fifo_) std::make_heap(now_.begin(), now_.end(), KeyAfter{});
  }

  std::vector<QueuedEvent> early_;  ///< events pushed before the floor: a heap on (at, key), served first
  EventVec now_;                    ///< events at the floor: a FIFO from head_, or a heap on key
  std::size_t head_ = 0;
  std::array<EventVec, kLevels * 64> buckets_;   ///< level * 64 + digit
  std::array<std::uint64_t, kLevels> digits_{};  ///< per level: bit d set when bucket d is not empty
  std::uint32_t levels_ = 0;                     ///< bit l set when level l has a non-empty bucket
  Time last_{0};
  std::size_t size_ = 0;
  bool fifo_;
};

}  // namespace locksim
