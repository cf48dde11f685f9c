// `deltac run`: reads the inputs of one forward call from .npy files, runs it
// through the C API and writes o.npy and ht.npy. Everything is validated
// before anything is written.
#include "deltac/cli.h"

#include "deltac/convert.h"
#include "deltac/npy.h"
#include "deltac/preprocess.h"
#include "deltac/runtime.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace deltac {
namespace {

using npy::Array;
using npy::DType;

const char kUsage[] =
    "usage: deltac run --variant=delta|gated|kda --inputs=DIR --outputs=DIR\n"
    "                  [--device=auto|cpu|cuda] [--mode=auto|chunked|recurrent]"
    " [--chunk=16|32|64]\n"
    "                  [--dtype=f32|bf16] [--scale=X] [--qk-l2norm]"
    " [--allow-neg-eigval]\n"
    "                  [--threads=N] [--stats] [--beta-sigmoid] [--gate-in-kernel]\n"
    "\n"
    "Runs one delta-rule forward call on .npy inputs (float32, C order):\n"
    "  q.npy [B,T,H,K]  k.npy [B,T,H,K]  v.npy [B,T,HV,V]  beta.npy [B,T,HV]\n"
    "  g.npy  log decay <= 0: gated [B,T,HV], kda [B,T,HV,K]; absent for delta\n"
    "  h0.npy [N,HV,K,V] optional initial state (zero when absent)\n"
    "  cu_seqlens.npy [N+1] int32/int64 optional variable-length sequences"
    " (B = 1)\n"
    "Writes o.npy [B,T,HV,V] and ht.npy [N,HV,K,V] (float32) into --outputs.\n"
    "HV must be a multiple of H; K and V multiples of 16 in [16, 256];\n"
    "beta in [0, 1] ([0, 2] with --allow-neg-eigval).\n"
    "  --device    auto: GPU when present and a kernel exists, else CPU\n"
    "  --mode      auto: deltac/schedule.h's rule (on the CPU the recurrent kernel\n"
    "              at every length: it measured faster; chunked on request)\n"
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
    "Exit code 0 on success, 1 on any error (nothing is written then).\n";

struct CliError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string &msg) { throw CliError(msg); }

struct Options {
  std::string variant, inputs, outputs;
  std::string device = "auto", mode = "auto", dtype = "f32";
  int chunk = 0;
  double scale = 0; // 0: 1/sqrt(K)
  bool haveScale = false;
  bool l2norm = false, negEig = false, stats = false, help = false;
  bool betaSigmoid = false, gateInKernel = false;
  int threads = 0;
};

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

