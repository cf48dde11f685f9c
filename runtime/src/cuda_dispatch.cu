// CUDA side of the runtime: availability, the device's multiprocessor
// count, the device-pointer path (enqueue only: never a host copy or a
// synchronisation) and the host-pointer path (allocate, copy, run, copy
// back). Uses the runtime API
// with static cudart, which loads the driver lazily: on machines without a
// driver every call below fails cleanly and cuda_available() is false.
#include "cuda_dispatch.h"
#include "chunk_states.h"
#include "deltac/check.h"
#include "cuda_jit.h"
#include "cuda_pad.h"
#include "dispatch.h"
#include "select.h"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace deltac {
namespace rt {
namespace {

// Launching this shows that the binary holds code for the current device.
__global__ void probeKernel() {}

std::string cudaMsg(const std::string &what, cudaError_t e) {
  return std::string("CUDA ") + what + " failed: " + cudaGetErrorName(e) +
         " (" + cudaGetErrorString(e) + ")";
}

cudaError_t launch(const deltac_fwd_params &p, const KernelConfig &c,
                   cudaStream_t s, const Launch &l, bool *found) {
  switch (p.variant) {
  case DELTAC_VARIANT_DELTA:
    return cudaLaunch<DELTAC_VARIANT_DELTA>(p, c, s, l, found);
  case DELTAC_VARIANT_GATED:
    return cudaLaunch<DELTAC_VARIANT_GATED>(p, c, s, l, found);
  default:
    return cudaLaunch<DELTAC_VARIANT_KDA>(p, c, s, l, found);
  }
}

// Launches p with c; false with *error when nothing or a failing launch ran.
bool launchChecked(const deltac_fwd_params &p, const KernelConfig &c,
                   cudaStream_t s, const Launch &l, std::string *error) {
  bool found = false;
  cudaError_t e = launch(p, c, s, l, &found);
  if (!found) { // not precompiled: NVRTC where the family has that path
    std::string why;
    if (cuda_jit_enabled(c.family, &why))
      return c.family == Family::CudaChunked ? cuda_chunked_jit(p, c, s, l, error)
                                             : cuda_recurrent_jit(p, c, s, l, error);
    *error = "no precompiled CUDA kernel for " + config_string(c) + " with K = " +
             std::to_string(p.K) + ", V = " + std::to_string(p.V) + " (" + why + ")";
    return false;
  }
  if (e == cudaErrorInvalidValue && c.family == Family::CudaChunked) {
    *error = "cuda_chunked refused the call (" + cudaMsg("kernel launch", e) +
             "): q, k, v, o, h0, ht and chunk_states must be 16-byte aligned, the "
             "workspace 256-byte aligned and at least deltac_workspace_size()";
    return false;
  }
  if (e != cudaSuccess) {
    *error = cudaMsg("kernel launch", e);
    return false;
  }
  return true;
}

// The launches of one call: a mixed batch's short config, then c; padded
// first (cuda_pad.h) when pad.K is set.
bool launchCall(const deltac_fwd_params &p, const KernelConfig &c,
                cudaStream_t s, const Launch &l, const Mixed &mixed,
                const Pad &pad, std::string *error) {
  auto both = [&](const deltac_fwd_params &d, const Launch &ld) {
    if (mixed.route > 0 && (mixed.parts & 1) &&
        !launchChecked(d, mixed.short_config, s, ld, error))
      return false;
    return mixed.route > 0 && !(mixed.parts & 2) ? true
                                                 : launchChecked(d, c, s, ld, error);
  };
  if (!pad.K)
    return both(p, l);
  if (l.cstates && (pad.K != p.K || pad.V != p.V)) { // runtime.cpp refuses these first
    *error = "a padded call writes no chunk-end states";
    return false;
  }
  if (mixed.route > 0 && mixed.parts != 3) { // a part alone would unpad the other's o
    *error = "a padded call runs both kernels of a mixed batch (Mixed.parts = 3)";
    return false;
  }
  Launch lp = l;
  lp.saved = nullptr; // the padded dims' states are not the backward's
  return run_padded(p, pad, pad_shares_state(c.family, mixed.route), s, lp, both, error);
}

// One device allocation holding every tensor at 256-byte aligned offsets.
struct DeviceBuffer {
  char *base = nullptr;
  ~DeviceBuffer() {
    if (base)
      cudaFree(base);
  }
};

} // namespace

bool cuda_built() { return true; }

size_t cuda_workspace_size(const deltac_fwd_params &p, const KernelConfig &c,
                           bool deterministic, int32_t route, const Pad &pad) {
  if (pad.K) { // the padded tensors, then the kernel's workspace for them
    const bool share = pad_shares_state(c.family, route);
    return pad_bytes(p, pad, share) +
           cuda_workspace_size(padded_params(p, pad, share, nullptr), c,
                               deterministic, route);
  }
  size_t n = 0;
  switch (p.variant) {
  case DELTAC_VARIANT_DELTA:
    n = cudaWorkspace<DELTAC_VARIANT_DELTA>(p, c, deterministic, route);
    break;
  case DELTAC_VARIANT_GATED:
    n = cudaWorkspace<DELTAC_VARIANT_GATED>(p, c, deterministic, route);
    break;
  default:
    n = cudaWorkspace<DELTAC_VARIANT_KDA>(p, c, deterministic, route);
  }
  // A chunked config with no precompiled instance (its workspace is never
  // 0): the NVRTC path's, where it runs.
  if (n == 0 && c.family == Family::CudaChunked && cuda_jit_enabled(c.family))
    n = cuda_chunked_jit_workspace(p, c, deterministic, route);
  return n;
}

bool cuda_available() {
  static std::once_flag once;
  static bool available = false;
  std::call_once(once, [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
      cudaGetLastError(); // clear the sticky-free error state
      return;
    }
    cudaFuncAttributes attr;
    available = cudaFuncGetAttributes(&attr, probeKernel) == cudaSuccess;
    cudaGetLastError();
  });
  return available;
}

