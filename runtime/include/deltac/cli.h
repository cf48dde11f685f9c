// The `deltac run` command, shared by the deltac-run executable and the
// compiler's `deltac run` subcommand.
#ifndef DELTAC_CLI_H
#define DELTAC_CLI_H

namespace deltac {

// argv[0] is "run" (or the program name); the rest are the flags that
// --help prints (see runtime/README.md). Prints errors (one line) to stderr
// and returns 0 on success, 1 on any error; on error no output file is
// written.
int run_command(int argc, char **argv);

} // namespace deltac

#endif // DELTAC_CLI_H
