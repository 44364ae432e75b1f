// The HTML report: one self-contained file (inline CSS, SVG and JS; no network) with a space-time diagram.
//
// The C++ side turns a finished run into a small JSON model (lanes, events with their node clocks, messages,
// pauses, lease bars, writes, violations) and a static skeleton (one <g class="lane"> per process, the
// violation markers, the story): what a script-less reader or a string test needs. The inline script lays the
// model out on the time axis (optionally compressing idle gaps), draws it, and handles zoom, scroll and
// tooltips.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "reports/report.hpp"
#include "scenarios/expectation.hpp"

namespace locksim {

namespace {

/// The words the picture puts on an anomaly: a tag for it and a label for each of its two writes.
struct AnomalyLabels {
  std::string title, earlier, later;
};
AnomalyLabels anomaly_labels(const Violation& v) {
  auto who = [](std::uint64_t epoch, const std::string& client) {
    return fmt::format("epoch {} ({})", epoch, client);
  };
  const std::string a = who(v.earlier.epoch, v.earlier.client), b = who(v.later.epoch, v.later.client);
  auto token = [](const std::optional<std::uint64_t>& t) { return t ? fmt::format("{}", *t) : "none"; };
  if (v.kind == kLostUpdate)
    return {fmt::format("lost update: {}'s acknowledged write overwritten by {}", a, b), "lost: " + a + " ✓",
            "overwrote it: " + b + " ✓"};
  if (v.kind == kFreshWriteRejected)
    return {fmt::format("fresh write rejected: {}, the newest holder, refused", b), "fence set by " + a,
            "refused: " + b + " ✗"};
  if (v.kind == kTokenRegression)
    return {fmt::format("token regression: {} got token {} after {} got token {}",
                        who(v.grant_later.epoch, v.grant_later.client), token(v.grant_later.token),
                        who(v.grant_earlier.epoch, v.grant_earlier.client), token(v.grant_earlier.token)),
            "", ""};
  return {fmt::format("stale write accepted: {} after {}", b, a), a + " ✓", "stale: " + b + " ✓"};
}

using nlohmann::json;

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 16);
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

/// JSON that is safe inside a <script> element: no '<', '>' or '&' outside escapes (they only occur in
/// strings).
std::string script_json(const json& j) {
  const std::string raw = j.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(raw.size() + 64);
  for (char c : raw) {
    if (c == '<')
      out += "\\u003c";
    else if (c == '>')
      out += "\\u003e";
    else if (c == '&')
      out += "\\u0026";
    else
      out += c;
  }
  return out;
}

/// Lanes and event rows of the model. An event row is
/// [true ns, monotonic ns, wall ns, lane, kind, label, detail, approximate(0/1)].
class ModelBuilder {
 public:
  explicit ModelBuilder(const RunOutput& run) : run_(run) {
    auto add_lane = [&](const std::string& name, const char* kind) {
      if (name.empty() || lane_of_.count(name)) return;
      lane_of_[name] = static_cast<int>(lanes_.size());
      lanes_.push_back({{"name", name}, {"kind", kind}});
    };
    for (const auto& c : run.clients) add_lane(c, "client");
    for (const auto& s : run.servers) add_lane(s, "server");
    add_lane(run.resource, "store");
    for (const auto& p : run.process_names) add_lane(p, "other");
    by_lane_.resize(lanes_.size());
    for (std::size_t i = 0; i < run.trace.size(); ++i) {
      const int l = lane(run.trace[i].proc);
      if (l >= 0) by_lane_[l].push_back(i);
    }
  }

  int lane(ProcId p) const { return p.valid() ? lane(run_.name_of(p)) : -1; }
  int lane(const std::string& name) const {
    auto it = lane_of_.find(name);
    return it == lane_of_.end() ? -1 : it->second;
  }

  /// The row of trace event `i` (added once).
  int event(std::size_t i) {
    auto it = row_of_trace_.find(i);
    if (it != row_of_trace_.end()) return it->second;
    const TraceEvent& ev = run_.trace[i];
    const int r = push_row(ev.time, ev.node_time, ev.wall_time, lane(ev.proc),
                           std::string(to_string(ev.kind)), ev.label, ev.detail, false);
    row_of_trace_[i] = r;
    return r;
  }

  /// A row for a history fact at true time `t` on lane `l`; its node clocks come from the last trace event of
  /// that process at or before `t` (exact when the times match, otherwise extrapolated and flagged
  /// approximate).
  int fact(int l, Time t, std::string kind, std::string label, std::string detail) {
    Time mono{0}, wall{0};
    bool approx = true;
    if (l >= 0 && t != kTimeMax) {
      const auto& idx = by_lane_[l];
      auto it = std::upper_bound(idx.begin(), idx.end(), t,
                                 [&](Time v, std::size_t i) { return v < run_.trace[i].time; });
      if (it != idx.begin()) {
        const TraceEvent& ev = run_.trace[*std::prev(it)];
        mono = ev.node_time + (t - ev.time);
        wall = ev.wall_time + (t - ev.time);
        approx = ev.time != t;
      } else {
        mono = wall = t;
      }
    }
    return push_row(t, mono, wall, l, std::move(kind), std::move(label), std::move(detail), approx);
  }

  json lanes() const { return lanes_; }
  json rows() const { return rows_; }

 private:
  int push_row(Time t, Time mono, Time wall, int l, std::string kind, std::string label, std::string detail,
               bool approx) {
    rows_.push_back(json::array({t.count(), mono.count(), wall.count(), l, std::move(kind), std::move(label),
                                 std::move(detail), approx ? 1 : 0}));
    return static_cast<int>(rows_.size()) - 1;
  }

