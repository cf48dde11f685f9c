// Zero padding of a CUDA call to a precompiled instance of larger K, V
// (cuda_pad.h): one kernel copies rows into wider zeroed rows (and gathers a
// pool's slots), one copies the corner back (and scatters to write slots).
// With Pad::dtype the copies of q, k, v and o also change dtype (16-bit to
// f32 and back).
#include "cuda_pad.h"

#include "deltac/check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace deltac {
namespace rt {
namespace {

size_t bytesOf(int32_t dtype) { return size_t(detail::dtypeSize(dtype)); }

// outer matrices of R x C elements (row-major) inside ones of Rp x Cp. With
// slots, matrix o = n * group + h is matrix slots[n] * group + h of the
// unpadded side (none when the slot is -1 or out of [0, num_slots)).
struct Shape {
  int64_t outer;
  int32_t R, C, Rp, Cp;
  const int32_t *slots;
  int32_t group, num_slots;
};

// The unpadded side's matrix for padded matrix o, or -1.
__device__ int64_t unpaddedMatrix(const Shape &s, int64_t o) {
  if (!s.slots)
    return o;
  const int64_t n = o / s.group;
  const int32_t slot = s.slots[n];
  if (slot < 0 || slot >= s.num_slots)
    return -1;
  return int64_t(slot) * s.group + (o - n * s.group);
}

// Element conversions (S -> D through float) where the copies change dtype;
// else the bits move (uint16_t / uint32_t: any 2- or 4-byte dtype).
template <class T> __device__ float toF(T x);
template <> __device__ float toF(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> __device__ float toF(__half x) { return __half2float(x); }
template <> __device__ float toF(float x) { return x; }
template <class T> __device__ T fromF(float x);
template <> __device__ float fromF(float x) { return x; }
template <> __device__ __nv_bfloat16 fromF(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __half fromF(float x) { return __float2half_rn(x); }
template <class D, class S> __device__ D elem(S x) {
  if constexpr (std::is_same_v<S, D>)
    return x;
  else
    return fromF<D>(toF(x));
}
template <class D> __device__ D zero() {
  if constexpr (std::is_integral_v<D>)
    return D(0);
  else
    return fromF<D>(0.f);
}

// dst (padded, every element written): src's element, or 0 outside it.
template <class S, class D>
__global__ void padKernel(const S *__restrict__ src, D *__restrict__ dst, Shape s) {
  const int64_t rows = s.outer * s.Rp;
  for (int64_t row = int64_t(blockIdx.x) * blockDim.y + threadIdx.y; row < rows;
       row += int64_t(gridDim.x) * blockDim.y) {
    const int64_t o = row / s.Rp;
    const int32_t r = int32_t(row - o * s.Rp);
    const int64_t so = src && r < s.R ? unpaddedMatrix(s, o) : -1;
    const S *x = so >= 0 ? src + (so * s.R + r) * s.C : nullptr;
    D *d = dst + row * s.Cp;
    for (int32_t c = threadIdx.x; c < s.Cp; c += blockDim.x)
      d[c] = x && c < s.C ? elem<D>(x[c]) : zero<D>();
  }
}

// dst (unpadded): the R x C corner of each padded matrix, unless *skip.
template <class S, class D>
__global__ void unpadKernel(const S *__restrict__ src, D *__restrict__ dst, Shape s,
                            const int32_t *skip) {
  if (skip && *skip)
    return;
  const int64_t rows = s.outer * s.R;
  for (int64_t row = int64_t(blockIdx.x) * blockDim.y + threadIdx.y; row < rows;
       row += int64_t(gridDim.x) * blockDim.y) {
    const int64_t o = row / s.R;
    const int32_t r = int32_t(row - o * s.R);
    const int64_t so = unpaddedMatrix(s, o);
    if (so < 0)
      continue;
    const S *x = src + (o * s.Rp + r) * s.Cp;
    D *d = dst + (so * s.R + r) * s.C;
    for (int32_t c = threadIdx.x; c < s.C; c += blockDim.x)
      d[c] = elem<D>(x[c]);
  }
}

constexpr int kRowsPerBlock = 8;

dim3 gridFor(int64_t rows) {
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return dim3(unsigned(blocks < 65535 * 16 ? (blocks ? blocks : 1) : 65535 * 16));
}

// Element copies by size (the bits move, so any 2- or 4-byte dtype).
cudaError_t padRows(const void *src, void *dst, size_t elem, const Shape &s,
                cudaStream_t stream) {
  if (s.outer == 0)
    return cudaSuccess;
  const dim3 block(32, kRowsPerBlock);
  if (elem == 4)
    padKernel<uint32_t, uint32_t><<<gridFor(s.outer * s.Rp), block, 0, stream>>>(
        static_cast<const uint32_t *>(src), static_cast<uint32_t *>(dst), s);
  else
    padKernel<uint16_t, uint16_t><<<gridFor(s.outer * s.Rp), block, 0, stream>>>(
        static_cast<const uint16_t *>(src), static_cast<uint16_t *>(dst), s);
  return cudaGetLastError();
}

cudaError_t unpadRows(const void *src, void *dst, size_t elem, const Shape &s,
                  const int32_t *skip, cudaStream_t stream) {
  if (s.outer == 0)
    return cudaSuccess;
  const dim3 block(32, kRowsPerBlock);
  if (elem == 4)
    unpadKernel<uint32_t, uint32_t><<<gridFor(s.outer * s.R), block, 0, stream>>>(
        static_cast<const uint32_t *>(src), static_cast<uint32_t *>(dst), s, skip);
  else
    unpadKernel<uint16_t, uint16_t><<<gridFor(s.outer * s.R), block, 0, stream>>>(
        static_cast<const uint16_t *>(src), static_cast<uint16_t *>(dst), s, skip);
  return cudaGetLastError();
}

// Rows of 16-bit q, k, v (dtype from) into f32 copies (pad.dtype f32), and
// o back: no pool slots (those are states, copied as bits).
cudaError_t padConvert(const void *src, int32_t from, void *dst, const Shape &s,
                       cudaStream_t stream) {
  if (s.outer == 0)
    return cudaSuccess;
  const dim3 block(32, kRowsPerBlock);
  float *d = static_cast<float *>(dst);
  if (from == DELTAC_BF16)
    padKernel<<<gridFor(s.outer * s.Rp), block, 0, stream>>>(
        static_cast<const __nv_bfloat16 *>(src), d, s);
  else
    padKernel<<<gridFor(s.outer * s.Rp), block, 0, stream>>>(
        static_cast<const __half *>(src), d, s);
  return cudaGetLastError();
}

cudaError_t unpadConvert(const void *src, void *dst, int32_t to, const Shape &s,
                         const int32_t *skip, cudaStream_t stream) {
  if (s.outer == 0)
    return cudaSuccess;
  const dim3 block(32, kRowsPerBlock);
  const float *x = static_cast<const float *>(src);
  if (to == DELTAC_BF16)
    unpadKernel<<<gridFor(s.outer * s.R), block, 0, stream>>>(
        x, static_cast<__nv_bfloat16 *>(dst), s, skip);
  else
    unpadKernel<<<gridFor(s.outer * s.R), block, 0, stream>>>(
        x, static_cast<__half *>(dst), s, skip);
  return cudaGetLastError();
}

// The dtype of the copies of q, k, v and o.
int32_t copyDtype(const deltac_fwd_params &p, const Pad &pad) {
  return pad.dtype >= 0 ? pad.dtype : p.in_dtype;
}

// Byte sizes and offsets (256-byte aligned) of the padded tensors.
struct PadLayout {
  size_t qk = 0, v = 0, g = 0, state = 0, o = 0, steps = 0;
  size_t qOff, kOff, vOff, gOff, h0Off, htOff, oOff, stepsOff, total = 0;

  PadLayout(const deltac_fwd_params &p, const Pad &pad, bool share) {
    const size_t tok = size_t(p.B) * p.T, in = bytesOf(copyDtype(p, pad));
    const size_t st = bytesOf(p.state_dtype);
    const size_t kv = size_t(pad.K) * pad.V;
    qk = tok * p.H * pad.K * in;
    v = tok * p.HV * pad.V * in;
    g = p.variant == DELTAC_VARIANT_KDA ? tok * p.HV * pad.K * 4 : 0;
    state = size_t(p.N) * p.HV * kv * st; // one per sequence, pool or not
    o = tok * p.HV * pad.V * (pad.dtype >= 0 ? bytesOf(pad.dtype) : bytesOf(p.out_dtype));
    steps = p.state_steps ? tok * p.HV * kv * st : 0;
    qOff = place(qk), kOff = place(qk), vOff = place(v), gOff = place(g);
    h0Off = place(p.h0 ? state : 0);
    htOff = share && p.h0 ? h0Off : place(p.ht ? state : 0);
    oOff = place(o), stepsOff = place(steps);
  }
  size_t place(size_t bytes) {
    const size_t off = total;
    total += (bytes + 255) / 256 * 256;
    return off;
  }
};

// A state's matrices: [outer, K, V] or [outer, V, K] (state_layout).
Shape stateShape(const deltac_fwd_params &p, const Pad &pad, int64_t outer) {
  const bool vk = p.state_layout == DELTAC_STATE_VK;
  Shape s{outer, vk ? p.V : p.K, vk ? p.K : p.V, vk ? pad.V : pad.K,
          vk ? pad.K : pad.V, nullptr, 1, 0};
  return s;
}

// Rows of C channels padded to Cp: [outer, 1, C].
Shape rowShape(int64_t outer, int32_t C, int32_t Cp) {
  return Shape{outer, 1, C, 1, Cp, nullptr, 1, 0};
}

} // namespace

size_t pad_bytes(const deltac_fwd_params &p, const Pad &pad, bool share_state) {
  return PadLayout(p, pad, share_state).total;
}

deltac_fwd_params padded_params(const deltac_fwd_params &p, const Pad &pad,
                                bool share_state, char *base) {
  const PadLayout l(p, pad, share_state);
  deltac_fwd_params d = p;
  d.K = pad.K, d.V = pad.V;
  if (pad.dtype >= 0)
    d.in_dtype = d.out_dtype = pad.dtype;
  auto at = [&](size_t off) -> void * { return base ? base + off : nullptr; };
  d.q = at(l.qOff);
  d.k = at(l.kOff);
  d.v = at(l.vOff);
  if (p.variant == DELTAC_VARIANT_KDA)
    d.g = static_cast<const float *>(at(l.gOff));
  d.h0 = p.h0 ? at(l.h0Off) : nullptr;
  d.ht = p.ht ? at(l.htOff) : nullptr;
  d.o = at(l.oOff);
  d.state_steps = p.state_steps ? at(l.stepsOff) : nullptr;
  // A pool becomes one dense state per sequence.
  d.num_slots = 0;
  d.read_slots = nullptr;
  d.write_slots = nullptr;
  return d;
}

bool run_padded(const deltac_fwd_params &p, const Pad &pad, bool share_state,
                cudaStream_t s, const Launch &l,
                const std::function<bool(const deltac_fwd_params &,
                                         const Launch &)> &launch,
                std::string *error) {
  auto fail = [&](const std::string &what, cudaError_t e) {
    *error = "CUDA " + what + " failed: " + cudaGetErrorName(e) + " (" +
             cudaGetErrorString(e) + ")";
    return false;
  };
  const PadLayout lay(p, pad, share_state);
  char *buf = nullptr;
  Launch lp = l;
  if (l.ws) {
    if (l.ws_bytes < lay.total) {
      *error = "options.workspace_bytes = " + std::to_string(l.ws_bytes) +
               ": K = " + std::to_string(p.K) + ", V = " + std::to_string(p.V) +
               " runs padded to " + std::to_string(pad.K) + "/" +
               std::to_string(pad.V) + " and needs " + std::to_string(lay.total) +
               " bytes for the padded tensors alone (deltac_workspace_size)";
      return false;
    }
    buf = static_cast<char *>(l.ws);
    lp.ws = buf + lay.total;
    lp.ws_bytes = l.ws_bytes - lay.total;
  } else {
    cudaError_t e = cudaMallocAsync(reinterpret_cast<void **>(&buf),
                                    lay.total ? lay.total : 256, s);
    if (e != cudaSuccess)
      return fail("allocation of " + std::to_string(lay.total) +
                      " bytes for the padded tensors",
                  e);
  }
  const deltac_fwd_params d = padded_params(p, pad, share_state, buf);
  const int64_t tok = int64_t(p.B) * p.T;
  const size_t in = bytesOf(p.in_dtype), st = bytesOf(p.state_dtype);
  const bool conv = copyDtype(p, pad) != p.in_dtype; // 16-bit to f32 copies
  auto inRows = [&](const void *src, const void *dst, const Shape &sh) {
    return conv ? padConvert(src, p.in_dtype, const_cast<void *>(dst), sh, s)
                : padRows(src, const_cast<void *>(dst), in, sh, s);
  };
  bool ok = true;
  cudaError_t e = inRows(p.q, d.q, rowShape(tok * p.H, p.K, pad.K));
  if (e == cudaSuccess)
    e = inRows(p.k, d.k, rowShape(tok * p.H, p.K, pad.K));
  if (e == cudaSuccess)
    e = inRows(p.v, d.v, rowShape(tok * p.HV, p.V, pad.V));
  if (e == cudaSuccess && p.variant == DELTAC_VARIANT_KDA) // g = 0: no decay
    e = padRows(p.g, const_cast<float *>(d.g), 4, rowShape(tok * p.HV, p.K, pad.K), s);
  if (e == cudaSuccess && p.h0) {
    Shape h = stateShape(p, pad, int64_t(p.N) * p.HV);
    if (p.read_slots)
      h.slots = p.read_slots, h.group = p.HV, h.num_slots = p.num_slots;
    e = padRows(p.h0, const_cast<void *>(d.h0), st, h, s);
  }
  if (e != cudaSuccess)
    ok = fail("launch of the padding kernels", e);
  ok = ok && launch(d, lp);
  if (ok) {
    e = conv ? unpadConvert(d.o, p.o, p.out_dtype, rowShape(tok * p.HV, p.V, pad.V), l.skip, s)
             : unpadRows(d.o, p.o, bytesOf(p.out_dtype), rowShape(tok * p.HV, p.V, pad.V),
                         l.skip, s);
    if (e == cudaSuccess && p.ht) {
      Shape h = stateShape(p, pad, int64_t(p.N) * p.HV);
      if (p.read_slots)
        h.slots = p.write_slots ? p.write_slots : p.read_slots, h.group = p.HV,
        h.num_slots = p.num_slots;
      e = unpadRows(d.ht, p.ht, st, h, l.skip, s);
    }
    if (e == cudaSuccess && p.state_steps)
      e = unpadRows(d.state_steps, p.state_steps, st, stateShape(p, pad, tok * p.HV),
                l.skip, s);
    if (e != cudaSuccess)
      ok = fail("launch of the unpadding kernels", e);
  }
  if (!l.ws) {
    e = cudaFreeAsync(buf, s);
    if (ok && e != cudaSuccess)
      ok = fail("release of the padded tensors", e);
  }
  return ok;
}

} // namespace rt
} // namespace deltac
