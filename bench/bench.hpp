#pragma once
/// Benchmarks (not tests): performance figures of the kernel, printed one per line as `name: value`.
/// Only bench/ reads a real clock (std::chrono::steady_clock), to measure wall time.

namespace locksim {

/// Runs the kernel benchmark and prints timer_events_per_s, fiber_events_per_s, probe_timer_events_per_s,
/// probe_fiber_events_per_s, kernel_vs_probe and peak_rss_mib_10k_sleeping to stdout.
/// Arguments (argv[0] is the program or sub-command name): `--quick` for a short smoke run, `--help`.
/// Returns 0, or 2 for a usage error (message on stderr).
int run_kernel_bench(int argc, char** argv);

/// `locksim bench [NAME [OPTIONS...]]`: argv[1] names the benchmark (`kernel`; all of them when absent), the
/// rest are its options. Returns the benchmark's exit code, or 2 for an unknown name.
int run_bench(int argc, char** argv);

}  // namespace locksim
