// The terminal timeline: a character grid with one lane per process over true time, and each trace event in
// words (for `locksim run --step`).
//
// Every lane is a row of cells; each fact of the run (a lease believed, a pause, a crash, a write) paints the
// cells its time span covers, and a fact of higher priority wins a cell (a write is never hidden by the pause
// around it). Clients get a second row: the lease as the service knew it, next to the lease as the client
// believed it. Everything is read from the finished run (trace, history, checker result): no clock, no
// environment, so the same run always draws the same picture.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "locksim/reports/report.hpp"

namespace locksim {

namespace {

/// What a cell shows. Higher `prio` wins a cell that two facts want.
struct Glyph {
  const char* ch;
  const char* color;  // ANSI SGR parameters
  int prio;
  const char* legend;
};

// clang-format off
const Glyph kEmpty      {" ", "",     0, ""};
const Glyph kBelief     {"━", "36",   2, "lease as the client believes it"};
const Glyph kActing     {"╌", "31",   2, "its lease ran out, the client still acts on it"};
const Glyph kService    {"─", "34",   2, "lease as the service knows it"};
const Glyph kDown       {"·", "2",    3, "down (crashed)"};
const Glyph kPause      {"░", "33",   4, "paused (GC, SIGSTOP): runs no code"};
const Glyph kPartition  {"▒", "35",   4, "network partitioned"};
const Glyph kSet        {"▲", "34",   5, "server set the lock to a holder"};
const Glyph kClock      {"~", "35",   6, "clock jump / drift change"};
const Glyph kDelay      {"≈", "35",   6, "network delay spike"};
const Glyph kRestart    {"↻", "32",   7, "restart"};
const Glyph kCrash      {"✗", "1;31", 8, "crash"};
const Glyph kLost       {"◌", "2",    9, "write that never arrived"};
const Glyph kRejected   {"○", "31",  10, "write rejected by the store"};
const Glyph kAccepted   {"●", "32",  10, "write accepted by the store"};
const Glyph kStale      {"◉", "1;31",11, "stale write ACCEPTED (the violation)"};
// clang-format on

const Glyph* const kLegendOrder[] = {&kBelief,  &kActing, &kService, &kAccepted,  &kRejected,
                                     &kStale,   &kLost,   &kPause,   &kCrash,     &kDown,
                                     &kRestart, &kClock,  &kSet,     &kPartition, &kDelay};

std::string paint(bool on, const char* code, const std::string& s) {
  return on && code[0] != '\0' ? fmt::format("\x1b[{}m{}\x1b[0m", code, s) : s;
}

/// Maps true time onto columns: `per_col` nanoseconds a column, a "nice" step so that the tick every 10
/// columns falls on a round number of seconds.
struct Scale {
  std::int64_t per_col = 1;
  int cols = 1;
  int col(Time t) const {
    if (t.count() <= 0) return 0;
    const std::int64_t c = t.count() / per_col;
    return static_cast<int>(std::min<std::int64_t>(c, cols - 1));
  }
};

Scale make_scale(Time end, int max_cols) {
  static const std::int64_t mant[] = {10, 12, 15, 20, 25, 30, 40, 50, 60, 80};  // tenths
  const std::int64_t span = std::max<std::int64_t>(end.count(), 1);
  Scale s;
  for (std::int64_t pow = 1; pow <= 1'000'000'000'000'000LL; pow *= 10) {
    for (std::int64_t m : mant) {
      const std::int64_t step = m * pow / 10;
      if (step <= 0) continue;
      const std::int64_t cols = span / step + 1;
      if (cols <= max_cols) {
        s.per_col = step;
        s.cols = static_cast<int>(cols);
        return s;
      }
    }
  }
  s.per_col = span;
  s.cols = 1;
  return s;
}

class Row {
 public:
  Row(std::string label, int cols) : label_(std::move(label)), cells_(cols, &kEmpty) {}
  void put(int c, const Glyph& g) {
    if (c < 0 || c >= static_cast<int>(cells_.size())) return;
    if (g.prio >= cells_[c]->prio) cells_[c] = &g;
  }
  void span(int c0, int c1, const Glyph& g) {
    for (int c = c0; c <= c1; ++c) put(c, g);
  }
  const std::string& label() const { return label_; }
  const std::vector<const Glyph*>& cells() const { return cells_; }
  bool empty() const {
    return std::all_of(cells_.begin(), cells_.end(), [](const Glyph* g) { return g == &kEmpty; });
  }

