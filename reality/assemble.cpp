#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "reality/real_run.hpp"
#include "reality/zk_client.hpp"

namespace locksim::reality::detail {

void RealRun::trace_sentinel() {
  // "pid:X 07 Dec 2026 02:44:49.123 # +sdown master mymaster 127.0.0.1 6379": the time of day, local time,
  // placed against the run's start on the real clock.
  const time_t start_s = static_cast<time_t>(real0_ / 1'000'000'000);
  tm start{};
  ::localtime_r(&start_s, &start);
  const double start_of_day = start.tm_hour * 3600.0 + start.tm_min * 60.0 + start.tm_sec +
                              static_cast<double>(real0_ % 1'000'000'000) / 1e9;
  std::istringstream in(sentinel_->log());
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':', line.find(' '));  // hh:mm:ss.mmm
    if (colon == std::string::npos || colon < 2) continue;
    int hh = 0, mm = 0;
    double ss = 0;
    if (std::sscanf(line.c_str() + colon - 2, "%d:%d:%lf", &hh, &mm, &ss) != 3) continue;
    double at = hh * 3600.0 + mm * 60.0 + ss - start_of_day;
    if (at < -43200) at += 86400;  // past midnight
    const auto ev = line.find_first_of("+-", colon + 10);
    if (ev == std::string::npos) continue;
    const std::string rest = line.substr(ev);
    const std::string label = rest.substr(0, rest.find(' '));
    if (at < 0) continue;  // its start-up, before time 0 (the note at time 0 says how long it took)
    trace(TraceKind::note, "sentinel1", label, rest, static_cast<std::int64_t>(at * 1e9));
  }
}

void RealRun::assemble() {
  History& h = out_.history;
  // Grants in the order their clients learned of them, writes in the order they were sent (ties: client
  // order), as the simulated workload appends them.
  struct G {
    Child* c;
    std::uint64_t local;
  };
  std::vector<G> gs;
  for (Child& c : children_)
    for (auto& [id, g] : c.grants) gs.push_back({&c, id});
  std::stable_sort(gs.begin(), gs.end(), [](const G& a, const G& b) {
    return a.c->grants[a.local].granted < b.c->grants[b.local].granted;
  });
  std::map<std::pair<std::string, std::uint64_t>, std::uint64_t> grant_id, write_id;
  for (const G& g : gs) grant_id[{g.c->name, g.local}] = h.add_grant(g.c->grants[g.local]);
  std::vector<G> ws;
  for (Child& c : children_)
    for (auto& [id, w] : c.writes) ws.push_back({&c, id});
  std::stable_sort(ws.begin(), ws.end(), [](const G& a, const G& b) {
    return a.c->writes[a.local].sent < b.c->writes[b.local].sent;
  });
  for (const G& w : ws) {
    WriteRecord r = w.c->writes[w.local];
    r.grant = grant_id.at({w.c->name, w.c->write_grant[w.local]});
    write_id[{w.c->name, w.local}] = h.add_write(r);
  }
  std::vector<StoreEntry> log = store_->log();
  std::string resource = sc_.resource_name;
  if (pg_) {
    // The database lease's grants are lease_grants' rows (written inside AcquireLease's transaction); with
    // resource = "same-db" the resource's log is db1's resource_log (write_with_fence's decisions).
    for (const PgGrant& g : pg_->grants()) {
      h.service_sets.push_back({Time{g.real_ns - real0_}, "db1", g.name, g.owner});
      trace(TraceKind::note, "db1", "granted",
            fmt::format("key={} owner={} token={}", g.name, g.owner, g.token), g.real_ns - real0_);
    }
    if (sc_.config_for(protocol_).same_db_resource) {
      resource = "db1";
      log.clear();
      for (const PgWrite& w : pg_->writes())
        log.push_back({w.real_ns - real0_, w.client, w.write, w.key, w.value, w.token, w.accepted, w.reason});
    }
  }
  for (const StoreEntry& e : log) {
    auto it = write_id.find({e.client, e.write});
    h.log(ResourceEntry{.op = ResourceEntry::Op::write,
                        .time = Time{e.time_ns},
                        .resource = resource,
                        .key = e.key,
                        .request = it == write_id.end() ? kNoId : it->second,
                        .token = e.token,
                        .accepted = e.accepted,
                        .applied = e.accepted,
                        .value = e.value,
                        .reason = e.reason});
  }
  if (etcd_)
    for (const LeaseRecord& l : etcd_->records()) {
      h.service_sets.push_back({Time{l.mono_ns - t0_}, l.node, sc_.lock_key, l.lease});
      trace(TraceKind::note, l.node, "holder",
            fmt::format("key={} lease={} revision={}", l.key, l.lease, l.revision), l.mono_ns - t0_);
    }
  if (zk_)
    for (const ZkRecord& z : zk_->recorder().records()) {
      const auto colon = z.server.rfind(':');
      const std::string node =
          colon == std::string::npos
              ? z.server
              : zk_->member_of_port(static_cast<std::uint16_t>(std::stoul(z.server.substr(colon + 1))));
      h.service_sets.push_back({Time{z.mono_ns - t0_}, node, sc_.lock_key, std::to_string(z.czxid)});
      trace(TraceKind::note, node, "lowest",
            fmt::format("node={} czxid={} ctime={} ephemeralOwner=0x{:x}", z.node, z.czxid, z.ctime_ms,
                        z.ephemeral_owner),
            z.mono_ns - t0_);
    }
  std::vector<SetRecord> sets;
  for (auto& l : listeners_)
    for (SetRecord& s : l->records()) sets.push_back(std::move(s));  // a replica's copies are not among them
  std::stable_sort(sets.begin(), sets.end(),
                   [](const SetRecord& a, const SetRecord& b) { return a.real_ns < b.real_ns; });
  if (sentinel_) trace_sentinel();
  for (const SetRecord& s : sets) {
    h.service_sets.push_back({Time{s.real_ns - real0_}, s.node, s.key, s.value});
    trace(TraceKind::note, s.node, "set", fmt::format("key={} value={}", s.key, s.value), s.real_ns - real0_);
  }
  std::stable_sort(out_.trace.begin(), out_.trace.end(),
                   [](const TraceEvent& a, const TraceEvent& b) { return a.time < b.time; });
  h.summarize();
  out_.check = check(h);
  out_.events = out_.trace.size();
  out_.process_names = names_;
  for (const Armed& a : armed_) {
    Fault f = a.spec->fault;
    f.target = id_of(a.target.empty() ? a.spec->target : a.target);
    out_.faults.push_back(f);
    out_.fault_specs.push_back(a.index);
    out_.fault_firings.push_back(firings_[a.index]);
    out_.fault_draws.emplace_back();
  }
}

}  // namespace locksim::reality::detail
