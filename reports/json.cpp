#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "locksim/reports/report.hpp"
#include "locksim/scenarios/expectation.hpp"

namespace locksim {

namespace {
using nlohmann::ordered_json;

ordered_json opt_token(const std::optional<std::uint64_t>& t) {
  return t ? ordered_json(*t) : ordered_json(nullptr);
}
ordered_json opt_time(Time t) {
  return t == kTimeMax ? ordered_json(nullptr) : ordered_json(t.count());
}

ordered_json write_json(const RunOutput& run, const WriteRef& w) {
  const WriteRecord& rec = run.history.writes.at(w.write);
  ordered_json j;
  j["write"] = rec.id;
  j["client"] = rec.client;
  j["epoch"] = w.epoch;
  j["token"] = opt_token(rec.token);
  j["time_ns"] = opt_time(w.arrived);
  j["sent_ns"] = rec.sent.count();
  j["accepted"] = w.accepted;
  j["value"] = rec.value;
  j["log_seq"] = w.seq;
  return j;
}

ordered_json grant_json(const GrantRef& g) {
  ordered_json j;
  j["grant"] = g.grant;
  j["client"] = g.client;
  j["epoch"] = g.epoch;
  j["token"] = opt_token(g.token);
  j["time_ns"] = g.ordered_at.count();
  return j;
}

ordered_json config_json(const ProtocolConfig& c) {
  ordered_json j;
  j["nodes"] = c.nodes;
  j["ttl_ns"] = c.ttl.count();
  j["aof"] = c.aof;
  j["fsync"] = c.fsync == FsyncPolicy::always     ? "always"
               : c.fsync == FsyncPolicy::periodic ? "periodic"
                                                  : "never";
  j["fsync_period_ns"] = c.fsync_period.count();
  j["replica"] = c.replica;
  j["incr_token"] = c.incr_token;
  j["drift_factor_ppm"] = c.drift_factor_ppm;
  j["node_timeout_ns"] = c.node_timeout.count();
  j["retry_count"] = c.retry_count;
  j["retry_delay_ns"] = c.retry_delay.count();
  j["retry_jitter_ns"] = c.retry_jitter.count();
  j["elapsed_recheck"] = c.elapsed_recheck;
  j["variant"] = c.variant;
  return j;
}
}  // namespace

std::string json_report(const RunOutput& run, const Scenario& sc) {
  ordered_json j;
  j["schema_version"] = 2;
  j["scenario"] = run.scenario;
  j["protocol"] = run.protocol;
  j["seed"] = run.seed;
  j["verdict"] = std::string(to_string(run.verdict()));
  if (auto it = sc.expect.find(run.protocol); it != sc.expect.end()) {
    j["expected"] = it->second.describe();
    if (it->second.seeds)
      j["as_expected"] = nullptr;  // judged over a seed range, not by one run
    else
      j["as_expected"] = unmet_in_run(it->second, run).empty();
  } else {
    j["expected"] = nullptr;
  }
  ordered_json vs = ordered_json::array();
  for (const Violation& v : run.check.violations) {
    ordered_json jv;
    jv["kind"] = v.kind;
    jv["key"] = v.key;
    if (!run.more_resources.empty() && !v.resource.empty()) jv["resource"] = v.resource;
    jv["time_ns"] = v.time.count();
    ordered_json ws = ordered_json::array();
    if (v.earlier.valid()) ws.push_back(write_json(run, v.earlier));
    if (v.later.valid()) ws.push_back(write_json(run, v.later));
    jv["writes"] = ws;
    if (v.grant_earlier.valid())
      jv["grants"] = ordered_json::array({grant_json(v.grant_earlier), grant_json(v.grant_later)});
    if (!v.reason.empty()) jv["reason"] = v.reason;
    jv["story"] = anomaly_story(run, v);
    vs.push_back(jv);
  }
  j["violations"] = vs;
  ordered_json kinds = ordered_json::object();
  for (const char* k : {kStaleWriteAccepted, kLostUpdate, kTokenRegression, kFreshWriteRejected})
    kinds[k] = run.check.count(k);
  if (run.has_kind(ResourceKind::checkpoint_table))
    for (const char* k : {kCheckpointRewind, kDuplicateProcessing}) kinds[k] = run.check.count(k);
  if (run.has_kind(ResourceKind::object_store)) kinds[kStaleManifest] = run.check.count(kStaleManifest);
  if (run.has_kind(ResourceKind::external_api)) kinds[kDuplicateEffect] = run.check.count(kDuplicateEffect);
  if (run.has_kind(ResourceKind::job_queue)) kinds[kDuplicateEnqueue] = run.check.count(kDuplicateEnqueue);
  for (const auto& [k, n] : run.check.anomaly_counts)
    if (!kinds.contains(k)) kinds[k] = n;
  j["anomalies"] = kinds;
  if (run.has_kind(ResourceKind::external_api)) {
    ordered_json missing = ordered_json::array();
    for (const CheckResult::MissingEffect& m : run.check.missing) {
      ordered_json jm;
      jm["resource"] = m.resource;
      jm["key"] = m.key;
      jm["job"] = m.job;
      jm["acknowledged"] = m.acknowledged.valid() ? write_json(run, m.acknowledged) : ordered_json(nullptr);
      missing.push_back(jm);
    }
    j["missing_effects"] = missing;
    j["idempotency_keys"] = sc.idempotency_keys;
    j["idempotency_retention_ns"] = sc.idempotency_retention.count();
  }
  j["inconclusive"] = run.inconclusive();
  j["story"] = story(run);
  j["orphan_grants"] = orphan_grants(run);
  j["warnings"] = run_warnings(run);
  j["trace_hash"] = fmt::format("{:016x}", run.trace_hash);
  j["events"] = run.events;
  j["messages"] = run.messages;
  j["stop_reason"] = std::string(to_string(run.run.reason));
  j["simulated_ns"] = run.run.end.count();
  j["resource_mode"] = run.resource_mode == ResourceMode::fenced ? "fenced" : "unfenced";
  if (run.resource_kind != ResourceKind::store)
    j["resource_kind"] = std::string(to_string(run.resource_kind));
  if (!run.more_resources.empty()) {  // several resources: each by name, the first included
    ordered_json rs = ordered_json::array();
    rs.push_back({{"name", run.resource},
                  {"kind", std::string(to_string(run.resource_kind))},
                  {"mode", run.resource_mode == ResourceMode::fenced ? "fenced" : "unfenced"}});
    for (const RunOutput::MoreResource& m : run.more_resources)
      rs.push_back({{"name", m.name},
                    {"kind", std::string(to_string(m.kind))},
                    {"mode", m.mode == ResourceMode::fenced ? "fenced" : "unfenced"}});
    j["resources"] = rs;
  }
  if (run.has_kind(ResourceKind::cas_row))  // beside the verdict: what the version check cost
    j["cas_row"] = {{"statements", run.check.cas.statements},
                    {"applied", run.check.cas.applied},
                    {"conflicts", run.check.cas.conflicts},
                    {"retries", run.check.cas.retries},
                    {"gave_up", run.check.cas.gave_up}};
  if (run.has_kind(ResourceKind::job_queue))
    j["job_queue"] = {{"enqueues", run.check.queue.enqueues},
                      {"accepted", run.check.queue.accepted},
                      {"refused", run.check.queue.refused},
                      {"refusals", queue_refusal_lines(run)}};
  j["config"] = config_json(run.config);
  j["scenario_file"] = sc.file;
  ordered_json clients = ordered_json::array();
  for (const ClientSpec& c : sc.clients) {
    clients.push_back({{"name", c.name},
                       {"start_ns", c.start.count()},
                       {"acquisitions", c.acquisitions},
                       {"writes_per_hold", c.writes_per_hold},
                       {"work_min_ns", c.work_min.count()},
                       {"work_max_ns", c.work_max.count()},
                       {"read_modify_write", c.read_modify_write},
                       {"check_before_write", c.check_before_write},
                       {"extend_before_write", c.extend_before_write}});
  }
  j["clients"] = clients;
  ordered_json grants = ordered_json::array();
  std::vector<const UnbackedGrant*> unbacked(run.history.grants.size(), nullptr);
  for (const UnbackedGrant& u : run.check.unbacked)
    if (u.grant < unbacked.size()) unbacked[u.grant] = &u;
  for (const GrantRecord& g : run.history.grants) {
    ordered_json jg;
    jg["client"] = g.client;
    jg["epoch"] = g.id < run.check.epoch_of_grant.size() ? run.check.epoch_of_grant[g.id] : 0;
    jg["token"] = opt_token(g.token);
    jg["granted_ns"] = g.granted.count();
    jg["believed_valid_until_ns"] = opt_time(g.believed_valid_until);
    jg["belief_end_ns"] = opt_time(g.belief_end);
    jg["end_reason"] = g.end_reason;
    const bool has = g.id < run.check.backed.size();
    jg["backed"] = has && run.check.backed[g.id];
    jg["backing_records"] = has ? run.check.backing_records[g.id] : 0;
    jg["ordered_at_ns"] = has ? run.check.service_grant_time[g.id].count() : g.granted.count();
    jg["unbacked"] = ordered_json(nullptr);
    if (const UnbackedGrant* u = g.id < unbacked.size() ? unbacked[g.id] : nullptr)
      jg["unbacked"] = {
          {"why", std::string(to_string(u->why))}, {"records", u->records}, {"detail", u->detail}};
    grants.push_back(jg);
  }
  j["grants"] = grants;
  ordered_json writes = ordered_json::array();
  for (const WriteRecord& w : run.history.writes) {
    ordered_json jw;
    jw["client"] = w.client;
    jw["grant"] = w.grant == kNoId ? ordered_json(nullptr) : ordered_json(w.grant);  // null: no lock
    jw["token"] = opt_token(w.token);
    jw["sent_ns"] = w.sent.count();
    jw["arrived_ns"] = opt_time(w.arrived);
    jw["accepted"] = w.accepted;
    jw["reject_reason"] = w.reject_reason;
    jw["copies"] = w.copies;
    writes.push_back(jw);
  }
  j["writes"] = writes;
  ordered_json ov = ordered_json::array();
  for (const auto& o : run.check.overlaps)
    ov.push_back({{"key", o.key},
                  {"clients", {o.client_a, o.client_b}},
                  {"from_ns", o.start.count()},
                  {"to_ns", o.end.count()}});
  j["overlaps"] = ov;
  j["lost_updates"] = {{"acknowledged", run.check.lost.acknowledged},
                       {"lost", run.check.lost.lost},
                       {"percent", run.check.lost.percent}};
  j["slack_ns"] = run.check.slack ? ordered_json(run.check.slack->count()) : ordered_json(nullptr);
  ordered_json faults = ordered_json::array();
  for (const Fault& f : run.faults) {
    ordered_json jf;
    jf["kind"] = std::string(to_string(f.kind));
    jf["target"] = run.name_of(f.target);
    jf["duration_ns"] = f.duration.count();
    faults.push_back(jf);
  }
  j["faults"] = faults;
  ordered_json stats;
  stats["events"] = run.events;
  stats["messages_delivered"] = run.messages;
  stats["grants"] = run.history.grants.size();
  stats["writes"] = run.history.writes.size();
  std::uint64_t accepted = 0;
  for (const WriteRecord& w : run.history.writes) accepted += w.accepted ? 1 : 0;
  stats["writes_accepted"] = accepted;
  stats["writes_rejected"] = run.history.writes.size() - accepted;
  stats["service_sets"] = run.history.service_sets.size();
  stats["unbacked_grants"] = run.check.unbacked_grants;
  stats["undeclared_service_records"] = run.check.undeclared_records;
  stats["service_quorum"] = run.history.service_quorum;
  stats["resource_log_entries"] = run.history.resource_log.size();
  stats["processes"] = run.process_names.size();
  j["statistics"] = stats;
  // The full trace, when the run kept it: every kernel event with true time and the process's own clocks.
  ordered_json tr = ordered_json::array();
  for (const TraceEvent& ev : run.trace) {
    ordered_json e;
    e["time_ns"] = ev.time.count();
    e["kind"] = std::string(to_string(ev.kind));
    e["process"] = ev.proc.valid() ? ordered_json(run.name_of(ev.proc)) : ordered_json(nullptr);
    if (ev.peer.valid()) e["peer"] = run.name_of(ev.peer);
    if (ev.msg != 0) e["msg"] = ev.msg;
    if (!ev.label.empty()) e["label"] = ev.label;
    if (!ev.detail.empty()) e["detail"] = ev.detail;
    if (ev.proc.valid()) {
      e["monotonic_ns"] = ev.node_time.count();
      e["wall_ns"] = ev.wall_time.count();
    }
    tr.push_back(std::move(e));
  }
  j["trace"] = tr;
  j["trace_truncated"] = run.trace_truncated;
  return j.dump(2) + "\n";
}

}  // namespace locksim
