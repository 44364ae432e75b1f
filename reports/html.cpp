// The HTML report: one self-contained file (inline CSS, SVG and JS; no network) with a space-time diagram.
//
// The C++ side turns a finished run into a small JSON model (lanes, events with their node clocks, messages,
// pauses, lease bars, writes, violations) and a static skeleton (one <g class="lane"> per process, the
// violation markers and banner, the story): what a script-less reader or a string test needs. The script
// (reports/html/layout.js and report.js, embedded at build time with report.css) lays the model out on the
// time axis (idle gaps squeezed into labelled breaks, or linear), draws it, and handles zoom, scroll, message
// bands and tooltips.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "html_labels.hpp"
#include "locksim/reports/html_assets.hpp"
#include "locksim/reports/report.hpp"
#include "locksim/scenarios/expectation.hpp"

namespace locksim {

namespace {

using html_labels::anomaly_labels;
using html_labels::AnomalyLabels;
using html_labels::no_anomalies;
using nlohmann::json;

}  // namespace

std::string html_escape(std::string_view s) {
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

namespace {

std::string esc(std::string_view s) {
  return html_escape(s);
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
    // Each resource its own lane; one of another kind than the store says what it is (report.js shows the
    // label).
    auto add_resource = [&](const std::string& name, ResourceKind kind) {
      add_lane(name, "store");
      if (kind != ResourceKind::store && lane_of_.count(name))
        lanes_[lane_of_[name]]["label"] = fmt::format("resource ({})", to_string(kind));
    };
    add_resource(run.resource, run.resource_kind);
    for (const RunOutput::MoreResource& m : run.more_resources) add_resource(m.name, m.kind);
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
  // Each write goes to the lane of the resource whose log holds it (the first resource's if none does).
  std::map<std::uint64_t, std::string> write_resource;
  for (const ResourceEntry& e : h.resource_log)
    if (e.op != ResourceEntry::Op::read && e.request < h.writes.size())
      write_resource.emplace(e.request, e.resource);
  json writes = json::array();
  for (const WriteRecord& w : h.writes) {
    const auto wr = write_resource.find(w.id);
    const std::string& target = wr == write_resource.end() ? run.resource : wr->second;
    const int store = mb.lane(target);
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
    const bool api = run.kind_of(target) == ResourceKind::external_api;
    jw["e1"] = mb.fact(store, std::min(w.arrived, end), "write",
                       w.arrived == kTimeMax ? "never arrived"
                       : w.accepted          ? (api ? "PERFORMED" : "ACCEPTED")
                                             : (api ? "deduplicated" : "rejected"),
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
  o += html_assets::css;
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
  const std::string resource =
      run.resource_kind == ResourceKind::external_api
          ? (sc.idempotency_keys ? fmt::format("external API (idempotency keys kept {} s)",
                                               format_seconds(sc.idempotency_retention, 3))
                                 : std::string("external API (no idempotency keys)"))
      : run.resource_kind == ResourceKind::object_store
          ? std::string(run.resource_mode == ResourceMode::fenced
                            ? "object store (manifest with If-Match)"
                            : "object store (manifest without If-Match)")
          : fmt::format("{} {}", run.resource_mode == ResourceMode::fenced ? "fenced" : "unfenced",
                        to_string(run.resource_kind));
  std::string all_resources = resource;
  for (const RunOutput::MoreResource& m : run.more_resources)
    all_resources += fmt::format(" · {} {} ({})", m.mode == ResourceMode::fenced ? "fenced" : "unfenced",
                                 to_string(m.kind), m.name);
  const std::string clock =
      run.real
          ? fmt::format("real run on this machine · {} s", format_seconds(run.run.end, 3))
          : fmt::format("simulated {} s · trace {:016x}", format_seconds(run.run.end, 3), run.trace_hash);
  o += fmt::format("<span class=\"meta\">protocol <b>{}</b> · {} · seed {} · {} events · {}{}</span>",
                   esc(run.protocol), esc(all_resources), run.seed, run.events, esc(clock), esc(expect));
  o += "</header>\n";
  o += "<div class=\"controls\"><button id=\"zoom-out\" title=\"zoom out\">−</button>"
       "<button id=\"zoom-in\" title=\"zoom in\">+</button><button id=\"zoom-fit\">fit</button>"
       "<span id=\"zoom-level\">100%</span><label><input type=\"checkbox\" id=\"compress\"> squeeze idle "
       "gaps</label>"
       "<span>· ctrl+wheel zooms, scroll sideways to move, hover any mark for its clocks</span></div>\n";

  // The violations, numbered as their marks in the diagram, each with the moment the story tells it at; the
  // first few always shown, the rest folded under a count (never cut off by the banner's edge).
  if (const auto& vs = run.check.violations; !vs.empty()) {
    constexpr std::size_t kShown = 3;
    auto item = [&](const Violation& v) {
      return fmt::format("<li>⚠ {} on {}, at {} s</li>", esc(anomaly_labels(v).title), esc(v.key),
                         format_seconds(v.time, 3));
    };
    o += "<div id=\"violations\" class=\"violations\"><ol>";
    for (std::size_t i = 0; i < std::min(kShown, vs.size()); ++i) o += item(vs[i]);
    o += "</ol>";
    if (vs.size() > kShown) {
      o += fmt::format("<details><summary>and {} more</summary><ol start=\"{}\">", vs.size() - kShown,
                       kShown + 1);
      for (std::size_t i = kShown; i < vs.size(); ++i) o += item(vs[i]);
      o += "</ol></details>";
    }
    o += "</div>\n";
  }
  for (const std::string& w : run_warnings(run))
    o += "<p class=\"warning\" role=\"alert\">⚠ warning: " + esc(w) + "</p>\n";
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
  o += "</g><g id=\"layer-labels\"></g><g id=\"layer-bands\"></g>\n</svg></div></div>\n";

  // Story and legend.
  o += "<div class=\"panels\"><section class=\"story\">";
  if (safe) {
    o += "<div class=\"verdict-ok\"><h2>What happened</h2><p>No anomaly: " + esc(no_anomalies(run)) +
         "</p></div>";
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
  o += legend_item(
      "<rect x=\"2\" y=\"4\" width=\"30\" height=\"8\" rx=\"4\" fill=\"#64748b\" opacity=\".45\"/>",
      "repeated messages, writes or grants: click the band to see each");
  o += "</ul></section></div>\n<div id=\"tip\"></div>\n";
  o += "<script id=\"model\" type=\"application/json\">" + script_json(model) + "</script>\n";
  o += "<script>";
  o += html_assets::layout_js;
  o += html_assets::report_js;
  o += "</script>\n</body>\n</html>\n";
  return o;
}

}  // namespace locksim
