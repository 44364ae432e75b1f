// The text report: the terminal timeline (lanes, glyphs, scale, colour), the events in words for --step, and
// golden files of the whole plain-text report of two catalog scenarios, compared byte for byte.
// LOCKSIM_UPDATE_GOLDEN=1 rewrites the golden files instead of comparing (then review the diff).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "locksim/reports/report.hpp"
#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/runner.hpp"

using namespace locksim;
namespace fs = std::filesystem;

namespace {

struct Ran {
  Scenario sc;
  RunOutput run;
};

Ran run_catalog(const std::string& name, const std::string& protocol) {
  Scenario sc = load_scenario(name);
  RunOutput r = run_scenario(sc, protocol);
  return {std::move(sc), std::move(r)};
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

/// The cells of a lane (one string per code point) after its label; `nth` picks the nth line with that label.
std::vector<std::string> cells_of(const std::string& timeline, const std::string& label, int nth = 0) {
  for (const auto& l : lines_of(timeline)) {
    if (l.rfind(label + " ", 0) != 0) continue;
    if (nth-- > 0) continue;
    // Labels are padded to the same width: the grid starts where the axis's first tick '|' is.
    std::vector<std::string> cells;
    for (std::size_t k = 0; k < l.size();) {
      std::size_t n = 1;
      const unsigned char c = static_cast<unsigned char>(l[k]);
      if (c >= 0xF0)
        n = 4;
      else if (c >= 0xE0)
        n = 3;
      else if (c >= 0xC0)
        n = 2;
      cells.push_back(l.substr(k, n));
      k += n;
    }
    return cells;
  }
  return {};
}

/// The column (in code points) of the first occurrence of `glyph` in the cells, or -1.
int first(const std::vector<std::string>& cells, const std::string& glyph) {
  for (std::size_t i = 0; i < cells.size(); ++i)
    if (cells[i] == glyph) return static_cast<int>(i);
  return -1;
}
int last(const std::vector<std::string>& cells, const std::string& glyph) {
  for (std::size_t i = cells.size(); i-- > 0;)
    if (cells[i] == glyph) return static_cast<int>(i);
  return -1;
}
int count(const std::vector<std::string>& cells, const std::string& glyph) {
  return static_cast<int>(std::count(cells.begin(), cells.end(), glyph));
}

/// The line numbers (in order) at which each lane label starts a line.
int line_index(const std::string& timeline, const std::string& label) {
  const auto ls = lines_of(timeline);
  for (std::size_t i = 0; i < ls.size(); ++i)
    if (ls[i] == label || ls[i].rfind(label + " ", 0) == 0) return static_cast<int>(i);
  return -1;
}

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

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Compares `got` with the golden file byte for byte (or rewrites it under LOCKSIM_UPDATE_GOLDEN=1). On a
/// mismatch, writes the new text beside it as .actual and names the first differing line.
void expect_golden(const std::string& file, const std::string& got) {
  const fs::path path = fs::path(LOCKSIM_GOLDEN_DIR) / file;
  const char* update = std::getenv("LOCKSIM_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << got;
    GTEST_SKIP() << "rewrote " << path;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " is missing; run with LOCKSIM_UPDATE_GOLDEN=1 to create it";
  const std::string want = slurp(path);
  if (want == got) return;
  const fs::path actual = fs::temp_directory_path() / (file + ".actual");
  std::ofstream(actual, std::ios::binary) << got;
  const auto a = lines_of(want), b = lines_of(got);
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  ADD_FAILURE() << file << " differs from the golden file at line " << i + 1
                << "\n  golden: " << (i < a.size() ? a[i] : "<end>")
                << "\n  now:    " << (i < b.size() ? b[i] : "<end>") << "\nnew text in " << actual
                << "; LOCKSIM_UPDATE_GOLDEN=1 rewrites the golden file";
}

}  // namespace

TEST(TextGolden, KleppmannGcPauseRedis) {
  auto [sc, run] = run_catalog("kleppmann-gc-pause", "redis");
  ASSERT_FALSE(run.check.safe);
  expect_golden("kleppmann-gc-pause.redis.txt", text_report(run, sc, TextStyle{false, 100}));
}

TEST(TextGolden, RedisIncrTokenFailover) {
  auto [sc, run] = run_catalog("redis-incr-token-failover", "redis+incr");
  ASSERT_FALSE(run.check.safe);
  expect_golden("redis-incr-token-failover.redis+incr.txt", text_report(run, sc, TextStyle{false, 100}));
}

TEST(TextGolden, SameRunSameText) {
  auto a = run_catalog("kleppmann-gc-pause", "lease+fence");
  auto b = run_catalog("kleppmann-gc-pause", "lease+fence");
  EXPECT_EQ(text_report(a.run, a.sc, TextStyle{false, 100}), text_report(b.run, b.sc, TextStyle{false, 100}));
}

TEST(Timeline, KleppmannLanesInOrderClientsServersStore) {
  auto [sc, run] = run_catalog("kleppmann-gc-pause", "redis");
  const std::string tl = timeline(run, TextStyle{false, 100});
  const int c1 = line_index(tl, "client1"), c2 = line_index(tl, "client2");
  const int srv = line_index(tl, run.servers.at(0)), store = line_index(tl, run.resource);
  ASSERT_GE(c1, 0);
  ASSERT_GE(srv, 0);
  EXPECT_LT(c1, c2);
  EXPECT_LT(c2, srv);
  EXPECT_LT(srv, store);
  // Each client that was granted the lock has its belief and the service's view on the lines under it.
  const auto ls = lines_of(tl);
  EXPECT_EQ(ls.at(c1 + 1).rfind("  believes", 0), 0u);
  EXPECT_EQ(ls.at(c1 + 2).rfind("  service", 0), 0u);
  EXPECT_EQ(ls.at(c2 + 1).rfind("  believes", 0), 0u);
  EXPECT_EQ(ls.at(c2 + 2).rfind("  service", 0), 0u);
  // No line ends in blanks (lanes with nothing drawn are just their name).
  for (const auto& l : ls) EXPECT_TRUE(l.empty() || l.back() != ' ') << "[" << l << "]";
}

TEST(Timeline, KleppmannShowsPauseLeasesAndTheStaleWrite) {
  auto [sc, run] = run_catalog("kleppmann-gc-pause", "redis");
  const std::string tl = timeline(run, TextStyle{false, 100});
  const auto c1 = cells_of(tl, "client1"), c2 = cells_of(tl, "client2");
  const auto b1 = cells_of(tl, "  believes", 0), b2 = cells_of(tl, "  believes", 1);
  const auto s1 = cells_of(tl, "  service", 0), s2 = cells_of(tl, "  service", 1);
  const auto store = cells_of(tl, run.resource);
  // client1: believes, is paused for a long stretch, then its stale write is accepted.
  EXPECT_GE(count(c1, "░"), 40) << tl;  // 15 s of a ~25 s picture
  EXPECT_GE(first(c1, "░"), 0);
  EXPECT_EQ(count(c1, "◉"), 1) << tl;
  EXPECT_GT(first(c1, "◉"), last(c1, "░"));
  // It believes from the start, until its validity estimate runs out at 10 s (half of the ~20 s picture)...
  EXPECT_EQ(first(b1, "━"), first(c1, "░"));
  EXPECT_NEAR(last(b1, "━"), first(s2, "─"), 1) << tl;
  // ...and then acts on it anyway: its write comes after the lease ran out.
  EXPECT_EQ(last(b1, "╌"), first(c1, "◉")) << tl;
  EXPECT_EQ(first(b1, "╌"), last(b1, "━") + 1) << tl;
  // client2 acquires after client1's lease ran out (as the service knew it) and its write is accepted.
  EXPECT_GT(first(b2, "━"), 0);
  EXPECT_EQ(first(b2, "━"), first(c2, "●"));
  EXPECT_EQ(count(c2, "●"), 1) << tl;
  EXPECT_GE(first(s2, "─"), last(s1, "─")) << tl;
  EXPECT_LT(first(c2, "●"), first(c1, "◉"));
  // The store judges both: the accepted one first, then the stale one.
  EXPECT_LT(first(store, "●"), first(store, "◉"));
  EXPECT_EQ(count(store, "○"), 0);
  // The legend names what is drawn.
  EXPECT_NE(tl.find("░ paused"), std::string::npos);
  EXPECT_NE(tl.find("◉ stale write ACCEPTED"), std::string::npos);
  EXPECT_NE(tl.find("━ lease as the client believes it"), std::string::npos);
  EXPECT_NE(tl.find("╌ its lease ran out, the client still acts on it"), std::string::npos);
  EXPECT_NE(tl.find("─ lease as the service knows it"), std::string::npos);
  EXPECT_EQ(tl.find("✗ crash"), std::string::npos);  // nothing crashed: not in the legend
}

TEST(Timeline, FencingRejectsTheStaleWrite) {
  auto [sc, run] = run_catalog("kleppmann-gc-pause", "lease+fence");
  ASSERT_TRUE(run.check.safe);
  const std::string tl = timeline(run, TextStyle{false, 100});
  const auto c1 = cells_of(tl, "client1"), store = cells_of(tl, run.resource);
  EXPECT_EQ(count(c1, "○"), 1) << tl;
  EXPECT_GE(count(store, "○"), 1);
  EXPECT_EQ(tl.find("◉"), std::string::npos);
  // Lease servers are lanes too, between the clients and the store.
  for (const auto& s : run.servers) EXPECT_GE(line_index(tl, s), 0) << s;
}

TEST(Timeline, CrashAndRestartOfALockServer) {
  auto [sc, run] = run_catalog("redis-restart-no-fsync", "redlock");
  const std::string tl = timeline(run, TextStyle{false, 100});
  int crashed = 0, restarted = 0;
  for (const auto& s : run.servers) {
    const auto cells = cells_of(tl, s);
    crashed += count(cells, "✗");
    restarted += count(cells, "↻");
  }
  EXPECT_GE(crashed, 1) << tl;
  EXPECT_GE(restarted, 1) << tl;
  EXPECT_NE(tl.find("✗ crash"), std::string::npos);
}

TEST(Timeline, ClockJumpIsMarked) {
  auto [sc, run] = run_catalog("kleppmann-clock-jump", "redlock");
  const std::string tl = timeline(run, TextStyle{false, 100});
  int marks = 0;
  for (const auto& s : run.servers) marks += count(cells_of(tl, s), "~");
  EXPECT_GE(marks, 1) << tl;
}

TEST(Timeline, FitsTheWidthAndGrowsWithIt) {
  auto [sc, run] = run_catalog("kleppmann-gc-pause", "redis");
  for (int width : {60, 100, 160}) {
    const std::string tl = timeline(run, TextStyle{false, width});
    std::size_t widest = 0;
    for (const auto& l : lines_of(tl)) {
      EXPECT_LE(visible_width(l), static_cast<std::size_t>(width)) << l;
      widest = std::max(widest, visible_width(l));
    }
    EXPECT_GE(widest, static_cast<std::size_t>(width) * 6 / 10) << "width " << width << "\n" << tl;
  }
  // The default is 100 columns.
  EXPECT_EQ(timeline(run, TextStyle{false, 0}), timeline(run, TextStyle{false, 100}));
  // A wider terminal gets a finer scale: more columns of pause.
  EXPECT_GT(count(cells_of(timeline(run, TextStyle{false, 200}), "client1"), "░"),
            count(cells_of(timeline(run, TextStyle{false, 100}), "client1"), "░"));
}

TEST(Timeline, AxisTicksEveryTenColumnsOnRoundTimes) {
  auto [sc, run] = run_catalog("kleppmann-gc-pause", "redis");
  const std::string tl = timeline(run, TextStyle{false, 100});
  const auto ls = lines_of(tl);
  ASSERT_GE(ls.size(), 3u);
  EXPECT_EQ(ls[0].rfind("timeline (true time; one column = ", 0), 0u);
  const std::string& labels = ls[1];
  const std::string& ticks = ls[2];
  const std::size_t grid0 = ticks.find('|');
  ASSERT_NE(grid0, std::string::npos);
  EXPECT_EQ(labels.substr(grid0, 2), "0s");
  EXPECT_EQ(ticks[grid0 + 10], '|');
  // The first client's lane starts its grid where the ticks start.
  EXPECT_EQ(ls[3].rfind("client1", 0), 0u);
}

TEST(Timeline, ColourOnlyWhenAsked) {
  auto [sc, run] = run_catalog("kleppmann-gc-pause", "redis");
  const std::string plain = text_report(run, sc, TextStyle{false, 100});
  const std::string coloured = text_report(run, sc, TextStyle{true, 100});
  EXPECT_EQ(plain.find('\x1b'), std::string::npos);
  EXPECT_NE(coloured.find("\x1b[32m●"), std::string::npos);    // accepted: green
  EXPECT_NE(coloured.find("\x1b[1;31m◉"), std::string::npos);  // the stale write: bold red
  EXPECT_NE(coloured.find("\x1b[33m░"), std::string::npos);    // pause: yellow
  // Stripped of its escapes, the coloured report is the plain one.
  std::string stripped;
  for (std::size_t k = 0; k < coloured.size(); ++k) {
    if (coloured[k] == '\x1b') {
      while (k < coloured.size() && coloured[k] != 'm') ++k;
      continue;
    }
    stripped += coloured[k];
  }
  EXPECT_EQ(stripped, plain);
}

TEST(TextReport, KeepsTheEventListAndTheStory) {
  auto [sc, run] = run_catalog("kleppmann-gc-pause", "redis");
  const std::string t = text_report(run, sc, TextStyle{false, 100});
  const auto tl = t.find("timeline (true time;"), ev = t.find("events (true time):"),
             st = t.find("what happened:");
  ASSERT_NE(tl, std::string::npos);
  ASSERT_NE(ev, std::string::npos);
  ASSERT_NE(st, std::string::npos);
  EXPECT_LT(tl, ev);
  EXPECT_LT(ev, st);
  EXPECT_NE(t.find("PAUSED"), std::string::npos);
  EXPECT_NE(t.find(story(run)), std::string::npos);
  EXPECT_NE(t.find("verdict: UNSAFE"), std::string::npos);
}

// A holder whose belief never ended gives a slack near minus the end of time: the report names it as
// unbounded rather than printing a huge negative number of seconds.
TEST(TextReport, NamesAnUnboundedSlack) {
  auto [sc, run] = run_catalog("kleppmann-gc-pause", "redis");
  run.check.slack = (Time{} - kTimeMax) + std::chrono::seconds(5);
  const std::string t = text_report(run, sc, TextStyle{false, 100});
  EXPECT_NE(
      t.find("slack (smallest margin): unbounded (a holder still believed when the next grant came, and "
             "never stopped)\n"),
      std::string::npos)
      << t;
  EXPECT_EQ(t.find("-9223372"), std::string::npos) << t;
}

TEST(DescribeEvent, SaysTimeClocksAndWhatHappened) {
  auto [sc, run] = run_catalog("kleppmann-gc-pause", "redis");
  bool saw_pause = false, saw_send = false, saw_accept = false;
  for (const auto& ev : run.trace) {
    const std::string d = describe_event(run, ev, TextStyle{false, 100});
    EXPECT_EQ(d.find('\n'), std::string::npos);
    EXPECT_EQ(d.rfind("t=", 0), 0u) << d;
    EXPECT_NE(d.find(format_seconds(ev.time, 3) + " s"), std::string::npos) << d;
    if (ev.proc.valid()) {
      EXPECT_NE(d.find(run.name_of(ev.proc)), std::string::npos) << d;
      EXPECT_NE(d.find("monotonic " + format_seconds(ev.node_time, 3) + " s"), std::string::npos) << d;
      EXPECT_NE(d.find("wall " + format_seconds(ev.wall_time, 3) + " s"), std::string::npos) << d;
    }
    if (ev.kind == TraceKind::pause) saw_pause |= d.find("PAUSED") != std::string::npos;
    if (ev.kind == TraceKind::send)
      saw_send |= d.find("sent " + ev.label + " to " + run.name_of(ev.peer)) != std::string::npos;
    if (ev.kind == TraceKind::note && ev.label == "write-accepted") saw_accept = true;
  }
  EXPECT_TRUE(saw_pause);
  EXPECT_TRUE(saw_send);
  EXPECT_TRUE(saw_accept);
}

// The stale write's story tells of the lease check only when there was one, in its place among the pauses.
TEST(Story, TellsOfALeaseCheckBeforeThePauseThatFollowedIt) {
  auto [sc, run] = run_catalog("kleppmann-gc-pause", "redis");
  const std::string s = story(run);
  const auto check = s.find("It checked its lease at");
  const auto pause = s.find("Then it was paused from");
  ASSERT_NE(check, std::string::npos) << s;
  ASSERT_NE(pause, std::string::npos) << s;
  EXPECT_LT(check, pause) << s;
  EXPECT_EQ(s.find("did not check"), std::string::npos) << s;
}

TEST(Story, SaysSoWhenTheHolderNeverCheckedItsLease) {
  // The lock-set program has no check step: the paused holder wrote as it woke.
  auto [sc, run] = run_catalog("jepsen-etcd-lock-set-keepalive", "lease");
  const std::string all = story(run);
  EXPECT_EQ(all.find("It checked its lease"), std::string::npos) << all;
  // The first stale write's story (one per line).
  const auto at = all.find("It did not check its lease before it wrote.");
  ASSERT_NE(at, std::string::npos) << all;
  const auto begin = all.rfind('\n', at), end = all.find('\n', at);
  const std::string s = all.substr(begin == std::string::npos ? 0 : begin + 1, end - begin);
  const auto pause = s.find("Then it was paused from");
  ASSERT_NE(pause, std::string::npos) << s;
  EXPECT_LT(pause, s.find("It did not check")) << s;
}

// A receive that waited no time (a client clearing stale replies) is not told as a timeout it gave up on;
// one that blocked and ran out is.
TEST(DescribeEvent, APollIsNotAGivingUp) {
  std::size_t polls = 0, gave_up = 0;
  for (const auto& [scenario, p] :
       {std::pair{"kleppmann-gc-pause", "redis"}, std::pair{"redis-restart-no-fsync", "redlock"}}) {
    auto [sc, run] = run_catalog(scenario, p);
    for (std::size_t i = 0; i < run.trace.size(); ++i) {
      const TraceEvent& ev = run.trace[i];
      if (ev.kind != TraceKind::timeout) continue;
      Time before = Time{-1};
      for (std::size_t j = i; j-- > 0;)
        if (run.trace[j].proc == ev.proc) {
          before = run.trace[j].time;
          break;
        }
      const std::string d = describe_event(run, ev, TextStyle{false, 0});
      if (before == ev.time) {
        ++polls;
        EXPECT_NE(d.find("found none waiting"), std::string::npos) << d;
      } else {
        ++gave_up;
        EXPECT_NE(d.find("gave up waiting (timeout)"), std::string::npos) << d;
      }
    }
  }
  EXPECT_GT(polls, 0u);
  EXPECT_GT(gave_up, 0u);
}

// A reply later than the client's node timeout leaves the lock granted to an attempt nobody follows up: the
// report says so (a liveness problem beside a safe verdict); a healthy run has none.
TEST(Story, AGrantNoClientLearnedOfIsReported) {
  const std::string text =
      "[lock]\nttl = \"2s\"\n[[client]]\nname = \"client1\"\nacquisitions = 1\n[[client]]\nname = "
      "\"client2\"\n"
      "start = \"10ms\"\nacquisitions = 1\nretry_delay = \"100ms\"\n[[fault]]\nkind = \"delay_spike\"\n"
      "target = \"redis1\"\npeer = \"client1\"\nextra = \"100ms\"\ncount = 1\nat = \"0s\"\n";
  const Scenario sc = load_scenario_text(text, "orphan.toml");
  const RunOutput run = run_scenario(sc, "redis");
  const auto o = orphan_grants(run);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_NE(o[0].find("to client1's attempt sent at 0.000 s"), std::string::npos) << o[0];
  EXPECT_NE(o[0].find("its next attempt came at"), std::string::npos) << o[0];
  EXPECT_NE(text_report(run, sc, TextStyle{false, 100}).find("granted to nobody: "), std::string::npos);
  const std::string json = json_report(run, sc);
  EXPECT_NE(json.find("\"orphan_grants\": [\n    \"The service granted 'lock' to client1"), std::string::npos)
      << json;
  EXPECT_TRUE(run.check.safe);
  auto [healthy_sc, healthy] = run_catalog("no-faults", "redlock");
  EXPECT_TRUE(orphan_grants(healthy).empty());
  auto [lease_sc, lease] = run_catalog("no-faults", "lease");
  EXPECT_TRUE(orphan_grants(lease).empty());
}