  const RunOutput& run_;
  json lanes_ = json::array();
  json rows_ = json::array();
  std::map<std::string, int> lane_of_;
  std::vector<std::vector<std::size_t>> by_lane_;
  std::map<std::size_t, int> row_of_trace_;
};

std::string token_text(const std::optional<std::uint64_t>& t) {
  return t ? std::to_string(*t) : "none";
}

/// Notes that are drawn as bars or write arrows already; everything else a process notes becomes a tick.
bool note_drawn_elsewhere(const std::string& label) {
  return label == "write" || label == "write-accepted" || label == "write-rejected" || label == "acquire";
}

json build_model(const RunOutput& run, const Scenario& sc) {
  ModelBuilder mb(run);
  const History& h = run.history;
  const CheckResult& c = run.check;
  const Time end = std::max(run.run.end, Time{1});

  json msgs = json::array(), pauses = json::array(), downs = json::array(), marks = json::array();
  std::map<std::uint64_t, std::size_t> send_of;  // message id -> trace index of its send
  std::map<std::uint64_t, bool> settled;         // message id -> delivered or dropped at least once
  std::map<int, std::size_t> paused_at, crashed_at;
  for (std::size_t i = 0; i < run.trace.size(); ++i) {
    const TraceEvent& ev = run.trace[i];
    const int l = mb.lane(ev.proc);
    switch (ev.kind) {
      case TraceKind::send:
        send_of[ev.msg] = i;
        break;
      case TraceKind::deliver:
      case TraceKind::drop: {
        auto it = send_of.find(ev.msg);
        if (it == send_of.end()) break;
        const TraceEvent& s = run.trace[it->second];
        const int from = mb.lane(s.proc), to = mb.lane(s.peer);
        if (from < 0 || to < 0) break;
        msgs.push_back({mb.event(it->second), mb.event(i), from, to, ev.kind == TraceKind::drop ? 1 : 0});
        settled[ev.msg] = true;
        break;
      }
      case TraceKind::pause:
        if (l >= 0) paused_at[l] = i;
        break;
      case TraceKind::resume:
        if (auto it = paused_at.find(l); it != paused_at.end()) {
          pauses.push_back({l, mb.event(it->second), mb.event(i)});
          paused_at.erase(it);
        }
        break;
      case TraceKind::crash:
        if (l < 0) break;
        crashed_at[l] = i;
        marks.push_back({l, mb.event(i), "crash"});
        break;
      case TraceKind::restart:
        if (l < 0) break;
        if (auto it = crashed_at.find(l); it != crashed_at.end()) {
          downs.push_back({l, mb.event(it->second), mb.event(i)});
          crashed_at.erase(it);
        }
        marks.push_back({l, mb.event(i), "restart"});
        break;
      case TraceKind::clock:
        if (l >= 0) marks.push_back({l, mb.event(i), "clock"});
        break;
      case TraceKind::network:
      case TraceKind::limit:
        marks.push_back({l, mb.event(i), "global"});
        break;
      case TraceKind::fault:
        // Pauses, crashes and clock changes show as their own events; a delay spike has no other trace.
        if (ev.label.find("delay") != std::string::npos) marks.push_back({l, mb.event(i), "fault"});
        break;
      case TraceKind::note:
        if (l >= 0 && !note_drawn_elsewhere(ev.label)) marks.push_back({l, mb.event(i), "note"});
        break;
      default:
        break;
    }
  }
  // Still open at the end of the run: pauses, crashes, messages in flight.
  for (auto& [l, i] : paused_at)
    pauses.push_back({l, mb.event(i), mb.fact(l, end, "end", "end of run", "still paused")});
  for (auto& [l, i] : crashed_at)
    downs.push_back({l, mb.event(i), mb.fact(l, end, "end", "end of run", "still down")});
  for (auto& [id, i] : send_of) {
    if (settled.count(id)) continue;
    const TraceEvent& s = run.trace[i];
    const int from = mb.lane(s.proc), to = mb.lane(s.peer);
    if (from < 0 || to < 0) continue;
    msgs.push_back({mb.event(i), mb.fact(to, end, "end", "end of run", "still in flight"), from, to, 2});
  }

  // Service sets: the service's own record of who holds what.
  json svc = json::array();
  for (const ServiceSet& s : h.service_sets) {
    const int l = mb.lane(s.node);
    if (l < 0) continue;
    svc.push_back(mb.fact(l, s.time, "service-set", "set " + s.key, fmt::format("{}={}", s.key, s.value)));
  }

  // Leases: the client's belief against the service's view (service grant → next epoch's service grant).
  const std::size_t ng = h.grants.size();
  const bool judged = c.epoch_of_grant.size() == ng && c.service_grant_time.size() == ng;
  std::map<std::string, std::vector<std::uint64_t>> by_key;  // lock key -> grant ids in epoch order
  if (judged) {
    std::vector<std::uint64_t> order(ng);
    for (std::uint64_t g = 0; g < ng; ++g) order[g] = g;
    std::sort(order.begin(), order.end(),
              [&](auto a, auto b) { return c.epoch_of_grant[a] < c.epoch_of_grant[b]; });
    for (auto g : order) by_key[h.grants[g].key].push_back(g);
  }
  std::vector<Time> svc_end(ng, kTimeMax);
  for (auto& [key, gs] : by_key)
    for (std::size_t k = 0; k < gs.size(); ++k) {
      const GrantRecord& g = h.grants[gs[k]];
      Time e =
          k + 1 < gs.size() ? c.service_grant_time[gs[k + 1]] : c.service_grant_time[gs[k]] + run.config.ttl;
      if (g.end_reason == "released" && g.belief_end != kTimeMax) e = std::min(e, g.belief_end);
      svc_end[gs[k]] = std::min(e, end);
    }
  json grants = json::array();
  for (const GrantRecord& g : h.grants) {
    const int l = mb.lane(g.client);
    if (l < 0) continue;
    const std::uint64_t epoch = judged ? c.epoch_of_grant[g.id] : 0;
    const Time bend = std::min(g.belief_end, g.believed_valid_until);
    const std::string who = fmt::format("token {} · epoch {}", token_text(g.token), epoch);
    json jg;
    jg["lane"] = l;
    jg["epoch"] = epoch;
    jg["token"] = g.token ? json(*g.token) : json(nullptr);
    jg["b0"] = mb.fact(l, g.granted, "lease", "acquired", who);
    jg["b1"] = mb.fact(l, std::min(bend, end), "lease",
                       bend == kTimeMax ? "end of run (still believed)" : "belief ends",
                       bend == g.belief_end ? g.end_reason : "its own validity estimate ran out");
    jg["open"] = bend == kTimeMax;
    // The client acted after its belief ended (the write it sent last under this grant).
    Time last_sent{-1};
    for (const WriteRecord& w : h.writes)
      if (w.grant == g.id) last_sent = std::max(last_sent, w.sent);
    if (bend != kTimeMax && last_sent > bend)
      jg["stale"] = mb.fact(l, last_sent, "write", "wrote after its lease ran out", who);
    if (judged) {
      jg["s0"] = mb.fact(
          l, c.service_grant_time[g.id], "service-grant",
          c.backed.size() == ng && !c.backed[g.id] ? "service grant (unbacked)" : "service granted", who);
      jg["s1"] =
          mb.fact(l, svc_end[g.id], "service-grant", "service's holder until", "next grant / release / ttl");
    }
    grants.push_back(jg);
  }

  // Writes: client (sent) → store (arrived), judged there.
  const int store = mb.lane(run.resource);
  json writes = json::array();
  for (const WriteRecord& w : h.writes) {
    const int l = mb.lane(w.client);
    if (l < 0 || store < 0) continue;
    const std::uint64_t epoch = judged && w.grant < ng ? c.epoch_of_grant[w.grant] : 0;
    const std::string what = fmt::format("write #{} {}={} · token {} · epoch {}", w.id, w.key, w.value,
                                         token_text(w.token), epoch);
    json jw;
    jw["id"] = w.id;
    jw["from"] = l;
    jw["to"] = store;
    jw["token"] = w.token ? json(*w.token) : json(nullptr);
    jw["epoch"] = epoch;
    jw["accepted"] = w.accepted;
    jw["arrived"] = w.arrived != kTimeMax;
    jw["e0"] = mb.fact(l, w.sent, "write", "write sent", what);
    jw["e1"] = mb.fact(store, std::min(w.arrived, end), "write",
                       w.arrived == kTimeMax ? "never arrived"
                       : w.accepted          ? "ACCEPTED"
                                             : "rejected",
                       w.accepted ? what : what + (w.reject_reason.empty() ? "" : " · " + w.reject_reason));
    writes.push_back(jw);
  }

  json viol = json::array();
  for (const Violation& v : c.violations) {
    const AnomalyLabels t = anomaly_labels(v);
    viol.push_back({{"key", v.key},
                    {"kind", v.kind},
                    {"earlier", v.earlier.valid() ? json(v.earlier.write) : json(nullptr)},
                    {"later", v.later.valid() ? json(v.later.write) : json(nullptr)},
                    {"earlier_epoch", v.earlier.epoch},
                    {"later_epoch", v.later.epoch},
                    {"earlier_client", v.earlier.client},
                    {"later_client", v.later.client},
                    {"title", t.title},
                    {"label_earlier", t.earlier},
                    {"label_later", t.later}});
  }

  json m;
  m["scenario"] = sc.name;
  m["protocol"] = run.protocol;
  m["end"] = end.count();
  m["compress"] = true;
  m["lanes"] = mb.lanes();
  m["msgs"] = msgs;
  m["pauses"] = pauses;
  m["downs"] = downs;
  m["marks"] = marks;
  m["svc"] = svc;
  m["grants"] = grants;
  m["writes"] = writes;
  m["violations"] = viol;
  m["ev"] = mb.rows();
  return m;
}

constexpr std::string_view kCss = R"CSS(
:root{--ink:#1f2937;--muted:#6b7280;--line:#e5e7eb;--belief:#2563eb;--service:#7c3aed;--pause:#f59e0b;
--ok:#16a34a;--bad:#dc2626;--msg:#94a3b8}
*{box-sizing:border-box}
body{margin:0;font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--ink);
background:#fff}
header{padding:10px 16px 6px;border-bottom:1px solid var(--line);display:flex;gap:16px;align-items:baseline;
flex-wrap:wrap}
header h1{font-size:20px;margin:0}
header .title{color:var(--muted)}
.badge{font-weight:700;padding:2px 10px;border-radius:12px;color:#fff;font-size:13px;letter-spacing:.05em}
.badge.safe{background:var(--ok)}.badge.unsafe{background:var(--bad)}
.meta{color:var(--muted);font-size:12px}
.controls{display:flex;gap:6px;align-items:center;padding:6px 16px;font-size:13px;color:var(--muted)}
.controls button{font:inherit;border:1px solid #cbd5e1;background:#f8fafc;border-radius:4px;padding:1px 9px;
cursor:pointer;color:var(--ink)}
.controls button:hover{background:#e2e8f0}
#wrap{display:flex;border-top:1px solid var(--line);border-bottom:1px solid var(--line)}
#labels{flex:0 0 150px;border-right:1px solid var(--line);background:#fff}
#scroller{flex:1 1 auto;overflow-x:auto;overflow-y:hidden}
svg text{font-family:inherit}
.lane-name{font-weight:700;font-size:14px;fill:var(--ink)}
.lane-kind{font-size:11px;fill:var(--muted)}
.band-0{fill:#fff}.band-1{fill:#f8fafc}
.baseline{stroke:#94a3b8;stroke-width:1.5}
.axis text{font-size:12px;fill:var(--muted)}
.axis line{stroke:#cbd5e1}
.gridline{stroke:#eef2f7}
.gap{fill:url(#gaphatch)}
.gap-label{font-size:11px;fill:#64748b}
.msg{stroke:var(--msg);stroke-width:1.2;fill:none}
.msg.dropped{stroke:var(--bad);stroke-dasharray:3 2}
.msg.inflight{stroke-dasharray:2 3}
.msg-label{font-size:9.5px;fill:#64748b}
.hit{stroke:transparent;stroke-width:9;fill:none;pointer-events:stroke}
.xmark{stroke:var(--bad);stroke-width:2}
.belief{fill:var(--belief)}
.belief-open{fill:url(#fadeblue)}
.stale{stroke:var(--bad);stroke-width:2.5;stroke-dasharray:5 3}
.service{fill:var(--service);opacity:.75}
.bar-label{font-size:12px;fill:var(--ink);paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}
.pause{fill:url(#pausehatch);stroke:#d97706;stroke-width:1}
.pause-label{font-size:11.5px;font-weight:700;fill:#92400e;paint-order:stroke;stroke:#fff;stroke-width:3px}
.down{stroke:var(--bad);stroke-width:3;stroke-dasharray:1 4;stroke-linecap:round}
.write{stroke-width:2.6;fill:none}
.write.ok{stroke:var(--ok)}.write.bad{stroke:var(--bad)}.write.lost{stroke:#9ca3af;stroke-dasharray:4 3}
.wdot.ok{fill:var(--ok);stroke:#14532d;stroke-width:1}
.wdot.bad{fill:#fff;stroke:var(--bad);stroke-width:2.5}
.wlabel{font-size:12px;font-weight:600;paint-order:stroke;stroke:#fff;stroke-width:3px}
.wlabel.ok{fill:#166534}.wlabel.bad{fill:#991b1b}
.note-tick{stroke:#475569;stroke-width:1.5}
.note-label{font-size:11.5px;fill:#334155;paint-order:stroke;stroke:#fff;stroke-width:3px}
.svc-dot{fill:var(--service)}
.clock-mark{fill:#fff;stroke:#0e7490;stroke-width:2}
.clock-label{font-size:11px;font-weight:600;fill:#0e7490;paint-order:stroke;stroke:#fff;stroke-width:3px}
.crash-mark{stroke:var(--bad);stroke-width:3}
.restart-mark{fill:var(--ok)}
.global-line{stroke:#0f766e;stroke-width:1.5;stroke-dasharray:6 4}
.violation-line{stroke:var(--bad);stroke-width:2;stroke-dasharray:6 4}
.violation-ring{fill:none;stroke:var(--bad);stroke-width:3}
.violation-tag{fill:var(--bad)}
.violation-text{fill:#fff;font-size:12px;font-weight:700}
.panels{display:flex;gap:24px;padding:10px 16px;align-items:flex-start;flex-wrap:wrap}
.story{flex:1 1 560px;max-width:900px}
.story h2,.legend h2{font-size:14px;margin:0 0 4px}
.story p{margin:0 0 6px;font-size:14px}
.story .teaches{color:var(--muted);font-size:12.5px}
.verdict-bad{border-left:4px solid var(--bad);padding-left:10px}
.verdict-ok{border-left:4px solid var(--ok);padding-left:10px}
.legend{flex:0 1 540px;font-size:12px}
.legend ul{list-style:none;margin:0;padding:0;columns:2;column-gap:16px}
.legend li{display:flex;align-items:center;gap:6px;margin:2px 0;break-inside:avoid}
.legend svg{flex:0 0 34px}
#tip{position:fixed;pointer-events:none;background:#111827;color:#f9fafb;font-size:12px;padding:6px 9px;
border-radius:6px;white-space:pre;display:none;z-index:10;box-shadow:0 4px 14px rgba(0,0,0,.25);max-width:560px}
)CSS";

constexpr std::string_view kScript = R"JS(
(function(){
'use strict';
var body=document.body;
function fail(){body.setAttribute('data-js-errors',String(Number(body.getAttribute('data-js-errors')||0)+1));}
window.addEventListener('error',fail);
var cerr=console.error;console.error=function(){fail();return cerr.apply(console,arguments);};
var M=JSON.parse(document.getElementById('model').textContent);
var NS='http://www.w3.org/2000/svg';
var svg=document.getElementById('diagram'),labels=document.getElementById('lane-labels');
var scroller=document.getElementById('scroller');
var L=M.lanes,E=M.ev,END=M.end/1e9;
var TOP=60,AXIS=34,PAD=18,RIGHT=40;
var H={client:112,server:62,store:70,other:56};
var laneY=[],y=TOP+6;
for(var i=0;i<L.length;i++){var h=H[L[i].kind]||56;laneY.push(y+(L[i].kind==='client'?h*0.48:h/2));L[i].top=y;L[i].h=h;y+=h;}
var HEIGHT=y+AXIS+14,BOT=y+4;
function T(i){return E[i][0]/1e9;}
function el(tag,attrs,parent,text){var e=document.createElementNS(NS,tag);for(var k in attrs)e.setAttribute(k,attrs[k]);
 if(text!==undefined)e.textContent=text;if(parent)parent.appendChild(e);return e;}
// ---- the time axis: linear, or compressed (idle gaps squeezed, distinct times kept apart) ----
// Important instants (lease, write, pause, crash, clock, service and client events) get room of their own; message
// traffic in between only gets a little, so a retry loop does not push the story off the screen.
function rowsOf(){var imp=[0,END],minor=[];var k,g;
 function a(r){if(r!==undefined)imp.push(Math.min(T(r),END));}
 for(k=0;k<M.pauses.length;k++){a(M.pauses[k][1]);a(M.pauses[k][2]);}
 for(k=0;k<M.downs.length;k++){a(M.downs[k][1]);a(M.downs[k][2]);}
 for(k=0;k<M.grants.length;k++){g=M.grants[k];a(g.b0);a(g.b1);a(g.s0);a(g.s1);a(g.stale);}
 for(k=0;k<M.writes.length;k++){a(M.writes[k].e0);a(M.writes[k].e1);}
 for(k=0;k<M.svc.length;k++)a(M.svc[k]);
 for(k=0;k<M.marks.length;k++){var mk=M.marks[k],e=E[mk[1]];
  if(mk[2]==='note'&&(e[5]==='acquire-failed'||mk[0]<0||L[mk[0]].kind!=='client'))minor.push(Math.min(e[0]/1e9,END));else a(mk[1]);}
 for(k=0;k<M.msgs.length;k++){minor.push(Math.min(T(M.msgs[k][0]),END));minor.push(Math.min(T(M.msgs[k][1]),END));}
 return [imp,minor];}
var both=rowsOf(),imp=both[0].sort(function(a,b){return a-b;}),minor=both[1].sort(function(a,b){return a-b;});
var K=[imp[0]];for(i=1;i<imp.length;i++)if(imp[i]-K[K.length-1]>1e-9)K.push(imp[i]);
var CNT=[0],mi=0;
for(i=1;i<K.length;i++){var c0=0;while(mi<minor.length&&minor[mi]<=K[i-1])mi++;while(mi<minor.length&&minor[mi]<K[i]){c0++;mi++;}CNT.push(c0);}
var CAP=90,MINSEP=14,MINOR=2,MINORCAP=240;
function gapw(j,S){var g=K[j]-K[j-1],w=g*S;if(w>CAP)w=CAP+18*Math.log2(w/CAP);
 return Math.max(w,MINSEP,Math.min(CNT[j]*MINOR,MINORCAP));}
function total(S){var s=0;for(var j=1;j<K.length;j++)s+=gapw(j,S);return s;}
var avail=Math.max(400,scroller.clientWidth-PAD-RIGHT);
var lo=1e-3,hi=1e12;
for(var it=0;it<80;it++){var mid=Math.sqrt(lo*hi);if(total(mid)>avail)hi=mid;else lo=mid;}
var S=lo,X=[0],gaps=[];
for(i=1;i<K.length;i++){var g=K[i]-K[i-1],w=gapw(i,S);X.push(X[i-1]+w);if(g>END*0.08&&w<g*S/2)gaps.push([K[i-1],K[i]]);}
var LIN=avail/Math.max(END,1e-9);
var state={zoom:1,compressed:M.compress};
function xof(t){
 if(!state.compressed)return PAD+t*LIN*state.zoom;
 if(t<=K[0])return PAD;var n=K.length-1;if(t>=K[n])return PAD+(X[n]+(t-K[n])*S)*state.zoom;
 var a=0,b=n;while(b-a>1){var m=(a+b)>>1;if(K[m]<=t)a=m;else b=m;}
 return PAD+(X[a]+(X[b]-X[a])*(t-K[a])/(K[b]-K[a]))*state.zoom;}
function width(){return xof(END)+RIGHT;}
// ---- labels that never overlap (later ones give way) ----
var grid,Wcur=0;
function place(x,y,w,h){var cx0=Math.floor(x/100),cx1=Math.floor((x+w)/100),cy0=Math.floor(y/20),cy1=Math.floor((y+h)/20);
 for(var a=cx0;a<=cx1;a++)for(var b=cy0;b<=cy1;b++){var c=grid[a+','+b];if(!c)continue;
  for(var k=0;k<c.length;k++){var r=c[k];if(x<r[0]+r[2]&&r[0]<x+w&&y<r[1]+r[3]&&r[1]<y+h)return false;}}
 for(a=cx0;a<=cx1;a++)for(b=cy0;b<=cy1;b++){var key=a+','+b;(grid[key]=grid[key]||[]).push([x,y,w,h]);}
 return true;}
function label(parent,x,y,text,cls,anchor,force){var w=text.length*6.8+6,h=14;
 var x0=anchor==='middle'?x-w/2:anchor==='end'?x-w:x;if(x0+w>Wcur-2){x0=Wcur-2-w;x=x0;anchor='start';}if(x0<2){x0=2;x=2;anchor='start';}
 if(!place(x0,y-h+2,w,h)&&!force)return null;
 return el('text',{x:x,y:y,'class':cls,'text-anchor':anchor||'start'},parent,text);}
// ---- tooltips: true time and the node's own clocks ----
function secs(ns){return (ns/1e9).toFixed(6)+' s';}
function describe(r){var e=E[r],name=e[3]>=0?L[e[3]].name:'world',ap=e[7]?'≈ ':'';
 var s=name+' · '+e[4]+(e[5]?' '+e[5]:'')+(e[6]?'\n  '+e[6]:'');
 s+='\n  true time '+secs(e[0]);
 if(e[3]>=0)s+='\n  '+name+' clocks: monotonic '+ap+secs(e[1])+' · wall '+ap+secs(e[2]);
 return s;}
var tip=document.getElementById('tip');
function showTip(ev){var t=ev.target.closest?ev.target.closest('[data-ev]'):null;if(!t){tip.style.display='none';return;}
 var rows=t.getAttribute('data-ev').split(' ').map(Number),head=t.getAttribute('data-head');
 tip.textContent=(head?head+'\n':'')+rows.map(describe).join('\n');tip.style.display='block';
 var x=ev.clientX+14,yy=ev.clientY+14,r=tip.getBoundingClientRect();
 if(x+r.width>window.innerWidth-4)x=ev.clientX-r.width-14;if(yy+r.height>window.innerHeight-4)yy=ev.clientY-r.height-14;
 tip.style.left=x+'px';tip.style.top=yy+'px';}
svg.addEventListener('mousemove',showTip);svg.addEventListener('mouseleave',function(){tip.style.display='none';});
// ---- static parts: lane labels ----
el('rect',{x:0,y:0,width:150,height:HEIGHT,fill:'#fff'},labels);
for(i=0;i<L.length;i++){
 var kind={client:'client',server:'lock server',store:'resource (store)',other:'process'}[L[i].kind];
 el('rect',{x:0,y:L[i].top,width:150,height:L[i].h,'class':'band-'+(i%2)},labels);
 el('text',{x:12,y:laneY[i]-2,'class':'lane-name'},labels,L[i].name);
 el('text',{x:12,y:laneY[i]+13,'class':'lane-kind'},labels,kind);}
labels.setAttribute('height',HEIGHT);labels.setAttribute('viewBox','0 0 150 '+HEIGHT);
var laneG=svg.querySelectorAll('g.lane');
var layers={};
['axis','bars','arrows','marks','writes','labels'].forEach(function(n){layers[n]=document.getElementById('layer-'+n);});
var violG=svg.querySelectorAll('g.violation');
function clear(g){var c=g.firstChild;while(c){var n=c.nextSibling;if(c.nodeName!=='title')g.removeChild(c);c=n;}}
function hit(parent,d,rows,head){var p=el('path',{d:d,'class':'hit','data-ev':rows.join(' ')},parent);if(head)p.setAttribute('data-head',head);return p;}
function fmtTick(t,step){var d=Math.max(0,Math.min(6,Math.ceil(-Math.log10(step)-1e-9)));return t.toFixed(d)+' s';}
function drawAxis(W){var g=layers.axis;clear(g);
 var steps=[600,300,120,60,30,10,5,2,1,.5,.2,.1,.05,.02,.01,.005,.002,.001,5e-4,2e-4,1e-4,5e-5,2e-5,1e-5,5e-6,2e-6,1e-6];
 var xs=[],MIN=78;
 function free(x){var a=0,b=xs.length;while(a<b){var m=(a+b)>>1;if(xs[m]<x)a=m+1;else b=m;}
  return(a===xs.length||xs[a]-x>=MIN)&&(a===0||x-xs[a-1]>=MIN)?a:-1;}
 var ticks=[],used=0;
 for(var s=0;s<steps.length;s++){var st=steps[s];if(END/st>20000)break;if(used>=2)MIN=150;var placed=0;
  for(var n=0;n*st<=END+1e-12;n++){var t=n*st,x=xof(t),at=free(x);if(at<0)continue;xs.splice(at,0,x);ticks.push([t,x,st]);placed++;}
  if(placed>0||used>0)used++;}
 for(var k=0;k<ticks.length;k++){var tk=ticks[k];if(!vis(tk[1]-60,tk[1]+60))continue;
  el('line',{x1:tk[1],x2:tk[1],y1:TOP-6,y2:BOT+6,'class':'gridline'},g);
  el('text',{x:tk[1],y:TOP-10,'text-anchor':'middle'},g,fmtTick(tk[0],tk[2]));
  el('text',{x:tk[1],y:BOT+16,'text-anchor':'middle'},g,fmtTick(tk[0],tk[2]));}
 el('line',{x1:PAD,x2:W-RIGHT+10,y1:TOP-4,y2:TOP-4},g);
 el('line',{x1:PAD,x2:W-RIGHT+10,y1:BOT,y2:BOT},g);
 if(state.compressed)for(k=0;k<gaps.length;k++){var a=xof(gaps[k][0])+3,b=xof(gaps[k][1])-3;if(b-a<14)continue;
  el('rect',{x:a,y:TOP,width:b-a,height:BOT-TOP,'class':'gap'},g);
  var gl=el('text',{x:(a+b)/2,y:BOT+32,'text-anchor':'middle','class':'gap-label'},g,'≈ '+(gaps[k][1]-gaps[k][0]).toFixed(3)+' s squeezed');
  if(b-a<gl.getComputedTextLength()+4)g.removeChild(gl);}}
function arrowPath(x1,y1,x2,y2){return 'M'+x1+','+y1+'L'+x2+','+y2;}
// Only what lies within a screen of the viewport is drawn (big runs stay fast when zoomed in); scrolling further
// redraws.
var VX0=0,VX1=0,pending=false;
function vis(a,b){return Math.max(a,b)>=VX0&&Math.min(a,b)<=VX1;}
function render(scrollTo){var started=performance.now();
 var sl=scrollTo===undefined?scroller.scrollLeft:scrollTo,cw=scroller.clientWidth;VX0=sl-cw;VX1=sl+2*cw;
 var W=width();Wcur=W;svg.setAttribute('width',W);svg.setAttribute('height',HEIGHT);grid={};
 for(var n in layers)clear(layers[n]);
 for(var i=0;i<laneG.length;i++){var g=laneG[i];clear(g);var li=Number(g.getAttribute('data-index'));
  el('rect',{x:0,y:L[li].top-laneY[li],width:W,height:L[li].h,'class':'band-'+(li%2)},g);
  el('line',{x1:PAD,x2:W-RIGHT+10,y1:0,y2:0,'class':'baseline'},g);}
 drawAxis(W);
 var B=layers.bars,A=layers.arrows,Mk=layers.marks,Wr=layers.writes,Lb=layers.labels,k,x0,x1,yy,r;
 // violations first: their labels win every collision
 for(k=0;k<violG.length;k++){var vg=violG[k];clear(vg);var v=M.violations[Number(vg.getAttribute('data-index'))];
  var wa=v.earlier===null?null:findWrite(v.earlier),wb=v.later===null?null:findWrite(v.later);if(!wa||!wb)continue;
  var xa=xof(T(wa.e1)),xb=xof(T(wb.e1)),ys=laneY[wb.to];
  el('line',{x1:xb,x2:xb,y1:28,y2:BOT,'class':'violation-line'},vg);
  el('circle',{cx:xa,cy:ys,r:14,'class':'violation-ring'},vg);el('circle',{cx:xb,cy:ys,r:14,'class':'violation-ring'},vg);
  var txt='⚠ '+v.title;
  var tw=txt.length*6.6+16,tx=Math.max(PAD,Math.min(xb-tw/2,W-tw-4));
  el('rect',{x:tx,y:6,width:tw,height:22,rx:4,'class':'violation-tag'},vg);
  el('text',{x:tx+8,y:21.5,'class':'violation-text'},vg,txt);place(tx,6,tw,22);
  place(xa-16,ys-16,32,32);place(xb-16,ys-16,32,32);
  label(layers.labels,xa,ys+30,v.label_earlier,'wlabel ok','middle',true);
  label(layers.labels,xb,ys-22,v.label_later,'wlabel bad','middle',true);}
 // pauses
 for(k=0;k<M.pauses.length;k++){var p=M.pauses[k];x0=xof(T(p[1]));x1=xof(T(p[2]));yy=laneY[p[0]];if(!vis(x0,x1))continue;
  el('rect',{x:x0,y:yy-8,width:Math.max(2,x1-x0),height:16,rx:2,'class':'pause'},B);
  hit(B,'M'+x0+','+yy+'H'+x1,[p[1],p[2]],'PAUSED for '+(T(p[2])-T(p[1])).toFixed(3)+' s (messages and timers queue up)');
  var pl='paused '+(T(p[2])-T(p[1])).toFixed(3)+' s';if(x1-x0>pl.length*7)label(Lb,(x0+x1)/2,yy+4,pl,'pause-label','middle',true);}
 for(k=0;k<M.downs.length;k++){var dn=M.downs[k];x0=xof(T(dn[1]));x1=xof(T(dn[2]));yy=laneY[dn[0]];if(!vis(x0,x1))continue;
  el('line',{x1:x0,x2:x1,y1:yy,y2:yy,'class':'down'},B);hit(B,'M'+x0+','+yy+'H'+x1,[dn[1],dn[2]],'DOWN (crashed)');}
 // leases: belief above the lane, the service's view below it
 for(k=0;k<M.grants.length;k++){var gr=M.grants[k];yy=laneY[gr.lane];x0=xof(T(gr.b0));x1=xof(T(gr.b1));
  if(!vis(Math.min(x0,gr.s0===undefined?x0:xof(T(gr.s0))),Math.max(x1,gr.s1===undefined?x1:xof(T(gr.s1)),gr.stale===undefined?x1:xof(T(gr.stale)))))continue;
  var tok=gr.token===null?'no token':'token '+gr.token,bl='holds the lock (as it believes) · '+tok+' · epoch '+gr.epoch;
  el('rect',{x:x0,y:yy-30,width:Math.max(2,x1-x0),height:10,rx:3,'class':gr.open?'belief-open':'belief'},B);
  hit(B,'M'+x0+','+(yy-25)+'H'+x1,[gr.b0,gr.b1],'LEASE as '+L[gr.lane].name+' believes · '+tok+' · epoch '+gr.epoch);
  label(Lb,x0,yy-35,bl,'bar-label','start',false)||label(Lb,x0,yy-35,tok,'bar-label','start',false);
  if(gr.stale!==undefined){var xs2=xof(T(gr.stale));el('line',{x1:x1,x2:xs2,y1:yy-25,y2:yy-25,'class':'stale'},B);
   hit(B,'M'+x1+','+(yy-25)+'H'+xs2,[gr.b1,gr.stale],'ACTING ON A STALE LEASE');
   label(Lb,xs2-4,yy-35,'lease ran out, still acting','bar-label','end',false);}
  if(gr.s0!==undefined){var s0=xof(T(gr.s0)),s1=xof(T(gr.s1));
   el('rect',{x:s0,y:yy+18,width:Math.max(2,s1-s0),height:7,rx:2,'class':'service'},B);
   hit(B,'M'+s0+','+(yy+21)+'H'+s1,[gr.s0,gr.s1],'SERVICE VIEW: '+L[gr.lane].name+' is the holder (epoch '+gr.epoch+')');
   label(Lb,s0,yy+38,'service: holder (epoch '+gr.epoch+')','bar-label','start',false);}}
 // messages
 for(k=0;k<M.msgs.length;k++){var m=M.msgs[k];var xa2=xof(T(m[0])),ya=laneY[m[2]],xb2=xof(T(m[1])),yb=laneY[m[3]];if(!vis(xa2,xb2))continue;
  var head=E[m[0]][5]+' '+L[m[2]].name+' → '+L[m[3]].name+(m[4]===1?' (DROPPED)':m[4]===2?' (in flight at the end)':'');
  if(m[4]===0){el('path',{d:arrowPath(xa2,ya,xb2,yb),'class':'msg','marker-end':'url(#arrow)'},A);}
  else{var xe=xa2+(xb2-xa2)*0.35,ye=ya+(yb-ya)*0.35;if(m[4]===1){xe=Math.max(xa2+4,xb2);ye=ya+(yb-ya)*0.35;}
   el('path',{d:arrowPath(xa2,ya,xe,ye),'class':'msg '+(m[4]===1?'dropped':'inflight')},A);
   if(m[4]===1){el('path',{d:'M'+(xe-5)+','+(ye-5)+'L'+(xe+5)+','+(ye+5)+'M'+(xe-5)+','+(ye+5)+'L'+(xe+5)+','+(ye-5),'class':'xmark'},A);}
   xb2=xe;yb=ye;}
  hit(A,arrowPath(xa2,ya,xb2,yb),[m[0],m[1]],head);
  if(Math.abs(xb2-xa2)>40)label(Lb,xa2+(xb2-xa2)*0.5+3,ya+(yb-ya)*0.5,E[m[0]][5],'msg-label','start',false);}
 // writes: client → store, judged there
 for(k=0;k<M.writes.length;k++){var w=M.writes[k];x0=xof(T(w.e0));x1=xof(T(w.e1));if(!vis(x0,x1))continue;var y0=laneY[w.from],y1=laneY[w.to];
  var cls=!w.arrived?'lost':w.accepted?'ok':'bad';
  el('path',{d:arrowPath(x0,y0,x1,y1),'class':'write '+cls},Wr);
  var wt=(w.token===null?'':'t'+w.token+' ')+(w.accepted?'✓':'✗');
  hit(Wr,arrowPath(x0,y0,x1,y1),[w.e0,w.e1],'WRITE #'+w.id+' by '+L[w.from].name+(w.accepted?' — ACCEPTED':' — rejected'));
  if(w.arrived){var c=el('circle',{cx:x1,cy:y1,r:7,'class':'wdot '+(w.accepted?'ok':'bad'),'data-ev':w.e1+' '+w.e0,'data-head':'WRITE #'+w.id+(w.accepted?' ACCEPTED':' rejected')},Wr);
   c.setAttribute('data-write',String(w.id));
   label(Lb,x1,y1+24,'epoch '+w.epoch+' '+wt,'wlabel '+(w.accepted?'ok':'bad'),'middle',false)||label(Lb,x1,y1+24,wt,'wlabel '+(w.accepted?'ok':'bad'),'middle',false);}}
 // clocks, crashes, restarts, notes, service sets, network events
 var lastNote={};  // lane|label -> x of its last label: a retry loop's notes get one label, not one each
 for(k=0;k<M.marks.length;k++){var mk=M.marks[k],r2=mk[1];x0=xof(T(r2));if(!vis(x0-300,x0+300))continue;
  if(mk[0]<0||mk[2]==='global'){el('line',{x1:x0,x2:x0,y1:TOP,y2:BOT,'class':'global-line'},Mk);
   hit(Mk,'M'+x0+','+TOP+'V'+(BOT),[r2]);label(Lb,x0+4,BOT-6,E[r2][4]+' '+E[r2][5],'note-label','start',false);continue;}
  yy=laneY[mk[0]];var txt2=E[r2][5]+(E[r2][6]?' '+E[r2][6]:'');
  if(mk[2]==='crash'){el('path',{d:'M'+(x0-7)+','+(yy-7)+'L'+(x0+7)+','+(yy+7)+'M'+(x0-7)+','+(yy+7)+'L'+(x0+7)+','+(yy-7),'class':'crash-mark'},Mk);
   label(Lb,x0,yy-12,'CRASH','clock-label','middle',true);}
  else if(mk[2]==='restart'){el('path',{d:'M'+x0+','+(yy-7)+'L'+(x0+11)+','+yy+'L'+x0+','+(yy+7)+'Z','class':'restart-mark'},Mk);
   label(Lb,x0+4,yy-10,'restart','note-label','start',false);}
  else if(mk[2]==='clock'){el('circle',{cx:x0,cy:yy,r:7,'class':'clock-mark'},Mk);
   el('path',{d:'M'+x0+','+(yy-4)+'V'+yy+'H'+(x0+3),stroke:'#0e7490','stroke-width':1.5,fill:'none'},Mk);
   label(Lb,x0+10,yy-10,'clock '+txt2,'clock-label','start',false);}
  else if(mk[2]==='fault'){el('rect',{x:x0-5,y:yy-5,width:10,height:10,fill:'#0f766e'},Mk);label(Lb,x0+8,yy-8,txt2,'note-label','start',false);}
  else{el('line',{x1:x0,x2:x0,y1:yy-6,y2:yy+6,'class':'note-tick'},Mk);var nk=mk[0]+'|'+E[r2][5];
   if(!(nk in lastNote)||x0-lastNote[nk]>260){if(label(Lb,x0+3,yy+14,E[r2][5],'note-label','start',false))lastNote[nk]=x0;}}
  hit(Mk,'M'+x0+','+(yy-8)+'V'+(yy+8),[r2]);}
 for(k=0;k<M.svc.length;k++){var sr=M.svc[k];x0=xof(T(sr));if(!vis(x0-200,x0+200))continue;yy=laneY[E[sr][3]];
  el('path',{d:'M'+x0+','+(yy-6)+'L'+(x0+6)+','+yy+'L'+x0+','+(yy+6)+'L'+(x0-6)+','+yy+'Z','class':'svc-dot'},Mk);
  hit(Mk,'M'+x0+','+(yy-8)+'V'+(yy+8),[sr],'SERVICE SET (ground truth)');label(Lb,x0+8,yy-8,'grant '+E[sr][6].split('=')[0],'note-label','start',false);}
 document.getElementById('zoom-level').textContent=Math.round(state.zoom*100)+'%';
 if(scrollTo!==undefined)scroller.scrollLeft=scrollTo;
 body.setAttribute('data-rendered','1');body.setAttribute('data-render-ms',String(Math.round(performance.now()-started)));}
var writeById={};for(var q=0;q<M.writes.length;q++)writeById[M.writes[q].id]=M.writes[q];
function findWrite(id){return writeById[id];}
// ---- zoom and scroll ----
function zoomTo(z,clientX){var rect=scroller.getBoundingClientRect();var cx=clientX===undefined?rect.width/2:clientX-rect.left;
 var tx=scroller.scrollLeft+cx,old=state.zoom;state.zoom=Math.max(0.02,Math.min(2000,z));
 render(Math.max(0,PAD+(tx-PAD)*state.zoom/old-cx));}
scroller.addEventListener('scroll',function(){if(pending)return;var sl=scroller.scrollLeft,cw=scroller.clientWidth;
 if((sl<VX0+cw*0.5&&VX0>0)||(sl+cw>VX1-cw*0.5&&VX1<Wcur)){pending=true;
  requestAnimationFrame(function(){pending=false;render();});}});
document.getElementById('zoom-in').addEventListener('click',function(){zoomTo(state.zoom*1.5);});
document.getElementById('zoom-out').addEventListener('click',function(){zoomTo(state.zoom/1.5);});
document.getElementById('zoom-fit').addEventListener('click',function(){state.zoom=1;state.zoom=Math.min(1,avail/(width()-RIGHT-PAD));if(state.compressed)state.zoom=Math.max(state.zoom,0.02);render(0);});
var cb=document.getElementById('compress');cb.checked=state.compressed;
cb.addEventListener('change',function(){state.compressed=cb.checked;state.zoom=1;render(0);});
scroller.addEventListener('wheel',function(ev){if(!ev.ctrlKey)return;ev.preventDefault();zoomTo(state.zoom*(ev.deltaY<0?1.25:0.8),ev.clientX);},{passive:false});
render();
if(width()>scroller.clientWidth*1.02&&state.compressed){state.zoom=Math.max(0.02,avail/(width()-RIGHT-PAD));render();}
// #zoom=Z&at=SECONDS opens the page zoomed in at a moment (links in a workshop handout, screenshots).
(function(){var h=location.hash.slice(1).split('&'),q={};for(var i=0;i<h.length;i++){var kv=h[i].split('=');q[kv[0]]=kv[1];}
 if(q.zoom){state.zoom=Math.max(0.02,Math.min(2000,Number(q.zoom)||1));render(0);}
 if(q.at!==undefined){render(Math.max(0,xof(Number(q.at)||0)-scroller.clientWidth/3));}})();
// #selftest (used by the tests in a headless browser): exercise tooltips, zoom and the axis toggle, then restore.
if(location.hash==='#selftest'){var targets=svg.querySelectorAll('[data-ev]'),tips=0;
 for(var st=0;st<targets.length;st+=Math.max(1,Math.floor(targets.length/25))){
  targets[st].dispatchEvent(new MouseEvent('mousemove',{bubbles:true,clientX:100,clientY:100}));if(tip.textContent.indexOf('true time')>=0)tips++;}
 body.setAttribute('data-selftest-tip',tip.textContent);body.setAttribute('data-selftest-tips',String(tips));
 document.getElementById('zoom-in').click();document.getElementById('zoom-in').click();
 scroller.dispatchEvent(new WheelEvent('wheel',{ctrlKey:true,deltaY:-100,clientX:300,bubbles:true,cancelable:true}));
 body.setAttribute('data-selftest-zoom',String(Math.round(state.zoom*1000)/1000));
 render(Math.max(0,(scroller.scrollWidth-scroller.clientWidth)/2));body.setAttribute('data-selftest-middle',String(svg.querySelectorAll('.msg').length));
 cb.checked=false;cb.dispatchEvent(new Event('change'));cb.checked=true;cb.dispatchEvent(new Event('change'));
 document.getElementById('zoom-fit').click();tip.style.display='none';body.setAttribute('data-selftest','done');}
})();
)JS";

std::string legend_item(std::string_view svg, std::string_view text) {
  return fmt::format("<li><svg width=\"34\" height=\"16\" viewBox=\"0 0 34 16\">{}</svg>{}</li>", svg, text);
}

}  // namespace

std::string html_report(const RunOutput& run, const Scenario& sc) {
  const json model = build_model(run, sc);
  const bool safe = run.check.safe;
  std::string o;
  o.reserve(64 * 1024 + run.trace.size() * 96);
  o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  o += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  o += fmt::format("<title>locksim · {} · {}</title>\n", esc(sc.name), esc(run.protocol));
  o += "<style>";
  o += kCss;
  o += "</style>\n</head>\n<body data-js-errors=\"0\" data-rendered=\"0\">\n";

  // Header: what ran and the verdict.
  o += "<header>";
  o += fmt::format("<h1>{}</h1><span class=\"title\">{}</span>", esc(sc.name), esc(sc.title));
  o += fmt::format("<span class=\"badge {}\">{}</span>", safe ? "safe" : "unsafe", safe ? "SAFE" : "UNSAFE");
  std::string expect;
  if (auto it = sc.expect.find(run.protocol); it != sc.expect.end())
    expect = fmt::format(" · expected {} ({})", it->second.describe(),
                         it->second.seeds                        ? "judged over seeds by locksim check"
                         : unmet_in_run(it->second, run).empty() ? "as expected"
                                                                 : "NOT as expected");
  o += fmt::format(
      "<span class=\"meta\">protocol <b>{}</b> · {} store · seed {} · {} events · simulated {} s · trace "
      "{:016x}{}"
      "</span>",
      esc(run.protocol), run.resource_mode == ResourceMode::fenced ? "fenced" : "unfenced", run.seed,
      run.events, format_seconds(run.run.end, 3), run.trace_hash, esc(expect));
  o += "</header>\n";
  o += "<div class=\"controls\"><button id=\"zoom-out\" title=\"zoom out\">−</button>"
       "<button id=\"zoom-in\" title=\"zoom in\">+</button><button id=\"zoom-fit\">fit</button>"
       "<span id=\"zoom-level\">100%</span><label><input type=\"checkbox\" id=\"compress\"> squeeze idle "
       "gaps</label>"
       "<span>· ctrl+wheel zooms, scroll sideways to move, hover any mark for its clocks</span></div>\n";

  // The diagram skeleton: lanes and violation markers exist without the script; the script draws into them.
  o += "<div id=\"wrap\"><div id=\"labels\"><svg id=\"lane-labels\" width=\"150\" "
       "xmlns=\"http://www.w3.org/2000/svg\"></svg></div>\n<div id=\"scroller\">"
       "<svg id=\"diagram\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" aria-label=\"space-time "
       "diagram\">\n";
  o += "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" "
       "markerHeight=\"7\" "
       "orient=\"auto-start-reverse\"><path d=\"M0,0L10,5L0,10z\" fill=\"#94a3b8\"/></marker>"
       "<pattern id=\"pausehatch\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" "
       "patternTransform=\"rotate(45)\"><rect width=\"8\" height=\"8\" fill=\"#fde68a\"/>"
       "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"8\" stroke=\"#f59e0b\" stroke-width=\"4\"/></pattern>"
       "<pattern id=\"gaphatch\" width=\"10\" height=\"10\" patternUnits=\"userSpaceOnUse\" "
       "patternTransform=\"rotate(-45)\"><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"10\" stroke=\"#eef2f7\" "
       "stroke-width=\"3\"/></pattern>"
       "<linearGradient id=\"fadeblue\"><stop offset=\"0.7\" stop-color=\"#2563eb\"/>"
       "<stop offset=\"1\" stop-color=\"#2563eb\" stop-opacity=\"0.1\"/></linearGradient></defs>\n";
  o += "<g id=\"layer-lanes\">\n";
  const auto& lanes = model["lanes"];
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    const std::string name = lanes[i]["name"].get<std::string>();
    o += fmt::format(
        "<g class=\"lane\" data-process=\"{}\" data-kind=\"{}\" data-index=\"{}\"><title>{}</title></g>\n",
        esc(name), lanes[i]["kind"].get<std::string>(), i, esc(name));
  }
  o += "</g>\n<g id=\"layer-axis\" class=\"axis\"></g><g id=\"layer-bars\"></g><g id=\"layer-arrows\"></g>"
       "<g id=\"layer-writes\"></g><g id=\"layer-marks\"></g><g id=\"layer-viol\">\n";
  for (std::size_t i = 0; i < run.check.violations.size(); ++i) {
    const Violation& v = run.check.violations[i];
    auto id = [](const WriteRef& w) { return w.valid() ? fmt::format("{}", w.write) : std::string("-"); };
    o += fmt::format(
        "<g class=\"violation\" data-index=\"{}\" data-kind=\"{}\" data-key=\"{}\" data-writes=\"{} {}\">"
        "<title>{} on {}</title></g>\n",
        i, esc(v.kind), esc(v.key), id(v.earlier), id(v.later), esc(anomaly_labels(v).title), esc(v.key));
  }
  o += "</g><g id=\"layer-labels\"></g>\n</svg></div></div>\n";

  // Story and legend.
  o += "<div class=\"panels\"><section class=\"story\">";
  if (safe) {
    o += "<div class=\"verdict-ok\"><h2>What happened</h2><p>No anomaly: every write the store took followed "
         "the order in which the service granted the lock, no acknowledged update was lost, tokens grew with "
         "every grant and the newest holder's writes were taken.</p></div>";
  } else {
    o += "<div class=\"verdict-bad\"><h2>What happened</h2>";
    const std::string st = story(run);
    std::size_t pos = 0;
    while (pos < st.size()) {
      std::size_t nl = st.find('\n', pos);
      if (nl == std::string::npos) nl = st.size();
      if (nl > pos)
        o += "<p class=\"story-text\">" + esc(std::string_view(st).substr(pos, nl - pos)) + "</p>";
      pos = nl + 1;
    }
    o += "</div>";
  }
  if (!sc.teaches.empty()) o += "<p class=\"teaches\">" + esc(sc.teaches) + "</p>";
  if (!sc.source.empty()) o += "<p class=\"teaches\">Source: " + esc(sc.source) + "</p>";
  o += "</section>\n<section class=\"legend\"><h2>Legend</h2><ul>";
  o += legend_item("<rect x=\"2\" y=\"3\" width=\"30\" height=\"10\" rx=\"3\" fill=\"#2563eb\"/>",
                   "lease as the client believes it");
  o += legend_item(
      "<rect x=\"2\" y=\"5\" width=\"30\" height=\"7\" rx=\"2\" fill=\"#7c3aed\" opacity=\".75\"/>",
      "lease as the service knows it");
  o += legend_item(
      "<line x1=\"2\" y1=\"8\" x2=\"32\" y2=\"8\" stroke=\"#dc2626\" stroke-width=\"2.5\" "
      "stroke-dasharray=\"5 3\"/>",
      "acting after its lease ran out");
  o += legend_item(
      "<rect x=\"2\" y=\"1\" width=\"30\" height=\"14\" fill=\"url(#pausehatch)\" stroke=\"#d97706\"/>",
      "process paused (GC, SIGSTOP)");
  o += legend_item(
      "<line x1=\"2\" y1=\"13\" x2=\"30\" y2=\"3\" stroke=\"#94a3b8\" stroke-width=\"1.2\"/>"
      "<path d=\"M26,2L32,3L28,7z\" fill=\"#94a3b8\"/>",
      "message (send → deliver)");
  o += legend_item(
      "<line x1=\"2\" y1=\"13\" x2=\"18\" y2=\"6\" stroke=\"#dc2626\" stroke-dasharray=\"3 2\"/>"
      "<path d=\"M14,2L22,10M14,10L22,2\" stroke=\"#dc2626\" stroke-width=\"2\"/>",
      "message dropped");
  o += legend_item(
      "<line x1=\"2\" y1=\"13\" x2=\"24\" y2=\"8\" stroke=\"#16a34a\" stroke-width=\"2.6\"/>"
      "<circle cx=\"25\" cy=\"8\" r=\"6\" fill=\"#16a34a\"/>",
      "write accepted by the store");
  o += legend_item(
      "<line x1=\"2\" y1=\"13\" x2=\"24\" y2=\"8\" stroke=\"#dc2626\" stroke-width=\"2.6\"/>"
      "<circle cx=\"25\" cy=\"8\" r=\"6\" fill=\"#fff\" stroke=\"#dc2626\" stroke-width=\"2.5\"/>",
      "write rejected (fenced)");
  o += legend_item("<circle cx=\"17\" cy=\"8\" r=\"7\" fill=\"none\" stroke=\"#dc2626\" stroke-width=\"3\"/>",
                   "the violation: both writes ringed");
  o += legend_item("<path d=\"M17,2L23,8L17,14L11,8z\" fill=\"#7c3aed\"/>", "service granted (ground truth)");
  o += legend_item("<circle cx=\"17\" cy=\"8\" r=\"6\" fill=\"#fff\" stroke=\"#0e7490\" stroke-width=\"2\"/>",
                   "clock jump / drift change");
  o += legend_item(
      "<path d=\"M11,2L23,14M11,14L23,2\" stroke=\"#dc2626\" stroke-width=\"3\"/>"
      "<path d=\"M26,3L33,8L26,13z\" fill=\"#16a34a\"/>",
      "crash / restart");
  o += legend_item("<line x1=\"17\" y1=\"1\" x2=\"17\" y2=\"15\" stroke=\"#475569\" stroke-width=\"1.5\"/>",
                   "a note the process logged");
  o += legend_item(
      "<rect x=\"2\" y=\"1\" width=\"30\" height=\"14\" fill=\"url(#gaphatch)\" stroke=\"#cbd5e1\"/>",
      "idle time squeezed (see axis)");
  o += "</ul></section></div>\n<div id=\"tip\"></div>\n";
  o += "<script id=\"model\" type=\"application/json\">" + script_json(model) + "</script>\n";
  o += "<script>";
  o += kScript;
  o += "</script>\n</body>\n</html>\n";
  return o;
}

}  // namespace locksim
