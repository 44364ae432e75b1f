// Dispatch `locksim bench NAME ...` to the named benchmark.
#include <fmt/format.h>

#include <string_view>

#include "bench/bench.hpp"

namespace locksim {

int run_bench(int argc, char** argv) {
  if (argc < 2) return run_kernel_bench(argc, argv);  // the only benchmark so far
  const std::string_view name = argv[1];
  if (name == "kernel") return run_kernel_bench(argc - 1, argv + 1);  // argv[0] becomes "kernel"
  if (name == "churn") return run_churn_bench(argc - 1, argv + 1);
  if (name == "scale") return run_scale_bench(argc - 1, argv + 1);
  if (name == "--help" || name == "-h") {
    fmt::print("usage: bench [kernel|churn|scale [OPTIONS...]]   (NAME --help for its options)\n");
    return 0;
  }
  fmt::print(stderr, "bench: unknown benchmark '{}' (available: kernel, churn, scale)\n", name);
  return 2;
}

}  // namespace locksim