 private:
  std::string label_;
  std::vector<const Glyph*> cells_;
};

/// The lanes of a run in display order: clients, lock servers, the store, then any other process.
std::vector<std::string> lane_names(const RunOutput& run) {
  std::vector<std::string> out;
  auto add = [&](const std::string& n) {
    if (!n.empty() && std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  };
  for (const auto& c : run.clients) add(c);
  for (const auto& s : run.servers) add(s);
  add(run.resource);
  for (const auto& p : run.process_names) add(p);
  return out;
}

/// Terminal columns a string takes: code points, not counting ANSI escape sequences.
std::size_t visible_width(const std::string& s) {
  std::size_t n = 0;
  for (std::size_t k = 0; k < s.size(); ++k) {
    const unsigned char ch = static_cast<unsigned char>(s[k]);
    if (ch == 0x1b) {
      while (k < s.size() && s[k] != 'm') ++k;
      continue;
    }
    if ((ch & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::string axis_label(std::int64_t ns) {
  return format_time(Time{ns});
}

/// The service's view of each grant: from its service grant time to the next epoch's service grant on the
/// same key, its release, or TTL after the grant for the last one; clipped to the run's end.
std::vector<std::pair<Time, Time>> service_spans(const RunOutput& run, Time end) {
  const History& h = run.history;
  const CheckResult& c = run.check;
  const std::size_t ng = h.grants.size();
  std::vector<std::pair<Time, Time>> out(ng, {kTimeMax, kTimeMax});
  if (c.epoch_of_grant.size() != ng || c.service_grant_time.size() != ng) return out;
  std::vector<std::uint64_t> order(ng);
  for (std::uint64_t g = 0; g < ng; ++g) order[g] = g;
  std::sort(order.begin(), order.end(),
            [&](auto a, auto b) { return c.epoch_of_grant[a] < c.epoch_of_grant[b]; });
  std::map<std::string, std::vector<std::uint64_t>> by_key;
  for (auto g : order) by_key[h.grants[g].key].push_back(g);
  for (auto& [key, gs] : by_key)
    for (std::size_t k = 0; k < gs.size(); ++k) {
      const GrantRecord& g = h.grants[gs[k]];
      Time e =
          k + 1 < gs.size() ? c.service_grant_time[gs[k + 1]] : c.service_grant_time[gs[k]] + run.config.ttl;
      if (g.end_reason == "released" && g.belief_end != kTimeMax) e = std::min(e, g.belief_end);
      out[gs[k]] = {c.service_grant_time[gs[k]], std::min(e, end)};
    }
  return out;
}

}  // namespace

std::string timeline(const RunOutput& run, TextStyle style) {
  const bool col = style.color;
  const int width = style.width > 0 ? style.width : 100;
  const std::vector<std::string> lanes = lane_names(run);
  std::size_t label_w = std::string("  believes").size();
  for (const auto& n : lanes) label_w = std::max(label_w, n.size());
  label_w += 2;
  const int grid_w = std::max(20, width - static_cast<int>(label_w) - 1);

  // The end of the picture: the end of the run, or the last fact when the run stopped early.
  Time end = run.run.end;
  for (const auto& ev : run.trace) end = std::max(end, ev.time);
  for (const auto& w : run.history.writes)
    if (w.arrived != kTimeMax) end = std::max(end, w.arrived);
  const Scale sc = make_scale(end, grid_w);

  std::map<std::string, std::size_t> idx;  // lane name -> index in rows (main row)
  std::vector<Row> rows;
  std::map<std::string, std::size_t> belief_row, svc_row;  // client -> the rows under it
  std::set<std::string> client_set(run.clients.begin(), run.clients.end());
  for (const auto& n : lanes) {
    idx[n] = rows.size();
    rows.emplace_back(n, sc.cols);
    const bool has_grant = std::any_of(run.history.grants.begin(), run.history.grants.end(),
                                       [&](const GrantRecord& g) { return g.client == n; });
    if (client_set.count(n) && has_grant) {
      belief_row[n] = rows.size();
      rows.emplace_back("  believes", sc.cols);
      svc_row[n] = rows.size();
      rows.emplace_back("  service", sc.cols);
    }
  }
  auto row_of = [&](const std::string& n) -> Row* {
    auto it = idx.find(n);
    return it == idx.end() ? nullptr : &rows[it->second];
  };

  // Process states from the trace: pauses, crashes (down until restart), restarts, clock changes; network.
  std::map<std::string, Time> paused_at, crashed_at;
  Time partitioned_at = kTimeMax;  // kTimeMax: not partitioned
  Row net("network", sc.cols);
  for (const auto& ev : run.trace) {
    const std::string& n = run.name_of(ev.proc);
    Row* r = ev.proc.valid() ? row_of(n) : nullptr;
    switch (ev.kind) {
      case TraceKind::pause:
        paused_at[n] = ev.time;
        break;
      case TraceKind::resume:
        if (auto it = paused_at.find(n); it != paused_at.end()) {
          if (r) r->span(sc.col(it->second), sc.col(ev.time), kPause);
          paused_at.erase(it);
        }
        break;
      case TraceKind::crash:
        crashed_at[n] = ev.time;
        if (r) r->put(sc.col(ev.time), kCrash);
        break;
      case TraceKind::restart:
        if (auto it = crashed_at.find(n); it != crashed_at.end()) {
          if (r) r->span(sc.col(it->second), sc.col(ev.time), kDown);
          crashed_at.erase(it);
        }
        if (r) r->put(sc.col(ev.time), kRestart);
        break;
      case TraceKind::clock:
        if (r) r->put(sc.col(ev.time), kClock);
        break;
      case TraceKind::network:
        if (ev.label == "partition") {
          if (partitioned_at == kTimeMax) partitioned_at = ev.time;
        } else if (ev.label == "heal" && partitioned_at != kTimeMax) {
          net.span(sc.col(partitioned_at), sc.col(ev.time), kPartition);
          partitioned_at = kTimeMax;
        }
        break;
      case TraceKind::fault:
        if (ev.label.find("delay") != std::string::npos) net.put(sc.col(ev.time), kDelay);
        break;
      default:
        break;
    }
  }
  for (auto& [n, t] : paused_at)
    if (Row* r = row_of(n)) r->span(sc.col(t), sc.cols - 1, kPause);
  for (auto& [n, t] : crashed_at)
    if (Row* r = row_of(n)) r->span(sc.col(t), sc.cols - 1, kDown);
  if (partitioned_at != kTimeMax) net.span(sc.col(partitioned_at), sc.cols - 1, kPartition);

  // Service sets on the servers.
  for (const ServiceSet& s : run.history.service_sets)
    if (Row* r = row_of(s.node)) r->put(sc.col(s.time), kSet);

  // Leases: belief on the client's row, the service's view on the row under it.
  const auto spans = service_spans(run, end);
  for (const GrantRecord& g : run.history.grants) {
    auto bt = belief_row.find(g.client);
    if (bt == belief_row.end()) continue;
    Row& r = rows[bt->second];
    const Time bend = std::min({g.belief_end, g.believed_valid_until, end});
    if (bend > g.granted)
      r.span(sc.col(g.granted), std::max(sc.col(g.granted), sc.col(bend - Time{1})), kBelief);
    else
      r.put(sc.col(g.granted), kBelief);
    // Acting after its own belief ended: the last write sent under this grant came later.
    Time last_sent{-1};
    for (const WriteRecord& w : run.history.writes)
      if (w.grant == g.id) last_sent = std::max(last_sent, w.sent);
    if (last_sent > bend) r.span(sc.col(bend), sc.col(last_sent), kActing);
    auto it = svc_row.find(g.client);
    if (it == svc_row.end() || g.id >= spans.size() || spans[g.id].first == kTimeMax) continue;
    const auto [s0, s1] = spans[g.id];
    rows[it->second].span(sc.col(s0), std::max(sc.col(s0), sc.col(s1 - Time{1})), kService);
  }

  // Writes: on the client's row when sent, on the store's row when judged.
  std::set<std::uint64_t> stale;
  for (const Violation& v : run.check.violations) stale.insert(v.later.write);
  Row* store = row_of(run.resource);
  for (const WriteRecord& w : run.history.writes) {
    const Glyph& g = w.arrived == kTimeMax ? kLost
                     : !w.accepted         ? kRejected
                     : stale.count(w.id)   ? kStale
                                           : kAccepted;
    if (Row* r = row_of(w.client)) r->put(sc.col(w.sent), g);
    if (store && w.arrived != kTimeMax) store->put(sc.col(w.arrived), g);
  }
  if (!net.empty()) rows.push_back(net);

  // Render: axis labels every 10 columns, then the rows, then the legend of the glyphs drawn.
  std::string out;
  out += fmt::format("timeline (true time; one column = {})\n", format_time(Time{sc.per_col}));
  std::string labels(label_w, ' '), ticks(label_w, ' ');
  for (int c = 0; c < sc.cols; c += 10) {
    const std::string l = axis_label(c * sc.per_col);
    if (labels.size() > label_w + c) continue;  // the previous label is too long
    labels.resize(label_w + c, ' ');
    labels += l;
  }
  std::string tick_row;
  for (int c = 0; c < sc.cols; c += 10) tick_row += c == 0 ? "|" : "         |";
  out += paint(col, "2", labels) + "\n";
  out += std::string(label_w, ' ') + paint(col, "2", tick_row) + "\n";
  std::set<const Glyph*> used;
  for (const Row& r : rows) {
    std::string line = fmt::format("{:<{}}", r.label(), label_w);
    const auto& cells = r.cells();
    std::size_t last = cells.size();
    while (last > 0 && cells[last - 1] == &kEmpty) --last;
    for (std::size_t i = 0; i < last;) {
      std::size_t j = i;
      std::string run_text;
      while (j < last && cells[j]->color == cells[i]->color) run_text += cells[j++]->ch;
      line += paint(col, cells[i]->color, run_text);
      i = j;
    }
    for (std::size_t i = 0; i < last; ++i)
      if (cells[i] != &kEmpty) used.insert(cells[i]);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  std::vector<std::string> items;
  for (const Glyph* g : kLegendOrder)
    if (used.count(g)) items.push_back(paint(col, g->color, g->ch) + " " + g->legend);
  std::string legend = "legend:";
  std::size_t line_len = legend.size();
  for (const auto& it : items) {
    const std::size_t visible = visible_width(it);
    if (line_len + 3 + visible > static_cast<std::size_t>(width)) {
      legend += "\n       ";
      line_len = 7;
    }
    legend += "   " + it;
    line_len += 3 + visible;
  }
  out += legend + "\n";
  return out;
}

namespace {

/// Whether a timeout event of the kept trace ended a wait of no time (a receive with a zero timeout, as a
/// client clearing stale replies from its mailbox does): the process's previous event is at the same instant.
/// A wait that blocked ends later than anything before it.
bool polled(const RunOutput& run, const TraceEvent& ev) {
  const TraceEvent* b = run.trace.data();
  if (&ev < b || &ev >= b + run.trace.size()) return false;  // not an event of this run's kept trace
  for (const TraceEvent* e = &ev; e != b;) {
    --e;
    if (e->proc == ev.proc) return e->time == ev.time;
  }
  return false;
}

}  // namespace

std::string describe_event(const RunOutput& run, const TraceEvent& ev, TextStyle style) {
  const bool col = style.color;
  const std::string who = ev.proc.valid() ? run.name_of(ev.proc) : "world";
  const std::string peer = ev.peer.valid() ? run.name_of(ev.peer) : "";
  std::string what;
  auto with_detail = [&](std::string s) {
    return ev.detail.empty() ? s : fmt::format("{} ({})", s, ev.detail);
  };
  switch (ev.kind) {
    case TraceKind::start:
      what = with_detail("started");
      break;
    case TraceKind::exit:
      what = "finished";
      break;
    case TraceKind::send:
      what = with_detail(fmt::format("sent {} to {}", ev.label, peer));
      break;
    case TraceKind::deliver:
      what = fmt::format("{} from {} arrived in its mailbox", ev.label, peer);
      break;
    case TraceKind::drop:
      what = with_detail(fmt::format("{} from {} was LOST", ev.label, peer));
      break;
    case TraceKind::duplicate:
      what = fmt::format("the network duplicated {} from {}", ev.label, peer);
      break;
    case TraceKind::receive:
      what = fmt::format("took {} from {} out of its mailbox", ev.label, peer);
      break;
    case TraceKind::timeout:
      what = polled(run, ev) ? "looked for a message and found none waiting (a check, no wait)"
                             : "gave up waiting (timeout)";
      break;
    case TraceKind::pause:
      what = paint(col, "33", with_detail("PAUSED: runs no code until resumed"));
      break;
    case TraceKind::resume:
      what = paint(col, "33", "resumed: carries on where it stopped");
      break;
    case TraceKind::crash:
      what = paint(col, "1;31", with_detail("CRASHED: its volatile state is lost"));
      break;
    case TraceKind::restart:
      what = with_detail("restarted from what it had persisted");
      break;
    case TraceKind::clock:
      what = paint(
          col, "35",
          ev.label == "jump" ? with_detail("its wall clock JUMPED") : with_detail("its clock drift changed"));
      break;
    case TraceKind::network:
      what = paint(col, "35", ev.label == "heal" ? "the network healed" : with_detail("network " + ev.label));
      break;
    case TraceKind::fault:
      what = with_detail("fault fired: " + ev.label);
      break;
    case TraceKind::note:
      what = ev.detail.empty() ? ev.label : fmt::format("{}: {}", ev.label, ev.detail);
      if (ev.label == "write-accepted") what = paint(col, "32", what);
      if (ev.label == "write-rejected") what = paint(col, "31", what);
      if (ev.label == "acquired") what = paint(col, "36", what);
      break;
    case TraceKind::limit:
      what = with_detail("the run stopped at the " + ev.label + " limit");
      break;
    case TraceKind::hold:
      what = held_message_words(ev, peer);
      break;
  }
  std::string clocks;
  if (ev.proc.valid()) {
    clocks = fmt::format("[its clocks: monotonic {}, wall {}]", format_seconds(ev.node_time, 3) + " s",
                         format_seconds(ev.wall_time, 3) + " s");
  }
  return fmt::format("t={:>9} s  {:<10} {}  {}", format_seconds(ev.time, 3), who, what,
                     paint(col, "2", clocks));
}

}  // namespace locksim
