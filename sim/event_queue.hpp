#pragma once
/// The world's event queue: a radix heap on time (Ahuja, Mehlhorn, Orlin, Tarjan 1990) with 6-bit digits,
/// whose three lowest levels are replaced by one sorted run.
/// Simulated time never goes back: an event is never scheduled before the one being run, which is exactly the
/// monotone case a radix heap needs. The floor is the time the queue last moved to. An event in the floor's
/// block (the same 262,144 ns aligned block: it differs from the floor only in the three lowest 6-bit
/// digits) goes to the run, a sorted array served from its head: appended when it sorts last (an event at the
/// current time, the usual case), else into a small binary heap beside it (`near_`), the two merged at the
/// head. A later event goes to the bucket named by the highest 6-bit digit in which its time differs from the
/// floor and that digit's value (levels 3 to 10, 64 buckets each). Pushing is an append. When the run and its
/// heap are empty, the lowest non-empty bucket is emptied: the floor moves to its earliest time, its events
/// in the floor's new block are sorted into the run (a counting sort, digit by digit), and the others go to
/// lower buckets. An event sent over a network (a delay of more than the block) moves once, from its bucket
/// to a run, and every access is sequential, so a world of 100,000 processes with half a million events
/// pending pays no cache miss per heap level, as a binary heap does. (The block was 4,096 ns, two levels,
/// before: the kernel benchmark's events then moved twice, with a refill every four events.)
///
/// Order: earliest `at` first; among events at the same time, smallest `key` first. The pop order is the
/// total order on (at, key), so it is the same as any other priority queue's on distinct keys. The world
/// makes the key (World::push_event): a class in the top bit, so that at one instant its callbacks (faults
/// and their ends) run before its process steps (starts, wakes, deliveries), then an insertion sequence, or
/// with shuffled ties seeded random bits (the same-instant rule: sim/world.hpp, EvKind).
///
/// Looking at the earliest event (top) may move the floor. An event pushed afterwards before the new floor
/// (the world stopped at run_until's time and is given more work, say) goes to a small binary heap ordered on
/// (at, key) that is always served first: the order stays exact.
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

