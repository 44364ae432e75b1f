// Distributions in scenario files: every kind through the network delay, the network's older forms read as
// they always were, empirical values inline and from a CSV (with the CSV's own file:line on a bad value), the
// field rules other fields ask for, and a saved scenario listing its observed values inline.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/loader/dist.hpp"
#include "locksim/scenarios/replay.hpp"
#include "locksim/scenarios/runner.hpp"

namespace locksim {
namespace {

namespace fs = std::filesystem;

const fs::path kRepo = LOCKSIM_SOURCE_DIR;

Dist delay_of(const std::string& delay) {
  return load_scenario_text("[[client]]\nname = \"client1\"\n[network]\ndelay = " + delay + "\n", "d.toml")
      .network.defaults.delay;
}

InputError error_of(const std::string& delay, const std::string& file = "d.toml") {
  try {
    load_scenario_text("[[client]]\nname = \"client1\"\n[network]\ndelay = " + delay + "\n", file);
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << delay << " loaded";
  return InputError("", 0, "", "");
}

/// A directory of this process and test under the system's temp directory, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / fmt::format("locksim-dist-{}", ::getpid());
    path /= ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return (path / name).string();
  }
};

/// Loads a scenario file beside `csv` whose delay reads it.
Scenario with_csv(const TempDir& dir, const std::string& csv, const std::string& extra = "unit = \"ms\"") {
  dir.write("pauses.csv", csv);
  const std::string toml =
      "[[client]]\nname = \"client1\"\n[network.delay]\nkind = \"empirical\"\nfile = "
      "\"pauses.csv\"\n" +
      extra + "\n";
  return load_scenario_file(dir.write("s.toml", toml));
}

InputError csv_error(const TempDir& dir, const std::string& csv, const std::string& extra = "unit = \"ms\"") {
  try {
    with_csv(dir, csv, extra);
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "loaded:\n" << csv;
  return InputError("", 0, "", "");
}

std::vector<std::int64_t> ns(const Dist& d) {
  std::vector<std::int64_t> out;
  for (Duration v : *d.values) out.push_back(v.count());
  return out;
}

}  // namespace

TEST(LoaderDist, EveryKindThroughTheNetworkDelay) {
  const Dist c = delay_of("\"15s\"");
  EXPECT_TRUE(c.is_constant());
  EXPECT_EQ(c.min, 15s);
  EXPECT_EQ(delay_of("{ kind = \"uniform\", min = \"1s\", max = \"2s\" }").describe(),
            "uniform(min=1s, max=2s)");
  EXPECT_EQ(delay_of("{ kind = \"exponential\", mean = \"200ms\", max = \"5s\" }").describe(),
            "exponential(mean=200ms, max=5s)");
  EXPECT_EQ(delay_of("{ kind = \"lognormal\", median = \"50ms\", sigma = 1.2, max = \"10s\" }").describe(),
            "lognormal(median=50ms, sigma=1.2, max=10s)");
  EXPECT_EQ(delay_of("{ kind = \"lognormal\", median = \"50ms\", sigma = 2, max = \"10s\", min = \"1ms\" }")
                .describe(),
            "lognormal(min=1ms, median=50ms, sigma=2, max=10s)");
  EXPECT_EQ(delay_of("{ kind = \"pareto\", scale = \"10ms\", alpha = 1.5, max = \"30s\" }").describe(),
            "pareto(scale=10ms, alpha=1.5, max=30s)");
  EXPECT_EQ(delay_of("{ kind = \"empirical\", values = [\"340ms\", \"12ms\", \"2.1s\"] }").describe(),
            "empirical(3 values, min=12ms, median=340ms, max=2.1s)");
}

TEST(LoaderDist, TheNetworksOlderFormsReadAsBefore) {
  const Dist lt =
      delay_of("{ kind = \"long_tail\", min = \"1ms\", max = \"2s\", mean = \"5ms\", alpha = 1.5 }");
  EXPECT_EQ(lt.kind, Dist::Kind::long_tail);
  EXPECT_EQ(lt.min, 1ms);
  EXPECT_EQ(lt.max, 2s);
  EXPECT_EQ(lt.mean, 5ms);
  EXPECT_EQ(lt.alpha, 1.5);
  EXPECT_EQ(delay_of("{ kind = \"long_tail\", max = \"2s\", mean = \"5ms\" }").alpha, 1.5);  // the default
  EXPECT_EQ(delay_of("{ kind = \"long_tail\", max = \"2s\", mean = \"5ms\", alpha = 2 }").alpha, 2.0);
  // long_tail's cap may sit below its scale (every value is then the cap), as it always could.
  EXPECT_EQ(delay_of("{ kind = \"long_tail\", max = \"1ms\", mean = \"5ms\" }").lower_bound(), 1ms);
  const Dist e = delay_of("{ kind = \"exponential\", min = \"1ms\", max = \"20ms\", mean = \"2ms\" }");
  EXPECT_EQ(e.kind, Dist::Kind::exponential);
  EXPECT_EQ(e.min, 1ms);
  EXPECT_EQ(e.max, 20ms);
  EXPECT_EQ(e.mean, 2ms);
  const Dist u = delay_of("{ kind = \"uniform\", max = \"3ms\" }");
  EXPECT_EQ(u.min, 0ns);
  EXPECT_EQ(u.max, 3ms);
  EXPECT_EQ(delay_of("{ kind = \"constant\", value = \"2ms\" }").min, 2ms);
  EXPECT_EQ(delay_of("\"0\"").min, 0ns);
  EXPECT_NE(
      std::string(error_of("{ kind = \"uniform\", min = \"1ms\", max = \"2ms\", mean = \"1ms\" }").what())
          .find("'mean' does not apply to a uniform delay"),
      std::string::npos);
}

TEST(LoaderDist, InlineValues) {
  EXPECT_EQ(ns(delay_of("{ kind = \"empirical\", values = [\"2ms\", \"1ms\", \"1ms\"] }")),
            (std::vector<std::int64_t>{1'000'000, 1'000'000, 2'000'000}));
  EXPECT_EQ(ns(delay_of("{ kind = \"empirical\", values = [12, 340, \"2s\"], unit = \"ms\" }")),
            (std::vector<std::int64_t>{12'000'000, 340'000'000, 2'000'000'000}));
  // Floats are rounded to the nearest nanosecond; decimals written as text are exact.
  EXPECT_EQ(ns(delay_of("{ kind = \"empirical\", values = [0.1, 12.5], unit = \"s\" }")),
            (std::vector<std::int64_t>{100'000'000, 12'500'000'000}));
  const InputError e = error_of("{ kind = \"empirical\", values = [\"1ms\", true] }");
  EXPECT_EQ(e.field, "network.delay.values[1]");
  EXPECT_NE(std::string(e.what()).find("got a boolean"), std::string::npos) << e.what();
}

TEST(LoaderDist, ValuesFromACsvFile) {
  const TempDir dir;
  // One value per line, bare numbers in `unit` or durations, comments, blank lines, CRLF, a byte order mark.
  EXPECT_EQ(ns(with_csv(dir, "\xEF\xBB\xBF# pauses\r\n12\r\n\r\n340.5\r\n2s\r\n").network.defaults.delay),
            (std::vector<std::int64_t>{12'000'000, 340'500'000, 2'000'000'000}));
  // A one-column header is skipped.
  EXPECT_EQ(ns(with_csv(dir, "pause_ms\n12\n7\n").network.defaults.delay),
            (std::vector<std::int64_t>{7'000'000, 12'000'000}));
  // A named column of several.
  EXPECT_EQ(ns(with_csv(dir, "uptime_s,pause_ms,cause\n1.5,13.78,\"Pause Young\"\n9,2490.187,Full\n",
                        "column = \"pause_ms\"\nunit = \"ms\"")
                   .network.defaults.delay),
            (std::vector<std::int64_t>{13'780'000, 2'490'187'000}));
}

TEST(LoaderDist, TheExampleGcPauses) {
  const TempDir dir;
  const std::string csv = (kRepo / "examples" / "gc-pauses.csv").string();
  const std::string toml =
      "[[client]]\nname = \"client1\"\n[network]\ndelay = { kind = \"empirical\", file = \"" + csv +
      "\", column = \"pause_ms\", unit = \"ms\" }\n";
  const Dist d = load_scenario_file(dir.write("s.toml", toml)).network.defaults.delay;
  EXPECT_EQ(d.values->size(), 120u);
  EXPECT_EQ(d.lower_bound(), 4294us);
  EXPECT_EQ(d.upper_bound(), 2490187us);
}

TEST(LoaderDist, ABadCsvNamesItsOwnFileAndLine) {
  const TempDir dir;
  const std::string csv = (dir.path / "pauses.csv").string();
  struct Case {
    std::string text, extra;
    std::uint32_t line;
    std::string expect;
  };
  const Case cases[] = {
      {"12\n7\n12x\n", "unit = \"ms\"", 3, "'12x' has an unknown unit 'x'"},
      {"1\n2\n3\n4\n\n# a comment\n7q\n", "unit = \"ms\"", 7, "'7q' has an unknown unit 'q'"},
      {"12\n-7\n", "unit = \"ms\"", 2, "'-7ms' must not be negative"},
      {"12\n400d\n", "unit = \"ms\"", 2, "'400d' is longer than a year"},
      {"12\n1.5e-3\n", "unit = \"s\"", 2, "'1.5e-3' is in exponent notation"},
      {"12\n7\n", "", 1, "'12' has no unit"},
      {"# nothing\n\n", "unit = \"ms\"", 2, "has no values"},
      {"", "unit = \"ms\"", 1, "has no values"},
      {"a,b\n1,2\n", "unit = \"ms\"", 1, "has 2 columns (a, b): name the one to read with column = \"a\""},
      {"1,2\n", "unit = \"ms\"", 1, "has 2 values on one line"},
      {"x\n1\n2,3\n", "unit = \"ms\"", 3, "has 2 values on one line"},
      {"uptime,pause\n1,2\n", "column = \"pasue\"\nunit = \"ms\"", 1,
       "no column 'pasue' in the header line (did you mean 'pause'?)"},
      {"uptime,pause\n1,2\n3\n", "column = \"pause\"\nunit = \"ms\"", 3,
       "has 1 cells; column 'pause' is cell 2"},
      {"uptime,pause\n1,\n", "column = \"pause\"\nunit = \"ms\"", 2, "empty value in column 'pause'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const InputError e = csv_error(dir, c.text, c.extra);
    EXPECT_EQ(e.file, csv);
    EXPECT_EQ(e.line, c.line) << e.what();
    EXPECT_EQ(e.field, "network.delay.file");
    EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << e.what();
  }
}

TEST(LoaderDist, AFileIsReadBesideTheScenarioAndNeverByACatalogScenario) {
  const TempDir dir;
  fs::create_directories(dir.path / "sub");
  dir.write("sub/p.csv", "5ms\n");
  const std::string toml =
      "[[client]]\nname = \"client1\"\n[network]\ndelay = { kind = \"empirical\", file = \"sub/p.csv\" }\n";
  EXPECT_EQ(load_scenario_file(dir.write("s.toml", toml)).network.defaults.delay.min, 5ms);
  const InputError e =
      error_of("{ kind = \"empirical\", file = \"gc-pauses.csv\" }", "scenarios/catalog/no-faults.toml");
  EXPECT_EQ(e.field, "network.delay.file");
  EXPECT_NE(std::string(e.what()).find("a catalog scenario is embedded in the locksim binary"),
            std::string::npos)
      << e.what();
  const InputError missing =
      error_of("{ kind = \"empirical\", file = \"nope.csv\" }", (dir.path / "s.toml").string());
  EXPECT_NE(std::string(missing.what()).find((dir.path / "nope.csv").string() + "': No such file"),
            std::string::npos)
      << missing.what();
}

TEST(LoaderDist, FieldRules) {
  // What other fields ask: a positive value, a limit, their own noun.
  const auto parse = [](const std::string& value, const DistRules& rules) {
    const std::string text = "x = " + value + "\n";
    const toml::table t = toml::parse(std::string_view(text), std::string_view("f.toml"));
    return parse_dist(*t.get("x"), "fault[0].duration", "f.toml", rules);
  };
  const auto error = [&](const std::string& value, const DistRules& rules) -> std::string {
    try {
      parse(value, rules);
    } catch (const InputError& e) {
      return e.what();
    }
    return "loaded";
  };
  DistRules pause;
  pause.sign = DistRules::Sign::positive;
  pause.limit = 60s;
  pause.limit_name = "limits.max_time (60s)";
  pause.noun = "pause";
  EXPECT_EQ(parse("\"15s\"", pause).min, 15s);
  EXPECT_EQ(error("\"0\"", pause), "f.toml:1: fault[0].duration: '0' must be greater than zero");
  EXPECT_EQ(error("\"90s\"", pause), "f.toml:1: fault[0].duration: '90s' is beyond limits.max_time (60s)");
  EXPECT_EQ(error("{ kind = \"lognormal\", median = \"1s\", sigma = 1, max = \"2m\", min = \"1ns\" }", pause),
            "f.toml:1: fault[0].duration.max: can reach 120s, beyond limits.max_time (60s)");
  EXPECT_EQ(
      error("{ kind = \"exponential\", mean = \"1s\", max = \"10s\" }", pause),
      "f.toml:1: fault[0].duration.min: the exponential can be 0 (min is 0): a pause must be longer than "
      "zero; set min (e.g. min = \"1ms\")");
  EXPECT_EQ(
      parse("{ kind = \"exponential\", mean = \"1s\", max = \"10s\", min = \"1ms\" }", pause).lower_bound(),
      1ms);
  EXPECT_EQ(error("{ kind = \"empirical\", values = [\"0\", \"1s\"] }", pause),
            "f.toml:1: fault[0].duration.values: a value is 0: a pause must be longer than zero");
  EXPECT_EQ(error("{ kind = \"uniform\", max = \"1s\", mean = \"1s\" }", pause),
            "f.toml:1: fault[0].duration.mean: 'mean' does not apply to a uniform pause (it takes: kind, "
            "min, max)");
  EXPECT_EQ(error("[1]", pause),
            "f.toml:1: fault[0].duration: expected a duration (\"2ms\") or a table { kind = \"uniform\", min "
            "= ..., "
            "max = ... }, got an array");
}

TEST(LoaderDist, ASavedScenarioListsItsValuesInline) {
  Scenario sc = load_scenario_text("[[client]]\nname = \"client1\"\n", "s.toml");
  sc.network.defaults.delay = Dist::empirical_of({12ms, 340ms, 1500ms});
  sc.links.push_back(LinkSpec{"client1", "store", LinkOptions{Dist::lognormal_of(50ms, 1.2, 10s, 1ms)}});
  const std::string text = scenario_to_toml(sc);
  EXPECT_NE(text.find("kind = \"empirical\", values = [\"0.012s\", \"0.34s\", \"1.5s\"]"), std::string::npos)
      << text;
  const Scenario back = load_scenario_text(text, "back.toml");
  EXPECT_EQ(scenario_to_toml(back), text);
  EXPECT_EQ(ns(back.network.defaults.delay), ns(sc.network.defaults.delay));
  EXPECT_EQ(back.links.at(0).options.delay.describe(), "lognormal(min=1ms, median=50ms, sigma=1.2, max=10s)");
}

TEST(LoaderDist, ARunWithEveryKindIsDeterministic) {
  for (const std::string delay : {"{ kind = \"lognormal\", median = \"2ms\", sigma = 0.8, max = \"50ms\" }",
                                  "{ kind = \"pareto\", scale = \"1ms\", alpha = 1.2, max = \"200ms\" }",
                                  "{ kind = \"empirical\", values = [\"1ms\", \"2ms\", \"30ms\"] }"}) {
    SCOPED_TRACE(delay);
    const Scenario sc = load_scenario_text(
        "[[client]]\nname = \"client1\"\n[[client]]\nname = \"client2\"\n[network]\ndelay = " + delay + "\n",
        "r.toml");
    const RunOutput a = run_scenario(sc, "redis"), b = run_scenario(sc, "redis");
    EXPECT_EQ(a.trace_hash, b.trace_hash);
    EXPECT_NE(a.trace_hash,
              run_scenario(load_scenario_text("[[client]]\nname = \"client1\"\n[[client]]\nname = "
                                              "\"client2\"\n",
                                              "r.toml"),
                           "redis")
                  .trace_hash);
  }
}

// A fault's period and jitter as distributions: read, drawn per firing, written back by a replay file.
const char* kRandomPeriod = R"(
[[client]]
name = "client1"
acquisitions = 100
work = "200ms"
[[fault]]
kind = "pause"
target = "client1"
duration = "300ms"
at = "1s"
every = { kind = "exponential", mean = "3s", min = "200ms", max = "20s" }
until = "50s"
jitter = { kind = "uniform", min = "10ms", max = "90ms" }
)";

TEST(LoaderDist, AFaultPeriodAndJitterMayBeDistributions) {
  const Scenario sc = load_scenario_text(kRandomPeriod, "p.toml");
  const Repeat& r = sc.faults.at(0).fault.repeat;
  ASSERT_TRUE(r.every_dist);
  EXPECT_EQ(r.every, Duration{200ms});  // the shortest period bounds the firings
  EXPECT_EQ(r.every_dist->describe(), "exponential(min=200ms, mean=3s, max=20s)");
  ASSERT_TRUE(r.jitter_dist);
  EXPECT_EQ(r.jitter, Duration{90ms});
  // A constant written as a table is the constant: nothing to draw, the same run as the plain duration.
  auto with_every = [](const std::string& every) {
    return load_scenario_text(
        "[[client]]\nname = \"client1\"\n[[fault]]\nkind = \"pause\"\ntarget = \"client1\"\nduration = "
        "\"1s\"\nat = \"1s\"\ntimes = 3\nevery = " +
            every + "\n",
        "c.toml");
  };
  const Scenario table = with_every("{ kind = \"uniform\", min = \"5s\", max = \"5s\" }");
  EXPECT_FALSE(table.faults.at(0).fault.repeat.every_dist);
  EXPECT_EQ(run_scenario(table, "redis").trace_hash, run_scenario(with_every("\"5s\""), "redis").trace_hash);
}

TEST(LoaderDist, ARandomPeriodIsDrawnPerFiringAndReplaysExactly) {
  const Scenario sc = load_scenario_text(kRandomPeriod, "p.toml");
  RunOptions ro;
  ro.keep_trace = true;
  const RunOutput a = run_scenario(sc, "redis", ro);
  std::vector<Time> fired;
  for (const TraceEvent& e : a.trace)
    if (e.kind == TraceKind::pause) fired.push_back(e.time);
  ASSERT_GE(fired.size(), 4u);
  std::set<Duration> gaps;
  for (std::size_t k = 1; k < fired.size(); ++k) {
    EXPECT_GE(fired[k] - fired[k - 1], Duration{200ms} - Duration{90ms});
    gaps.insert(fired[k] - fired[k - 1]);
  }
  EXPECT_GT(gaps.size(), 2u);  // not a grid
  ReplayInfo info{"redis", a.trace_hash, a.verdict(), "test", ""};
  const std::string text = scenario_to_toml(sc, &info);
  EXPECT_NE(text.find("every = { kind = \"exponential\""), std::string::npos) << text;
  EXPECT_NE(text.find("jitter = { kind = \"uniform\""), std::string::npos) << text;
  const ReplayFile back = load_replay_text(text, "back.toml");
  const Repeat& r = back.scenario.faults.at(0).fault.repeat;
  ASSERT_TRUE(r.every_dist && r.jitter_dist);
  EXPECT_EQ(r.every_dist->describe(), sc.faults.at(0).fault.repeat.every_dist->describe());
  const ReplayCheck again = replay(back);
  EXPECT_TRUE(again.hash_matches);
  // Another seed draws other periods.
  RunOptions other = ro;
  other.seed = 2;
  EXPECT_NE(run_scenario(sc, "redis", other).trace_hash, a.trace_hash);
}

}  // namespace locksim
