// CUDA side of the runtime: availability, the device's multiprocessor
// count, the device-pointer path (enqueue only: never a host copy or a
// synchronisation) and the host-pointer path (allocate, copy, run, copy
// back). Uses the runtime API
// with static cudart, which loads the driver lazily: on machines without a
// driver every call below fails cleanly and cuda_available() is false.
#include "cuda_dispatch.h"
#include "dispatch.h"

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
                   cudaStream_t s, const int32_t *skip, bool *found) {
  switch (p.variant) {
  case DELTAC_VARIANT_DELTA:
    return cuda_launch_delta(p, c, s, skip, found);
  case DELTAC_VARIANT_GATED:
    return cuda_launch_gated(p, c, s, skip, found);
  default:
    return cuda_launch_kda(p, c, s, skip, found);
  }
}

// Launches p with c; false with *error when nothing or a failing launch ran.
bool launchChecked(const deltac_fwd_params &p, const KernelConfig &c,
                   cudaStream_t s, const int32_t *skip, std::string *error) {
  bool found = false;
  cudaError_t e = launch(p, c, s, skip, &found);
  if (!found) {
    *error = std::string("no precompiled CUDA kernel for ") +
             family_info(c.family).name + " tile_v = " +
             std::to_string(c.tile_v) + ", warps = " +
             std::to_string(c.warps) + " with K = " + std::to_string(p.K) +
             ", V = " + std::to_string(p.V);
    return false;
  }
  if (e != cudaSuccess) {
    *error = cudaMsg("kernel launch", e);
    return false;
  }
  return true;
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

int cuda_sm_count() {
  // Per device, read once (cudaDeviceGetAttribute is cheap, but this is on
  // every call's path). 0 = unknown.
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) {
    cudaGetLastError();
    return 0;
  }
  int sms = cache[dev].load(std::memory_order_relaxed);
  if (sms == 0) {
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) !=
        cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    cache[dev].store(sms, std::memory_order_relaxed);
  }
  return sms;
}

bool cuda_run(const deltac_fwd_params &p, const KernelConfig &c,
              const deltac_options &opt, std::string *error) {
  cudaStream_t stream = static_cast<cudaStream_t>(opt.cuda_stream);
  cudaError_t e;

  if (opt.device_pointers) {
    // The caller ran check_params(p, .., /*cu_seqlens_on_host=*/false); the
    // contents of cu_seqlens are never copied to the host. Checking mode:
    // the device check runs first on the same stream and the kernel reads
    // its flag.
    const int32_t *skip = nullptr;
    if (opt.check_values) {
      e = cuda_check_values(p, opt.allow_neg_eigval ? 2.0f : 1.0f,
                            opt.check_flag, stream);
      if (e != cudaSuccess) {
        *error = cudaMsg("launch of the value check", e);
        return false;
      }
      skip = opt.check_flag;
    }
    return launchChecked(p, c, stream, skip, error);
  }

  // Host pointers: lay out every tensor in one allocation.
  const size_t in = p.in_dtype == DELTAC_BF16 ? 2 : 4;
  const size_t out = p.out_dtype == DELTAC_BF16 ? 2 : 4;
  const size_t tok = size_t(p.B) * p.T;
  const size_t qkBytes = tok * p.H * p.K * in;
  const size_t vBytes = tok * p.HV * p.V * in;
  const size_t betaBytes = tok * p.HV * 4;
  const size_t gBytes = p.variant == DELTAC_VARIANT_KDA     ? betaBytes * p.K
                        : p.variant == DELTAC_VARIANT_GATED ? betaBytes
                                                            : 0;
  const size_t stateBytes = size_t(p.N) * p.HV * p.K * p.V * 4;
  const size_t oBytes = tok * p.HV * p.V * out;
  const size_t cuBytes = p.cu_seqlens ? (size_t(p.N) + 1) * 8 : 0;

  size_t total = 0;
  auto place = [&](size_t bytes) {
    size_t off = total;
    total += (bytes + 255) / 256 * 256;
    return off;
  };
  const size_t qOff = place(qkBytes), kOff = place(qkBytes),
               vOff = place(vBytes), betaOff = place(betaBytes),
               gOff = place(gBytes), h0Off = place(p.h0 ? stateBytes : 0),
               htOff = place(p.ht ? stateBytes : 0), oOff = place(oBytes),
               cuOff = place(cuBytes);

  DeviceBuffer buf;
  e = cudaMalloc(reinterpret_cast<void **>(&buf.base), total);
  if (e != cudaSuccess) {
    buf.base = nullptr;
    cudaGetLastError();
    *error = cudaMsg("allocation of " + std::to_string(total) + " bytes", e);
    return false;
  }
  struct Copy {
    size_t off;
    const void *src;
    size_t bytes;
  };
  const Copy copies[] = {{qOff, p.q, qkBytes},         {kOff, p.k, qkBytes},
                         {vOff, p.v, vBytes},          {betaOff, p.beta, betaBytes},
                         {gOff, p.g, gBytes},          {h0Off, p.h0, p.h0 ? stateBytes : 0},
                         {cuOff, p.cu_seqlens, cuBytes}};
  for (const Copy &c : copies) {
    if (!c.src || !c.bytes)
      continue;
    e = cudaMemcpyAsync(buf.base + c.off, c.src, c.bytes,
                        cudaMemcpyHostToDevice, stream);
    if (e != cudaSuccess) {
      *error = cudaMsg("copy to the device", e);
      return false;
    }
  }
  deltac_fwd_params d = p;
  d.q = buf.base + qOff;
  d.k = buf.base + kOff;
  d.v = buf.base + vOff;
  d.beta = reinterpret_cast<const float *>(buf.base + betaOff);
  d.g = p.g && gBytes ? reinterpret_cast<const float *>(buf.base + gOff)
                      : nullptr;
  d.h0 = p.h0 ? buf.base + h0Off : nullptr;
  d.ht = p.ht ? buf.base + htOff : nullptr;
  d.o = buf.base + oOff;
  d.cu_seqlens = p.cu_seqlens
                     ? reinterpret_cast<const int64_t *>(buf.base + cuOff)
                     : nullptr;
  if (!launchChecked(d, c, stream, nullptr, error))
    return false;
  e = cudaMemcpyAsync(p.o, d.o, oBytes, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess && p.ht)
    e = cudaMemcpyAsync(p.ht, d.ht, stateBytes, cudaMemcpyDeviceToHost,
                        stream);
  if (e == cudaSuccess)
    e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) {
    *error = cudaMsg("kernel run or copy back", e);
    return false;
  }
  return true;
}

} // namespace rt
} // namespace deltac
