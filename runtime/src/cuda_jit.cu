// The NVRTC paths (cuda_jit.h). cuda_recurrent: the kernel form
// recurrent_choice picks for the call, compiled from
// deltac/cuda/recurrent_strip.cuh by name expression, launched with the
// arguments recurrent.cuh's launch_st passes to the precompiled kernels.
// cuda_chunked: the kernels of one config (chunk index, intra-chunk, the
// block scan's legal V tiles, the warp scan's, the split's fold and fix-up;
// not the fused launch), launched by chunked.cuh's chunked_run_stages, the
// code the precompiled instances run.
#include "cuda_jit.h"
#include "jit.h"
#include "select.h"

#include "deltac/cuda/launch.cuh"
#include "deltac/cuda/recurrent.cuh"
#include "deltac/check.h"     // detail::dtypeSize
#include "deltac/tuning_db.h" // variant_name, dtype_name

#include <cuda_runtime.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace deltac {
namespace rt {
namespace {

using cuda::RecurrentChoice;
using cuda::RecurrentKernel;

const char *type_name(int32_t dtype) {
  return dtype == DELTAC_BF16         ? "__nv_bfloat16"
         : dtype == DELTAC_F16        ? "__half"
         : dtype == DELTAC_FP8_E4M3   ? "__nv_fp8_e4m3"
                                      : "float";
}

// The name expression of the kernel of choice ch (recurrent_strip.cuh,
// recurrent_kernel.cuh), as NVRTC resolves it.
std::string kernel_expr(const deltac_fwd_params &p, const KernelConfig &c,
                        RecurrentChoice ch, bool per_token, bool staged) {
  const std::string var = "(deltac_variant)" + std::to_string(p.variant);
  const std::string in = type_name(p.in_dtype), st = type_name(p.state_dtype);
  const std::string dims = std::to_string(p.K) + ", " + std::to_string(p.V) + ", " +
                           std::to_string(c.tile_v) + ", " + std::to_string(c.warps);
  const std::string pt = per_token ? "true" : "false";
  switch (ch.kernel) {
  case RecurrentKernel::StripOne:
    return std::string("&deltac::cuda::detail::") +
           (staged ? "strip_staged_kernel<" : "strip_one_kernel<") + var +
           ", deltac::cuda::StripTraits<" + dims + ", " + std::to_string(ch.vec) + ">, " + in +
           ", " + st + ">";
  case RecurrentKernel::Strip:
    return "&deltac::cuda::detail::strip_kernel<" + var + ", deltac::cuda::StripTraits<" +
           dims + ", " + std::to_string(ch.vec) + ">, " + in + ", " + st + ", " + pt + ">";
  default: // the guarded split kernel, as recurrent_knobs launches it
    return std::string("&deltac::cuda::detail::guarded_kernel") +
           (c.warps * 32 > 128 ? "_2<" : "<") + var + ", deltac::cuda::RecurrentTraits<" +
           dims + ">, " + in + ", " + st + ", " + pt + ">";
  }
}

// The loaded kernels of prog on this device: compiled or read from the
// disk cache once per process and device (the jit module keeps the library
// loaded), or null with *error. A program that failed is not compiled again
// in this process (its error is kept). The lock is not held while compiling,
// so calls of kernels already loaded never wait behind a compile (two
// threads that first meet one program may both compile it; one result is
// kept).
const jit::Module *module_for(const jit::Program &prog, std::string *error) {
  struct Entry {
    const jit::Module *m;
    std::string error;
  };
  static std::mutex mu;
  static std::map<std::pair<int, std::string>, Entry> cache; // (device, name)
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess)
    dev = -1;
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = cache.find({dev, prog.name});
    if (it != cache.end()) {
      *error = it->second.error;
      return it->second.m;
    }
  }
  const jit::Module *m = jit::load(prog, error);
  if (m && m->kernels.size() != prog.kernels.size())
    m = nullptr, *error = "NVRTC gave no kernels for " + prog.name;
  for (size_t i = 0; m && i < m->kernels.size(); ++i)
    if (!m->kernels[i])
      m = nullptr, *error = "NVRTC gave a null kernel for " + prog.name;
  if (!m && error->empty())
    *error = "NVRTC gave no module for " + prog.name;
  std::lock_guard<std::mutex> lock(mu);
  const auto ins = cache.insert({{dev, prog.name}, Entry{m, m ? std::string() : *error}});
  *error = ins.first->second.error;
  return ins.first->second.m;
}

// Stand-in handle of a kernel a chunked program holds, for sizing before
// it is compiled (chunked_plan reads only whether a handle is there).
const void *const kPlanned = &kPlanned;

