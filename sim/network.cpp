#include "locksim/sim/network.hpp"

#include <algorithm>

namespace locksim {

void Network::add_spike(ProcId from, ProcId to, Duration extra, Time until, std::uint32_t count) {
  spikes_.push_back({from, to, extra, until, count});
}

PartitionId Network::cut(std::vector<std::pair<ProcId, ProcId>> links) {
  std::sort(links.begin(), links.end());
  links.erase(std::unique(links.begin(), links.end()), links.end());
  for (const auto& l : links) ++blocked_[l];
  const PartitionId id = ++last_partition_;
  partitions_.emplace(id, std::move(links));
  return id;
}

bool Network::heal(PartitionId id, Links* opened) {
  auto it = partitions_.find(id);
  if (it == partitions_.end()) return false;
  for (const auto& l : it->second) {
    auto b = blocked_.find(l);
    if (--b->second == 0) {
      blocked_.erase(b);
      if (opened != nullptr) opened->push_back(l);  // (a partition's links are sorted: so are these)
    }
  }
  partitions_.erase(it);
  return true;
}

void Network::set_host(ProcId thread, ProcId process) {
  if (host_.size() <= thread.value) {
    const std::size_t old = host_.size();
    host_.resize(thread.value + 1);
    for (std::size_t i = old; i < host_.size(); ++i) host_[i] = static_cast<std::uint32_t>(i);
  }
  host_[thread.value] = process.value;
}

Fate Network::decide_general(ProcId from, ProcId to, Time now) {
  from = host(from);
  to = host(to);
  Fate fate;
  if (!blocked_.empty() && cut({from, to})) {
    fate.lost = true;
    fate.held = holds();
    fate.why = fate.held ? "held by the cut link" : "partition";
    return fate;
  }
  const LinkOptions& l = options_of(from, to);
  if (l.loss_ppm != 0 && rng_.chance(l.loss_ppm, 1'000'000)) {
    fate.lost = true;
    fate.why = "loss";
    return fate;
  }
  const Duration extra = spikes_.empty() ? Duration{0} : spike_extra(from, to, now);
  auto one = [&] {
    Duration d = l.delay.sample(rng_) + extra;
    if (l.reorder_ppm != 0 && rng_.chance(l.reorder_ppm, 1'000'000)) d += rng_.uniform(0ns, l.reorder_extra);
    return d;
  };
  fate.delays[fate.copies++] = one();
  if (l.duplicate_ppm != 0 && rng_.chance(l.duplicate_ppm, 1'000'000)) fate.delays[fate.copies++] = one();
  return fate;
}

Duration Network::held_delay(ProcId from, ProcId to, Time now) {
  from = host(from);
  to = host(to);
  const Duration extra = spike_extra(from, to, now);
  return options_of(from, to).delay.sample(rng_) + extra;
}

Duration Network::spike_extra(ProcId from, ProcId to, Time now) {
  Duration extra{0};
  for (auto s = spikes_.begin(); s != spikes_.end();) {
    const bool expired = now >= s->until;
    if (expired) {
      s = spikes_.erase(s);
      continue;
    }
    const bool match = (!s->from.valid() || s->from == from) && (!s->to.valid() || s->to == to);
    if (match) {
      extra += s->extra;
      if (s->remaining != 0 && --s->remaining == 0) {
        s = spikes_.erase(s);
        continue;
      }
    }
    ++s;
  }
  return extra;
}

}  // namespace locksim
