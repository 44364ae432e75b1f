#pragma once
/// The network model: per-message delay from a distribution, loss, duplication, reordering, partitions
/// (one-way too) and per-link overrides. It only decides a message's fate; the world schedules the delivery.
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "locksim/sim/distribution.hpp"
#include "locksim/sim/inline.hpp"
#include "locksim/sim/random.hpp"
#include "locksim/sim/time.hpp"
#include "locksim/sim/trace.hpp"

namespace locksim {

/// A message's delay: any distribution of durations (sim/distribution.hpp). Constant and uniform are sampled
/// inline on the message path; the network's older kinds draw exactly what they always drew (long_tail is
/// pareto, with `mean` as the Pareto scale).
using DelayDist = Dist;

/// Probabilities are integer parts per million: exact and portable.
struct LinkOptions {
  DelayDist delay = DelayDist::constant_of(1ms);
  std::uint32_t loss_ppm = 0;
  std::uint32_t duplicate_ppm = 0;
  std::uint32_t reorder_ppm = 0;  ///< chance that a message gets an extra uniform delay in [0, reorder_extra]
  Duration reorder_extra{0};
};

/// What a cut link (a partition) does to a message that meets it, when it is sent or when it arrives.
enum class CutMessages : std::uint8_t {
  /// Lost: a datagram's fate, or a connection's that gave up. The default.
  lost,
  /// Held, as TCP holds a stream's bytes and retransmits them: kept per directed link (between the hosts, as
  /// Network::blocked() looks at it) and delivered when the link opens again, in the order they were sent,
  /// each with a delay the link draws from the heal (no loss, duplication or reordering: TCP). A held
  /// message whose sender or receiver crashed or restarted meanwhile is dropped at the heal: its connection
  /// is gone ("connection reset: ...").
  held,
};

struct NetworkOptions {
  LinkOptions defaults;
  /// A message that reaches a process which is not running (crashed, or its body returned) or an earlier
  /// incarnation of one is answered by its host with a "conn-refused" message (ConnectionRefused, reply_to
  /// the refused message), as a TCP host answers a connection to a closed port with a reset. Off: silence,
  /// the sender finds out only by its timeout. A host that lost power (a crash with power loss) answers
  /// nothing either way, and a paused process still accepts and buffers, as a stopped (SIGSTOP) one does.
  bool refuse_when_down = false;
  CutMessages cut_messages = CutMessages::lost;
  std::map<std::pair<ProcId, ProcId>, LinkOptions> links;  ///< per directed link overrides (ordered map)
};

/// A partition's identity: 1 for the first one a network made, 2 for the next, ... (0 is none).
using PartitionId = std::uint32_t;

/// The fate of one message, decided when it is sent. (A partition is looked at again when it arrives:
/// World::deliver.)
struct Fate {
  bool lost = false;
  bool held = false;          ///< lost to the link for now, held until it opens (CutMessages::held)
  std::uint32_t copies = 0;   ///< 1, or 2 when duplicated
  Duration delays[2]{};       ///< one delay per copy (no allocation per message)
  const char* why = nullptr;  ///< reason when lost
};

class Network {
 public:
  explicit Network(NetworkOptions opts, Rng rng) : opts_(std::move(opts)), rng_(rng) {}

  Fate decide(ProcId from, ProcId to, Time now) {
    // The common case, inline: no partition, no per-link override, no delay spike, and a default link that
    // neither loses, duplicates nor reorders. It draws exactly what decide_general() would.
    const LinkOptions& d = opts_.defaults;
    if (blocked_.empty() && opts_.links.empty() && spikes_.empty() &&
        (d.loss_ppm | d.duplicate_ppm | d.reorder_ppm) == 0) [[likely]] {
      Fate fate;
      fate.delays[fate.copies++] = d.delay.sample(rng_);
      return fate;
    }
    return decide_general(from, to, now);
  }

  /// Cut the directed links `links` (a partition: both directions are two links); returns its identity.
  /// Partitions may overlap: a link is cut while any partition cuts it.
  PartitionId cut(std::vector<std::pair<ProcId, ProcId>> links);
  /// Links that opened again (a heal): directed, between hosts, in ascending order.
  using Links = std::vector<std::pair<ProcId, ProcId>>;
  /// End partition `id` only: its links open again unless another partition cuts them too. False if there is
  /// no such partition (never made, or healed already). `opened`, if given, gets the links that opened.
  bool heal(PartitionId id, Links* opened = nullptr);
  /// End every partition; `opened`, if given, gets the links that were cut.
  void heal_all(Links* opened = nullptr) {
    if (opened != nullptr)
      for (const auto& [l, n] : blocked_) opened->push_back(l);
    partitions_.clear();
    blocked_.clear();
  }
  bool blocked(ProcId from, ProcId to) const { return !blocked_.empty() && cut({host(from), host(to)}); }
  /// Whether any link is cut (one test on the message path).
  bool any_cut() const { return !blocked_.empty(); }
  /// Whether a message that meets a cut link is held rather than lost (NetworkOptions::cut_messages).
  bool holds() const { return opts_.cut_messages == CutMessages::held; }
  /// The delay of a held message released on the open link from -> to: the link's delay and any delay spike
  /// on it, drawn as for a message sent now, without loss, duplication or reordering (a TCP stream's).
  Duration held_delay(ProcId from, ProcId to, Time now);

  /// Extra delay added to messages on a link (or any link when from/to are invalid) until `until`.
  void add_spike(ProcId from, ProcId to, Duration extra, Time until, std::uint32_t count);

  LinkOptions& link(ProcId from, ProcId to) { return opts_.links[{from, to}]; }

  /// Thread `thread` sends and receives as process `process`: partitions, link settings and delay spikes
  /// naming the process apply to the thread's messages (sim/threads.cpp). Looked at only off the fast path
  /// (a cut, an override, a spike), so a world without threads pays nothing.
  void set_host(ProcId thread, ProcId process);
  /// The process whose links `p`'s messages take: p itself unless it is a thread.
  ProcId host(ProcId p) const { return p.value < host_.size() ? ProcId{host_[p.value]} : p; }
  NetworkOptions& options() { return opts_; }

 private:
  struct Spike {
    ProcId from, to;
    Duration extra;
    Time until;
    std::uint32_t remaining;  ///< messages left to delay (0 = unlimited until `until`)
  };
  Fate decide_general(ProcId from, ProcId to, Time now);
  /// The extra delay of the spikes in force on the link from -> to (hosts); counts them down.
  Duration spike_extra(ProcId from, ProcId to, Time now);
  LOCKSIM_ALWAYS_INLINE const LinkOptions& options_of(ProcId from, ProcId to) const {
    auto it = opts_.links.find({from, to});
    return it != opts_.links.end() ? it->second : opts_.defaults;
  }
  bool cut(std::pair<ProcId, ProcId> link) const { return blocked_.count(link) != 0; }
  NetworkOptions opts_;
  Rng rng_;
  std::map<PartitionId, std::vector<std::pair<ProcId, ProcId>>> partitions_;  ///< in force, by identity
  std::map<std::pair<ProcId, ProcId>, std::uint32_t> blocked_;  ///< cut links: how many partitions cut each
  PartitionId last_partition_ = 0;
  std::vector<Spike> spikes_;
  std::vector<std::uint32_t> host_;  ///< by process index: whose links it takes (empty: no thread yet)
};

}  // namespace locksim