// The chunked program of config c for (var, K, V, dtype): its kernels'
// name expressions and where each goes in the ChunkedKernels table (filled
// with kPlanned).
struct ChunkedProgram {
  jit::Program program;
  cuda::detail::ChunkedKernels layout;
  std::vector<const void **> slots; // per program kernel: its place in layout
};
void chunked_program(int32_t var, int K, int V, int32_t dtype, const KernelConfig &c,
                     ChunkedProgram *out) {
  using cuda::detail::ChunkedKernels;
  const int elem = dtype == DELTAC_F32 ? 4 : 2, C = c.chunk;
  ChunkedKernels &k = out->layout;
  k = ChunkedKernels{var, K, V, elem, C, c.tile_v, c.warps, c.stages, nullptr, nullptr, {},
                     {},  {}, nullptr, nullptr, {}, false};
  const std::string v = "(deltac_variant)" + std::to_string(var), in = type_name(dtype);
  const std::string ns = "deltac::cuda::detail::", kv = std::to_string(K) + ", " + std::to_string(V);
  auto traits = [&](int bv, int stages) {
    return ns + "ChunkedTraits<" + v + ", " + kv + ", " + in + ", deltac::cuda::ChunkedConfig<" +
           std::to_string(C) + ", " + std::to_string(bv) + ", " + std::to_string(c.warps) + ", " +
           std::to_string(stages) + ">>";
  };
  jit::Program &prog = out->program;
  out->slots.clear();
  auto add = [&](const void **slot, const std::string &expr) {
    *slot = kPlanned;
    out->slots.push_back(slot);
    prog.kernels.push_back(expr);
  };
  const std::string tr = traits(c.tile_v, c.stages);
  add(&k.index, "&" + ns + "chunked_index_kernel<" + std::to_string(C) + ">");
  add(&k.prep, "&" + ns + "chunked_prep_kernel<" + v + ", " + tr + ">");
  for (int i = 0; i < 3; ++i) {
    const int bv = c.tile_v >> i;
    if (bv >= 16 && V % bv == 0 &&
        cuda::chunked_legal(var, K, V, elem, C, bv, c.warps, c.stages))
      add(&k.scan[i], "&" + ns + "chunked_scan_kernel<" + v + ", " + traits(bv, c.stages) + ">");
  }
  // Scan 5's kernels only where the config asks for them (its own program).
  const bool precise = c.scan == cuda::kChunkedScanPrecise && elem == 2;
  for (int i = 0; i < 3 && precise; ++i) {
    const int bv = c.tile_v >> i;
    if (V % bv == 0 && cuda::chunked_precise_ok(var, K, V, elem, C, bv, c.warps, c.stages))
      add(&k.precise[i],
          "&" + ns + "chunked_scan_kernel<" + v + ", " + traits(bv, c.stages) + ", true>");
  }
  for (int i = 0; i < 2; ++i) {
    const int bv = cuda::kChunkedWarpBVs[i];
    if (cuda::chunked_warp_ok(var, K, V, elem, C, bv))
      add(&k.warp[i], "&" + ns + "chunked_scan_warp_kernel<" + v + ", " + ns + "WarpScanTraits<" +
                          v + ", " + kv + ", " + in + ", " + std::to_string(C) + ", " +
                          std::to_string(bv) + ", false>>");
  }
  add(&k.fold, "&" + ns + "chunked_fold_kernel<" + in + ", " + kv + ", " + std::to_string(C) +
                   ">");
  add(&k.fix, "&" + ns + "chunked_fix_kernel<" + tr + ", " +
                  std::to_string(cuda::detail::chunked_fix_cols(V)) + ">");
  prog.name = std::string("chunked_") + variant_name(var) + "_k" + std::to_string(K) + "_v" +
              std::to_string(V) + "_" + dtype_name(dtype) + "_c" + std::to_string(C) + "_bv" +
              std::to_string(c.tile_v) + "_w" + std::to_string(c.warps) + "_s" +
              std::to_string(c.stages) + (precise ? "_precise" : "");
  prog.source = "#include \"deltac/cuda/chunked_prep.cuh\"\n"
                "#include \"deltac/cuda/chunked_scan.cuh\"\n"
                "#include \"deltac/cuda/chunked_scan_warp.cuh\"\n"
                "#include \"deltac/cuda/chunked_split.cuh\"\n";
}

bool chunked_config_ok(int32_t var, int K, int V, int32_t dtype, const KernelConfig &c,
                       std::string *error) {
  const int elem = dtype == DELTAC_F32 ? 4 : 2;
  if (c.family != Family::CudaChunked ||
      !cuda::chunked_legal(var, K, V, elem, c.chunk, c.tile_v, c.warps, c.stages)) {
    *error = config_string(c) + " is not a legal cuda_chunked config for K = " +
             std::to_string(K) + ", V = " + std::to_string(V);
    return false;
  }
  return true;
}