void cuda_env(std::map<std::string, std::string> *env) {
  if (!cuda_available())
    return;
  int dev = 0, driver = 0, runtime = 0;
  cudaDeviceProp prop;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaGetLastError();
  (*env)["gpu"] = prop.name;
  (*env)["cc"] = std::to_string(prop.major) + "." + std::to_string(prop.minor);
  (*env)["sm_count"] = std::to_string(prop.multiProcessorCount);
  (*env)["driver"] = std::to_string(driver);
  (*env)["cuda_runtime"] = std::to_string(runtime);
}

namespace {
// Attribute a of the current device, read once per device (cudaDeviceGetAttribute
// is cheap, but these are on every call's path); 0 = unknown.
constexpr int kMaxDevices = 64;
int cachedAttribute(cudaDeviceAttr a, std::atomic<int> (&cache)[kMaxDevices]) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) {
    cudaGetLastError();
    return 0;
  }
  int x = cache[dev].load(std::memory_order_relaxed);
  if (x == 0) {
    if (cudaDeviceGetAttribute(&x, a, dev) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    cache[dev].store(x, std::memory_order_relaxed);
  }
  return x;
}
} // namespace

int cuda_sm_count() {
  static std::atomic<int> cache[kMaxDevices] = {};
  return cachedAttribute(cudaDevAttrMultiProcessorCount, cache);
}

int cuda_cc() {
  static std::atomic<int> major[kMaxDevices] = {}, minor[kMaxDevices] = {};
  const int ma = cachedAttribute(cudaDevAttrComputeCapabilityMajor, major);
  return ma ? 10 * ma + cachedAttribute(cudaDevAttrComputeCapabilityMinor, minor) : 0;
}

namespace {

// Byte sizes and offsets (256-byte aligned) of every tensor of p in one
// device allocation.
struct Layout {
  size_t qk, v, beta, g, state, o, cu, slots, steps, sscale, cstates;
  size_t qOff, kOff, vOff, betaOff, gOff, h0Off, htOff, oOff, cuOff;
  size_t readOff, writeOff, accOff, stepsOff, sscaleOff, cstatesOff;
  bool shared; // h0 == ht: one device pool
  size_t total = 0;

