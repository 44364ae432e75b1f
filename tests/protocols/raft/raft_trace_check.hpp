#pragma once
/// Checks of Raft's rules for each member against a run's kept trace (the simulator's ground truth: every
/// send with its summary, every receive, pause, resume, crash, and the members' notes):
///  - terms are logical clocks (Raft §5.1: "if a candidate or leader discovers that its term is out of date,
///    it immediately reverts to follower state"): once a member has read a message carrying term T, it sends
///    no AppendEntries and no RequestVote of a term below T. A request carries its term in its summary
///    ("term=N"); an AppendEntries answer "stale term" says the answerer's term is above the term of the
///    request it answers (the AppendEntries it read just before);
///  - check-quorum (Raft thesis §6.2): a leader paused for longer than an election timeout (true time equals
///    its monotonic time: no clock drift) has heard from nobody within an election timeout when it resumes,
///    so it steps down before it has run for `tolerance` (or crashes).
/// The world must keep its trace (WorldOptions::keep_trace) and the trace must not be truncated.
#include <fmt/format.h>

#include <charconv>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "locksim/protocols/raft/lease_group.hpp"
#include "locksim/sim/world.hpp"

namespace locksim::raft::testing {

struct TraceCheckOptions {
  Duration election_timeout_max{300ms};
  bool check_quorum = true;
  Duration tolerance{1ms};
};

namespace detail {
inline std::optional<std::uint64_t> term_of(std::string_view detail) {
  const auto at = detail.find("term=");
  if (at == std::string_view::npos) return std::nullopt;
  std::uint64_t t = 0;
  const char* b = detail.data() + at + 5;
  auto r = std::from_chars(b, detail.data() + detail.size(), t);
  if (r.ec != std::errc{}) return std::nullopt;
  return t;
}
}  // namespace detail

/// The rules above, for the members `members` (the group's processes); one line per violation (at most 20).
inline std::vector<std::string> check_raft_trace(const World& w, const std::vector<ProcId>& members,
                                                 const TraceCheckOptions& opts = {}) {
  std::vector<std::string> errors;
  auto error = [&](Time t, std::string s) {
    if (errors.size() < 20) errors.push_back(fmt::format("t={} {}", format_time(t), s));
  };
  const Trace& trace = w.trace();
  if (!trace.keeps_events()) return {"the trace was not kept"};
  if (trace.truncated()) return {"the trace was truncated"};
  auto is_member = [&](ProcId p) {
    for (ProcId m : members)
      if (m == p) return true;
    return false;
  };
  struct Member {
    std::uint64_t known = 0;        // highest term it has read
    std::uint64_t last_append = 0;  // term of the last AppendEntries it read
    std::optional<std::uint64_t> leads;
    // A pause while leading, longer than an election timeout: running time since it resumed, still leading.
    bool owes_step_down = false;
    Time running_since{};
    Duration ran{0};
    Time paused_at{};
    bool paused = false;
  };
  std::map<ProcId, Member> st;
  std::map<std::uint64_t, std::uint64_t> msg_term;  // message id → the term it carries (at least)
  auto name = [&](ProcId p) { return w.name(p); };
  auto step_down_owed_for = [&](Member& m, ProcId p, Time now) {
    if (!m.owes_step_down || m.paused) return;
    m.ran += now - m.running_since;
    m.running_since = now;
    if (m.ran > opts.tolerance) {
      error(now, fmt::format("{} led on for {} after a pause longer than an election timeout", name(p),
                             format_time(m.ran)));
      m.owes_step_down = false;
    }
  };
  for (const TraceEvent& ev : trace.events()) {
    if (!is_member(ev.proc)) continue;
    Member& m = st[ev.proc];
    switch (ev.kind) {
      case TraceKind::send:
        if (ev.label == "raft.append" || ev.label == "raft.vote") {
          auto t = detail::term_of(ev.detail);
          if (!t) break;
          msg_term[ev.msg] = *t;
          if (*t < m.known)
            error(ev.time, fmt::format("{} sent {} of term {} after it read term {}", name(ev.proc), ev.label,
                                       *t, m.known));
        } else if (ev.label == "raft.append.reply" && ev.detail == "stale term") {
          msg_term[ev.msg] = m.last_append + 1;
        }
        break;
      case TraceKind::receive:
        if (auto it = msg_term.find(ev.msg); it != msg_term.end()) {
          m.known = std::max(m.known, it->second);
          if (ev.label == "raft.append") m.last_append = it->second;
        }
        step_down_owed_for(m, ev.proc, ev.time);
        break;
      case TraceKind::note:
        if (ev.label == "raft-leader") {
          m.leads = detail::term_of(ev.detail);
        } else if (ev.label == "raft-step-down") {
          step_down_owed_for(m, ev.proc, ev.time);
          m.leads.reset();
          m.owes_step_down = false;
        }
        break;
      case TraceKind::pause:
        step_down_owed_for(m, ev.proc, ev.time);
        m.paused = true;
        m.paused_at = ev.time;
        break;
      case TraceKind::resume:
        m.paused = false;
        if (opts.check_quorum && m.leads && ev.time - m.paused_at > opts.election_timeout_max &&
            !m.owes_step_down) {
          m.owes_step_down = true;
          m.ran = 0ns;
        }
        m.running_since = ev.time;
        break;
      case TraceKind::crash:
        m.leads.reset();
        m.owes_step_down = false;
        m.paused = false;
        break;
      default:
        break;
    }
  }
  const Time end = w.now();
  for (auto& [p, m] : st) step_down_owed_for(m, p, end);
  return errors;
}

}  // namespace locksim::raft::testing
