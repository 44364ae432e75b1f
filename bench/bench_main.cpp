// locksim-bench: every benchmark as a standalone program (`locksim-bench churn --clients 30`), the same as
// `locksim bench ...` without the rest of the command line tool.
#include "bench/bench.hpp"

int main(int argc, char** argv) {
  return locksim::run_bench(argc, argv);
}
