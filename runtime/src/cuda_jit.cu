// The NVRTC path of cuda_recurrent (cuda_jit.h): the kernel form
// recurrent_choice picks for the call, compiled from
// deltac/cuda/recurrent_strip.cuh by name expression, launched with the
// arguments recurrent.cuh's launch_st passes to the precompiled kernels.
#include "cuda_jit.h"
#include "jit.h"
#include "select.h"

#include "deltac/cuda/recurrent.cuh"

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace deltac {
namespace rt {
namespace {

using cuda::RecurrentChoice;
using cuda::RecurrentKernel;

const char *type_name(int32_t dtype) {
  return dtype == DELTAC_BF16 ? "__nv_bfloat16" : dtype == DELTAC_F16 ? "__half" : "float";
}
const char *var_name(int32_t v) {
  return v == DELTAC_VARIANT_DELTA ? "delta" : v == DELTAC_VARIANT_GATED ? "gated" : "kda";
}
const char *short_name(int32_t dtype) {
  return dtype == DELTAC_BF16 ? "bf16" : dtype == DELTAC_F16 ? "f16" : "f32";
}

// The name expression of the kernel of choice ch (recurrent_strip.cuh,
// recurrent_kernel.cuh), as NVRTC resolves it.
std::string kernel_expr(const deltac_fwd_params &p, const KernelConfig &c,
                        RecurrentChoice ch, bool per_token) {
  const std::string var = "(deltac_variant)" + std::to_string(p.variant);
  const std::string in = type_name(p.in_dtype), st = type_name(p.state_dtype);
  const std::string dims = std::to_string(p.K) + ", " + std::to_string(p.V) + ", " +
                           std::to_string(c.tile_v) + ", " + std::to_string(c.warps);
  const std::string pt = per_token ? "true" : "false";
  switch (ch.kernel) {
  case RecurrentKernel::StripOne:
    return "&deltac::cuda::detail::strip_one_kernel<" + var + ", deltac::cuda::StripTraits<" +
           dims + ", " + std::to_string(ch.vec) + ">, " + in + ", " + st + ">";
  case RecurrentKernel::Strip:
    return "&deltac::cuda::detail::strip_kernel<" + var + ", deltac::cuda::StripTraits<" +
           dims + ", " + std::to_string(ch.vec) + ">, " + in + ", " + st + ", " + pt + ">";
  default: // the guarded split kernel, as recurrent_knobs launches it
    return std::string("&deltac::cuda::detail::guarded_kernel") +
           (c.warps * 32 > 128 ? "_2<" : "<") + var + ", deltac::cuda::RecurrentTraits<" +
           dims + ">, " + in + ", " + st + ", " + pt + ">";
  }
}

// The loaded kernel of prog (one kernel) on this device: compiled or read
// from the disk cache once per process and device (the jit module keeps the
// library loaded), or null with *error.
const void *kernel_for(const jit::Program &prog, std::string *error) {
  static std::mutex mu;
  static std::map<std::pair<int, std::string>, const void *> cache; // (device, name)
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess)
    dev = -1;
  std::lock_guard<std::mutex> lock(mu);
  const auto it = cache.find({dev, prog.name});
  if (it != cache.end())
    return it->second;
  const jit::Module *m = jit::load(prog, error);
  if (!m || m->kernels.size() != 1 || !m->kernels[0]) {
    if (error->empty())
      *error = "NVRTC gave no kernel for " + prog.name;
    return nullptr;
  }
  cache[{dev, prog.name}] = m->kernels[0];
  return m->kernels[0];
}

} // namespace

bool cuda_recurrent_program(const deltac_fwd_params &p, const KernelConfig &c, bool det,
                            RecurrentProgram *out, std::string *error) {
  if (!cuda::detail::recurrent_matches(p, p.variant, p.K, p.V, p.in_dtype) ||
      (p.in_dtype != DELTAC_F32 && p.in_dtype != DELTAC_BF16) || c.tile_v <= 0 ||
      c.warps <= 0 || p.V % c.tile_v != 0) {
    *error = "cuda_recurrent (compiled at run time) refused the call: its fields do not "
             "match a recurrent kernel of " + config_string(c);
    return false;
  }
  const bool per_token = p.state_steps || p.accepted;
  const bool one = !per_token && cuda::recurrent_one_token(p, det);
  out->choice = cuda::recurrent_choice(p.K, c.tile_v, c.warps,
                                       p.state_dtype == DELTAC_BF16 ? 2 : 4, one,
                                       cuda::detail::Form::Auto);
  if (out->choice.kernel == RecurrentKernel::None) {
    *error = config_string(c) + " has no recurrent kernel form for this call";
    return false;
  }
  const bool pt = per_token && out->choice.kernel != RecurrentKernel::StripOne;
  jit::Program &prog = out->program;
  prog.name = std::string("recurrent_") + var_name(p.variant) + "_k" + std::to_string(p.K) +
              "_v" + std::to_string(p.V) + "_" + short_name(p.in_dtype) + "_state_" +
              short_name(p.state_dtype) + "_bv" + std::to_string(c.tile_v) + "_w" +
              std::to_string(c.warps) + "_form" + std::to_string(int(out->choice.kernel)) +
              "_vec" + std::to_string(out->choice.vec) + (pt ? "_steps" : "");
  prog.source = "#include \"deltac/cuda/recurrent_strip.cuh\"\n";
  prog.kernels = {kernel_expr(p, c, out->choice, pt)};
  return true;
}

bool cuda_jit_enabled(Family f, std::string *why) {
  std::string local;
  std::string &w = why ? *why : local;
  if (f != Family::CudaRecurrent) {
    w = std::string(family_info(f).name) + " has no run-time compiled kernels";
    return false;
  }
  const char *env = std::getenv("DELTAC_JIT");
  if (env && (!std::strcmp(env, "0") || !std::strcmp(env, "off"))) {
    w = "DELTAC_JIT=" + std::string(env) + " switches run-time compilation off";
    return false;
  }
  if (!cuda_available()) {
    w = "no usable CUDA device";
    return false;
  }
  // Once per process: NVRTC loads and compiles the kernel headers for this
  // device (else the padded or refused path runs, never a failing launch).
  static std::once_flag once;
  static bool ok = false;
  static std::string probe_why;
  std::call_once(once, [] {
    if (!jit::available(&probe_why))
      return;
    jit::Program prog;
    prog.name = "recurrent_probe";
    prog.source = "#include \"deltac/cuda/recurrent_strip.cuh\"\n"
                  "extern \"C\" __global__ void deltac_jit_probe() {}\n";
    prog.kernels = {"&deltac_jit_probe"};
    ok = jit::load(prog, &probe_why) != nullptr;
  });
  if (!ok)
    w = "NVRTC cannot compile deltac's kernels here: " + probe_why;
  return ok;
}

bool cuda_recurrent_jit(const deltac_fwd_params &p, const KernelConfig &c, cudaStream_t s,
                        const Launch &l, std::string *error) {
  using namespace cuda::detail;
  RecurrentProgram rp;
  if (!cuda_recurrent_program(p, c, l.deterministic, &rp, error))
    return false;
  if (p.N == 0)
    return true;
  const int threads = c.warps * 32;
  const int64_t blocks = int64_t(p.N) * p.HV * (p.V / c.tile_v);
  if (blocks > 0x7fffffff) {
    *error = "cuda_recurrent: " + std::to_string(blocks) + " blocks exceed the grid limit";
    return false;
  }
  const void *fn = kernel_for(rp.program, error);
  if (!fn)
    return false;
  float scale;
  bool vec_io, vec_state;
  call_setup(p, p.in_dtype == DELTAC_F32 ? 4 : 2, &scale, &vec_io, &vec_state);
  const RecurrentChoice ch = rp.choice;
  const RecurrentFlags f = recurrent_flags(p, p.variant);
  const int32_t *skip = l.skip;
  int32_t route = l.route;
  const deltac_fwd_params pp = p;
  bool io = f.io, st = f.st, qk = f.qk;
  void *one_args[] = {(void *)&pp, &scale, &io, &st, &qk, (void *)&skip};
  void *strip_args[] = {(void *)&pp, &scale, &io, &st, &qk, (void *)&skip, &route};
  void *split_args[] = {(void *)&pp, &scale, &vec_io, &vec_state, (void *)&skip, &route};
  void **args = ch.kernel == RecurrentKernel::StripOne ? one_args
                : ch.kernel == RecurrentKernel::Strip  ? strip_args
                                                       : split_args;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(blocks));
  cfg.blockDim = dim3(unsigned(threads));
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const cudaError_t e = cudaLaunchKernelExC(&cfg, fn, args);
  if (e != cudaSuccess) {
    *error = std::string("CUDA launch of the run-time compiled cuda_recurrent kernel failed: ") +
             cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    return false;
  }
  return true;
}

} // namespace rt
} // namespace deltac
