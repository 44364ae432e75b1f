// The envelope's engine: a field varied by its path loads as the loader reads it, the grid and its
// refinement find the analytic Kleppmann boundary, results do not depend on the number of threads, and the
// shards of a grid merge into the same result.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "locksim/scenarios/catalog.hpp"
#include "locksim/scenarios/envelope.hpp"
#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/runner.hpp"

using namespace locksim;

namespace {

std::string catalog_text(std::string_view name) {
  for (const CatalogEntry& e : catalog())
    if (e.name == name) return std::string(e.text);
  return {};
}

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

EnvelopeSpec kleppmann(std::vector<std::string> protocols, std::uint32_t steps) {
  EnvelopeSpec s;
  s.scenario = "kleppmann-gc-pause";
  s.toml = catalog_text(s.scenario);
  s.file = "kleppmann-gc-pause.toml";
  s.protocols = std::move(protocols);
  s.axes.push_back(parse_vary("lock.ttl=1s..40s", s.toml, s.file));
  s.axes.push_back(parse_vary("fault[0].duration=1s..40s", s.toml, s.file));
  s.steps = steps;
  return s;
}

}  // namespace

TEST(EnvelopeField, PathsOfEveryKindSetTheFieldTheLoaderReads) {
  const std::string t = catalog_text("kleppmann-gc-pause");
  const std::string f = "k.toml";
  const auto one = [&](const std::string& spec, double v) {
    return vary_scenario(t, f, {parse_vary(spec, t, f)}, {v});
  };
  EXPECT_EQ(one("lock.ttl=1s..60s", 2.5e9).config.ttl, 2500ms);
  EXPECT_EQ(one("fault[0].duration=1s..60s", 7e9).faults[0].fault.duration, 7s);
  EXPECT_EQ(one("protocol.drift_factor=0..0.1", 0.05).config.drift_factor_ppm, 50'000);
  EXPECT_EQ(one("client[1].retry_delay=1ms..1s", 20e6).clients[1].retry_delay, 20ms);
  EXPECT_EQ(one("client[1].work=0s..1s", 300e6).clients[1].work_max, 300ms);
  EXPECT_EQ(one("network.delay=1ms..100ms", 5e6).network.defaults.delay.max, 5ms);
  EXPECT_EQ(one("limits.max_events=1000..100000", 5000).max_events, 5000u);
  const EnvelopeAxis a = parse_vary("lock.ttl=1s..60s", t, f);
  EXPECT_EQ(a.kind, AxisKind::duration);
  EXPECT_EQ(a.lo, 1e9);
  EXPECT_EQ(a.hi, 60e9);
  EXPECT_EQ(parse_vary("protocol.drift_factor=0..0.1", t, f).kind, AxisKind::number);
}

TEST(EnvelopeField, DistributionParameterIsAFieldToo) {
  const std::string t = catalog_text("kleppmann-gc-pause") +
                        "\n[network]\ndelay = { kind = \"exponential\", mean = \"2ms\", max = \"1s\" }\n";
  const EnvelopeAxis a = parse_vary("network.delay.mean=1ms..10ms", t, "k.toml");
  EXPECT_EQ(a.kind, AxisKind::duration);
  const Scenario sc = vary_scenario(t, "k.toml", {a}, {4e6});
  EXPECT_NE(vary_text(t, "k.toml", {a}, {4e6}).find("mean = '4ms'"), std::string::npos)
      << vary_text(t, "k.toml", {a}, {4e6});
  (void)sc;
}

TEST(EnvelopeField, BadInputNamesTheField) {
  const std::string t = catalog_text("kleppmann-gc-pause");
  const auto err = [&](const std::string& spec) -> std::string {
    try {
      parse_vary(spec, t, "k.toml");
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(err("lock.tll=1s..2s").find("unknown field 'lock.tll' (did you mean 'lock.ttl'?)"),
            std::string::npos)
      << err("lock.tll=1s..2s");
  EXPECT_NE(err("lokc.ttl=1s..2s").find("did you mean 'lock'?"), std::string::npos) << err("lokc.ttl=1s..2s");
  EXPECT_NE(err("lock.ttl=1..60").find("--vary lock.ttl: lock.ttl is a duration: give the range with units"),
            std::string::npos)
      << err("lock.ttl=1..60");
  EXPECT_NE(err("lock.ttl=60s..1s").find("--vary lock.ttl: LO > HI"), std::string::npos)
      << err("lock.ttl=60s..1s");
  EXPECT_NE(err("lock.key=1..2").find("lock.key is not a numeric field"), std::string::npos)
      << err("lock.key=1..2");
  EXPECT_NE(err("fault[0].target=1..2").find("fault[0].target is not a numeric field"), std::string::npos);
  EXPECT_NE(
      err("fault[3].duration=1s..2s").find("index 3 is past the end: the scenario has 1 [[fault]] table(s)"),
      std::string::npos)
      << err("fault[3].duration=1s..2s");
  EXPECT_NE(err("fault.duration=1s..2s").find("say which, e.g. fault[0]"), std::string::npos);
  EXPECT_NE(err("protocol.drift_factor=0.01s..1s").find("is not a plain number"), std::string::npos);
  EXPECT_NE(err("lock.ttl").find("is not FIELD=LO..HI"), std::string::npos);
  EXPECT_NE(err("lock.ttl=1s").find("is not a range LO..HI"), std::string::npos);
  EXPECT_NE(err("lock.ttl=1s..1s").find("an empty range"), std::string::npos);
}

TEST(EnvelopeField, LoaderRejectsAPointNamingTheField) {
  EnvelopeSpec s = kleppmann({"redis"}, 3);
  s.axes[1] = parse_vary("fault[0].duration=0s..10s", s.toml, s.file);  // a pause of 0 is no pause
  try {
    run_envelope(s, 1);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field, "--vary fault[0].duration");
    EXPECT_NE(std::string(e.what()).find("must be greater than zero"), std::string::npos) << e.what();
  }
}

TEST(EnvelopeField, OptionsOutOfRangeNameTheOption) {
  for (auto [steps, seeds, refine, option] : {std::tuple{201u, 1u, 4u, "--steps"},
                                              {1u, 1u, 4u, "--steps"},
                                              {5u, 0u, 4u, "--seeds"},
                                              {5u, 1u, 31u, "--refine"}}) {
    EnvelopeSpec s = kleppmann({"redis"}, steps);
    s.seeds = seeds;
    s.refine = refine;
    try {
      run_envelope(s, 1);
      ADD_FAILURE() << option << ": no error";
    } catch (const InputError& e) {
      EXPECT_EQ(e.field, option) << e.what();
    }
  }
}

TEST(EnvelopeField, AtTheScenariosOwnValuesTheRunIsTheSame) {
  // Rewriting the TOML changes nothing else: the trace hash of the catalog scenario, per protocol.
  const std::string t = catalog_text("kleppmann-gc-pause");
  const Scenario orig = load_scenario("kleppmann-gc-pause");
  const std::vector<EnvelopeAxis> axes = {parse_vary("lock.ttl=1s..60s", t, "k.toml"),
                                          parse_vary("fault[0].duration=1s..60s", t, "k.toml")};
  const Scenario same = vary_scenario(t, "k.toml", axes, {10e9, 15e9});
  for (const std::string p : {"redis", "redlock", "lease", "lease+fence"})
    EXPECT_EQ(run_scenario(same, p).trace_hash, run_scenario(orig, p).trace_hash) << p;
}

TEST(Envelope, AnUnsafePointsCommandReplaysItsRun) {
  EnvelopeSpec s = kleppmann({"redlock"}, 4);
  s.refine = 1;
  const EnvelopeResult r = run_envelope(s, 2);
  int checked = 0;
  for (const EnvelopePoint& p : r.protocols[0].grid) {
    if (!p.first_unsafe_seed) continue;
    // What `locksim run POINT.toml -p redlock --seed S` runs: the point's scenario file, loaded again.
    const Scenario sc = load_scenario_text(vary_text(s.toml, s.file, s.axes, p.at), "point.toml");
    RunOptions ro;
    ro.seed = *p.first_unsafe_seed;
    const RunOutput out = run_scenario(sc, "redlock", ro);
    EXPECT_FALSE(out.check.safe);
    EXPECT_EQ(out.trace_hash, p.first_unsafe_hash);
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(Envelope, KleppmannBoundaryIsTheAnalyticOne) {
  // Servers' clocks as fast as Redlock's drift allows (1%, no fixed allowance) and a second client that takes
  // the lock within 20 ms of it freeing: the boundary must be pause = ttl - drift - elapsed, drift = 0.01
  // ttl, elapsed = one round trip (2 ms), to within one refinement step along the axis that was bisected.
  EnvelopeSpec s;
  s.scenario = std::string(LOCKSIM_SOURCE_DIR) + "/tests/envelope/data/gc-pause-worst-clocks.toml";
  s.toml = file_text(s.scenario);
  s.file = s.scenario;
  s.protocols = {"redlock"};
  s.axes.push_back(parse_vary("lock.ttl=1s..60s", s.toml, s.file));
  s.axes.push_back(parse_vary("fault[0].duration=1s..60s", s.toml, s.file));
  s.steps = 20;
  s.refine = 4;
  const EnvelopeResult r = run_envelope(s, 2);
  const ProtocolEnvelope& pe = r.protocols[0];
  const std::vector<double> step = r.resolution();
  ASSERT_GE(pe.boundary.size(), 19u * 2);  // crossings along both axes on every row and column it passes
  for (const BoundaryPoint& b : pe.boundary) {
    const double ttl = b.at[0] / 1e9, pause = b.at[1] / 1e9;
    const double analytic = 0.99 * ttl - 0.002;
    // Distance from the analytic line along the bisected axis.
    const double off = b.axis == 1 ? pause - analytic : (pause + 0.002) / 0.99 - ttl;
    EXPECT_LE(std::abs(off), step[b.axis] / 1e9)
        << "crossing at ttl " << ttl << " s, pause " << pause << " s is " << off << " s off the analytic "
        << "boundary (pause " << analytic << " s); one refinement step is " << step[b.axis] / 1e9 << " s";
  }
  EXPECT_TRUE(pe.fit.is_line);
  EXPECT_EQ(pe.fit.dependent, 1u);
  EXPECT_NEAR(pe.fit.slope, 0.99, 0.005);
  EXPECT_NEAR(pe.fit.intercept, -0.002, step[1] / 1e9);
  EXPECT_TRUE(pe.fit.unsafe_above);
  EXPECT_EQ(pe.summary.rfind("redlock: unsafe when fault[0].duration > 0.99", 0), 0u) << pe.summary;
}

TEST(Envelope, FencedLeaseIsSafeOnTheWholeGrid) {
  const EnvelopeResult r = run_envelope(kleppmann({"lease+fence", "redis"}, 5), 2);
  EXPECT_EQ(r.protocols[0].summary, "lease+fence: safe on the whole grid");
  EXPECT_TRUE(r.protocols[0].boundary.empty());
  EXPECT_EQ(r.protocols[1].summary.rfind("redis: unsafe when fault[0].duration > ", 0), 0u)
      << r.protocols[1].summary;
}

TEST(Envelope, OneFieldIsAThreshold) {
  EnvelopeSpec s = kleppmann({"lease"}, 9);
  s.axes.pop_back();  // lock.ttl 1..40 s at the catalog's 15 s pause
  s.refine = 6;
  const EnvelopeResult r = run_envelope(s, 2);
  const ProtocolEnvelope& pe = r.protocols[0];
  ASSERT_EQ(pe.boundary.size(), 1u);
  EXPECT_TRUE(pe.fit.is_line);
  EXPECT_FALSE(pe.fit.unsafe_above);  // unsafe below the threshold: a TTL shorter than the pause
  EXPECT_NEAR(pe.boundary[0].at[0] / 1e9, 14.74, r.resolution()[0] / 1e9 + 0.01);
  EXPECT_EQ(pe.summary.rfind("lease: unsafe when lock.ttl < 14.", 0), 0u) << pe.summary;
}

TEST(Envelope, SeedsGiveTheFractionAndFirstUnsafeSeed) {
  // The nemesis-free catalog scenario is the same for every seed except for nothing random: a fraction of 1
  // at unsafe points, 0 at safe ones, and the first seed recorded.
  EnvelopeSpec s = kleppmann({"redis"}, 3);
  s.seeds = 3;
  s.first_seed = 7;
  const EnvelopeResult r = run_envelope(s, 2);
  for (const EnvelopePoint& p : r.protocols[0].grid) {
    EXPECT_EQ(p.runs, 3u);
    if (p.is_unsafe()) {
      EXPECT_EQ(p.first_unsafe_seed, 7u);
      EXPECT_EQ(p.fraction(), 1.0);
    }
  }
}

TEST(Envelope, OutputsDoNotDependOnJobs) {
  EnvelopeSpec s = kleppmann({"redis", "lease", "lease+fence"}, 6);
  s.seeds = 2;
  const PointCommand cmd = [](const std::string& p, const EnvelopePoint& pt) {
    return "run " + p + " " + std::to_string(*pt.first_unsafe_seed);
  };
  const EnvelopeResult one = run_envelope(s, 1), two = run_envelope(s, 2), five = run_envelope(s, 5);
  EXPECT_EQ(envelope_csv(one, cmd), envelope_csv(two, cmd));
  EXPECT_EQ(envelope_csv(one, cmd), envelope_csv(five, cmd));
  EXPECT_EQ(envelope_json(one, cmd), envelope_json(two, cmd));
  EXPECT_EQ(envelope_json(one, cmd), envelope_json(five, cmd));
}

TEST(Envelope, ShardsMergeIntoTheWholeGrid) {
  EnvelopeSpec s = kleppmann({"redis", "lease"}, 5);
  const EnvelopeResult whole = run_envelope(s, 2);
  const std::string dir = ::testing::TempDir();
  std::vector<std::string> files;
  for (std::uint32_t k = 0; k < 3; ++k) {
    EnvelopeSpec part = s;
    part.shard = k;
    part.shards = 3;
    const EnvelopeResult r = run_envelope(part, 2);
    EXPECT_TRUE(r.protocols[0].refined.empty());  // a shard runs grid points only
    files.push_back(dir + "/envelope-shard-" + std::to_string(k) + ".jsonl");
    std::ofstream(files.back(), std::ios::binary) << envelope_jsonl(r);
  }
  const auto load = [&](const std::string& name) {
    EXPECT_EQ(name, "kleppmann-gc-pause");
    return std::pair{s.toml, s.file};
  };
  EnvelopeMerge m = merge_envelope_jsonl(files, load);
  ASSERT_TRUE(m.result) << (m.missing.empty() ? "" : m.missing[0]);
  m.result->spec.refine = s.refine;
  refine_envelope(*m.result, 2);
  EXPECT_EQ(envelope_json(*m.result, {}), envelope_json(whole, {}));

  // One shard missing, and one cut short: each named.
  EnvelopeMerge gone = merge_envelope_jsonl({files[0], files[2]}, load);
  EXPECT_FALSE(gone.result);
  ASSERT_EQ(gone.missing.size(), 1u);
  EXPECT_EQ(gone.missing[0].rfind("shard 1 of 3 missing: no file has its 16 point(s)", 0), 0u)
      << gone.missing[0];
  std::ifstream in(files[1], std::ios::binary);
  std::string first;
  std::getline(in, first);
  std::ofstream(files[1], std::ios::binary) << first << "\n";
  EnvelopeMerge cut = merge_envelope_jsonl(files, load);
  EXPECT_FALSE(cut.result);
  ASSERT_EQ(cut.missing.size(), 1u);
  EXPECT_EQ(cut.missing[0].rfind("shard 1 of 3: 15 of its 16 point(s) missing", 0), 0u) << cut.missing[0];

  // A scenario that changed since the shards ran.
  EXPECT_THROW(merge_envelope_jsonl(files,
                                    [&](const std::string&) {
                                      return std::pair{s.toml + "\n#", s.file};
                                    }),
               InputError);
}
