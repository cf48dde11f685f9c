// deltac-run: the LLVM-free `deltac run` executable.
#include "deltac/cli.h"

#include <cstring>

int main(int argc, char **argv) {
  // Accept both `deltac-run --flags...` and `deltac-run run --flags...`.
  if (argc > 1 && std::strcmp(argv[1], "run") == 0)
    return deltac::run_command(argc - 1, argv + 1);
  return deltac::run_command(argc, argv);
}
