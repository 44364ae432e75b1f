#pragma once
/// Small helpers shared by the kernel tests: trace queries.
#include <cstddef>
#include <string_view>
#include <vector>

#include "locksim/sim/world.hpp"

namespace locksim::test {

/// Trace events of one kind (and, if given, of one process), in trace order.
inline std::vector<TraceEvent> events_of(const World& w, TraceKind k, ProcId p = {}) {
  std::vector<TraceEvent> out;
  for (const auto& e : w.trace().events())
    if (e.kind == k && (!p.valid() || e.proc == p)) out.push_back(e);
  return out;
}

inline std::size_t count_of(const World& w, TraceKind k, ProcId p = {}) {
  return events_of(w, k, p).size();
}

/// Index of the first trace event matching kind/proc/label at or after `from`, or npos.
inline std::size_t index_of(const World& w, TraceKind k, ProcId p, std::string_view label = {},
                            std::size_t from = 0) {
  const auto& ev = w.trace().events();
  for (std::size_t i = from; i < ev.size(); ++i)
    if (ev[i].kind == k && (!p.valid() || ev[i].proc == p) && (label.empty() || ev[i].label == label))
      return i;
  return static_cast<std::size_t>(-1);
}

}  // namespace locksim::test
