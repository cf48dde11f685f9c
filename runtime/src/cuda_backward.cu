// deltac_backward on CUDA: the instances of deltac/cuda/backward.cuh (every
// variant, K = 64, 128, 256; in_dtype read at run time) and of the chunked
// deltac/cuda/backward_chunked.cuh (delta, gated; K = 64, 128), the choice
// between them (deltac/backward_rules.h), and a check that the pointers are
// device memory.
#include "cuda_backward.h"

#include "deltac/backward_rules.h"
#include "deltac/cuda/backward.cuh"
#include "deltac/cuda/backward_chunked.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace deltac::rt {
namespace {

std::string cuda_message(const char *what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}

// The instance of p's variant and K: X(Var, K) expands to its call.
#define DELTAC_BWD_DISPATCH(p, X)                                          \
  switch ((p).variant * 1000 + (p).K) {                                    \
    case DELTAC_VARIANT_DELTA * 1000 + 64: return X(DELTAC_VARIANT_DELTA, 64); \
    case DELTAC_VARIANT_DELTA * 1000 + 128: return X(DELTAC_VARIANT_DELTA, 128); \
    case DELTAC_VARIANT_DELTA * 1000 + 256: return X(DELTAC_VARIANT_DELTA, 256); \
    case DELTAC_VARIANT_GATED * 1000 + 64: return X(DELTAC_VARIANT_GATED, 64); \
    case DELTAC_VARIANT_GATED * 1000 + 128: return X(DELTAC_VARIANT_GATED, 128); \
    case DELTAC_VARIANT_GATED * 1000 + 256: return X(DELTAC_VARIANT_GATED, 256); \
    case DELTAC_VARIANT_KDA * 1000 + 64: return X(DELTAC_VARIANT_KDA, 64);   \
    case DELTAC_VARIANT_KDA * 1000 + 128: return X(DELTAC_VARIANT_KDA, 128); \
    case DELTAC_VARIANT_KDA * 1000 + 256: return X(DELTAC_VARIANT_KDA, 256); \
    default: return cudaErrorInvalidValue;                                 \
  }

// The chunked instance of p's variant and K (covered shapes only).
#define DELTAC_BWDC_DISPATCH(p, X)                                         \
  switch ((p).variant * 1000 + (p).K) {                                    \
    case DELTAC_VARIANT_DELTA * 1000 + 64: return X(DELTAC_VARIANT_DELTA, 64); \
    case DELTAC_VARIANT_DELTA * 1000 + 128: return X(DELTAC_VARIANT_DELTA, 128); \
    case DELTAC_VARIANT_GATED * 1000 + 64: return X(DELTAC_VARIANT_GATED, 64); \
    case DELTAC_VARIANT_GATED * 1000 + 128: return X(DELTAC_VARIANT_GATED, 128); \
    default: return cudaErrorInvalidValue;                                 \
  }

int64_t sequences(const deltac_bwd_params &p) { return p.cu_seqlens ? p.N : p.B; }

// The workspace of each path: *chk = 0 where no chunked instance covers p.
cudaError_t path_sizes(const deltac_bwd_params &p, size_t *simt, size_t *chk) {
  *simt = *chk = 0;
  cudaError_t e;
  {
#define DELTAC_X(V, K) cuda::bwd::workspace<V, K>(p, simt)
    auto run = [&]() -> cudaError_t { DELTAC_BWD_DISPATCH(p, DELTAC_X) };
#undef DELTAC_X
    if ((e = run()) != cudaSuccess) return e;
  }
  if (!bwd_chunked_covers(p.variant, p.K, p.V)) return cudaSuccess;
#define DELTAC_X(V, K) cuda::bwdc::workspace<V, K>(p, chk)
  auto run = [&]() -> cudaError_t { DELTAC_BWDC_DISPATCH(p, DELTAC_X) };
#undef DELTAC_X
  return run();
}

// bwd_chunked_cap of the current device's memory (8 GiB where unknown),
// queried once per device (the total does not change).
uint64_t chunked_cap() {
  constexpr int kDevices = 64;
  static std::atomic<uint64_t> caps[kDevices] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kDevices) {
    cudaGetLastError();
    return bwd_chunked_cap(0);
  }
  uint64_t cap = caps[dev].load(std::memory_order_relaxed);
  if (cap == 0) {
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) {
      cudaGetLastError();
      return bwd_chunked_cap(0);
    }
    cap = bwd_chunked_cap(total);
    caps[dev].store(cap, std::memory_order_relaxed);
  }
  return cap;
}

// Whether the chunked path may run p at all: covered, and its workspace
// within the rule's bound (bwd_chunked_workspace_ok).
bool chunked_allowed(const deltac_bwd_params &p) {
  if (!bwd_chunked_covers(p.variant, p.K, p.V)) return false;
  size_t simt = 0, chk = 0;
  return path_sizes(p, &simt, &chk) == cudaSuccess &&
         bwd_chunked_workspace_ok(chk, simt, chunked_cap());
}

// Whether the rule picks the chunked backward for p's shape and lengths
// (backward_rules.h). Tests only: DELTAC_CUDA_BWD=recurrent or =chunked
// forces a path (chunked only where chunked_allowed).
bool chunked_by_rule(const deltac_bwd_params &p) {
  if (!chunked_allowed(p) || sequences(p) > 65535) return false;
  const char *force = std::getenv("DELTAC_CUDA_BWD");
  if (force && std::strcmp(force, "recurrent") == 0) return false;
  if (force && std::strcmp(force, "chunked") == 0) return true;
  return bwd_use_chunked(p.variant, p.K, p.V, int64_t(p.B) * p.T, sequences(p));
}

