#include <CLI/CLI.hpp>
int main(int argc, char** argv) {
  CLI::App app{"locksim"};
  CLI11_PARSE(app, argc, argv);
}