  // chunks: the chunk-end states the call writes (0: none).
  Layout(const deltac_fwd_params &p, int64_t chunks) {
    const size_t in = detail::dtypeSize(p.in_dtype), out = detail::dtypeSize(p.out_dtype);
    const size_t st = detail::dtypeSize(p.state_dtype);
    const size_t tok = size_t(p.B) * p.T;
    qk = tok * p.H * p.K * in;
    v = tok * p.HV * p.V * in;
    beta = tok * p.HV * 4;
    g = p.variant == DELTAC_VARIANT_KDA     ? beta * p.K
        : p.variant == DELTAC_VARIANT_GATED ? beta
                                            : 0;
    // A pool holds num_slots states, else one per sequence.
    state = size_t(p.read_slots ? p.num_slots : p.N) * p.HV * p.K * p.V * st;
    steps = p.state_steps ? tok * p.HV * p.K * p.V * st : 0;
    o = tok * p.HV * p.V * out;
    cu = p.cu_seqlens ? (size_t(p.N) + 1) * 8 : 0;
    slots = size_t(p.N) * 4;
    sscale = p.state_scale ? size_t(p.HV) * 4 : 0;
    cstates = size_t(chunks) * p.HV * p.K * p.V * 4;
    shared = p.h0 && p.h0 == p.ht;
    qOff = place(qk), kOff = place(qk), vOff = place(v);
    betaOff = place(beta), gOff = place(g);
    h0Off = place(p.h0 ? state : 0);
    htOff = shared ? h0Off : place(p.ht ? state : 0);
    oOff = place(o), cuOff = place(cu);
    readOff = place(p.read_slots ? slots : 0);
    writeOff = place(p.write_slots ? slots : 0);
    accOff = place(p.accepted ? slots : 0);
    stepsOff = place(steps);
    sscaleOff = place(sscale);
    cstatesOff = place(cstates);
  }
  size_t place(size_t bytes) {
    const size_t off = total;
    total += (bytes + 255) / 256 * 256;
    return off;
  }
};

// p with its pointers moved into the allocation at base.
deltac_fwd_params onDevice(const deltac_fwd_params &p, const Layout &l,
                           char *base) {
  deltac_fwd_params d = p;
  d.q = base + l.qOff;
  d.k = base + l.kOff;
  d.v = base + l.vOff;
  d.beta = reinterpret_cast<const float *>(base + l.betaOff);
  d.g = p.g && l.g ? reinterpret_cast<const float *>(base + l.gOff) : nullptr;
  d.h0 = p.h0 ? base + l.h0Off : nullptr;
  d.ht = p.ht ? base + l.htOff : nullptr;
  d.o = base + l.oOff;
  d.cu_seqlens =
      p.cu_seqlens ? reinterpret_cast<const int64_t *>(base + l.cuOff) : nullptr;
  auto slots = [&](const int32_t *x, size_t off) {
    return x ? reinterpret_cast<const int32_t *>(base + off) : nullptr;
  };
  d.read_slots = slots(p.read_slots, l.readOff);
  d.write_slots = slots(p.write_slots, l.writeOff);
  d.accepted = slots(p.accepted, l.accOff);
  d.state_steps = p.state_steps ? base + l.stepsOff : nullptr;
  d.state_scale =
      p.state_scale ? reinterpret_cast<const float *>(base + l.sscaleOff) : nullptr;
  return d;
}

// Device pointers: the caller ran check_params(p, .., false); the contents
// of cu_seqlens are never copied to the host and nothing synchronises.
// Checking mode: the device check runs first on the same stream and the
// kernel reads its flag.
bool runDevicePointers(const deltac_fwd_params &p, const KernelConfig &c,
                       const deltac_options &opt, const Mixed &mixed,
                       const Pad &pad, std::string *error) {
  cudaStream_t stream = static_cast<cudaStream_t>(opt.cuda_stream);
  Launch l;
  l.deterministic = opt.deterministic != 0;
  l.ws = opt.workspace;
  l.ws_bytes = opt.workspace_bytes;
  if (opt.check_values) {
    cudaError_t e = cuda_check_values(p, opt.allow_neg_eigval ? 2.0f : 1.0f,
                                      opt.check_flag, stream);
    if (e != cudaSuccess) {
      *error = cudaMsg("launch of the value check", e);
      return false;
    }
    l.skip = opt.check_flag;
  }
  l.route = mixed.route;
  l.cstates = opt.chunk_states;
  l.cstates_count = opt.chunk_states ? opt.chunk_states_count : 0;
  if (opt.saved_states) { // the kernel that writes them sets the flag
    cudaError_t e = cudaMemsetAsync(opt.saved_states, 0, sizeof(int32_t), stream);
    if (e != cudaSuccess) {
      *error = cudaMsg("zeroing options.saved_states' flag", e);
      return false;
    }
    l.saved = opt.saved_states;
  }
  return launchCall(p, c, stream, l, mixed, pad, error);
}

// Host pointers: one allocation, copies in, the kernel, copies back, sync.
bool runHostPointers(const deltac_fwd_params &p, const KernelConfig &c,
                     const deltac_options &opt, const Mixed &mixed,
                     const Pad &pad, std::string *error) {
  cudaStream_t stream = static_cast<cudaStream_t>(opt.cuda_stream);
  const int64_t chunks = opt.chunk_states ? chunk_count(p, c.chunk) : 0;
  const Layout l(p, chunks);
  DeviceBuffer buf;
  cudaError_t e = cudaMalloc(reinterpret_cast<void **>(&buf.base), l.total);
  if (e != cudaSuccess) {
    buf.base = nullptr;
    cudaGetLastError();
    *error = cudaMsg("allocation of " + std::to_string(l.total) + " bytes", e);
    return false;
  }
  struct Copy {
    size_t off;
    const void *src;
    size_t bytes;
  };
  // A pool's ht goes in too: the slots no sequence writes come back as
  // they were.
  const bool htIn = p.read_slots && p.ht && !l.shared;
  const Copy copies[] = {{l.qOff, p.q, l.qk},       {l.kOff, p.k, l.qk},
                         {l.vOff, p.v, l.v},        {l.betaOff, p.beta, l.beta},
                         {l.gOff, p.g, l.g},        {l.h0Off, p.h0, p.h0 ? l.state : 0},
                         {l.cuOff, p.cu_seqlens, l.cu},
                         {l.htOff, htIn ? p.ht : nullptr, l.state},
                         {l.readOff, p.read_slots, l.slots},
                         {l.writeOff, p.write_slots, l.slots},
                         {l.accOff, p.accepted, l.slots},
                         {l.sscaleOff, p.state_scale, l.sscale}};
  for (const Copy &cp : copies) {
    if (!cp.src || !cp.bytes)
      continue;
    e = cudaMemcpyAsync(buf.base + cp.off, cp.src, cp.bytes,
                        cudaMemcpyHostToDevice, stream);
    if (e != cudaSuccess) {
      *error = cudaMsg("copy to the device", e);
      return false;
    }
  }
  const deltac_fwd_params d = onDevice(p, l, buf.base);
  Launch run;
  run.deterministic = opt.deterministic != 0;
  run.route = mixed.route;
  if (opt.chunk_states) {
    run.cstates = reinterpret_cast<float *>(buf.base + l.cstatesOff);
    run.cstates_count = chunks;
  }
  Mixed all = mixed;
  all.parts = 3;
  if (!launchCall(d, c, stream, run, all, pad, error))
    return false;
  e = cudaMemcpyAsync(p.o, d.o, l.o, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess && p.ht)
    e = cudaMemcpyAsync(p.ht, d.ht, l.state, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess && p.state_steps)
    e = cudaMemcpyAsync(p.state_steps, d.state_steps, l.steps,
                        cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess && l.cstates)
    e = cudaMemcpyAsync(opt.chunk_states, run.cstates, l.cstates,
                        cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess)
    e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) {
    *error = cudaMsg("kernel run or copy back", e);
    return false;
  }
  return true;
}

} // namespace

bool cuda_run(const deltac_fwd_params &p, const KernelConfig &c,
              const deltac_options &opt, std::string *error, const Mixed &mixed,
              const Pad &pad) {
  return opt.device_pointers ? runDevicePointers(p, c, opt, mixed, pad, error)
                             : runHostPointers(p, c, opt, mixed, pad, error);
}

} // namespace rt
} // namespace deltac
