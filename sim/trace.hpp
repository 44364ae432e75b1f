#pragma once
/// The trace: every kernel event with true time and node time, and a 64-bit hash over its canonical form.
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "locksim/sim/inline.hpp"
#include "locksim/sim/time.hpp"

namespace locksim {

/// Process identifier inside one world (index in creation order: stable across runs).
struct ProcId {
  std::uint32_t value = kNone;
  static constexpr std::uint32_t kNone = 0xffffffffu;
  constexpr bool valid() const { return value != kNone; }
  friend constexpr auto operator<=>(ProcId, ProcId) = default;
};

enum class TraceKind : std::uint8_t {
  start,      ///< a process's fiber started (first start or restart)
  exit,       ///< a process's body returned
  send,       ///< a message left a process
  deliver,    ///< a message reached a process's mailbox
  drop,       ///< a message was lost (loss, partition, dead receiver)
  duplicate,  ///< the network duplicated a message
  receive,    ///< a process took a message from its mailbox
  timeout,    ///< a receive or call gave up
  pause,      ///< a process stopped being scheduled (GC pause, SIGSTOP)
  resume,     ///< a paused process runs again
  crash,      ///< a process lost its volatile state
  restart,    ///< a crashed process starts again from its persisted state
  clock,      ///< a node clock changed (jump, drift)
  network,    ///< partition / heal / link change
  fault,      ///< a fault of the plan fired
  note,       ///< an event logged by code inside the world (e.g. "acquired", "write")
  limit,      ///< the run stopped at a limit
  /// a message met a cut link and is held until the link opens (NetworkOptions::cut_messages), or the heal
  /// released it (the detail says which)
  hold,
};

std::string_view to_string(TraceKind k);

struct TraceEvent {
  Time time{};       ///< true simulated time
  Time node_time{};  ///< the process's own monotonic clock at that moment (0 when not applicable)
  Time wall_time{};  ///< the process's wall clock at that moment
  TraceKind kind{};
  ProcId proc{};          ///< the process it happened to
  ProcId peer{};          ///< the other side (sender/receiver), if any
  std::uint64_t msg = 0;  ///< message id, if any
  std::string label;      ///< short name: message type, note label, fault kind
  std::string detail;     ///< free text, canonical (no pointers, no unordered iteration)
};

/// Records events and hashes them incrementally. Keeping the events is optional (hash-only mode for speed).
class Trace {
 public:
  /// `max_kept`: events kept in memory at most (the hash always covers every event), so a runaway run's
  /// memory stays bounded; truncated() says whether events were dropped from the kept list.
  explicit Trace(bool keep_events = true, std::uint64_t max_kept = kDefaultMaxKept);
  static constexpr std::uint64_t kDefaultMaxKept = 2'000'000;
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;
  ~Trace();

  void record(TraceEvent ev);
  /// Same as record(), without building a TraceEvent unless events are kept (the hot path, inline: the
  /// canonical bytes are written straight into the hash batch).
  LOCKSIM_ALWAYS_INLINE void record(Time time, Time node_time, Time wall_time, TraceKind kind, ProcId proc,
                                    ProcId peer, std::uint64_t msg, std::string_view label,
                                    std::string_view detail) {
    encode<0>(time, node_time, wall_time, kind, proc, peer, msg, label.data(), label.size(), detail);
  }
  /// record() for a label with kLabelRoom readable bytes at `label` (a message type's inline buffer), of
  /// which the first `label_size` are the label: copied as whole words, without branching on the size (the
  /// same canonical bytes).
  static constexpr std::size_t kLabelRoom = 24;
  LOCKSIM_ALWAYS_INLINE void record_roomy_label(Time time, Time node_time, Time wall_time, TraceKind kind,
                                                ProcId proc, ProcId peer, std::uint64_t msg,
                                                const void* label, std::size_t label_size,
                                                std::string_view detail) {
    encode<kLabelRoom>(time, node_time, wall_time, kind, proc, peer, msg, static_cast<const char*>(label),
                       label_size, detail);
  }
  std::uint64_t hash() const;
  std::uint64_t count() const { return count_; }
  const std::vector<TraceEvent>& events() const { return events_; }
  bool keeps_events() const { return keep_; }
  bool truncated() const { return truncated_; }

  /// One line per event, stable format, used by golden files and --trace output.
  static std::string format(const TraceEvent& ev, std::string_view proc_name, std::string_view peer_name);

