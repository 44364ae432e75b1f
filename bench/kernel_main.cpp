// locksim-bench-kernel: the kernel benchmark as a standalone program.
#include "bench/bench.hpp"

int main(int argc, char** argv) {
  return locksim::run_kernel_bench(argc, argv);
}
