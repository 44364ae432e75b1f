#pragma once
/// locksim's whole command line as a library call, so a user's own binary — with its own protocols
/// registered — is a locksim: `run`, `matrix`, `check`, `explore`, `replay`, `merge`, `list`, `explain`,
/// every report. Every command it prints for a person to copy names that binary (argv[0]'s file name).
///
///   #include <locksim/cli.hpp>
///   int main(int argc, char** argv) {
///     locksim::ProtocolRegistry::instance().add("my-lock", "my lease service", [] { return make_my_lock();
///     }); return locksim::cli_main(argc, argv);
///   }
///
/// Exit codes as locksim's: 0 as expected (`run`: the verdict is safe), 1 a safety violation or an
/// expectation not met, 2 a usage or input error.
#include <functional>

namespace locksim {

/// Optional pieces the shipped binary adds.
struct CliHooks {
  /// `bench`: performance figures (the shipped binary's bench/; a user's binary has none by default).
  std::function<int(int, char**)> bench;
  /// `reality`: real servers beside the simulation (the shipped binary's reality/, built with hiredis).
  std::function<int(int, char**)> reality;
};

int cli_main(int argc, char** argv, const CliHooks& hooks = {});

}  // namespace locksim