Options parseArgs(int argc, char **argv) {
  Options o;
  bool seen[16] = {};
  const char *valued[] = {"--variant", "--inputs", "--outputs", "--device",
                          "--mode",    "--chunk",  "--dtype",   "--scale",
                          "--threads"};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i] ? argv[i] : "";
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      return o;
    }
    if (arg.rfind("--", 0) != 0)
      fail("unexpected argument '" + arg + "': expected --flag=value (see "
           "--help)");
    std::string key = arg, value;
    bool hasValue = false;
    std::size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      key = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      hasValue = true;
    }
    int idx = -1;
    for (int j = 0; j < int(sizeof(valued) / sizeof(*valued)); ++j)
      if (key == valued[j])
        idx = j;
    if (idx >= 0) {
      if (!hasValue) {
        if (i + 1 >= argc)
          fail(key + ": missing value");
        value = argv[++i] ? argv[i] : "";
      }
      if (seen[idx])
        fail(key + ": given twice");
      seen[idx] = true;
    } else if (key == "--qk-l2norm" || key == "--allow-neg-eigval" ||
               key == "--stats" || key == "--beta-sigmoid" ||
               key == "--gate-in-kernel") {
      if (hasValue)
        fail(key + " takes no value");
    } else {
      fail("unknown flag '" + key + "' (see --help)");
    }

    if (key == "--variant") {
      if (value != "delta" && value != "gated" && value != "kda")
        fail("--variant=" + value + ": expected delta, gated or kda");
      o.variant = value;
    } else if (key == "--inputs") {
      if (value.empty())
        fail("--inputs: expected a directory");
      o.inputs = value;
    } else if (key == "--outputs") {
      if (value.empty())
        fail("--outputs: expected a directory");
      o.outputs = value;
    } else if (key == "--device") {
      if (value != "auto" && value != "cpu" && value != "cuda")
        fail("--device=" + value + ": expected auto, cpu or cuda");
      o.device = value;
    } else if (key == "--mode") {
      if (value != "auto" && value != "chunked" && value != "recurrent")
        fail("--mode=" + value + ": expected auto, chunked or recurrent");
      o.mode = value;
    } else if (key == "--chunk") {
      long long c;
      if (!parseInt(value, 0, 1 << 20, &c) || (c != 16 && c != 32 && c != 64))
        fail("--chunk=" + value + ": expected 16, 32 or 64");
      o.chunk = int(c);
    } else if (key == "--dtype") {
      if (value != "f32" && value != "bf16")
        fail("--dtype=" + value + ": expected f32 or bf16");
      o.dtype = value;
    } else if (key == "--scale") {
      char *end = nullptr;
      errno = 0;
      double s = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || errno != 0 || !std::isfinite(s) ||
          !(s > 0) || !std::isfinite(float(s)) || float(s) == 0.0f)
        fail("--scale=" + value + ": expected a finite number > 0");
      o.scale = s;
      o.haveScale = true;
    } else if (key == "--threads") {
      long long t;
      if (!parseInt(value, 0, 1 << 20, &t))
        fail("--threads=" + value + ": expected an integer >= 0");
      o.threads = int(t);
    } else if (key == "--qk-l2norm") {
      o.l2norm = true;
    } else if (key == "--allow-neg-eigval") {
      o.negEig = true;
    } else if (key == "--stats") {
      o.stats = true;
    } else if (key == "--beta-sigmoid") {
      o.betaSigmoid = true;
    } else if (key == "--gate-in-kernel") {
      o.gateInKernel = true;
    }
  }
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
  if (o.device == "cuda" && (o.mode == "chunked" || o.chunk))
    fail("--device=cuda: only the recurrent mode exists on CUDA (drop "
         "--mode=chunked / --chunk)");
  return o;
}

std::string joinPath(const std::string &dir, const std::string &name) {
  if (!dir.empty() && dir.back() == '/')
    return dir + name;
  return dir + "/" + name;
}

bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Loads dir/name; throws with the path in the message.
Array load(const std::string &dir, const std::string &name) {
  std::string path = joinPath(dir, name);
  Array a;
  std::string err;
  if (!npy::read_file(path, &a, &err))
    fail(path + ": " + err);
  return a;
}

std::string dims(std::initializer_list<int64_t> d) {
  return npy::shape_str(std::vector<int64_t>(d));
}

void expectF32(const std::string &path, const Array &a, const char *layout) {
  if (a.dtype != DType::F32)
    fail(path + ": dtype " + npy::name(a.dtype) + ": expected float32 " +
         layout);
}

void expectShape(const std::string &path, const Array &a,
                 const std::vector<int64_t> &want, const char *layout,
                 const char *why) {
  if (a.shape != want)
    fail(path + ": shape " + npy::shape_str(a.shape) + ": expected " +
         npy::shape_str(want) + " " + layout + why);
}

std::string num(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

void expectFinite(const std::string &path, const Array &a) {
  const float *x = a.as<float>();
  for (int64_t i = 0, n = a.count(); i < n; ++i)
    if (!std::isfinite(x[i]))
      fail(path + ": element " + std::to_string(i) + " is " +
           num(x[i]) + ": expected finite values");
}

void checkHeadDim(const std::string &path, const char *name, int64_t d) {
  if (d < 16 || d > 256 || d % 16 != 0)
    fail(path + ": " + name + " = " + std::to_string(d) +
         " (last dimension): expected a multiple of 16 in [16, 256]");
}

std::vector<uint16_t> toBf16(const Array &a) {
  std::vector<uint16_t> out(std::size_t(a.count()));
  const float *x = a.as<float>();
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = f32_to_bf16(x[i]);
  return out;
}

// An existing output path must be a file (or a link) that rename() can
// replace; a directory there would make the second rename fail after the
// first succeeded.
void expectReplaceable(const std::string &path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) &&
      !S_ISLNK(st.st_mode))
    fail(path + ": exists and is not a regular file: expected a file to "
                "replace (remove it)");
}