// The kernel form p runs with c (no strings: every call of the NVRTC path
// makes it) and whether that form writes per-token states; false with
// *error where p does not match a recurrent kernel or c has no form for it.
bool recurrent_form(const deltac_fwd_params &p, const KernelConfig &c, bool det,
                    RecurrentChoice *ch, bool *steps, bool *staged, std::string *error) {
  if (!cuda::detail::recurrent_matches(p, p.variant, p.K, p.V, p.in_dtype) ||
      (p.in_dtype != DELTAC_F32 && p.in_dtype != DELTAC_BF16) || c.tile_v <= 0 ||
      c.warps <= 0 || p.V % c.tile_v != 0) {
    *error = "cuda_recurrent (compiled at run time) refused the call: its fields do not "
             "match a recurrent kernel of " + config_string(c);
    return false;
  }
  const int64_t blocks = int64_t(p.N) * p.HV * (p.V / c.tile_v);
  *ch = cuda::recurrent_choice(p.K, c.tile_v, c.warps, detail::dtypeSize(p.state_dtype),
                               cuda::recurrent_one_token(p, det), cuda::detail::Form::Auto,
                               blocks);
  if (ch->kernel == RecurrentKernel::None) {
    *error = config_string(c) + " has no recurrent kernel form for this call";
    return false;
  }
  *steps = (p.state_steps || p.accepted) && ch->kernel != RecurrentKernel::StripOne;
  *staged = ch->kernel == RecurrentKernel::StripOne &&
            cuda::detail::recurrent_staged(p, c.tile_v, c.warps, ch->vec,
                                           cuda::detail::Form::Auto, blocks);
  return true;
}
} // namespace

bool cuda_recurrent_program(const deltac_fwd_params &p, const KernelConfig &c, bool det,
                            RecurrentProgram *out, std::string *error) {
  bool pt = false, staged = false;
  if (!recurrent_form(p, c, det, &out->choice, &pt, &staged, error))
    return false;
  jit::Program &prog = out->program;
  prog.name = std::string("recurrent_") + variant_name(p.variant) + "_k" + std::to_string(p.K) +
              "_v" + std::to_string(p.V) + "_" + dtype_name(p.in_dtype) + "_state_" +
              dtype_name(p.state_dtype) + "_bv" + std::to_string(c.tile_v) + "_w" +
              std::to_string(c.warps) + "_form" + std::to_string(int(out->choice.kernel)) +
              "_vec" + std::to_string(out->choice.vec) + (pt ? "_steps" : "") +
              (staged ? "_staged" : "");
  prog.source = "#include \"deltac/cuda/recurrent_strip.cuh\"\n";
  prog.kernels = {kernel_expr(p, c, out->choice, pt, staged)};
  return true;
}

bool cuda_jit_enabled(Family f, std::string *why) {
  std::string local;
  std::string &w = why ? *why : local;
  if (f != Family::CudaRecurrent && f != Family::CudaChunked) {
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
  // Once per process: NVRTC loads and compiles a real recurrent kernel for
  // this device (else decode at dims no instance has runs padded, as without
  // NVRTC, and configs not shipped are refused or replaced by the default).
  static std::once_flag once;
  static bool ok = false;
  static std::string probe_why;
  std::call_once(once, [] {
    if (!jit::available(&probe_why))
      return;
    // A real kernel of the smallest shape (one-token form, K = V = 16),
    // instantiated, compiled and loaded like any other.
    static float dummy[4];
    deltac_fwd_params p{};
    p.variant = DELTAC_VARIANT_GATED;
    p.B = p.N = p.T = 1, p.H = p.HV = 1, p.K = p.V = 16;
    p.in_dtype = p.out_dtype = p.state_dtype = DELTAC_F32;
    p.state_layout = DELTAC_STATE_KV;
    p.q = p.k = p.v = dummy, p.g = p.beta = dummy, p.o = dummy;
    KernelConfig c;
    c.family = Family::CudaRecurrent, c.tile_v = 16, c.warps = 1;
    RecurrentProgram rp;
    ok = cuda_recurrent_program(p, c, false, &rp, &probe_why) &&
         jit::load(rp.program, &probe_why) != nullptr;
  });
  if (!ok)
    w = "NVRTC cannot compile deltac's kernels here: " + probe_why;
  return ok;
}

bool cuda_recurrent_jit(const deltac_fwd_params &p, const KernelConfig &c, cudaStream_t s,
                        const Launch &l, std::string *error) {
  using namespace cuda::detail;
  RecurrentChoice ch;
  bool steps = false, staged = false;
  if (!recurrent_form(p, c, l.deterministic, &ch, &steps, &staged, error))
    return false;
  if (p.N == 0)
    return true;
  const int threads = c.warps * 32;
  const int64_t blocks = int64_t(p.N) * p.HV * (p.V / c.tile_v);
  if (blocks > 0x7fffffff) {
    *error = "cuda_recurrent: " + std::to_string(blocks) + " blocks exceed the grid limit";
    return false;
  }
  // The kernel handle by what its program depends on (ints: a decode call
  // builds no program text once its kernel is loaded).
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess)
    dev = -1;
  const std::array<int, 12> key = {dev,     p.variant, p.K,          p.V,    p.in_dtype,
                                   p.state_dtype, c.tile_v, c.warps, int(ch.kernel), ch.vec,
                                   int(steps), int(staged)};
  static std::mutex mu;
  static std::map<std::array<int, 12>, const void *> handles;
  const void *fn = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = handles.find(key);
    if (it != handles.end())
      fn = it->second;
  }
  if (!fn) {
    RecurrentProgram rp;
    if (!cuda_recurrent_program(p, c, l.deterministic, &rp, error))
      return false;
    const jit::Module *m = module_for(rp.program, error);
    if (!m)
      return false;
    fn = m->kernels[0];
    std::lock_guard<std::mutex> lock(mu);
    handles.emplace(key, fn);
  }
  float scale;
  bool vec_io, vec_state;
  call_setup(p, p.in_dtype == DELTAC_F32 ? 4 : 2, &scale, &vec_io, &vec_state);
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

