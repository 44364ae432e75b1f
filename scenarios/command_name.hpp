#pragma once
/// The name of the program a person types to run locksim: "locksim" for the shipped binary, the user's own
/// binary's name when it runs locksim's commands through the library entry point. Every command printed for a
/// person to copy (replay lines, "next:" hints, JUnit details) names it, so the line works as printed.
#include <string>
#include <string_view>

namespace locksim {

/// "locksim" unless set_command_name was called.
const std::string& command_name();
/// Sets the name printed commands start with (e.g. the basename of argv[0]); an empty name restores
/// "locksim".
void set_command_name(std::string_view name);

}  // namespace locksim
