#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "locksim/scenarios/loader.hpp"
#include "locksim/scenarios/loader/schema.hpp"
#include "locksim/scenarios/services.hpp"

namespace locksim {
namespace {

namespace fs = std::filesystem;

const fs::path kRepo = LOCKSIM_SOURCE_DIR;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The annotated example of docs/scenario-format.md: the documentation is tested, so it cannot rot.
std::string doc_example() {
  const std::string doc = read_text(kRepo / "docs" / "scenario-format.md");
  const auto section = doc.find("## A complete annotated example");
  const auto begin = doc.find("```toml\n", section);
  const auto end = doc.find("\n```", begin + 8);
  if (section == std::string::npos || begin == std::string::npos || end == std::string::npos) return {};
  return doc.substr(begin + 8, end - begin - 8 + 1);
}

/// A minimal valid scenario for tests to extend.
const char* kMinimal = R"(
[[client]]
name = "client1"
)";

InputError load_error(const std::string& text, const std::string& name = "t.toml") {
  try {
    load_scenario_text(text, name);
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "expected an InputError for:\n" << text;
  return InputError(name, 0, "", "no error");
}

// ---------------------------------------------------------------------------------------------- durations

TEST(Duration, ParsesEveryUnitExactly) {
  EXPECT_EQ(parse_duration("15s"), Duration{15'000'000'000});
  EXPECT_EQ(parse_duration("250ms"), Duration{250'000'000});
  EXPECT_EQ(parse_duration("10us"), Duration{10'000});
  EXPECT_EQ(parse_duration("10\xc2\xb5s"), Duration{10'000});
  EXPECT_EQ(parse_duration("5ns"), Duration{5});
  EXPECT_EQ(parse_duration("1m"), Duration{60'000'000'000});
  EXPECT_EQ(parse_duration("2h"), Duration{7'200'000'000'000});
  EXPECT_EQ(parse_duration("1d"), Duration{86'400'000'000'000});
  EXPECT_EQ(parse_duration("1.5s"), Duration{1'500'000'000});
  EXPECT_EQ(parse_duration("0.1s"), Duration{100'000'000});  // no binary floating point anywhere
  EXPECT_EQ(parse_duration("0.000000001s"), Duration{1});
  EXPECT_EQ(parse_duration(".5ms"), Duration{500'000});
  EXPECT_EQ(parse_duration("1m30s"), Duration{90'000'000'000});
  EXPECT_EQ(parse_duration("1.250000000000s"), Duration{1'250'000'000});  // trailing zeros are harmless
  EXPECT_EQ(parse_duration("0"), Duration{0});
  EXPECT_EQ(parse_duration("365d"), kMaxDuration);
  EXPECT_EQ(parse_duration("-2s", true), Duration{-2'000'000'000});
  EXPECT_EQ(parse_duration("-0s"), Duration{0});
}

TEST(Duration, RejectsBadInputWithAReason) {
  struct Case {
    const char* text;
    const char* why;
  };
  const Case cases[] = {{"", "empty"},
                        {"15", "no unit"},
                        {"15 s", "unknown unit"},
                        {"15sec", "unknown unit"},
                        {"s", "not a duration"},
                        {"1.s", "not a duration"},
                        {"0.5ns", "whole number of nanoseconds"},
                        {"1.0000000001s", "whole number of nanoseconds"},
                        {"366d", "longer than a year"},
                        {"99999999999999999999s", "longer than a year"},
                        {"-2s", "must not be negative"},
                        {"--2s", "not a duration"},
                        {"2s-", "unknown unit"},
                        {"1e3s", "unknown unit"}};
  for (const auto& c : cases) {
    std::string why;
    EXPECT_FALSE(parse_duration(c.text, false, &why)) << c.text;
    EXPECT_NE(why.find(c.why), std::string::npos) << c.text << " -> " << why;
  }
}

RC_GTEST_PROP(DurationProperty, IntegerNanosecondsRoundTrip, ()) {
  const auto ns = *rc::gen::inRange<std::int64_t>(0, kMaxDuration.count() + 1);
  RC_ASSERT(parse_duration(std::to_string(ns) + "ns") == Duration{ns});
  RC_ASSERT(parse_duration("-" + std::to_string(ns) + "ns", true) == Duration{-ns});
}

RC_GTEST_PROP(DurationProperty, DecimalSecondsAreExact, ()) {
  const auto secs = *rc::gen::inRange<std::int64_t>(0, 31'536'000);
  const auto frac = *rc::gen::inRange<std::int64_t>(0, 1'000'000'000);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lld.%09llds", static_cast<long long>(secs), static_cast<long long>(frac));
  RC_ASSERT(parse_duration(buf) == Duration{secs * 1'000'000'000 + frac});
  // The same value in milliseconds with six decimals.
  std::snprintf(buf, sizeof buf, "%lld%03lld.%06lldms", static_cast<long long>(secs),
                static_cast<long long>(frac / 1'000'000), static_cast<long long>(frac % 1'000'000));
  RC_ASSERT(parse_duration(buf) == Duration{secs * 1'000'000'000 + frac});
}

RC_GTEST_PROP(DurationProperty, NeverThrowsOnGarbage, ()) {
  const auto text =
      *rc::gen::container<std::string>(rc::gen::elementOf(std::string("0123456789.-+smuhdn x")));
  std::string why;
  const auto d = parse_duration(text, true, &why);
  if (d) {
    RC_ASSERT(d->count() <= kMaxDuration.count());
    RC_ASSERT(d->count() >= -kMaxDuration.count());
  } else {
    RC_ASSERT(!why.empty());
  }
}

// ------------------------------------------------------------------------------------------ names, typos

TEST(Names, NearestNameFindsTyposOnly) {
  const std::vector<std::string> keys = {"ttl", "key", "fsync", "client1", "redlock", "lease+fence"};
  EXPECT_EQ(nearest_name("tll", keys), "ttl");
  EXPECT_EQ(nearest_name("fsnyc", keys), "fsync");  // a transposition is one edit
  EXPECT_EQ(nearest_name("clinet1", keys), "client1");
  EXPECT_EQ(nearest_name("Redlock", keys), "redlock");
  EXPECT_EQ(nearest_name("lease_fence", keys), "lease+fence");
  EXPECT_EQ(nearest_name("completely-different", keys), "");
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
}

TEST(Names, ServiceProcessNamesAreTheBuiltInsDeclarations) {
  Scenario sc;
  const DeclaredServices d = declared_services(sc);
  for (const char* n : {"redis1", "redis5", "raft1", "raft3"}) EXPECT_TRUE(d.has(n)) << n;
  for (const char* n : {"redis", "redis0", "redis6", "raft4", "replica1", "client1", "store", "raft1x"})
    EXPECT_FALSE(d.has(n)) << n;
  EXPECT_TRUE(d.in_family("redis12"));
  EXPECT_FALSE(d.in_family("redis"));
  EXPECT_FALSE(d.in_family("redis0"));
  EXPECT_EQ(d.summary(), "consul1..consul3, db1, raft1..raft3, redis1..redis5, zk1..zk3");
  for (const char* n : {"consul1", "consul3"}) EXPECT_TRUE(d.has(n)) << n;
  sc.config.replica = true;
  sc.config.nodes = 7;
  const DeclaredServices r = declared_services(sc);
  for (const char* n : {"replica1", "sentinel1", "redis7", "raft7"}) EXPECT_TRUE(r.has(n)) << n;
  EXPECT_EQ(r.protocols_of("replica1"), (std::vector<std::string>{"redis", "redis+incr"}));
}

TEST(Names, FixedProtocolNamesAreAlwaysValid) {
  const auto names = valid_protocol_names();
  for (auto n : kKnownProtocolNames) EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

// ------------------------------------------------------------------------------------------ valid files

TEST(Loader, MinimalFileGetsDefaults) {
  const Scenario s = load_scenario_text(kMinimal, "dir/minimal.toml");
  EXPECT_EQ(s.name, "minimal");
  EXPECT_EQ(s.file, "dir/minimal.toml");
  EXPECT_EQ(s.config.ttl, 10s);
  EXPECT_EQ(s.resource_name, "store");
  EXPECT_FALSE(s.resource_mode.has_value());
  ASSERT_EQ(s.clients.size(), 1u);
  EXPECT_EQ(s.clients[0].name, "client1");
  EXPECT_EQ(s.max_time, 60s);
  EXPECT_TRUE(s.protocols.empty());
  EXPECT_TRUE(s.expect.empty());
}

TEST(Loader, AnnotatedExampleOfTheDocsLoadsCompletely) {
  const std::string text = doc_example();
  ASSERT_FALSE(text.empty()) << "docs/scenario-format.md lost its example";
  const Scenario s = load_scenario_text(text, "docs/scenario-format.md");
  EXPECT_EQ(s.name, "annotated-example");
  EXPECT_EQ(s.seed, 42u);
  EXPECT_NE(s.teaches.find("fencing token"), std::string::npos);
  EXPECT_EQ(s.lock_key, "jobs");
  EXPECT_EQ(s.resource_key, "checkpoint");
  EXPECT_FALSE(s.resource_mode.has_value());  // "auto"

  EXPECT_EQ(s.config.ttl, 10s);
  EXPECT_EQ(s.config.nodes, 5u);
  EXPECT_TRUE(s.config.aof);
  EXPECT_EQ(s.config.fsync, FsyncPolicy::periodic);
  EXPECT_EQ(s.config.drift_factor_ppm, 10'000);
  EXPECT_EQ(s.config.extra.at("my_param"), "42");
  EXPECT_FALSE(s.config.elapsed_recheck);

  // Per-protocol overrides are complete configs: [protocol] with the override on top.
  ASSERT_EQ(s.per_protocol.size(), 2u);
  const ProtocolConfig& rl = s.config_for("redlock");
  EXPECT_TRUE(rl.elapsed_recheck);
  EXPECT_EQ(rl.nodes, 5u);
  EXPECT_EQ(rl.fsync, FsyncPolicy::periodic);
  EXPECT_EQ(rl.ttl, 10s);
  EXPECT_EQ(s.config_for("lease+fence").ttl, 8s);
  EXPECT_EQ(s.config_for("lease+fence").extra.at("my_param"), "42");
  EXPECT_EQ(s.config_for("redis").ttl, 10s);

  EXPECT_EQ(s.network.defaults.delay.kind, DelayDist::Kind::uniform);
  EXPECT_EQ(s.network.defaults.delay.min, 1ms);
  EXPECT_EQ(s.network.defaults.delay.max, 3ms);
  EXPECT_EQ(s.network.defaults.loss_ppm, 1'000u);
  EXPECT_EQ(s.network.defaults.reorder_ppm, 10'000u);
  EXPECT_EQ(s.network.defaults.reorder_extra, 5ms);
  ASSERT_EQ(s.links.size(), 2u);
  EXPECT_EQ(s.links[0].from, "client1");
  EXPECT_EQ(s.links[0].options.delay.kind, DelayDist::Kind::long_tail);
  EXPECT_EQ(s.links[0].options.delay.alpha, 1.5);
  EXPECT_EQ(s.links[0].options.loss_ppm, 1'000u);  // inherited from [network]
  EXPECT_EQ(s.links[1].from, "*");
  EXPECT_EQ(s.links[1].options.loss_ppm, 50'000u);
  EXPECT_EQ(s.links[1].options.delay.kind, DelayDist::Kind::uniform);

  ASSERT_EQ(s.clocks.size(), 1u);
  EXPECT_EQ(s.clocks[0].clock.offset, -250ms);
  EXPECT_EQ(s.clocks[0].clock.drift_ppm, 100);

  ASSERT_EQ(s.clients.size(), 4u);
  EXPECT_EQ(s.clients[0].work_min, 100ms);
  EXPECT_EQ(s.clients[0].work_max, 200ms);
  EXPECT_EQ(s.clients[1].name, "worker1");
  EXPECT_EQ(s.clients[3].name, "worker3");
  EXPECT_EQ(s.clients[1].start, 1s);
  EXPECT_EQ(s.clients[3].start, 3s);
  EXPECT_EQ(s.clients[3].acquisitions, 2u);
  EXPECT_EQ(s.clients[3].work_min, 50ms);
  EXPECT_EQ(s.clients[3].work_max, 50ms);
  EXPECT_EQ(s.clients[3].think_max, 10ms);

  ASSERT_EQ(s.faults.size(), 8u);
  const FaultSpec& pause = s.faults[0];
  EXPECT_EQ(pause.fault.kind, Fault::Kind::pause);
  EXPECT_EQ(pause.target, "client1");
  EXPECT_EQ(pause.fault.duration, 15s);
  EXPECT_EQ(pause.fault.when.kind, Trigger::Kind::note);
  EXPECT_EQ(pause.fault.when.label, "lease-check");
  EXPECT_EQ(pause.fault.when.nth, 1u);
  EXPECT_EQ(pause.trigger_proc, "client1");
  EXPECT_GT(pause.line, 1u);
  EXPECT_EQ(s.faults[1].fault.kind, Fault::Kind::crash);
  EXPECT_TRUE(s.faults[1].fault.power_loss);
  EXPECT_EQ(s.faults[1].fault.when.kind, Trigger::Kind::at);
  EXPECT_EQ(s.faults[1].fault.when.at, 2s);
  EXPECT_EQ(s.faults[3].fault.duration, -2s);
  EXPECT_EQ(s.faults[4].fault.ppm, -200);
  EXPECT_EQ(s.faults[5].side_a, std::vector<std::string>{"client1"});
  EXPECT_EQ(s.faults[5].side_b, (std::vector<std::string>{"redis4", "redis5"}));
  EXPECT_EQ(s.faults[6].fault.kind, Fault::Kind::heal);
  const FaultSpec& spike = s.faults[7];
  EXPECT_EQ(spike.fault.kind, Fault::Kind::delay_spike);
  EXPECT_EQ(spike.fault.extra, 12s);
  EXPECT_EQ(spike.fault.count, 1u);
  EXPECT_EQ(spike.fault.when.kind, Trigger::Kind::send);
  EXPECT_EQ(spike.fault.when.label, "write");
  EXPECT_EQ(spike.peer, "store");

  EXPECT_EQ(s.protocols, (std::vector<std::string>{"redis", "redlock", "lease", "lease+fence"}));
  EXPECT_EQ(s.expect.at("redis").verdict, Verdict::unsafe);
  EXPECT_EQ(s.expect.at("lease+fence").verdict, Verdict::safe);
}

TEST(Loader, ProtocolsDefaultToExpectKeysInFileOrder) {
  const Scenario s = load_scenario_text(std::string(kMinimal) + R"(
[expect]
"lease+fence" = "safe"
redlock = "unsafe"
lease = "unsafe"
redis = "unsafe"
)",
                                        "order.toml");
  EXPECT_EQ(s.protocols, (std::vector<std::string>{"lease+fence", "redlock", "lease", "redis"}));
}

TEST(Loader, ProbabilitiesAndDriftFactorAreExactPpm) {
  const Scenario s = load_scenario_text(std::string(kMinimal) + R"(
[protocol]
drift_factor = 0.000001
[network]
loss = 0.1
duplicate = 1
reorder = 0.333333
reorder_extra = "1ms"
delay = "2ms"
)",
                                        "ppm.toml");
  EXPECT_EQ(s.config.drift_factor_ppm, 1);
  EXPECT_EQ(s.network.defaults.loss_ppm, 100'000u);
  EXPECT_EQ(s.network.defaults.duplicate_ppm, 1'000'000u);
  EXPECT_EQ(s.network.defaults.reorder_ppm, 333'333u);
  EXPECT_EQ(s.network.defaults.delay.kind, DelayDist::Kind::constant);
  EXPECT_EQ(s.network.defaults.delay.min, 2ms);
  EXPECT_EQ(s.network.defaults.delay.max, 2ms);
}

TEST(Loader, TriggersAndAnyProcess) {
  const Scenario s = load_scenario_text(std::string(kMinimal) + R"(
[[fault]]
kind = "pause"
target = "client1"
duration = "1s"
after = { process = "*", receive = "grant", nth = 3, delay = "250ms" }
[[fault]]
kind = "delay_spike"
extra = "1s"
at = "1s"
)",
                                        "trig.toml");
  ASSERT_EQ(s.faults.size(), 2u);
  EXPECT_EQ(s.faults[0].trigger_proc, "");  // "*": any process
  EXPECT_EQ(s.faults[0].fault.when.kind, Trigger::Kind::receive);
  EXPECT_EQ(s.faults[0].fault.when.nth, 3u);
  EXPECT_EQ(s.faults[0].fault.when.delay, 250ms);
  EXPECT_EQ(s.faults[1].target, "");
  EXPECT_EQ(s.faults[1].peer, "");
}

TEST(Loader, ServiceNamesFollowNodeCounts) {
  // Default: redis1..redis5 (redlock) and raft1..raft3.
  EXPECT_NO_THROW(load_scenario_text(std::string(kMinimal) + "[[clock]]\nnode = \"redis5\"\n", "a.toml"));
  EXPECT_NO_THROW(load_scenario_text(std::string(kMinimal) + "[[clock]]\nnode = \"raft3\"\n", "a.toml"));
  EXPECT_EQ(load_error(std::string(kMinimal) + "[[clock]]\nnode = \"raft4\"\n").field, "clock[0].node");
  // Per-protocol node counts widen the set for their family only.
  const std::string seven =
      std::string(kMinimal) + "[protocols.redlock]\nnodes = 7\n[[clock]]\nnode = \"redis7\"\n";
  EXPECT_NO_THROW(load_scenario_text(seven, "a.toml"));
  EXPECT_EQ(
      load_error(std::string(kMinimal) + "[protocols.redlock]\nnodes = 7\n[[clock]]\nnode = \"raft7\"\n")
          .line,
      7u);
  // replica1 exists only with a replica.
  EXPECT_NE(
      load_error(std::string(kMinimal) + "[[clock]]\nnode = \"replica1\"\n").message.find("unknown process"),
      std::string::npos);
  EXPECT_NO_THROW(load_scenario_text(
      std::string(kMinimal) + "[protocol]\nreplica = true\n[[clock]]\nnode = \"replica1\"\n", "a"));
}

TEST(Loader, MessagesReadFileLineFieldWhat) {
  const InputError e = load_error("[lock]\nttl = \"10s\"\ntll = \"5s\"\n", "gc.toml");
  EXPECT_EQ(e.file, "gc.toml");
  EXPECT_EQ(e.line, 3u);
  EXPECT_EQ(e.field, "lock.tll");
  EXPECT_STREQ(e.what(), "gc.toml:3: lock.tll: unknown key 'tll' (did you mean 'ttl'?)");
}

TEST(Loader, MissingFileAndDirectoryAreInputErrors) {
  EXPECT_THROW(load_scenario_file((kRepo / "no-such-file.toml").string()), InputError);
  EXPECT_THROW(load_scenario_file((kRepo / "tests").string()), InputError);
}

// ------------------------------------------------------------------------------------------ bad files

struct BadFile {
  fs::path path;
  std::string expect;
  std::uint32_t line = 0;
};

std::vector<BadFile> bad_files() {
  std::vector<BadFile> out;
  for (const auto& entry : fs::directory_iterator(kRepo / "tests" / "scenarios" / "bad")) {
    if (entry.path().extension() != ".toml") continue;
    BadFile b{entry.path(), {}, 0};
    std::istringstream in(read_text(entry.path()));
    for (std::string l; std::getline(in, l);) {
      if (l.rfind("# expect: ", 0) == 0) b.expect = l.substr(10);
      if (l.rfind("# line: ", 0) == 0) b.line = static_cast<std::uint32_t>(std::stoul(l.substr(8)));
    }
    out.push_back(b);
  }
  std::sort(out.begin(), out.end(), [](const BadFile& a, const BadFile& b) { return a.path < b.path; });
  return out;
}

TEST(BadFiles, AtLeastTwentyFiveEachWithExpectations) {
  const auto files = bad_files();
  EXPECT_GE(files.size(), 25u);
  for (const auto& b : files) {
    EXPECT_FALSE(b.expect.empty()) << b.path << " has no '# expect: ' line";
    EXPECT_NE(b.line, 0u) << b.path << " has no '# line: ' line";
  }
}

TEST(BadFiles, EachNamesFileLineFieldAndWhatIsWrong) {
  for (const auto& b : bad_files()) {
    SCOPED_TRACE(b.path.filename().string());
    try {
      load_scenario_file(b.path.string());
      ADD_FAILURE() << "loaded without error";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(b.expect), std::string::npos) << what;
      EXPECT_EQ(e.line, b.line) << what;
      EXPECT_EQ(e.file, b.path.string());
      EXPECT_FALSE(e.field.empty()) << what;
      // file:line: field: what
      EXPECT_EQ(what.rfind(fmt::format("{}:{}: {}: ", e.file, e.line, e.field), 0), 0u) << what;
    }
  }
}

// Any edit of a valid file either loads or is an InputError with a line: never a crash, never a hang.
RC_GTEST_PROP(BadFilesProperty, MutatedFilesNeverCrash, ()) {
  static const std::string base = doc_example();
  RC_PRE(!base.empty());
  std::string text = base;
  const int edits = *rc::gen::inRange(1, 4);
  for (int i = 0; i < edits; ++i) {
    const auto pos = *rc::gen::inRange<std::size_t>(0, text.size());
    switch (*rc::gen::inRange(0, 4)) {
      case 0:
        text.erase(pos, *rc::gen::inRange<std::size_t>(1, 40));
        break;
      case 1:
        text.insert(pos, 1, *rc::gen::elementOf(std::string("=[]{}\"',.#-0123456789abcxyz \n\t\\")));
        break;
      case 2:
        text[pos] = *rc::gen::elementOf(std::string("=[]{}\"'.-9az \n"));
        break;
      default: {
        // Swap a value for another value: wrong types and out-of-range numbers.
        const auto eq = text.find("= ", pos);
        if (eq == std::string::npos) break;
        const auto nl = text.find('\n', eq);
        const std::string value = *rc::gen::elementOf(
            std::vector<std::string>{"-1", "0", "1e300", "true", "\"\"", "\"-5s\"", "\"400d\"", "[]", "{}",
                                     "99999999999", "\"x\"", "nan"});
        text.replace(eq + 2, nl == std::string::npos ? std::string::npos : nl - eq - 2, value);
      }
    }
  }
  try {
    load_scenario_text(text, "mutant.toml");
  } catch (const InputError& e) {
    RC_ASSERT(e.line >= 1u);
    RC_ASSERT(std::string(e.what()).rfind("mutant.toml:", 0) == 0);
  }
}

// ------------------------------------------------------------------------------------------ the catalog

TEST(Catalog, EveryFileLoadsAndIsComplete) {
  std::size_t n = 0;
  for (const auto& entry : fs::directory_iterator(kRepo / "scenarios" / "catalog")) {
    if (entry.path().extension() != ".toml") continue;
    ++n;
    SCOPED_TRACE(entry.path().filename().string());
    Scenario s;
    try {
      s = load_scenario_file(entry.path().string());
    } catch (const InputError& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    EXPECT_EQ(s.name, entry.path().stem().string()) << "name must match the file name";
    EXPECT_FALSE(s.title.empty());
    EXPECT_FALSE(s.source.empty());
    EXPECT_GT(s.teaches.size(), 80u) << "teaches is one paragraph";
    EXPECT_FALSE(s.expect.empty());
    EXPECT_FALSE(s.protocols.empty());
    for (const auto& [p, v] : s.expect) {
      EXPECT_NE(std::find(s.protocols.begin(), s.protocols.end(), p), s.protocols.end()) << p;
    }
  }
  EXPECT_GE(n, 13u);
}

TEST(Catalog, KleppmannGcPauseTellsTheStory) {
  const Scenario s =
      load_scenario_file((kRepo / "scenarios" / "catalog" / "kleppmann-gc-pause.toml").string());
  EXPECT_EQ(s.config.ttl, 10s);
  ASSERT_EQ(s.clients.size(), 2u);
  EXPECT_EQ(s.clients[1].start, 1s);
  ASSERT_EQ(s.faults.size(), 1u);
  EXPECT_EQ(s.faults[0].fault.kind, Fault::Kind::pause);
  EXPECT_EQ(s.faults[0].fault.duration, 15s);
  EXPECT_EQ(s.faults[0].fault.when.label, note::lease_check);
  EXPECT_EQ(s.expect.at("redis").verdict, Verdict::unsafe);
  EXPECT_EQ(s.expect.at("redlock").verdict, Verdict::unsafe);
  EXPECT_EQ(s.expect.at("lease").verdict, Verdict::unsafe);
  EXPECT_EQ(s.expect.at("lease+fence").verdict, Verdict::safe);
}

}  // namespace
}  // namespace locksim

// ------------------------------------------------------------------------------------------ programs

namespace locksim {

TEST(LoaderProgram, StepsLoadAsWritten) {
  const Scenario s = load_scenario_text(R"(
[[client]]
name = "client1"
renew = true
on_renew_failure = "stop"
renew_every = "3s"
steps = ["acquire", { work = { kind = "uniform", min = "1s", max = "2s" } },
         { repeat = 3, steps = ["increment", { sleep = "100ms" }] },
         { loop = "until 50s", steps = [{ step = "write", note = "w" }] }, "release"]
[[fault]]
kind = "pause"
target = "client1"
duration = "1s"
after = { process = "client1", note = "w", nth = 4 }
)",
                                        "p.toml");
  const ClientSpec& c = s.clients.at(0);
  ASSERT_EQ(c.steps.size(), 5u);
  EXPECT_EQ(c.steps[0].kind, ClientStep::Kind::acquire);
  EXPECT_EQ(c.steps[1].kind, ClientStep::Kind::work);
  EXPECT_EQ(c.steps[1].duration.kind, Dist::Kind::uniform);
  EXPECT_EQ(c.steps[1].duration.max, 2s);
  EXPECT_EQ(c.steps[2].count, 3u);
  ASSERT_EQ(c.steps[2].steps.size(), 2u);
  EXPECT_EQ(c.steps[2].steps[1].duration.min, 100ms);
  EXPECT_EQ(c.steps[3].kind, ClientStep::Kind::loop);
  EXPECT_EQ(c.steps[3].until, 50s);
  EXPECT_EQ(c.steps[3].steps[0].note, "w");  // unbounded in a loop: nth = 4 may fire
  EXPECT_TRUE(c.renewal.on);
  EXPECT_EQ(c.renewal.stop_on_failure, std::optional<bool>(true));
  EXPECT_EQ(c.renewal.every, std::optional<Duration>(3s));
  EXPECT_FALSE(c.renewal.before_expiry.has_value());
  EXPECT_FALSE(s.clients.empty());
}

TEST(LoaderProgram, LoopForeverNeedsNoGiveUpAt) {
  const Scenario s = load_scenario_text(R"(
[[client]]
name = "client1"
steps = [{ loop = "forever", steps = ["acquire", "write", "release"] }]
)",
                                        "p.toml");
  EXPECT_EQ(s.clients.at(0).steps.at(0).until, kTimeMax);
}

TEST(LoaderProgram, ExplainKnowsTheStepTable) {
  EXPECT_NE(explain_schema("client.steps").find("loop"), std::string::npos);
  EXPECT_NE(explain_schema("client.renew").find("thread"), std::string::npos);
}

}  // namespace locksim
