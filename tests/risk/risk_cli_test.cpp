// `locksim risk` on the command line: bad input exits 2 naming the option or field, the report's replay
// command reproduces its unsafe run, and shards merge (or are reported missing).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "locksim/cli.hpp"

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

fs::path fresh(const std::string& name) {
  const fs::path d = fs::path(::testing::TempDir()) / ("locksim-risk-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

const std::string kRedis = std::string(LOCKSIM_SOURCE_DIR) + "/tests/risk/data/redis-pareto-pause.toml";

std::vector<std::string> with(std::vector<std::string> more) {
  std::vector<std::string> a = {"risk", kRedis, "-p", "redis", "--no-progress", "--pilot", "50"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

void expect_input_error(const std::vector<std::string>& args, const std::string& names) {
  const Ran r = cli(args);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(names), std::string::npos) << r.err;
}

TEST(RiskCli, BadInputNamesTheOptionOrField) {
  expect_input_error(with({"--hours", "0"}), "--hours");
  expect_input_error(with({"--hours", "-3"}), "--hours");
  expect_input_error(with({"--hours", "1e12"}), "--hours");
  expect_input_error(with({"--hours", "1", "--acquisitions", "100"}), "only one of --hours");
  expect_input_error(with({}), "give one of --hours");
  expect_input_error(with({"--runs", "10", "--tilt", "fault[0].duration.mean=1s"}),
                     "its tilt is fault[0].duration.alpha");
  expect_input_error(with({"--runs", "10", "--tilt", "fault[3].duration.alpha=0.5"}), "past the end");
  expect_input_error(with({"--runs", "10", "--tilt", "fault[0].duration.alpha=2"}), "lighter tail");
  expect_input_error(with({"--runs", "10", "--tilt", "lock.ttl=2s"}), "--tilt lock.ttl");
  expect_input_error(with({"--runs", "10", "--tilt", "fault[0].duration.alpha=abc"}), "--tilt");
  expect_input_error(with({"--runs", "10", "--tilt", "none", "--tilt", "auto"}), "--tilt");
  expect_input_error({"risk", kRedis, "-p", "redlok", "--runs", "10"}, "redlok");
  // A scenario whose every draw is a constant: nothing to sample, and what to add.
  expect_input_error({"risk", "kleppmann-gc-pause", "-p", "redis", "--runs", "10"},
                     "no distribution to sample");
  expect_input_error({"risk", "--merge", "--no-progress"}, "SCENARIO");
}

TEST(RiskCli, TheReplayCommandReproducesAnUnsafeWeightedRun) {
  const fs::path d = fresh("replay");
  const std::string proposal = (d / "proposal.toml").string();
  const Ran r = cli(with({"--runs", "100", "--proposal", proposal}));
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  const auto at = r.out.find("replay: locksim run " + proposal);
  ASSERT_NE(at, std::string::npos) << r.out;
  const auto seed_at = r.out.find("--seed ", at) + 7;
  const std::string seed = r.out.substr(seed_at, r.out.find_first_of(" \n", seed_at) - seed_at);
  const auto hash_at = r.out.find("trace hash ", at) + 11;
  const std::string hash = r.out.substr(hash_at, 16);
  const Ran run = cli({"run", proposal, "-p", "redis", "--seed", seed, "--no-color"});
  EXPECT_EQ(run.code, 1) << run.out;
  EXPECT_NE(run.out.find("trace hash: " + hash), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("UNSAFE"), std::string::npos);
}

TEST(RiskCli, ShardsMergeAndMissingOnesAreNamed) {
  const fs::path d = fresh("shards");
  const std::string all = (d / "all.jsonl").string();
  ASSERT_EQ(cli(with({"--runs", "120", "--jsonl", all, "--proposal", (d / "p.toml").string()})).code, 1);
  for (const char* k : {"0/3", "1/3", "2/3"})
    ASSERT_EQ(cli(with({"--runs", "120", "--shard", k, "--jsonl", (d / "s{shard}.jsonl").string()})).code, 0);
  const Ran whole = cli({"risk", "--merge", all, "--proposal", (d / "p.toml").string()});
  const Ran merged = cli({"risk", "--merge", (d / "s2.jsonl").string(), (d / "s0.jsonl").string(),
                          (d / "s1.jsonl").string(), "--proposal", (d / "p.toml").string()});
  EXPECT_EQ(merged.code, 1);
  // The same estimate, byte for byte, whatever the split and the order of the files.
  EXPECT_EQ(merged.out, whole.out);
  EXPECT_NE(merged.out.find("per acquisition:"), std::string::npos);
  const Ran partial = cli({"risk", "--merge", (d / "s0.jsonl").string(), (d / "s2.jsonl").string()});
  EXPECT_EQ(partial.code, 1);
  EXPECT_NE(partial.out.find("shard 1 of 3 is missing: run it with --shard 1/3"), std::string::npos)
      << partial.out;
  const Ran allowed = cli({"risk", "--merge", (d / "s0.jsonl").string(), "--allow-partial", "--proposal",
                           (d / "p.toml").string()});
  EXPECT_NE(allowed.out.find("of 120 planned: shards are missing"), std::string::npos) << allowed.out;
}

}  // namespace
