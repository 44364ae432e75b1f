// The checkpoint table's anomalies and refusals told in its own words: shards, offsets, workers.
#include <fmt/format.h>

#include <map>

#include "locksim/reports/report.hpp"

namespace locksim {

namespace {

std::string secs(Time t) {
  return t == kTimeMax ? "never" : format_seconds(t, 3) + " s";
}
std::string tok(const std::optional<std::uint64_t>& t) {
  return t ? fmt::format("token {}", *t) : "no token";
}

/// "client1 was paused from 2.0 s to 17.0 s": the pauses of `client` that began before `until`.
std::string pauses_before(const RunOutput& run, const std::string& client, Time until) {
  std::string out;
  std::optional<Time> open;
  for (const TraceEvent& ev : run.trace) {
    if (ev.time > until) break;
    if (run.name_of(ev.proc) != client) continue;
    if (ev.kind == TraceKind::pause) open = ev.time;
    if (ev.kind == TraceKind::resume && open) {
      out += fmt::format(" {} was paused from {} to {}.", client, secs(*open), secs(ev.time));
      open.reset();
    }
  }
  return out;
}

std::string stmt(const RunOutput& run, const WriteRef& w) {
  const WriteRecord& rec = run.history.writes.at(w.write);
  return fmt::format("{} (epoch {}, {}) checkpointed offset {} at {}", w.client, w.epoch, tok(w.token),
                     rec.value, secs(w.arrived));
}

}  // namespace

std::string checkpoint_story(const RunOutput& run, const Violation& v) {
  const History& h = run.history;
  const std::string from = h.writes.at(v.earlier.write).value, to = h.writes.at(v.later.write).value;
  std::string s;
  if (v.kind == kCheckpointRewind) {
    s = fmt::format("Checkpoint of shard {} moved back from offset {} to {}. ", v.key, from, to);
    s += stmt(run, v.earlier) + "; then the table applied " + stmt(run, v.later) + ".";
    s += pauses_before(run, v.later.client, v.later.arrived);
    if (v.earlier.grant == v.later.grant) {
      // One hold's statements out of order: the fence passed both (the same token).
      const WriteRecord& late = h.writes.at(v.later.write);
      s += fmt::format(
          " {}'s UPDATE of offset {} was sent at {} and reached the table at {}, after its own later "
          "checkpoint: the same lock hold, the same token, so highest_fence_token <= :token passed it. A "
          "fencing token orders leaders, not one leader's statements: a leader that takes over now resumes "
          "after "
          "offset {} and processes offset {} again. `AND last_processed_offset <= :offset` in the WHERE "
          "clause "
          "(variant \"offset-guard\") refuses the late statement.",
          v.later.client, to, secs(late.sent), secs(v.later.arrived), to, from);
    } else {
      s += fmt::format(
          " A stale leader's UPDATE rewound the shard's progress: the next leader resumes after offset {} "
          "and "
          "processes up to offset {} again. The WHERE clause must compare the fencing token "
          "(highest_fence_token <= :token) and the leader must send it.",
          to, from);
    }
  } else {
    s = v.earlier.client == v.later.client
            ? fmt::format("Offset {} of shard {} processed twice by {}, in two lock holds: ", from, v.key,
                          v.later.client)
            : fmt::format("Offset {} of shard {} processed by two workers: ", from, v.key);
    s += stmt(run, v.earlier) + ", and the table applied " + stmt(run, v.later) + " too.";
    s += pauses_before(run, v.later.client, v.later.arrived);
    s += " Both leaders believed the unit was theirs; a fenced checkpoint would have refused the older one.";
  }
  return s;
}

ResourceKind refusal_kind(const RunOutput& run, const CheckResult::Refusal& f) {
  const auto& log = run.history.resource_log;
  return f.write.seq < log.size() ? log[f.write.seq].kind : run.resource_kind;
}

std::vector<std::string> refusal_lines(const RunOutput& run) {
  std::vector<std::string> out = object_store_refusal_lines(run);
  for (std::string& l : queue_refusal_lines(run)) out.push_back(std::move(l));
  for (const CheckResult::Refusal& f : run.check.refused) {
    if (refusal_kind(run, f) != ResourceKind::checkpoint_table) continue;
    out.push_back(fmt::format("refused checkpoint: {}'s offset {} of shard {} at {} (epoch {}, {}): {}{}",
                              f.write.client, run.history.writes.at(f.write.write).value, f.key,
                              secs(f.write.arrived), f.write.epoch, tok(f.write.token), f.reason,
                              f.newest ? " — the newest holder's own checkpoint" : ""));
  }
  return out;
}

}  // namespace locksim