 private:
  bool keep_;
  /// The batch room the inline path may fill: kBatch, or 0 while events are kept, so that one test sends
  /// both a full batch and a kept event to record_slow().
  std::size_t room_;
  std::uint64_t max_kept_;
  bool truncated_ = false;
  std::uint64_t count_ = 0;
  void* state_;  // XXH3 streaming state (opaque here to keep xxhash.h out of headers)
  /// Canonical bytes not yet fed to the hash: one XXH3 update per 16 KiB instead of one per event (the same
  /// byte stream, so the same hash). Events are encoded straight into it. (1, 2 and 4 KiB were measured
  /// slower: XXH3's per-call cost outweighs keeping the batch in L1.)
  static constexpr std::size_t kBatch = 16 * 1024;
  /// Not zeroed when made (a world is made per run, and explore makes thousands a second): every byte is
  /// written before it is hashed.
  std::unique_ptr<unsigned char[]> pending_;
  mutable std::size_t used_ = 0;
  void flush() const;
  /// Both record()s: the canonical form is fixed-width little-endian fields, then the strings (their
  /// lengths are in the fixed part), written straight into the hash batch. `Room` > 0: `label` has that
  /// many readable bytes, copied whole (the bytes past label_size are overwritten or never hashed); 0: the
  /// label's own bytes only.
  template <std::size_t Room>
  LOCKSIM_ALWAYS_INLINE void encode(Time time, Time node_time, Time wall_time, TraceKind kind, ProcId proc,
                                    ProcId peer, std::uint64_t msg, const char* label, std::size_t label_size,
                                    std::string_view detail) {
    if (used_ + kFixed + (Room > 0 ? Room : label_size) + detail.size() > room_) [[unlikely]] {
      record_slow(time, node_time, wall_time, kind, proc, peer, msg, std::string_view(label, label_size),
                  detail);
      return;
    }
    unsigned char* buf = pending_.get() + used_;
    encode_fixed(buf, time, node_time, wall_time, kind, proc, peer, msg, label_size, detail.size());
    buf += kFixed;
    if constexpr (Room > 0) {
      std::memcpy(buf, label, Room);
    } else {
      copy_short(buf, label, label_size);
    }
    buf += label_size;
    if (!detail.empty()) std::memcpy(buf, detail.data(), detail.size());
    used_ += kFixed + label_size + detail.size();
    ++count_;
  }
  void append(const void* p, std::size_t n);
  void record_slow(Time time, Time node_time, Time wall_time, TraceKind kind, ProcId proc, ProcId peer,
                   std::uint64_t msg, std::string_view label, std::string_view detail);
  void keep(Time time, Time node_time, Time wall_time, TraceKind kind, ProcId proc, ProcId peer,
            std::uint64_t msg, std::string_view label, std::string_view detail);
  /// The fixed part of an event's canonical form: seven little-endian 64-bit words and the kind.
  static constexpr std::size_t kFixed = 8 * 7 + 1;
  static void encode_fixed(unsigned char* buf, Time time, Time node_time, Time wall_time, TraceKind kind,
                           ProcId proc, ProcId peer, std::uint64_t msg, std::size_t label_size,
                           std::size_t detail_size) {
    put_u64(buf, static_cast<std::uint64_t>(time.count()));
    put_u64(buf + 8, static_cast<std::uint64_t>(node_time.count()));
    put_u64(buf + 16, static_cast<std::uint64_t>(wall_time.count()));
    put_u64(buf + 24, (static_cast<std::uint64_t>(proc.value) << 32) | peer.value);
    put_u64(buf + 32, msg);
    put_u64(buf + 40, label_size);
    put_u64(buf + 48, detail_size);
    buf[56] = static_cast<unsigned char>(kind);
  }
  /// Copies n bytes; labels (message types, fault names) are a few to 23 bytes, where two overlapping word
  /// copies beat both a byte loop and a memcpy call. Reads and writes only [src, src + n) and [dst, dst + n).
  static void copy_short(unsigned char* dst, const char* src, std::size_t n) {
    if (n >= 8) {
      if (n > 16) {
        std::memcpy(dst, src, n);
        return;
      }
      std::uint64_t head, tail;
      std::memcpy(&head, src, 8);
      std::memcpy(&tail, src + n - 8, 8);
      std::memcpy(dst, &head, 8);
      std::memcpy(dst + n - 8, &tail, 8);
    } else if (n >= 4) {
      std::uint32_t head, tail;
      std::memcpy(&head, src, 4);
      std::memcpy(&tail, src + n - 4, 4);
      std::memcpy(dst, &head, 4);
      std::memcpy(dst + n - 4, &tail, 4);
    } else if (n > 0) {  // 1 to 3 bytes: first, middle and last (some of them the same byte)
      dst[0] = static_cast<unsigned char>(src[0]);
      dst[n / 2] = static_cast<unsigned char>(src[n / 2]);
      dst[n - 1] = static_cast<unsigned char>(src[n - 1]);
    }
  }
  static void put_u64(unsigned char* p, std::uint64_t v) {
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(p, &v, 8);  // one store
    } else {
      for (int i = 0; i < 8; ++i)
        p[i] = static_cast<unsigned char>(v >> (8 * i));  // little-endian everywhere
    }
  }
  std::vector<TraceEvent> events_;
};

}  // namespace locksim
