#pragma once
/// `locksim reality`, called by the shipped binary (scenarios/cli/main.cpp) with the arguments after the
/// command's name: its own options, its own exit codes (0 real runs safe / every cell agrees, 1 otherwise,
/// 2 input errors or a server that would not start, 130 interrupted).
namespace locksim::reality {
int reality_main(int argc, char** argv);
}
