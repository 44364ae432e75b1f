// The shipped `locksim` binary: the library's command line (include/locksim/cli.hpp) plus the benchmarks.
#include "locksim/cli.hpp"

#if defined(LOCKSIM_HAVE_BENCH)
#include "bench/bench.hpp"
#endif
#if defined(LOCKSIM_HAVE_REALITY)
#include "reality/command.hpp"
#endif

int main(int argc, char** argv) {
  locksim::CliHooks hooks;
#if defined(LOCKSIM_HAVE_BENCH)
  hooks.bench = [](int n, char** args) { return locksim::run_bench(n, args); };
#endif
#if defined(LOCKSIM_HAVE_REALITY)
  hooks.reality = [](int n, char** args) { return locksim::reality::reality_main(n, args); };
#endif
  return locksim::cli_main(argc, argv, hooks);
}