#include "locksim/sim/inline.hpp"
#include "locksim/sim/time.hpp"

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
  /// n events whose contents the caller writes next.
  void resize_for_overwrite(std::size_t n) {
    while (cap_ < n) grow();
    size_ = static_cast<std::uint32_t>(n);
  }
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
  EventQueue() = default;

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  /// Add an event.
  LOCKSIM_ALWAYS_INLINE void push(const QueuedEvent& e) {
    ++size_;
    if (e.at < last_) [[unlikely]] {
      early_.push_back(e);
      std::push_heap(early_.begin(), early_.end(), After{});
      return;
    }
    if (in_block(e.at)) {
      // The floor's block: appended to the run when it sorts last (the usual case: at the current time with
      // the largest key so far), else into the small heap beside it.
      if (head_ == run_.size() || !Before{}(e, run_.back())) {
        run_.push_back(e);
      } else {
        near_.push_back(e);
        std::push_heap(near_.begin(), near_.end(), After{});
      }
      return;
    }
    put(e.at, e.key, e.kind, e.a, e.b);
  }

  /// A guess at the event `ahead` places after the earliest, without moving the floor (for prefetching):
  /// exact inside the run when nothing sits in the side heaps, else the earliest of a small next bucket;
  /// nullptr if there is nothing to guess. Inside the run inline; past it out of line.
  LOCKSIM_ALWAYS_INLINE const QueuedEvent* peek_hint(std::size_t ahead) const {
    if (head_ + ahead < run_.size()) [[likely]]
      return &run_[head_ + ahead];
    return peek_hint_past_run();
  }

  /// The earliest event, or nullptr when the queue is empty: what top() returns, and like top() it may move
  /// the floor. Inline when that is the run's head with nothing beside it (the usual case: one test, no
  /// refill); else out of line.
  LOCKSIM_ALWAYS_INLINE const QueuedEvent* peek() {
    if (only_run_ahead()) [[likely]]
      return &run_[head_];
    return peek_slow();
  }

  /// Removes the event peek() returned; nothing may be pushed or popped in between.
  LOCKSIM_ALWAYS_INLINE void drop_peeked() {
    if (only_run_ahead()) [[likely]] {
      --size_;
      if (++head_ == run_.size()) {
        run_.clear();
        head_ = 0;
      }
      return;
    }
    drop_peeked_slow();
  }

  /// The earliest event. The queue must not be empty. Forced inline: GCC stopped inlining it into the run
  /// loop when sim/world.cpp grew by a few dozen unrelated lines (+2.7% instructions per kernel event).
  LOCKSIM_ALWAYS_INLINE const QueuedEvent& top() {
    if (!early_.empty()) [[unlikely]]
      return early_.front();
    if (head_ == run_.size() && near_.empty()) refill();
    return near_first() ? near_.front() : run_[head_];
  }

  /// Take the earliest event out. The queue must not be empty.
  LOCKSIM_ALWAYS_INLINE QueuedEvent pop() {
    --size_;
    if (!early_.empty()) [[unlikely]]
      return pop_heap(early_);
    if (head_ == run_.size() && near_.empty()) refill();
    if (near_first()) [[unlikely]]
      return pop_heap(near_);
    const QueuedEvent e = run_[head_++];
    if (head_ == run_.size()) {
      run_.clear();
      head_ = 0;
    }
    return e;
  }

 private:
  /// The run's head is the earliest event: the run has events left and neither side heap has any.
  bool only_run_ahead() const { return head_ < run_.size() && (early_.size() | near_.size()) == 0; }
  [[gnu::noinline]] const QueuedEvent* peek_slow() { return size_ == 0 ? nullptr : &top(); }
  [[gnu::noinline]] void drop_peeked_slow() { (void)pop(); }
  [[gnu::noinline]] const QueuedEvent* peek_hint_past_run() const {
    if (levels_ == 0) return nullptr;
    const EventVec& b = buckets_[lowest()];
    if (b.size() > 8) return &b.front();
    const QueuedEvent* best = &b.front();
    for (const QueuedEvent& e : b)
      if (Before{}(e, *best)) best = &e;
    return best;
  }

  struct Before {  // the total order: time, then key
    bool operator()(const QueuedEvent& x, const QueuedEvent& y) const {
      return x.at != y.at ? x.at < y.at : x.key < y.key;
    }
  };
  struct After {  // std heaps are max-heaps: "after" makes the earliest the top
    bool operator()(const QueuedEvent& x, const QueuedEvent& y) const { return Before{}(y, x); }
  };

  /// Whether the earliest event of the floor's block is the near heap's rather than the run's head.
  bool near_first() const {
    return !near_.empty() && (head_ == run_.size() || Before{}(near_.front(), run_[head_]));
  }

  static QueuedEvent pop_heap(EventVec& h) {
    std::pop_heap(h.begin(), h.end(), After{});
    const QueuedEvent e = h.back();
    h.pop_back();
    return e;
  }

  static constexpr unsigned kDigitBits = 6;
  static constexpr unsigned kLevels = (64 + kDigitBits - 1) / kDigitBits;
  /// The run covers the floor's block of 2^kRunBits ns (262 µs): the three lowest radix levels. Message
  /// delays (a network's hundreds of microseconds to milliseconds) reach past it, so a send lands in a
  /// bucket, and each event is moved once, from its bucket into a run. (With the block at 4,096 ns, two
  /// levels, the kernel benchmark's events moved twice and a refill came every four events: refill, sort and
  /// pop took 145 instructions per event, against 115 now.)
  static constexpr unsigned kRunBits = 3 * kDigitBits;

  bool in_block(Time at) const {
    return ((static_cast<std::uint64_t>(at.count()) ^ static_cast<std::uint64_t>(last_.count())) >>
            kRunBits) == 0;
  }

  /// Into the bucket of (level, digit) for an event after the floor's block (level >= 3).
  /// Takes the event's fields, not a reference: a pushed event was just built field by field on the
  /// caller's stack, and copying it through memory loaded it back in 16-byte pieces, which the store
  /// buffer cannot forward from 8- and 4-byte stores. Such a load waits for the stores to reach the cache,
  /// at 100,000 processes behind older stores' cold lines (perf: half of this function's samples). From
  /// registers, the fields are stored straight into the bucket.
  void put(Time at, std::uint64_t key, std::uint32_t kind, std::uint32_t a, std::uint64_t b) {
    const auto t = static_cast<std::uint64_t>(at.count());
    const auto diff = t ^ static_cast<std::uint64_t>(last_.count());
    const unsigned level = (63u - static_cast<unsigned>(std::countl_zero(diff))) / kDigitBits;
    const unsigned digit = static_cast<unsigned>(t >> (level * kDigitBits)) & 63u;
    buckets_[level * 64 + digit].push_back(QueuedEvent{at, key, kind, a, b});
    digits_[level] |= std::uint64_t{1} << digit;
    levels_ |= 1u << level;
  }

  /// The lowest non-empty bucket: lower levels hold earlier times, and within a level lower digits do.
  unsigned lowest() const {
    const auto level = static_cast<unsigned>(std::countr_zero(levels_));
    return level * 64 + static_cast<unsigned>(std::countr_zero(digits_[level]));
  }

  /// The run and the near heap are empty: move the floor to the earliest time pending. The lowest bucket's
  /// events in the new floor's block become the run (sorted); the others go to lower buckets.
  void refill() {
    run_.clear();
    head_ = 0;
    const unsigned i = lowest();
    const unsigned level = i / 64;
    digits_[level] &= ~(std::uint64_t{1} << (i % 64));
    if (digits_[level] == 0) levels_ &= ~(1u << level);
    EventVec& b = buckets_[i];
    Time least = b.front().at;
    for (const QueuedEvent& e : b) least = std::min(least, e.at);
    last_ = least;
    if (level == kRunBits / kDigitBits) {
      // The level just above the run: the bucket's events all share its block (they agree with the old floor
      // above the bucket's digit, and on the digit), so the bucket becomes the run as it is.
      run_.swap(b);
    } else {
      for (const QueuedEvent& e : b) {
        if (in_block(e.at)) {
          run_.push_back(e);
        } else {
          put(e.at, e.key, e.kind, e.a, e.b);
        }
      }
      b.clear();
    }
    sort_run();
  }

  /// Sorts the run on (at, key): sort_range over the whole run (every event of it agrees with the floor from
  /// bit kRunBits up).
  void sort_run() { sort_range(run_.begin(), run_.end(), kRunBits, 0, true); }
  /// Sorts [first, last), whose events agree on every bit of their time from bit `top` up, on (at, key). A
  /// stable counting sort on the next `bits` bits below `top`, as many as give about two groups per event
  /// (6 to 12: the ~260 events of the kernel benchmark's block fall into 1,024 groups of 256 ns), so that
  /// the insertion pass over the whole range afterwards rarely finds two events of one group out of order:
  /// its comparison is then predictable (with 64 groups of ~4 events it mispredicted about every other
  /// time: 12% of the kernel benchmark's cycles went to the insertion sort). Groups of more than kSmallRun
  /// events are sorted likewise on the bits below theirs first; events at one time, by key. `depth` picks
  /// the count array (the caller's stays intact below it). `whole`: [first, last) is the whole run, whose
  /// buffer may trade places with the scratch buffer's (the scatter is then the only copy).
  void sort_range(QueuedEvent* first, QueuedEvent* last, unsigned top, unsigned depth, bool whole = false) {
    const auto n = static_cast<std::size_t>(last - first);
    if (n <= kSmallRun) {
      insertion_sort(first, last);
      return;
    }
    if (top == 0) {  // all at one time: by key
      std::sort(first, last, Before{});
      return;
    }
    const unsigned bits =
        std::min(top, std::clamp(static_cast<unsigned>(std::bit_width(n)) + 1, kMinSortBits, kMaxSortBits));
    const unsigned shift = top - bits;
    const std::uint64_t mask = (std::uint64_t{1} << bits) - 1;
    const std::size_t groups = std::size_t{1} << bits;
    const auto digit = [shift, mask](const QueuedEvent& e) {
      return static_cast<std::size_t>((static_cast<std::uint64_t>(e.at.count()) >> shift) & mask);
    };
    std::vector<std::uint32_t>& counts = counts_[depth];
    counts.assign(groups + 1, 0);
    std::uint32_t* start = counts.data();
    for (const QueuedEvent* e = first; e != last; ++e) ++start[digit(*e) + 1];
    std::uint32_t biggest = 0;
    for (std::size_t g = 1; g <= groups; ++g) {
      biggest = std::max(biggest, start[g]);
      start[g] += start[g - 1];
    }
    if (biggest == n) {  // all in one group: on the bits below
      sort_range(first, last, shift, depth, whole);
      return;
    }
    scratch_.resize_for_overwrite(n);
    for (const QueuedEvent* e = first; e != last; ++e) scratch_[start[digit(*e)]++] = *e;
    // Now start[g] is where group g ends (and g + 1 begins).
    if (whole) {
      run_.swap(scratch_);
      first = run_.begin();
      last = run_.end();
    } else {
      std::copy(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(n), first);
    }
    if (biggest > kSmallRun) {
      for (std::size_t g = 0; g < groups; ++g) {
        const std::uint32_t begin = g == 0 ? 0 : start[g - 1];
        if (start[g] - begin > kSmallRun) sort_range(first + begin, first + start[g], shift, depth + 1);
      }
    }
    insertion_sort(first, last);
  }
  static constexpr unsigned kMinSortBits = kDigitBits;
  static constexpr unsigned kMaxSortBits = 12;
  static constexpr std::size_t kSmallRun = 32;
  static void insertion_sort(QueuedEvent* first, QueuedEvent* last) {
    for (QueuedEvent* i = first + (first != last); i < last; ++i) {
      const QueuedEvent x = *i;
      QueuedEvent* j = i;
      for (; j > first && Before{}(x, *(j - 1)); --j) *j = *(j - 1);
      *j = x;
    }
  }

  EventVec early_;  ///< events pushed before the floor: a heap on (at, key), served first
  EventVec run_;    ///< events in the floor's block, sorted on (at, key), served from head_
  std::size_t head_ = 0;
  EventVec near_;     ///< events in the floor's block pushed out of the run's order: a heap on (at, key)
  EventVec scratch_;  ///< sort_run's counting sort
  /// sort_range's group counts, one array per level of its recursion (each consumes kMinSortBits or more of
  /// the run's kRunBits).
  std::array<std::vector<std::uint32_t>, kRunBits / kMinSortBits> counts_;
  std::array<EventVec, kLevels * 64> buckets_;   ///< level * 64 + digit (levels 3 and up)
  std::array<std::uint64_t, kLevels> digits_{};  ///< per level: bit d set when bucket d is not empty
  std::uint32_t levels_ = 0;                     ///< bit l set when level l has a non-empty bucket
  Time last_{0};                                 ///< the floor
  std::size_t size_ = 0;
};

}  // namespace locksim