// Whether the chunked backward runs p: the rule, and pointers aligned as its
// kernels need (bwdc::aligned); else the sweep, whose workspace the query
// covers.
bool chunked(const deltac_bwd_params &p) {
  return chunked_by_rule(p) && cuda::bwdc::aligned(p);
}

// The chunked path's where the rule picks it and p's pointers suit it
// (bwdc::aligned), enough for either path where the rule picks it but they
// do not (the call may run the sweep), else the recurrent sweep's. A call
// needs what the query with its own pointers gave.
cudaError_t workspace(const deltac_bwd_params &p, size_t *bytes) {
  size_t simt = 0, chk = 0;
  const cudaError_t e = path_sizes(p, &simt, &chk);
  if (e != cudaSuccess) return e;
  const bool rule = chk && chunked_by_rule(p);
  *bytes = rule && cuda::bwdc::aligned(p) ? chk : rule ? std::max(simt, chk) : simt;
  return cudaSuccess;
}

cudaError_t launch(const deltac_bwd_params &p, cudaStream_t s, void *ws, size_t ws_bytes) {
  if (chunked(p)) {
#define DELTAC_X(V, K) cuda::bwdc::backward<V, K>(p, s, ws, ws_bytes)
    DELTAC_BWDC_DISPATCH(p, DELTAC_X)
#undef DELTAC_X
  }
#define DELTAC_X(V, K) cuda::bwd::backward<V, K>(p, s, ws, ws_bytes)
  DELTAC_BWD_DISPATCH(p, DELTAC_X)
#undef DELTAC_X
}

// "" when every non-null pointer of p is device (or managed) memory.
std::string host_pointer(const deltac_bwd_params &p) {
  const struct {
    const char *name;
    const void *ptr;
  } ptrs[] = {{"q", p.q},         {"k", p.k},     {"v", p.v},       {"g", p.g},
              {"beta", p.beta},   {"h0", p.h0},   {"dout", p.dout}, {"dht", p.dht},
              {"dq", p.dq},       {"dk", p.dk},   {"dv", p.dv},     {"dg", p.dg},
              {"dbeta", p.dbeta}, {"dh0", p.dh0}, {"cu_seqlens", p.cu_seqlens},
              {"saved_states", p.saved_states}};
  for (const auto &x : ptrs) {
    if (!x.ptr) continue;
    if (x.name == std::string("g") || x.name == std::string("dg"))
      if (p.variant == DELTAC_VARIANT_DELTA) continue;
    cudaPointerAttributes a{};
    const cudaError_t e = cudaPointerGetAttributes(&a, x.ptr);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return std::string("params.") + x.name + ": " + cudaGetErrorString(e);
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
      return std::string("params.") + x.name +
             ": not device memory (options.device_pointers = 1 takes CUDA device pointers)";
  }
  return "";
}

}  // namespace

std::string cuda_backward_unsupported(const deltac_bwd_params &p) {
  std::ostringstream os;
  if (p.K != 64 && p.K != 128 && p.K != 256)
    os << "params.K = " << p.K << ": the CUDA backward has K = 64, 128 or 256";
  else if (p.in_dtype != DELTAC_F32 && p.in_dtype != DELTAC_BF16 && p.in_dtype != DELTAC_F16)
    os << "params.in_dtype = " << p.in_dtype << ": expected 0 (f32), 1 (bf16) or 2 (f16) on CUDA"
       << (p.in_dtype == DELTAC_BWD_F64 ? " (DELTAC_BWD_F64 runs on the CPU)" : "");
  else if (p.out_dtype != DELTAC_F32 && p.out_dtype != DELTAC_BF16 && p.out_dtype != DELTAC_F16)
    os << "params.out_dtype = " << p.out_dtype << ": expected 0 (f32), 1 (bf16) or 2 (f16) on CUDA";
  return os.str();
}

bool cuda_backward_workspace(const deltac_bwd_params &p, size_t *bytes, std::string *error) {
  const cudaError_t e = workspace(p, bytes);
  if (e != cudaSuccess) *error = cuda_message("deltac_backward_workspace_size", e);
  return e == cudaSuccess;
}

bool cuda_backward(const deltac_bwd_params &p, void *stream, void *ws, size_t ws_bytes,
                   std::string *error) {
  if ((*error = host_pointer(p)) != "") return false;
  if (ws) {
    size_t need = 0;
    if (!cuda_backward_workspace(p, &need, error)) return false;
    if (ws_bytes < need || reinterpret_cast<uintptr_t>(ws) % 256) {
      std::ostringstream os;
      os << "options.workspace: " << ws_bytes << " bytes; expected at least " << need
         << " (deltac_backward_workspace_size), 256-byte aligned";
      *error = os.str();
      return false;
    }
  }
  const cudaError_t e = launch(p, static_cast<cudaStream_t>(stream), ws, ws_bytes);
  if (e != cudaSuccess) *error = cuda_message("deltac_backward (CUDA)", e);
  return e == cudaSuccess;
}

}  // namespace deltac::rt
