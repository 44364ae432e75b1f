// The external API's anomaly and missing effects told in its own words: charges, jobs, idempotency keys.
#include <fmt/format.h>

#include "locksim/reports/report.hpp"

namespace locksim {

namespace {

std::string secs(Time t) {
  return t == kTimeMax ? "never" : format_seconds(t, 3) + " s";
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

const ResourceEntry* entry_of(const RunOutput& run, const WriteRef& w) {
  return w.seq < run.history.resource_log.size() ? &run.history.resource_log[w.seq] : nullptr;
}

std::string key_text(const ResourceEntry* e) {
  return e && !e->idempotency_key.empty() ? "idempotency key " + e->idempotency_key : "no idempotency key";
}

std::string request(const RunOutput& run, const WriteRef& w) {
  return fmt::format("{}'s request (epoch {}, sent at {}, {}) was performed at {}", w.client, w.epoch,
                     secs(w.sent), key_text(entry_of(run, w)), secs(w.arrived));
}

}  // namespace

std::string external_api_story(const RunOutput& run, const Violation& v) {
  const std::string job = run.history.writes.at(v.later.write).value;
  const ResourceEntry* later = entry_of(run, v.later);
  std::string s = fmt::format("Charged twice: job {} by {} at {} and by {} at {}. ", job, v.earlier.client,
                              secs(v.earlier.arrived), v.later.client, secs(v.later.arrived));
  s += request(run, v.earlier) + "; " + request(run, v.later) + " again";
  if (later && !later->reason.empty()) s += " (" + later->reason + ")";
  s += ".";
  s += pauses_before(run, v.later.client, v.later.arrived);
  if (v.earlier.client == v.later.client)
    s += fmt::format(" {} sent job {} twice: a retry of a request whose answer it never heard.",
                     v.later.client, job);
  else
    s += fmt::format(" Both believed job {} was theirs to do.", job);
  if (!later || later->idempotency_key.empty()) {
    s += " The API cannot check a fencing token and, without an idempotency key, performs every request it "
         "receives: no lock, fenced or not, makes this effect happen once. A key per logical job "
         "(job-<account>-"
         "<job>) lets the API return the first result instead.";
  } else {
    s +=
        " The request carried the job's key, but the API had forgotten it: a key protects only while the API "
        "remembers it, and this request came after the retention window had run out.";
  }
  return s;
}

std::vector<std::string> missing_effect_lines(const RunOutput& run) {
  std::vector<std::string> out;
  for (const CheckResult::MissingEffect& m : run.check.missing) {
    if (m.acknowledged.valid())
      out.push_back(fmt::format(
          "missing effect: job {} of account {} at {}: {} heard a result at {} (epoch {}) but the API never "
          "performed it",
          m.job, m.key, m.resource, m.acknowledged.client, secs(m.acknowledged.arrived),
          m.acknowledged.epoch));
    else
      out.push_back(fmt::format("missing effect: job {} of account {} at {} was never performed", m.job,
                                m.key, m.resource));
  }
  return out;
}

}  // namespace locksim
