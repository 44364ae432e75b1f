#pragma once
/// Benchmarks (not tests): performance figures of the kernel, printed one per line as `name: value`.
/// Only bench/ reads a real clock (std::chrono::steady_clock), to measure wall time.

#include <cstddef>
#include <cstdint>

namespace locksim {

/// Runs the kernel benchmark and prints timer_events_per_s, fiber_events_per_s, probe_timer_events_per_s,
/// probe_fiber_events_per_s, kernel_vs_probe and peak_rss_mib_10k_sleeping to stdout.
/// Arguments (argv[0] is the program or sub-command name): `--quick` for a short smoke run, `--help`.
/// Returns 0, or 2 for a usage error (message on stderr).
int run_kernel_bench(int argc, char** argv);

/// redlock-churn (issue 8): C clients contend for one lock on 5 Redis-like servers (SET NX PX,
/// compare-and-delete), every message taking exactly 3 ms one way; a winner writes once to a resource, then
/// releases.
struct ChurnOptions {
  std::uint32_t clients = 30;
  double sim_seconds = 10;
  std::uint64_t seed = 1;
  std::size_t stack_size = 0;     ///< fiber stack per process; 0 = the world's default
  bool huge_page_stacks = false;  ///< WorldOptions::huge_page_stacks
};

/// What one run of redlock-churn did and how long it took (wall time covers building the world and running
/// it).
struct ChurnResult {
  std::uint64_t acquisitions = 0;
  std::uint64_t messages = 0;  ///< messages delivered by the world
  std::uint64_t events = 0;
  double wall_s = 0;
  double cpu_s = 0;  ///< this process's CPU time over the same span (for a machine busy with other work)
};

/// Runs redlock-churn once in this thread.
ChurnResult run_churn(const ChurnOptions& o);

/// `bench churn [--clients C] [--sim-seconds T] [--seed S]`: prints
/// `impl=locksim clients=C sim_seconds=T acquisitions=A messages=M wall_s=W msgs_per_wall_s=R`.
int run_churn_bench(int argc, char** argv);

/// `bench scale [--clients C1,C2,...] [--sim-seconds T | --messages N] [--stack-kib K] [--huge-page-stacks]`:
/// redlock-churn at growing C, each size in a forked child (its own peak RSS); prints time per message and
/// peak RSS per size.
int run_scale_bench(int argc, char** argv);

/// `locksim bench [NAME [OPTIONS...]]`: argv[1] names the benchmark (`kernel`; all of them when absent), the
/// rest are its options. Returns the benchmark's exit code, or 2 for an unknown name.
int run_bench(int argc, char** argv);

}  // namespace locksim
