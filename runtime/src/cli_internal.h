// Internal parts of `deltac run` (cli.cpp): argument parsing (cli_args.cpp),
// loading and validating the inputs into params (cli_inputs.cpp) and writing
// the outputs (cli_outputs.cpp).
#ifndef DELTAC_RUNTIME_CLI_INTERNAL_H
#define DELTAC_RUNTIME_CLI_INTERNAL_H

#include "deltac/bind.h"
#include "deltac/npy.h"
#include "deltac/params.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace deltac {
namespace cli {

// Every error of the command: one line, printed as "deltac run: error: ...".
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] inline void fail(const std::string &msg) { throw Error(msg); }

struct Options {
  std::string variant, inputs, outputs, tuningDb;
  std::string device = "auto", mode = "auto", dtype = "f32";
  int chunk = 0;
  double scale = 0; // 0: 1/sqrt(K)
  bool haveScale = false;
  bool l2norm = false, negEig = false, stats = false, help = false;
  bool deterministic = false; // deltac_options.deterministic
  bool chunkStates = false;   // chunk_states.npy (deltac_options.chunk_states)
  bool betaSigmoid = false, gateInKernel = false;
  int threads = 0;
};

extern const char kUsage[];
// Throws Error on a bad flag.
Options parse_args(int argc, char **argv);
int32_t variant_of(const Options &opt);

std::string join_path(const std::string &dir, const std::string &name);
bool exists(const std::string &path);

// The inputs of one call, loaded, validated, pre-processed and bound: p has
// every field but o and ht (bind_inputs). The buffers stay owned here.
struct Inputs {
  ForwardTensors tensors;
  deltac_fwd_params p{};
  npy::Array q, k, v, beta, g, h0, aLog, dtBias;
  std::vector<uint16_t> q16, k16, v16; // --dtype=bf16
  std::vector<float> betaBuf, gBuf;    // pre-processed beta, g
  std::vector<int64_t> cu;
};
// Throws Error naming the file and what was expected; never allocates
// anything sized by an unchecked dimension.
void load_inputs(const Options &opt, Inputs *in);

// Output paths (inside opt.outputs): throws when one exists and is not a
// regular file or link, so that the renames cannot half-succeed.
void check_output_paths(const Options &opt);
// Creates opt.outputs and writes o.npy and ht.npy (and with --chunk-states
// chunk_states.npy, `chunks` entries) together or not at all
// (npy::write_files).
void write_outputs(const Options &opt, const deltac_fwd_params &p,
                   const std::vector<float> &o, const std::vector<float> &ht,
                   const std::vector<float> &cs, int64_t chunks);

} // namespace cli
} // namespace deltac

#endif // DELTAC_RUNTIME_CLI_INTERNAL_H
