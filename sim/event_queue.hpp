#pragma once
/// The world's event queue: a radix heap on time (Ahuja, Mehlhorn, Orlin, Tarjan 1990). Simulated time never
/// goes back: an event is never scheduled before the one being run, which is exactly the monotone case a
/// radix heap needs. Pushing is an append to one of 64 buckets; popping reads the bucket of the current
/// instant in order; each event moves down a few buckets on its way. Every access is sequential, so a world
/// of 100,000 processes with half a million events pending pays no cache miss per level, as a binary heap
/// does.
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
    const unsigned i = bucket_of(e.at);
    buckets_[i].push_back(e);
    mask_ |= std::uint64_t{1} << i;
  }

  /// A guess at the event `ahead` places after the earliest, without moving the floor (for prefetching);
  /// nullptr if none is at hand.
  const QueuedEvent* peek_hint(std::size_t ahead = 0) const {
    if (head_ + ahead < now_.size()) return &now_[fifo_ ? head_ + ahead : 0];
    if (ahead == 0 && mask_ != 0) return &buckets_[static_cast<unsigned>(std::countr_zero(mask_))].front();
    return nullptr;
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

  unsigned bucket_of(Time at) const {
    const auto diff = static_cast<std::uint64_t>(at.count()) ^ static_cast<std::uint64_t>(last_.count());
    return 63u - static_cast<unsigned>(std::countl_zero(diff));
  }

  void push_now(const QueuedEvent& e) {
    now_.push_back(e);
    if (!fifo_) std::push_heap(now_.begin(), now_.end(), KeyAfter{});
  }

  /// The floor's events are all taken: move to the earliest time pending. Only the lowest
  /// non-empty bucket is split; its events all go to lower buckets (they share the bits above it with the
  /// new floor).
  void refill() {
    now_.clear();
    head_ = 0;
    const unsigned i = static_cast<unsigned>(std::countr_zero(mask_));
    std::vector<QueuedEvent>& b = buckets_[i];
    Time least = b.front().at;
    for (const QueuedEvent& e : b) least = std::min(least, e.at);
    last_ = least;
    mask_ &= ~(std::uint64_t{1} << i);
    for (const QueuedEvent& e : b) {
      if (e.at == last_) {
        now_.push_back(e);
      } else {
        const unsigned j = bucket_of(e.at);
        buckets_[j].push_back(e);
        mask_ |= std::uint64_t{1} << j;
      }
    }
    b.clear();
    if (!fifo_) std::make_heap(now_.begin(), now_.end(), KeyAfter{});
  }

  std::vector<QueuedEvent> early_;  ///< events pushed before the floor: a heap on (at, key), served first
  std::vector<QueuedEvent> now_;    ///< events at the floor: a FIFO from head_, or a heap on key
  std::size_t head_ = 0;
  std::array<std::vector<QueuedEvent>, 64> buckets_;  ///< bucket i: at differs from floor() first at bit i
  std::uint64_t mask_ = 0;                            ///< bit i set when bucket i is not empty
  Time last_{0};
  std::size_t size_ = 0;
  bool fifo_;
};

}  // namespace locksim
