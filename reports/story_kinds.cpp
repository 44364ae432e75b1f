// The cas-row's and the job queue's anomalies, refusals and figures told in their own words: rows,
// versions and increments; jobs, periods and leaders.
#include <fmt/format.h>

#include "locksim/reports/report.hpp"

namespace locksim {

namespace {

std::string secs(Time t) {
  return t == kTimeMax ? "never" : format_seconds(t, 3) + " s";
}
std::string tok(const std::optional<std::uint64_t>& t) {
  return t ? fmt::format("token {}", *t) : "no token";
}
/// "client1 (epoch 2, token 5)", or "client1" for a client that wrote without a lock.
std::string who(const WriteRef& w) {
  if (w.grant == kNoId) return w.client;
  return fmt::format("{} (epoch {}, {})", w.client, w.epoch, tok(w.token));
}

/// " client1 was paused from 2.0 s to 17.0 s.": the pauses of `client` that began before `until`.
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

/// The version a cas-row write was computed from (its log entry's :read_version).
std::uint64_t read_version(const RunOutput& run, const WriteRef& w) {
  return w.seq < run.history.resource_log.size() ? run.history.resource_log[w.seq].version : 0;
}
/// The version row `key` of `resource` held just before log entry `seq`: the applied statements before it.
std::uint64_t version_before(const RunOutput& run, const std::string& resource, const std::string& key,
                             std::uint64_t seq) {
  std::uint64_t n = 0;
  for (const ResourceEntry& e : run.history.resource_log) {
    if (e.seq >= seq) break;
    if (e.kind == ResourceKind::cas_row && e.op == ResourceEntry::Op::write && e.applied &&
        e.resource == resource && e.key == key)
      ++n;
  }
  return n;
}

}  // namespace

std::string cas_row_story(const RunOutput& run, const Violation& v) {
  const History& h = run.history;
  const WriteRecord& over = h.writes.at(v.later.write);
  const std::uint64_t from = read_version(run, v.later);
  std::string s;
  if (v.earlier.valid()) {
    const WriteRecord& lost = h.writes.at(v.earlier.write);
    const std::uint64_t held = version_before(run, v.resource, v.key, v.later.seq);
    s = fmt::format(
        "Row '{}' lost {}'s increment: {} wrote value {} computed from version {}, but the row held version "
        "{} "
        "(value {}, written by {} at {}); the row applied it at {} as version {}.",
        v.key, v.earlier.client, who(v.later), over.value, from, held, lost.value, who(v.earlier),
        secs(v.earlier.arrived), secs(v.later.arrived), held + 1);
  } else {
    s = fmt::format("Row '{}' applied {}'s value {} computed from version {}, a version it never held.",
                    v.key, who(v.later), over.value, from);
  }
  if (v.later.grant == kNoId) s += " Neither client held a lock.";
  s += pauses_before(run, v.later.client, v.later.arrived);
  s += " The UPDATE must say WHERE version = :read_version: then it updates no row, the client re-reads and "
       "tries again, and no increment is lost, with a lock or without one.";
  return s;
}

std::string job_queue_story(const RunOutput& run, const Violation& v) {
  std::string s = fmt::format("Job {} enqueued twice: by {} at {} and {} at {}.", v.key, v.earlier.client,
                              secs(v.earlier.arrived), v.later.client, secs(v.later.arrived));
  s += fmt::format(" The queue accepted {} first, then {}.", who(v.earlier), who(v.later));
  s += pauses_before(run, v.later.client, v.later.arrived);
  if (v.earlier.client == v.later.client) {
    s += " One leader's enqueue landed twice: the job runs twice.";
  } else {
    s += " Both leaders believed the period was theirs to schedule: the job runs twice. A fenced queue (an "
         "enqueue below the highest token seen is refused; a new leader's listing claims the queue) with a "
         "protocol that sends tokens would have refused the older leader's.";
  }
  return s;
}

std::vector<std::string> queue_refusal_lines(const RunOutput& run) {
  std::vector<std::string> out;
  for (const CheckResult::Refusal& f : run.check.refused) {
    if (refusal_kind(run, f) != ResourceKind::job_queue) continue;
    out.push_back(fmt::format("refused enqueue: {}'s job {} at {} (epoch {}, {}): {}{}", f.write.client,
                              f.key, secs(f.write.arrived), f.write.epoch, tok(f.write.token), f.reason,
                              f.newest ? " — the newest holder's own enqueue" : ""));
  }
  return out;
}

std::vector<std::string> resource_figure_lines(const RunOutput& run) {
  const CheckResult& c = run.check;
  // The names of the run's resources of kind `k`, quoted, in file order.
  auto named = [&](ResourceKind k) {
    std::string out;
    auto add = [&](const std::string& n) { out += (out.empty() ? "" : ", ") + n; };
    if (run.resource_kind == k) add(run.resource);
    for (const RunOutput::MoreResource& m : run.more_resources)
      if (m.kind == k) add(m.name);
    return out;
  };
  std::string rows;  // the rows the log names, in log order
  for (const ResourceEntry& e : run.history.resource_log)
    if (e.kind == ResourceKind::cas_row && rows.find("'" + e.key + "'") == std::string::npos)
      rows += (rows.empty() ? "" : ", ") + ("'" + e.key + "'");
  std::vector<std::string> out;
  if (run.has_kind(ResourceKind::cas_row))
    out.push_back(
        fmt::format("cas-row {}, row {}: {} UPDATE statements, {} applied, {} conflicts (zero rows updated); "
                    "{} retries after a conflict, {} updates given up",
                    named(ResourceKind::cas_row), rows.empty() ? "none" : rows, c.cas.statements,
                    c.cas.applied, c.cas.conflicts, c.cas.retries, c.cas.gave_up));
  if (run.has_kind(ResourceKind::job_queue))
    out.push_back(fmt::format("job queue '{}': {} enqueues, {} accepted, {} refused",
                              named(ResourceKind::job_queue), c.queue.enqueues, c.queue.accepted,
                              c.queue.refused));
  return out;
}

}  // namespace locksim