bool cuda_chunked_program(const deltac_fwd_params &p, const KernelConfig &c,
                          jit::Program *out, std::string *error) {
  if (!chunked_config_ok(p.variant, p.K, p.V, p.in_dtype, c, error))
    return false;
  ChunkedProgram cp;
  chunked_program(p.variant, p.K, p.V, p.in_dtype, c, &cp);
  *out = cp.program;
  return true;
}

size_t cuda_chunked_jit_workspace(const deltac_fwd_params &p, const KernelConfig &c, bool det,
                                  int32_t route) {
  std::string error;
  if (!chunked_config_ok(p.variant, p.K, p.V, p.in_dtype, c, &error))
    return 0;
  ChunkedProgram cp;
  chunked_program(p.variant, p.K, p.V, p.in_dtype, c, &cp);
  using namespace cuda::detail;
  switch (p.in_dtype) {
  case DELTAC_BF16:
    return chunked_workspace_with<__nv_bfloat16>(cp.layout, p, det, route, c.split, c.fuse, c.scan);
  case DELTAC_F16:
    return chunked_workspace_with<__half>(cp.layout, p, det, route, c.split, c.fuse, c.scan);
  default:
    return chunked_workspace_with<float>(cp.layout, p, det, route, c.split, c.fuse, c.scan);
  }
}

bool cuda_chunked_jit(const deltac_fwd_params &p, const KernelConfig &c, cudaStream_t s,
                      const Launch &l, std::string *error) {
  if (!chunked_config_ok(p.variant, p.K, p.V, p.in_dtype, c, error))
    return false;
  ChunkedProgram cp;
  chunked_program(p.variant, p.K, p.V, p.in_dtype, c, &cp);
  const jit::Module *m = module_for(cp.program, error);
  if (!m)
    return false;
  for (size_t i = 0; i < cp.slots.size(); ++i)
    *cp.slots[i] = m->kernels[i];
  using namespace cuda::detail;
  cudaError_t e;
  switch (p.in_dtype) {
  case DELTAC_BF16:
    e = chunked_run_with<__nv_bfloat16>(cp.layout, p, s, l.ws, l.ws_bytes, l.skip,
                                        l.deterministic, l.route, c.split, c.fuse, c.scan, l.cstates,
                                l.cstates_count);
    break;
  case DELTAC_F16:
    e = chunked_run_with<__half>(cp.layout, p, s, l.ws, l.ws_bytes, l.skip, l.deterministic,
                                 l.route, c.split, c.fuse, c.scan, l.cstates,
                                l.cstates_count);
    break;
  default:
    e = chunked_run_with<float>(cp.layout, p, s, l.ws, l.ws_bytes, l.skip, l.deterministic,
                                l.route, c.split, c.fuse, c.scan, l.cstates,
                                l.cstates_count);
  }
  if (e == cudaErrorInvalidValue) {
    *error = "cuda_chunked (compiled at run time) refused the call: q, k, v, o, h0, ht and "
             "chunk_states must be 16-byte aligned, the workspace 256-byte aligned and at "
             "least deltac_workspace_size()";
    return false;
  }
  if (e != cudaSuccess) {
    *error = std::string("CUDA launch of the run-time compiled cuda_chunked kernels failed: ") +
             cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    return false;
  }
  return true;
}

} // namespace rt
} // namespace deltac
