// `locksim envelope` on the command line: bad input exits 2 naming the field, the files are byte-identical
// whatever --jobs, a printed command replays its run, and shards merge (or are reported missing).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "locksim/cli.hpp"
#include "locksim/scenarios/command_name.hpp"

namespace fs = std::filesystem;

namespace {

struct Ran {
  int code;
  std::string out, err;
};

Ran cli(std::vector<std::string> args) {
  args.insert(args.begin(), "locksim");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = locksim::cli_main(static_cast<int>(argv.size()), argv.data());
  std::fflush(stdout);
  std::fflush(stderr);
  Ran r{code, ::testing::internal::GetCapturedStdout(), ::testing::internal::GetCapturedStderr()};
  return r;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path fresh(const std::string& name) {
  const fs::path d = fs::path(::testing::TempDir()) / ("locksim-envelope-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

const std::vector<std::string> kBase = {"envelope", "kleppmann-gc-pause", "-p", "redis,lease+fence",
                                        "--no-progress"};

std::vector<std::string> with(std::vector<std::string> more) {
  std::vector<std::string> a = kBase;
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

TEST(EnvelopeCli, BadInputExits2NamingTheField) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--vary", "lock.tll=1s..60s"},
       "--vary lock.tll: unknown field 'lock.tll' (did you mean 'lock.ttl'?)"},
      {{"--vary", "lock.ttl=1..60"}, "--vary lock.ttl: lock.ttl is a duration: give the range with units"},
      {{"--vary", "lock.ttl=60s..1s"}, "--vary lock.ttl: LO > HI"},
      {{"--vary", "resource.mode=1..2"}, "--vary resource.mode: resource.mode is not a numeric field"},
      {{"--vary", "fault[1].duration=1s..2s"}, "--vary fault[1].duration: index 1 is past the end"},
      {{"--vary", "fault[0].duration=0s..9s"},
       "--vary fault[0].duration: at fault[0].duration = 0s the scenario does not load"},
      {{"--vary", "lock.ttl=1s..2s", "--steps", "1000"}, "--steps: expected a whole number from 2 to 200"},
      {{"--vary", "lock.ttl=1ns..3ns", "--steps", "50"},
       "--steps: 50 steps over 1ns..3ns are closer than the field"},
      {{"--vary", "lock.ttl=1s..2s", "--vary", "fault[0].duration=1s..2s", "--vary",
        "protocol.drift_factor=0..1"},
       "--vary: give one or two --vary FIELD=LO..HI"},
      {{"--vary", "lock.ttl=1s..2s", "--set", "limits.max_time=200"},
       "--set limits.max_time: limits.max_time is a duration"},
      {{"--vary", "lock.ttl=1s..2s", "--shard", "0/2"},
       "--shard: a shard writes its grid points with --jsonl"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> a = with(c.args);
    const Ran r = cli(a);
    EXPECT_EQ(r.code, 2) << c.says << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << "expected: " << c.says << "\ngot: " << r.err;
  }
}

TEST(EnvelopeCli, SeveralResourcesAreVariedByTheirIndex) {
  const std::string multi = "scheduler-leader-checkpoint-and-email-gc-pause";
  Ran r = cli({"envelope", multi, "-p", "lease+fence", "--vary", "resource.idempotency_retention=1s..2s",
               "--no-progress"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("'resource' is an array of [[resource]] tables: say which, e.g. resource[0]"),
            std::string::npos)
      << r.err;
  r = cli({"envelope", multi, "-p", "lease+fence", "--vary", "resource[2].idempotency_retention=1s..2s",
           "--no-progress"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("the scenario has 2 [[resource]] table(s)"), std::string::npos) << r.err;
  // The mail API cannot check a token: whatever it remembers of keys it is not sent, the report goes out
  // twice.
  r = cli({"envelope", multi, "-p", "lease+fence", "--vary", "resource[1].idempotency_retention=1s..2s",
           "--steps", "2", "--seeds", "1", "--no-progress"});
  EXPECT_EQ(r.code, 1) << r.err;  // unsafe somewhere
  EXPECT_NE(r.out.find("lease+fence: unsafe on the whole grid"), std::string::npos) << r.out;
  // One [resource] table is resource[0] too; there is no resource[1].
  r = cli({"envelope", "payment-api-gc-pause-idempotency-keys", "-p", "lease+fence", "--vary",
           "resource[1].idempotency_retention=1s..2s", "--no-progress"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("the scenario has one [resource] table (resource or resource[0])"), std::string::npos)
      << r.err;
  r = cli({"envelope", "kleppmann-gc-pause", "-p", "lease+fence", "--vary", "resource[0].key=1..2",
           "--no-progress"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("the scenario has no [resource] table: vary resource.FIELD"), std::string::npos)
      << r.err;
}

TEST(EnvelopeCli, FilesAreTheSameWhateverJobsAndACommandReplaysItsRun) {
  const fs::path d = fresh("jobs");
  std::vector<std::string> outs[2];
  for (int k = 0; k < 2; ++k) {
    const fs::path o = d / ("j" + std::to_string(k));
    fs::create_directories(o);
    const Ran r = cli(with({"--vary", "lock.ttl=2s..30s", "--vary", "fault[0].duration=2s..30s", "--steps",
                            "5", "--seeds", "2", "--jobs", k == 0 ? "1" : "2", "-o", (o / "e.html").string(),
                            "--csv", (o / "e.csv").string(), "--json", (o / "e.json").string(),
                            "--points-dir", (d / "pts").string()}));
    EXPECT_EQ(r.code, 1) << r.err;  // redis is unsafe somewhere
    EXPECT_NE(r.out.find("lease+fence: safe on the whole grid"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("redis: unsafe when fault[0].duration > lock.ttl"), std::string::npos) << r.out;
    for (const char* f : {"e.html", "e.csv", "e.json"}) outs[k].push_back(slurp(o / f));
  }
  for (std::size_t i = 0; i < outs[0].size(); ++i) {
    EXPECT_FALSE(outs[0][i].empty());
    EXPECT_EQ(outs[0][i], outs[1][i]) << "file " << i << " differs between --jobs 1 and --jobs 2";
  }
  // The first command of the CSV: `locksim run pts/<point>.toml -p redis --seed S` is unsafe (exit 1).
  const std::string csv = outs[0][1];
  const auto at = csv.find(locksim::command_name() + " run ");
  ASSERT_NE(at, std::string::npos) << csv;
  std::istringstream cmd(csv.substr(at, csv.find('\n', at) - at));
  std::vector<std::string> words;
  for (std::string w; cmd >> w;) words.push_back(w);
  ASSERT_EQ(words.size(), 7u) << csv.substr(at, 200);
  EXPECT_EQ(words[3], "-p");
  EXPECT_TRUE(fs::exists(words[2])) << words[2];
  const Ran again = cli({words.begin() + 1, words.end()});
  EXPECT_EQ(again.code, 1) << again.out << again.err;
}

TEST(EnvelopeCli, ShardsMergeAndAMissingShardIsReported) {
  const fs::path d = fresh("shards");
  const std::vector<std::string> grid = {
      "--vary", "lock.ttl=2s..30s", "--vary", "fault[0].duration=2s..30s", "--steps", "4"};
  std::vector<std::string> a = with(grid);
  a.insert(a.end(), {"--json", (d / "whole.json").string(), "--points-dir", (d / "pts").string()});
  ASSERT_EQ(cli(a).code, 1);
  for (int k = 0; k < 2; ++k) {
    std::vector<std::string> s = with(grid);
    s.insert(s.end(), {"--shard-number", std::to_string(k + 1) + "/2", "--jsonl",
                       (d / "part-{shard}.jsonl").string()});
    const Ran r = cli(s);
    EXPECT_EQ(r.code, 0) << r.err;
  }
  const Ran m =
      cli({"envelope", "--merge", (d / "part-0.jsonl").string(), (d / "part-1.jsonl").string(), "--json",
           (d / "merged.json").string(), "--points-dir", (d / "pts").string(), "--no-progress"});
  EXPECT_EQ(m.code, 1) << m.err;  // redis is unsafe somewhere
  EXPECT_EQ(slurp(d / "merged.json"), slurp(d / "whole.json"));
  const Ran half = cli({"envelope", "--merge", (d / "part-1.jsonl").string(), "--no-progress"});
  EXPECT_EQ(half.code, 1);
  EXPECT_NE(half.out.find("INCOMPLETE"), std::string::npos) << half.out;
  EXPECT_NE(half.out.find("shard 0 of 2 missing"), std::string::npos) << half.out;
  EXPECT_NE(half.out.find("--shard 0/2, JOB_COMPLETION_INDEX=0"), std::string::npos) << half.out;
  // explore's merge points at envelope --merge instead of reading the lines as runs.
  const Ran wrong = cli({"merge", (d / "part-1.jsonl").string()});
  EXPECT_EQ(wrong.code, 2);
  EXPECT_NE(wrong.err.find("`envelope --merge` merges it"), std::string::npos) << wrong.err;
}
