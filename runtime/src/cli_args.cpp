// `deltac run`: the flags (see kUsage and runtime/README.md).
#include "cli_internal.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <initializer_list>

namespace deltac {
namespace cli {
namespace {

bool parseInt(const std::string &s, long long lo, long long hi,
              long long *out) {
  if (s.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

} // namespace

const char kUsage[] =
    "usage: deltac run --variant=delta|gated|kda --inputs=DIR --outputs=DIR\n"
    "                  [--device=auto|cpu|cuda] [--mode=auto|chunked|recurrent]"
    " [--chunk=16|32|64]\n"
    "                  [--dtype=f32|bf16] [--scale=X] [--qk-l2norm]"
    " [--allow-neg-eigval]\n"
    "                  [--threads=N] [--stats] [--beta-sigmoid] [--gate-in-kernel]\n"
    "                  [--tuning-db=FILE] [--deterministic] [--chunk-states]\n"
    "\n"
    "Runs one delta-rule forward call on .npy inputs (float32, C order):\n"
    "  q.npy [B,T,H,K]  k.npy [B,T,H,K]  v.npy [B,T,HV,V]  beta.npy [B,T,HV]\n"
    "  g.npy  log decay <= 0: gated [B,T,HV], kda [B,T,HV,K]; absent for delta\n"
    "  h0.npy [N,HV,K,V] optional initial state (zero when absent)\n"
    "  cu_seqlens.npy [N+1] int32/int64 optional variable-length sequences"
    " (B = 1)\n"
    "Writes o.npy [B,T,HV,V] and ht.npy [N,HV,K,V] (float32) into --outputs.\n"
    "With --chunk-states also chunk_states.npy [chunks,HV,K,V]: the state after\n"
    "each chunk of --chunk tokens (a sequence of len tokens has ceil(len/chunk)).\n"
    "HV must be a multiple of H; K and V multiples of 16 in [16, 256];\n"
    "beta in [0, 1] ([0, 2] with --allow-neg-eigval); g <= 0 (-inf: a reset);\n"
    "q, k, v, h0 finite: every value is checked (the runtime's checking mode).\n"
    "  --device    auto: GPU when present and a kernel exists, else CPU\n"
    "  --mode      auto: the kernel catalogue's rule (deltac/catalogue.h; on the\n"
    "              CPU the recurrent kernel at every length: it measured faster;\n"
    "              chunked on request), or a tuning database's record\n"
    "  --chunk     chunk size of the chunked mode (default 32)\n"
    "  --dtype     bf16 rounds q, k, v to bf16 (nearest even) on load; the\n"
    "              arithmetic is f32 and o is f32 (on CUDA o is rounded to bf16)\n"
    "  --scale     output scale (default 1/sqrt(K))\n"
    "  --qk-l2norm L2-normalise q and k per head\n"
    "  --threads   CPU threads (0 = all cores)\n"
    "  --stats     print the time and tokens/s\n"
    "  --beta-sigmoid   beta.npy holds logits: beta = sigmoid(logits)"
    " (2 * sigmoid\n"
    "                   with --allow-neg-eigval)\n"
    "  --gate-in-kernel g.npy holds a: g = -exp(A_log) * softplus(a + dt_bias)"
    "\n"
    "                   with A_log.npy [HV] and dt_bias.npy [HV] (gated) or"
    " [HV, K] or [HV*K]\n"
    "                   (kda);"
    " A_log.npy or dt_bias.npy without --gate-in-kernel is an\n"
    "                   error\n"
    "  --tuning-db FILE pick kernel configs by this tuning database (default:\n"
    "                   the file named by $DELTAC_TUNING_DB, if any)\n"
    "  --deterministic  batch-invariant mode (deltac_options.deterministic):\n"
    "                   each sequence's result does not depend on the batch\n"
    "  --chunk-states   write chunk_states.npy (needs --chunk; the chunked kernel\n"
    "                   runs: deltac_options.chunk_states)\n"
    "Exit code 0 on success, 1 on any error (nothing is written then).\n";

namespace {

// "--x" and "--x=v" / "--x v": flags that take a value.
const char *const kValued[] = {"--variant", "--inputs", "--outputs",
                               "--device",  "--mode",   "--chunk",
                               "--dtype",   "--scale",  "--threads",
                               "--tuning-db"};
const char *const kSwitches[] = {"--qk-l2norm", "--allow-neg-eigval",
                                 "--stats", "--beta-sigmoid",
                                 "--gate-in-kernel", "--deterministic",
                                 "--chunk-states"};

void oneOf(const std::string &key, const std::string &value,
           std::initializer_list<const char *> allowed, std::string *out) {
  std::string list;
  for (const char *a : allowed) {
    if (value == a) {
      *out = value;
      return;
    }
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  const size_t last = list.rfind(", ");
  if (last != std::string::npos)
    list.replace(last, 2, " or ");
  fail(key + "=" + value + ": expected " + list);
}

double parseScale(const std::string &value) {
  char *end = nullptr;
  errno = 0;
  double s = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno != 0 || !std::isfinite(s) ||
      !(s > 0) || !std::isfinite(float(s)) || float(s) == 0.0f)
    fail("--scale=" + value + ": expected a finite number > 0");
  return s;
}

// Applies one flag (already known to exist and to have a value iff valued).
void apply(const std::string &key, const std::string &value, Options *o) {
  long long n = 0;
  if (key == "--variant") {
    oneOf(key, value, {"delta", "gated", "kda"}, &o->variant);
  } else if (key == "--device") {
    oneOf(key, value, {"auto", "cpu", "cuda"}, &o->device);
  } else if (key == "--mode") {
    oneOf(key, value, {"auto", "chunked", "recurrent"}, &o->mode);
  } else if (key == "--dtype") {
    oneOf(key, value, {"f32", "bf16"}, &o->dtype);
  } else if (key == "--inputs" || key == "--outputs" || key == "--tuning-db") {
    if (value.empty())
      fail(key + ": expected a " +
           (key == "--tuning-db" ? "file" : "directory"));
    (key == "--inputs"    ? o->inputs
     : key == "--outputs" ? o->outputs
                          : o->tuningDb) = value;
  } else if (key == "--chunk") {
    if (!parseInt(value, 0, 1 << 20, &n) || (n != 16 && n != 32 && n != 64))
      fail("--chunk=" + value + ": expected 16, 32 or 64");
    o->chunk = int(n);
  } else if (key == "--scale") {
    o->scale = parseScale(value);
    o->haveScale = true;
  } else if (key == "--threads") {
    if (!parseInt(value, 0, 1 << 20, &n))
      fail("--threads=" + value + ": expected an integer >= 0");
    o->threads = int(n);
  } else {
    (key == "--qk-l2norm"          ? o->l2norm
     : key == "--allow-neg-eigval" ? o->negEig
     : key == "--stats"            ? o->stats
     : key == "--beta-sigmoid"     ? o->betaSigmoid
     : key == "--deterministic"    ? o->deterministic
     : key == "--chunk-states"     ? o->chunkStates
                                   : o->gateInKernel) = true;
  }
}

// Rules between flags.
void checkCombination(const Options &o) {
  if (o.variant.empty())
    fail("missing --variant (expected delta, gated or kda)");
  if (o.inputs.empty())
    fail("missing --inputs=DIR");
  if (o.outputs.empty())
    fail("missing --outputs=DIR");
  if (o.gateInKernel && o.variant == "delta")
    fail("--gate-in-kernel: --variant=delta has no gate");
  if (o.chunk && o.mode == "recurrent")
    fail("--chunk=" + std::to_string(o.chunk) +
         ": a chunk size needs --mode=chunked or auto, not recurrent");
  if (o.chunkStates && !o.chunk)
    fail("--chunk-states: needs --chunk=16|32|64 (the chunks the states end)");
}

template <size_t N>
int indexOf(const char *const (&list)[N], const std::string &key) {
  for (size_t j = 0; j < N; ++j)
    if (key == list[j])
      return int(j);
  return -1;
}

} // namespace

Options parse_args(int argc, char **argv) {
  Options o;
  bool seen[sizeof(kValued) / sizeof(*kValued)] = {};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i] ? argv[i] : "";
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      return o;
    }
    if (arg.rfind("--", 0) != 0)
      fail("unexpected argument '" + arg + "': expected --flag=value (see "
           "--help)");
    const std::size_t eq = arg.find('=');
    const bool hasValue = eq != std::string::npos;
    const std::string key = arg.substr(0, eq);
    std::string value = hasValue ? arg.substr(eq + 1) : "";
    const int idx = indexOf(kValued, key);
    if (idx >= 0) {
      if (!hasValue) {
        if (i + 1 >= argc)
          fail(key + ": missing value");
        value = argv[++i] ? argv[i] : "";
      }
      if (seen[idx])
        fail(key + ": given twice");
      seen[idx] = true;
    } else if (indexOf(kSwitches, key) < 0) {
      fail("unknown flag '" + key + "' (see --help)");
    } else if (hasValue) {
      fail(key + " takes no value");
    }
    apply(key, value, &o);
  }
  checkCombination(o);
  return o;
}

int32_t variant_of(const Options &opt) {
  return opt.variant == "delta"   ? DELTAC_VARIANT_DELTA
         : opt.variant == "gated" ? DELTAC_VARIANT_GATED
                                  : DELTAC_VARIANT_KDA;
}

} // namespace cli
} // namespace deltac