// mkdir -p.
void makeDirs(const std::string &dir) {
  std::string cur;
  std::size_t i = 0;
  while (i <= dir.size()) {
    std::size_t j = dir.find('/', i);
    if (j == std::string::npos)
      j = dir.size();
    cur = dir.substr(0, j);
    if (!cur.empty() && !exists(cur) && ::mkdir(cur.c_str(), 0755) != 0 &&
        errno != EEXIST)
      fail(cur + ": cannot create directory: " + std::strerror(errno));
    i = j + 1;
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail(dir + ": not a directory");
}

int run(const Options &opt) {
  const std::string &in = opt.inputs;
  struct stat st;
  if (::stat(in.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail(in + ": input directory not found");
  if (::stat(opt.outputs.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    fail(opt.outputs + ": exists and is not a directory (--outputs)");
  const std::string oPath = joinPath(opt.outputs, "o.npy"),
                    htPath = joinPath(opt.outputs, "ht.npy");
  expectReplaceable(oPath);
  expectReplaceable(htPath);
  const std::string qPath = joinPath(in, "q.npy"), kPath = joinPath(in, "k.npy"),
                    vPath = joinPath(in, "v.npy"),
                    betaPath = joinPath(in, "beta.npy"),
                    gPath = joinPath(in, "g.npy"), h0Path = joinPath(in, "h0.npy"),
                    cuPath = joinPath(in, "cu_seqlens.npy"),
                    aLogPath = joinPath(in, "A_log.npy"),
                    dtBiasPath = joinPath(in, "dt_bias.npy");
  const int32_t variant = opt.variant == "delta"   ? DELTAC_VARIANT_DELTA
                          : opt.variant == "gated" ? DELTAC_VARIANT_GATED
                                                   : DELTAC_VARIANT_KDA;

  // q fixes B, T, H, K.
  Array q = load(in, "q.npy");
  expectF32(qPath, q, "[B, T, H, K]");
  if (q.shape.size() != 4)
    fail(qPath + ": shape " + npy::shape_str(q.shape) +
         ": expected rank 4 [B, T, H, K]");
  const int64_t B = q.shape[0], T = q.shape[1], H = q.shape[2], K = q.shape[3];
  if (B <= 0 || T <= 0 || H <= 0)
    fail(qPath + ": shape " + npy::shape_str(q.shape) +
         ": expected B, T, H > 0 in [B, T, H, K]");
  checkHeadDim(qPath, "K", K);
  if (B > INT32_MAX || T > INT32_MAX || H > INT32_MAX)
    fail(qPath + ": shape " + npy::shape_str(q.shape) +
         ": dimensions must fit in 32 bits");

  Array k = load(in, "k.npy");
  expectF32(kPath, k, "[B, T, H, K]");
  expectShape(kPath, k, q.shape, "[B, T, H, K]", " (as q.npy)");

  Array v = load(in, "v.npy");
  expectF32(vPath, v, "[B, T, HV, V]");
  if (v.shape.size() != 4 || v.shape[0] != B || v.shape[1] != T)
    fail(vPath + ": shape " + npy::shape_str(v.shape) +
         ": expected rank 4 [B, T, HV, V] with B = " + std::to_string(B) +
         ", T = " + std::to_string(T) + " (as q.npy)");
  const int64_t HV = v.shape[2], V = v.shape[3];
  if (HV <= 0 || HV % H != 0)
    fail(vPath + ": HV = " + std::to_string(HV) +
         " value heads: expected a positive multiple of H = " +
         std::to_string(H) + " (q.npy)");
  if (HV > INT32_MAX)
    fail(vPath + ": HV too large");
  checkHeadDim(vPath, "V", V);

  Array beta = load(in, "beta.npy");
  expectF32(betaPath, beta, "[B, T, HV]");
  expectShape(betaPath, beta, {B, T, HV}, "[B, T, HV]",
              " (from q.npy and v.npy)");

  Array g;
  const bool haveG = exists(gPath);
  if (variant == DELTAC_VARIANT_DELTA) {
    if (haveG)
      fail(gPath + ": present, but --variant=delta takes no gate (remove it "
                   "or use --variant=gated or kda)");
  } else {
    if (!haveG)
      fail(gPath + ": file not found: --variant=" + opt.variant +
           (opt.gateInKernel ? " with --gate-in-kernel needs the gate input a"
                             : " needs the log decay g"));
    g = load(in, "g.npy");
    if (variant == DELTAC_VARIANT_GATED) {
      expectF32(gPath, g, "[B, T, HV]");
      expectShape(gPath, g, {B, T, HV}, "[B, T, HV]",
                  " for --variant=gated");
    } else {
      expectF32(gPath, g, "[B, T, HV, K]");
      expectShape(gPath, g, {B, T, HV, K}, "[B, T, HV, K]",
                  " for --variant=kda");
    }
  }

  // --gate-in-kernel: A_log [HV], dt_bias [HV * width].
  Array aLog, dtBias;
  const int64_t gWidth = variant == DELTAC_VARIANT_KDA ? K : 1;
  if (opt.gateInKernel) {
    aLog = load(in, "A_log.npy");
    expectF32(aLogPath, aLog, "[HV]");
    expectShape(aLogPath, aLog, {HV}, "[HV]", " (HV from v.npy)");
    dtBias = load(in, "dt_bias.npy");
    if (variant == DELTAC_VARIANT_KDA) {
      expectF32(dtBiasPath, dtBias, "[HV, K]");
      if (dtBias.shape != std::vector<int64_t>{HV, K} &&
          dtBias.shape != std::vector<int64_t>{HV * K})
        fail(dtBiasPath + ": shape " + npy::shape_str(dtBias.shape) +
             ": expected " + dims({HV, K}) + " [HV, K] or " + dims({HV * K}) +
             " for --variant=kda");
    } else {
      expectF32(dtBiasPath, dtBias, "[HV]");
      expectShape(dtBiasPath, dtBias, {HV}, "[HV]", " for --variant=gated");
    }
  } else {
    for (const std::string *path : {&aLogPath, &dtBiasPath})
      if (exists(*path))
        fail(*path + ": present, but --gate-in-kernel is not set (g.npy is "
                     "read as the log decay)");
  }

  std::vector<int64_t> cu;
  const bool haveCu = exists(cuPath);
  if (haveCu) {
    Array c = load(in, "cu_seqlens.npy");
    if (c.dtype != DType::I32 && c.dtype != DType::I64)
      fail(cuPath + ": dtype " + npy::name(c.dtype) +
           ": expected int32 or int64 [N+1]");
    if (c.shape.size() != 1 || c.shape[0] < 2)
      fail(cuPath + ": shape " + npy::shape_str(c.shape) +
           ": expected rank 1 [N+1] with N >= 1");
    if (c.shape[0] - 1 > INT32_MAX)
      fail(cuPath + ": too many sequences");
    if (B != 1)
      fail(cuPath + ": variable-length sequences need B = 1 in q.npy, got "
                    "B = " +
           std::to_string(B));
    cu.resize(std::size_t(c.shape[0]));
    for (std::size_t i = 0; i < cu.size(); ++i)
      cu[i] = c.dtype == DType::I32 ? c.as<int32_t>()[i] : c.as<int64_t>()[i];
    if (cu[0] != 0)
      fail(cuPath + ": cu_seqlens[0] = " + std::to_string(cu[0]) +
           ": expected 0");
    for (std::size_t i = 1; i < cu.size(); ++i)
      if (cu[i] < cu[i - 1])
        fail(cuPath + ": cu_seqlens[" + std::to_string(i) +
             "] = " + std::to_string(cu[i]) + " < cu_seqlens[" +
             std::to_string(i - 1) + "] = " + std::to_string(cu[i - 1]) +
             ": expected non-decreasing values");
    if (cu.back() != T)
      fail(cuPath + ": last value " + std::to_string(cu.back()) +
           ": expected T = " + std::to_string(T) + " (q.npy)");
  }
  const int64_t N = haveCu ? int64_t(cu.size()) - 1 : B;

  Array h0;
  const bool haveH0 = exists(h0Path);
  if (haveH0) {
    h0 = load(in, "h0.npy");
    expectF32(h0Path, h0, "[N, HV, K, V]");
    expectShape(h0Path, h0, {N, HV, K, V}, "[N, HV, K, V]",
                haveCu ? " (N from cu_seqlens.npy)" : " (N = B)");
  }

  // Values.
  expectFinite(qPath, q);
  expectFinite(kPath, k);
  expectFinite(vPath, v);
  if (haveH0)
    expectFinite(h0Path, h0);
  const float betaMax = opt.negEig ? 2.0f : 1.0f;
  std::vector<float> betaBuf;
  if (opt.betaSigmoid) {
    expectFinite(betaPath, beta);
    betaBuf.resize(std::size_t(beta.count()));
    beta_sigmoid(beta.as<float>(), betaBuf.data(), betaBuf.size(), betaMax);
  } else {
    for (int64_t i = 0, n = beta.count(); i < n; ++i) {
      float b = beta.as<float>()[i];
      if (!(b >= 0.0f && b <= betaMax))
        fail(betaPath + ": element " + std::to_string(i) + " is " + num(b) +
             ": expected values in [0, " +
             (opt.negEig ? "2] (--allow-neg-eigval)"
                         : "1] (use --allow-neg-eigval for [0, 2], "
                           "--beta-sigmoid for logits)"));
    }
  }
  std::vector<float> gBuf;
  if (haveG && opt.gateInKernel) {
    expectFinite(gPath, g);
    expectFinite(aLogPath, aLog);
    expectFinite(dtBiasPath, dtBias);
    gBuf.resize(std::size_t(g.count()));
    gate_from_logits(g.as<float>(), aLog.as<float>(), dtBias.as<float>(),
                     gBuf.data(), gBuf.size(), int(HV), int(gWidth));
    for (std::size_t i = 0; i < gBuf.size(); ++i)
      if (!std::isfinite(gBuf[i]))
        fail(aLogPath + ": the gate -exp(A_log) * softplus(a + dt_bias) "
                        "overflows at g element " +
             std::to_string(i) + ": expected a finite gate");
  } else if (haveG) {
    for (int64_t i = 0, n = g.count(); i < n; ++i) {
      float x = g.as<float>()[i];
      if (!std::isfinite(x) || x > 0.0f)
        fail(gPath + ": element " + std::to_string(i) + " is " + num(x) +
             ": expected finite log decays <= 0 (--gate-in-kernel for "
             "gate inputs)");
    }
  }

  // Parameters. bf16 rounds q, k, v; o stays f32 except on CUDA, whose
  // kernels write o in their input type.
  const bool bf16 = opt.dtype == "bf16";
  const bool wantChunked = opt.mode == "chunked" || opt.chunk != 0;
  const bool onCuda =
      opt.device == "cuda" ||
      (opt.device == "auto" && !wantChunked && deltac_cuda_available() &&
       deltac_cuda_supports(variant, int32_t(K), int32_t(V),
                            bf16 ? DELTAC_BF16 : DELTAC_F32));
  const bool o16Out = bf16 && onCuda;
  std::vector<uint16_t> q16, k16, v16;
  if (bf16) {
    q16 = toBf16(q);
    k16 = toBf16(k);
    v16 = toBf16(v);
  }
  const std::size_t oCount = std::size_t(B * T * HV * V);
  std::vector<float> o(oCount);
  std::vector<uint16_t> o16(o16Out ? oCount : 0);
  std::vector<float> ht(std::size_t(N * HV * K * V));

  deltac_fwd_params p{};
  p.variant = variant;
  p.B = int32_t(B);
  p.T = int32_t(T);
  p.H = int32_t(H);
  p.HV = int32_t(HV);
  p.K = int32_t(K);
  p.V = int32_t(V);
  p.N = int32_t(N);
  p.in_dtype = bf16 ? DELTAC_BF16 : DELTAC_F32;
  p.out_dtype = o16Out ? DELTAC_BF16 : DELTAC_F32;
  p.state_dtype = DELTAC_F32;
  p.state_layout = DELTAC_STATE_KV;
  p.q = bf16 ? static_cast<const void *>(q16.data()) : q.as<float>();
  p.k = bf16 ? static_cast<const void *>(k16.data()) : k.as<float>();
  p.v = bf16 ? static_cast<const void *>(v16.data()) : v.as<float>();
  p.g = !haveG ? nullptr : gBuf.empty() ? g.as<float>() : gBuf.data();
  p.beta = betaBuf.empty() ? beta.as<float>() : betaBuf.data();
  p.h0 = haveH0 ? h0.as<float>() : nullptr;
  p.o = o16Out ? static_cast<void *>(o16.data()) : o.data();
  p.ht = ht.data();
  p.cu_seqlens = haveCu ? cu.data() : nullptr;
  p.scale = float(opt.haveScale ? opt.scale : 1.0 / std::sqrt(double(K)));
  p.qk_l2norm = opt.l2norm ? 1 : 0;
  p.threads = opt.threads;

  deltac_options dopt = deltac_default_options();
  // The device was chosen above (o's dtype depends on it): pass it on, so
  // the runtime does not decide a second time.
  dopt.device = onCuda ? DELTAC_DEVICE_CUDA : DELTAC_DEVICE_CPU;
  dopt.mode = opt.mode == "chunked"     ? DELTAC_MODE_CHUNKED
              : opt.mode == "recurrent" ? DELTAC_MODE_RECURRENT
                                        : DELTAC_MODE_AUTO;
  dopt.chunk = opt.chunk;

  deltac_run_info info{};
  auto t0 = std::chrono::steady_clock::now();
  if (deltac_forward_info(&p, &dopt, &info) != 0)
    fail(std::string("forward failed: ") + deltac_last_error());
  auto t1 = std::chrono::steady_clock::now();
  if (o16Out)
    for (std::size_t i = 0; i < oCount; ++i)
      o[i] = bf16_to_f32(o16[i]);

  // Outputs: o.npy and ht.npy, both written to temporary files first and
  // renamed only when both are complete, so a failure leaves earlier
  // outputs in place.
  makeDirs(opt.outputs);
  expectReplaceable(oPath);
  expectReplaceable(htPath);
  std::string err, oTmp, htTmp;
  if (!npy::write_temp(oPath, DType::F32, {B, T, HV, V}, o.data(), &oTmp, &err))
    fail(oPath + ": " + err);
  if (!npy::write_temp(htPath, DType::F32, {N, HV, K, V}, ht.data(), &htTmp,
                       &err)) {
    ::unlink(oTmp.c_str());
    fail(htPath + ": " + err);
  }
  if (!npy::commit(oTmp, oPath, &err)) {
    ::unlink(htTmp.c_str());
    fail(oPath + ": " + err);
  }
  if (!npy::commit(htTmp, htPath, &err))
    fail(htPath + ": " + err);

  if (opt.stats) {
    double secs = std::chrono::duration<double>(t1 - t0).count();
    std::printf("deltac run: variant=%s device=%s mode=%s chunk=%d%s B=%lld "
                "T=%lld H=%lld HV=%lld K=%lld V=%lld N=%lld dtype=%s "
                "time=%.3f ms tokens/s=%.4g\n",
                opt.variant.c_str(),
                info.device == DELTAC_DEVICE_CUDA ? "cuda" : "cpu",
                info.mode == DELTAC_MODE_CHUNKED ? "chunked" : "recurrent",
                info.chunk, info.specialized ? " (specialised K,V)" : "",
                (long long)B, (long long)T, (long long)H, (long long)HV,
                (long long)K, (long long)V, (long long)N, opt.dtype.c_str(),
                secs * 1e3, secs > 0 ? double(B * T) / secs : 0.0);
    std::fflush(stdout);
  }
  return 0;
}

} // namespace

int run_command(int argc, char **argv) {
  try {
    Options opt = parseArgs(argc, argv);
    if (opt.help) {
      std::fputs(kUsage, stdout);
      std::fflush(stdout);
      return 0;
    }
    return run(opt);
  } catch (const CliError &e) {
    std::fprintf(stderr, "deltac run: error: %s\n", e.what());
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "deltac run: error: out of memory\n");
  } catch (const std::exception &e) {
    std::fprintf(stderr, "deltac run: error: %s\n", e.what());
  }
  std::fflush(stderr);
  return 1;
}

} // namespace deltac
