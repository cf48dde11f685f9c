// The strip form of the fused recurrent kernel: each warp owns all K rows of
// a strip of BV / Warps state columns (StripTraits), so the reductions over
// K are warp shuffles only: no shared memory, no block barrier. Per token the
// warp computes the q/k norms itself, from the q/k rows its lanes hold.
// Same math, fields and contract as recurrent_kernel.cuh's recurrent_body.
#ifndef DELTAC_CUDA_RECURRENT_STRIP_CUH
#define DELTAC_CUDA_RECURRENT_STRIP_CUH

#include "deltac/cuda/recurrent_kernel.cuh"
#include "deltac/cuda/recurrent_mma.cuh"

namespace deltac::cuda::detail {

// Two bf16 packed in a 32-bit word, as floats (element 0 in the low half).
__device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// N elements of T kept packed in 32-bit words (bf16: two a word, element 0
// in the low half) until used: half the registers of floats for bf16.
template <int N, class T>
struct Packed {
  uint32_t w[(N * int(sizeof(T)) + 3) / 4];
};

__device__ __forceinline__ uint32_t bits(float x) { return __float_as_uint(x); }
__device__ __forceinline__ uint32_t bits(__nv_bfloat16 x) { return __bfloat16_as_ushort(x); }
__device__ __forceinline__ uint32_t bits(__nv_fp8_e4m3 x) { return x.__x; }

// src[0..N) into out. `vec`: src is aligned to the access (16 bytes when N
// elements fill them, else 8 bytes when they fill those), else scalar.
// Ldg: read-only data (the inputs), through the non-coherent path.
template <int N, bool Ldg, class T>
__device__ __forceinline__ void load_packed(const T* src, bool vec, Packed<N, T>& out) {
  constexpr int kBytes = N * int(sizeof(T));
  if constexpr (kBytes % 16 == 0) {
    if (vec) {
#pragma unroll
      for (int c = 0; c < kBytes / 16; ++c) {
        const uint4* s = reinterpret_cast<const uint4*>(src) + c;
        const uint4 x = Ldg ? __ldg(s) : *s;
        out.w[4 * c] = x.x, out.w[4 * c + 1] = x.y, out.w[4 * c + 2] = x.z, out.w[4 * c + 3] = x.w;
      }
      return;
    }
  } else if constexpr (kBytes % 8 == 0) {
    if (vec) {
#pragma unroll
      for (int c = 0; c < kBytes / 8; ++c) {
        const uint2* s = reinterpret_cast<const uint2*>(src) + c;
        const uint2 x = Ldg ? __ldg(s) : *s;
        out.w[2 * c] = x.x, out.w[2 * c + 1] = x.y;
      }
      return;
    }
  } else if constexpr (kBytes == 4) {  // four fp8 elements
    if (vec) {
      const uint32_t* s = reinterpret_cast<const uint32_t*>(src);
      out.w[0] = Ldg ? __ldg(s) : *s;
      return;
    }
  }
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < N; ++i) out.w[i] = bits(Ldg ? __ldg(src + i) : src[i]);
  } else if constexpr (sizeof(T) == 1) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      uint32_t w = 0;
#pragma unroll
      for (int b = 0; b < 4; ++b)
        if (i + b < N)
          w |= bits(src[i + b]) << (8 * b);
      out.w[i / 4] = w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; i += 2) {
      const uint32_t lo = bits(Ldg ? __ldg(src + i) : src[i]);
      const uint32_t hi = i + 1 < N ? bits(Ldg ? __ldg(src + i + 1) : src[i + 1]) : 0u;
      out.w[i / 2] = lo | hi << 16;
    }
  }
}

// A bf16 word's high / low element as a float, opaque to the optimizer:
// strip_one unpacks the state twice and must not keep the first unpacking
// live (unpack_again).
__device__ __forceinline__ float bf_hi_again(uint32_t w) {
  uint32_t x;
  asm("and.b32 %0, %1, 0xffff0000;" : "=r"(x) : "r"(w));
  return __uint_as_float(x);
}
__device__ __forceinline__ float bf_lo_again(uint32_t w) {
  uint32_t x;
  asm("shl.b32 %0, %1, 16;" : "=r"(x) : "r"(w));
  return __uint_as_float(x);
}

// The packed elements as floats; Again: through conversions the optimizer
// cannot merge with an earlier unpacking of the same words.
template <int N, class T, bool Again = false>
__device__ __forceinline__ void unpack(const Packed<N, T>& in, float* out) {
  if constexpr (sizeof(T) == 1) {  // fp8: four a word
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      uint32_t w = in.w[i / 4];
      if constexpr (Again)
        asm volatile("mov.b32 %0, %1;" : "=r"(w) : "r"(w));
      float x[4];
      fp8x4_to_f32(w, x);
#pragma unroll
      for (int b = 0; b < 4; ++b)
        if (i + b < N)
          out[i + b] = x[b];
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if constexpr (sizeof(T) == 4)
        out[i] = __uint_as_float(in.w[i]);
      else if constexpr (Again)
        out[i] = i % 2 ? bf_hi_again(in.w[i / 2]) : bf_lo_again(in.w[i / 2]);
      else
        out[i] = i % 2 ? bf_hi(in.w[i / 2]) : bf_lo(in.w[i / 2]);
    }
  }
}
template <int N, class T>
__device__ __forceinline__ void unpack_again(const Packed<N, T>& in, float* out) {
  unpack<N, T, true>(in, out);
}

// A token's readout from the lanes' partial sums of h k and h q (a column
// each): u = beta (v - h k), o = scale (u q.k + h q).
template <int L, int Vec>
__device__ __forceinline__ void readout(const float (&pk)[Vec], const float (&pq)[Vec],
                                        const float (&vv)[Vec], float beta, float qk, float scale,
                                        float (&u)[Vec], float (&out)[Vec]) {
#pragma unroll
  for (int c = 0; c < Vec; ++c) {
    const float hk = reduce_rows<L>(pk[c]), hq = reduce_rows<L>(pq[c]);
    u[c] = beta * (vv[c] - hk);
    out[c] = scale * fmaf(u[c], qk, hq);
  }
}

// A lane's R state rows of Vec columns in true scale: load(i, h[i]) for
// each row (an fp8 state then times its head's scale s8), or zeros where
// there is no state to read.
template <bool Fp8, int R, int Vec, class Load>
__device__ __forceinline__ void read_rows(float (&h)[R][Vec], bool has, float s8, Load&& load) {
  if (has) {
#pragma unroll
    for (int i = 0; i < R; ++i) {
      load(i, h[i]);
      if constexpr (Fp8)
#pragma unroll
        for (int c = 0; c < Vec; ++c) h[i][c] *= s8;
    }
  } else {
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int c = 0; c < Vec; ++c) h[i][c] = 0.f;
  }
}

// src[0..N) as floats (load_packed, then unpack).
template <int N, bool Ldg, class T>
__device__ __forceinline__ void load_n(const T* src, bool vec, float* out) {
  Packed<N, T> x;
  load_packed<N, Ldg>(src, vec, x);
  unpack(x, out);
}

__device__ __forceinline__ uint32_t bf_pack(float lo, float hi) {
  const __nv_bfloat162 x = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&x);
}

// N floats into dst[0..N) (global memory), with the access rules of load_n.
// __stwb keeps the vector store (see store4).
template <int N, class T>
__device__ __forceinline__ void store_n(T* dst, bool vec, const float* in) {
  constexpr int kBytes = N * int(sizeof(T));
  if constexpr (kBytes % 16 == 0) {
    if (vec) {
#pragma unroll
      for (int c = 0; c < kBytes / 16; ++c) {
        uint4 x;
        if constexpr (sizeof(T) == 4) {
          x = make_uint4(__float_as_uint(in[4 * c]), __float_as_uint(in[4 * c + 1]),
                         __float_as_uint(in[4 * c + 2]), __float_as_uint(in[4 * c + 3]));
        } else {
          x = make_uint4(bf_pack(in[8 * c], in[8 * c + 1]), bf_pack(in[8 * c + 2], in[8 * c + 3]),
                         bf_pack(in[8 * c + 4], in[8 * c + 5]),
                         bf_pack(in[8 * c + 6], in[8 * c + 7]));
        }
        __stwb(reinterpret_cast<uint4*>(dst) + c, x);
      }
      return;
    }
  } else if constexpr (sizeof(T) == 2 && N % 4 == 0) {
    if (vec) {
#pragma unroll
      for (int c = 0; c < N / 4; ++c)
        __stwb(reinterpret_cast<uint2*>(dst) + c,
               make_uint2(bf_pack(in[4 * c], in[4 * c + 1]), bf_pack(in[4 * c + 2], in[4 * c + 3])));
      return;
    }
  } else if constexpr (sizeof(T) == 1 && N % 4 == 0) {  // fp8: a word per four
    if (vec) {
#pragma unroll
      for (int c = 0; c < N / 4; ++c)
        reinterpret_cast<uint32_t*>(dst)[c] = f32_to_fp8x4(in + 4 * c);
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < N; ++i) dst[i] = from_float<T>(in[i]);
}

// Tokens whose inputs strip_body stages in shared memory at a time.
constexpr int kStripChunk = 8;
// strip_body's gated decay factor stays in [kFoldMin, 1 / kFoldMin].
constexpr float kFoldMin = 1e-20f;

// One warp, per token, with h' = a (.) h: hk = h'^T k, hq = h'^T q over the
// warp's K rows (lanes sum their R rows, then shuffles), u = beta (v - hk),
// h = h' + k u^T, o = scale (hq + u (k . q)). Lane l holds rows
// (l / L) * R .. + R of columns (l % L) * Vec .. + Vec of the warp's strip.
// The block stages the inputs of up to kStripChunk tokens in shared memory
// at once (one load latency per chunk, not per token). PerToken as in
// recurrent_body.
template <deltac_variant Var, class Tr, class InT, class StT, bool PerToken>
__device__ __forceinline__ void strip_body(const deltac_fwd_params& p, float scale, bool vec_io,
                                           bool vec_state) {
  constexpr int K = Tr::K, V = Tr::V, BV = Tr::BV, R = Tr::R, L = Tr::L, Vec = Tr::kVec;
  constexpr int C = kStripChunk;
  constexpr bool kKda = Var == DELTAC_VARIANT_KDA;
  constexpr bool kGated = Var == DELTAC_VARIANT_GATED;
  __shared__ __align__(16) float sq[C][K], sk[C][K], sg[kKda ? C : 1][kKda ? K : 1];
  __shared__ __align__(16) float sv[C][BV];
  __shared__ float sb[C], sa[C], sqk[C];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r0 = (lane / L) * R;  // first of this thread's rows
  const int c0 = warp * Tr::WV + (lane % L) * Vec;  // first column in the block's tile
  int bid = blockIdx.x;
  const int tile = bid % Tr::kTiles;
  bid /= Tr::kTiles;
  const int j = bid % p.HV;  // value head
  const int n = bid / p.HV;  // sequence
  const int hqk = j / (p.HV / p.H);
  const int v0 = tile * BV + c0;

  // Slots first (params.h; without a pool, sequence n's own state).
  int32_t rs = p.h0 ? n : -1, ws = p.ht ? n : -1;
  if (p.read_slots) {
    rs = p.h0 ? p.read_slots[n] : -1;
    ws = p.ht ? (p.write_slots ? p.write_slots : p.read_slots)[n] : -1;
  }
  int64_t t0, t1;
  if (p.cu_seqlens) {
    t0 = p.cu_seqlens[n];
    t1 = p.cu_seqlens[n + 1];
  } else {
    t0 = int64_t(n) * p.T;
    t1 = t0 + p.T;
  }
  const InT* q = static_cast<const InT*>(p.q);
  const InT* k = static_cast<const InT*>(p.k);
  const InT* v = static_cast<const InT*>(p.v);
  InT* o = static_cast<InT*>(p.o);

  // The inputs of tokens tc .. tc + nt into shared memory (as floats), then
  // what needs no state, off the token chain: per token (a warp each) the
  // L2 norms and q . k, q and k normalised in place, the gates' exponentials.
  auto stage = [&](int64_t tc, int nt) {
    for (int e = threadIdx.x; e < nt * K; e += Tr::kThreads) {
      const int tt = e / K, i = e % K;
      const int64_t qo = ((tc + tt) * p.H + hqk) * K + i;
      sq[tt][i] = to_float(__ldg(q + qo));
      sk[tt][i] = to_float(__ldg(k + qo));
      if constexpr (kKda)
        sg[tt][i] = __ldg(p.g + ((tc + tt) * p.HV + j) * K + i);
    }
    for (int e = threadIdx.x; e < nt * BV; e += Tr::kThreads) {
      const int tt = e / BV, c = e % BV;
      sv[tt][c] = to_float(__ldg(v + ((tc + tt) * p.HV + j) * V + tile * BV + c));
    }
    if (threadIdx.x < nt) {
      const int64_t th = (tc + threadIdx.x) * p.HV + j;
      sb[threadIdx.x] = __ldg(p.beta + th);
      if constexpr (kGated)
        sa[threadIdx.x] = expf(__ldg(p.g + th));
    }
    __syncthreads();
    for (int tt = warp; tt < nt; tt += Tr::kWarps) {
      float rq, rk;
      const float qk = warp_qk_norms<K>(sq[tt], sk[tt], lane, p.qk_l2norm, &rq, &rk);
      for (int i = lane; i < K; i += 32) {
        sq[tt][i] *= rq;
        sk[tt][i] *= rk;
        if constexpr (kKda)
          sg[tt][i] = expf(sg[tt][i]);
      }
      if (lane == 0)
        sqk[tt] = qk;
    }
  };
  int nt = int(t1 - t0 < C ? t1 - t0 : C);
  if (nt > 0)
    stage(t0, nt);

  if (p.read_slots) {
    rs = rs >= 0 && rs < p.num_slots ? rs : -1;
    ws = ws >= 0 && ws < p.num_slots ? ws : -1;
  }
  int64_t acc = t1 - t0;  // tokens after which ht is written (clamped)
  if (p.accepted) {
    const int64_t a = p.accepted[n];
    acc = a < 0 ? 0 : a < acc ? a : acc;
  }

  const bool vk = p.state_layout == DELTAC_STATE_VK;
  float h[R][Vec];
  // Gated: the state is hs * h (one decay factor a block, as a head shares
  // its gate), so a token scales 2 * Vec sums and its update, not R * Vec
  // state elements. hs is folded into h before it leaves the kernel and
  // whenever it leaves [kFoldMin, 1 / kFoldMin] (an exact 0 for a -inf gate).
  float hs = 1.f;
  auto fold = [&] {
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int c = 0; c < Vec; ++c) h[i][c] *= hs;
    hs = 1.f;
  };
  // An fp8 state is e4m3 times the head's scale (params.h).
  const float s8 = kFp8State<StT> ? fp8_scale_of(p.state_scale, j) : 1.f;
  auto store_state = [&](StT* dst) {
    if (kGated && hs != 1.f)
      fold();
    const float inv = 1.f / s8;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      float x[Vec];
#pragma unroll
      for (int c = 0; c < Vec; ++c) x[c] = kFp8State<StT> ? h[i][c] * inv : h[i][c];
      if (!vk) {
        store_n<Vec>(dst + int64_t(r0 + i) * V + v0, vec_state, x);
      } else {
#pragma unroll
        for (int c = 0; c < Vec; ++c)
          dst[int64_t(v0 + c) * K + r0 + i] = from_float<StT>(x[c]);
      }
    }
  };
  StT* ht = ws >= 0 ? static_cast<StT*>(p.ht) + (int64_t(ws) * p.HV + j) * K * V : nullptr;
  const StT* h0 = rs >= 0 ? static_cast<const StT*>(p.h0) + (int64_t(rs) * p.HV + j) * K * V
                          : nullptr;
  read_rows<kFp8State<StT>>(h, rs >= 0, s8, [&](int i, float* x) {
    if (!vk) {
      load_n<Vec, false>(h0 + int64_t(r0 + i) * V + v0, vec_state, x);
    } else {
#pragma unroll
      for (int c = 0; c < Vec; ++c) x[c] = to_float(h0[int64_t(v0 + c) * K + r0 + i]);
    }
  });
  if (PerToken && acc == 0 && ht)
    store_state(ht);

  for (int64_t tc = t0; tc < t1; tc += C) {
    if (tc != t0) {  // the next chunk, once every warp is done with this one
      __syncthreads();
      nt = int(t1 - tc < C ? t1 - tc : C);
      stage(tc, nt);
    }
    __syncthreads();
#pragma unroll 1
    for (int tt = 0; tt < nt; ++tt) {
      const int64_t t = tc + tt, th = t * p.HV + j;
      float vv[Vec];
#pragma unroll
      for (int c = 0; c < Vec; ++c) vv[c] = sv[tt][c0 + c];
      const float beta = sb[tt];
      const float a = kGated ? sa[tt] : 1.f;  // exp(g), from stage
      const float qk = sqk[tt];               // normalised q . k

      float rhs = 1.f;  // 1 / hs
      if constexpr (kGated) {
        hs *= a;
        if (!(hs >= kFoldMin && hs <= 1.f / kFoldMin))  // block-uniform; NaN too
          fold();
        rhs = 1.f / hs;
      }
      float pk[Vec], pq[Vec], kr[R];
#pragma unroll
      for (int c = 0; c < Vec; ++c) pk[c] = pq[c] = 0.f;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        kr[i] = sk[tt][r0 + i];  // normalised by stage
        const float qi = sq[tt][r0 + i];
#pragma unroll
        for (int c = 0; c < Vec; ++c) {
          if constexpr (kKda)
            h[i][c] *= sg[tt][r0 + i];
          pk[c] = fmaf(h[i][c], kr[i], pk[c]);
          pq[c] = fmaf(h[i][c], qi, pq[c]);
        }
      }
      float u[Vec], out[Vec];
#pragma unroll
      for (int c = 0; c < Vec; ++c) {
        const float hk = hs * reduce_rows<L>(pk[c]), hq = hs * reduce_rows<L>(pq[c]);
        u[c] = beta * (vv[c] - hk);
        out[c] = scale * fmaf(u[c], qk, hq);
        if constexpr (kGated)
          u[c] *= rhs;  // h += k u^T / hs keeps hs * h the new state
      }
#pragma unroll
      for (int i = 0; i < R; ++i)
#pragma unroll
        for (int c = 0; c < Vec; ++c) h[i][c] = fmaf(kr[i], u[c], h[i][c]);
      if (lane < L)
        store_n<Vec>(o + th * V + v0, vec_io, out);
      if constexpr (PerToken) {
        if (p.state_steps)
          store_state(static_cast<StT*>(p.state_steps) + th * K * V);
        if (t - t0 + 1 == acc && ht)
          store_state(ht);
      }
    }
  }
  if (!PerToken && ht)
    store_state(ht);
}

// One lane's state row (8 or 16 bytes) global -> shared by cp.async, zero-
// filled when !valid (src not read); completed by cp_async_row_wait.
template <int Bytes>
__device__ __forceinline__ void cp_async_row(void* dst, const void* src, bool valid) {
  static_assert(Bytes == 8 || Bytes == 16, "cp.async rows of 8 or 16 bytes");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  const int n = valid ? Bytes : 0;
  if constexpr (Bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src), "r"(n));
#else
  using W = std::conditional_t<Bytes == 16, uint4, uint2>;
  *static_cast<W*>(dst) = valid ? *static_cast<const W*>(src) : W{};
#endif
}
__device__ __forceinline__ void cp_async_row_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// N (1, 2 or 4) words from shared memory, in program order with the other
// volatile asm (cp.async waits): the compiler neither hoists nor keeps them.
// The clobber orders them after plain stores too (cp_async_row's fallback).
template <int N>
__device__ __forceinline__ void lds_words(const uint32_t* src, uint32_t* w) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(src));
  if constexpr (N == 4)
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "r"(a)
                 : "memory");
  else if constexpr (N == 2)
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];"
                 : "=r"(w[0]), "=r"(w[1])
                 : "r"(a)
                 : "memory");
  else
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(w[0]) : "r"(a) : "memory");
}
// Waits until at most N of the thread's cp.async groups are pending.
template <int N>
__device__ __forceinline__ void cp_async_row_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// cp_async_row_wait<n> for n in 0..8 given at run time (a constant once the
// caller's loop is unrolled).
__device__ __forceinline__ void cp_async_row_wait_n(int n) {
  switch (n) {
    case 0: cp_async_row_wait<0>(); break;
    case 1: cp_async_row_wait<1>(); break;
    case 2: cp_async_row_wait<2>(); break;
    case 3: cp_async_row_wait<3>(); break;
    case 4: cp_async_row_wait<4>(); break;
    case 5: cp_async_row_wait<5>(); break;
    case 6: cp_async_row_wait<6>(); break;
    case 7: cp_async_row_wait<7>(); break;
    default: cp_async_row_wait<8>(); break;
  }
}

// strip_body for calls of at most one token per sequence (no cu_seqlens,
// p.T <= 1, no state_steps / accepted): the state stays packed in registers
// (a bf16 state in half the registers of floats, so twice the bytes per
// thread in flight) and is unpacked once for h'^T k, h'^T q and once more
// for the update, which is stored at once.
//
// Staged (strip_staged_fits; K-first states with 16-byte aligned bases):
// the lane's state rows and the block's q / k rows land in shared memory by
// cp.async instead of registers, so bytes in flight cost no registers and
// about twice the blocks fit an SM. Each lane reads back only the state rows
// it copied; q / k take one block barrier.
template <deltac_variant Var, class Tr, class InT, class StT, bool Staged>
__device__ __forceinline__ void strip_one(const deltac_fwd_params& p, float scale, bool vec_io,
                                          bool vec_state, bool vec_qk, int32_t guess) {
  constexpr int K = Tr::K, V = Tr::V, R = Tr::R, L = Tr::L, Vec = Tr::kVec;
  constexpr int kWords = Vec * int(sizeof(StT)) / 4;  // one row of a lane, in words
  // Staged: the rows come in at most 8 cp.async groups, and the first pass
  // takes each group as it lands (not all rows at once).
  constexpr int kRowsPerGroup = R < 32 ? (R < 4 ? R : 4) : (R + 7) / 8;
  constexpr int kGroups = (R + kRowsPerGroup - 1) / kRowsPerGroup;
  static_assert(kGroups <= 8, "strip_one: at most 8 groups of rows");
  constexpr bool kKda = Var == DELTAC_VARIANT_KDA;
  constexpr bool kGated = Var == DELTAC_VARIANT_GATED;
  // Staged bf16 states of delta / gated: h'^T k and h'^T q on tensor cores
  // (below), where a warp's columns make whole 16-column tiles and a
  // lane's rows whole 8-row pieces; the rows land swizzled (at).
  constexpr bool kMma = Staged && std::is_same_v<StT, __nv_bfloat16> && !kKda && Vec == 8 &&
                        Tr::WV % 16 == 0 && R % 8 == 0;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r0 = (lane / L) * R;
  int bid = blockIdx.x;
  const int tile = bid % Tr::kTiles;
  bid /= Tr::kTiles;
  const int j = bid % p.HV;
  const int n = bid / p.HV;
  const int hqk = j / (p.HV / p.H);
  const int v0 = tile * Tr::BV + warp * Tr::WV + (lane % L) * Vec;
  // An fp8 state is e4m3 times the head's scale (params.h): s8 is folded
  // into the decay factor the passes below apply.
  constexpr bool kFp8 = kFp8State<StT>;
  const float s8 = kFp8 ? fp8_scale_of(p.state_scale, j) : 1.f;

  int32_t rs = p.h0 ? n : -1, ws = p.ht ? n : -1;
  if (p.read_slots) {
    rs = p.h0 ? p.read_slots[n] : -1;
    ws = p.ht ? (p.write_slots ? p.write_slots : p.read_slots)[n] : -1;
  }
  const bool has = p.T == 1;
  const int64_t th = int64_t(n) * p.HV + j;  // token n (T = 1)
  // Staged: the block's q and k rows in shared memory, not registers.
  constexpr int kQk = Staged ? 1 : R;
  __shared__ __align__(16) InT sqk[Staged ? 2 : 1][Staged ? K : 1];
  float qr[kQk] = {}, kr[kQk] = {}, gr[kKda ? R : 1], vv[Vec], beta = 0.f, a = 1.f;
  // kMma: this lane's columns of the product tiles (mma_col), their v.
  constexpr int kMmaCols = kMma ? Tr::WV / 8 : 1;
  float vm[kMmaCols];
  const InT* vin = static_cast<const InT*>(p.v) + th * V;
  auto mma_col = [&](int m) {  // tile m / 2, rows 8 (m % 2) + lane / 4
    return tile * Tr::BV + warp * Tr::WV + 8 * m + lane / 4;
  };
  auto qk_at = [&](int w, int i) {  // q (w = 0) or k row r0 + i from shared
    if constexpr (sizeof(InT) == 2) {
      const int e = r0 + i;  // r0 may be odd: the word holding element e
      uint32_t x;
      lds_words<1>(reinterpret_cast<const uint32_t*>(&sqk[w][0]) + e / 2, &x);
      return e % 2 ? bf_hi(x) : bf_lo(x);
    } else {
      uint32_t x;
      lds_words<1>(reinterpret_cast<const uint32_t*>(&sqk[w][r0 + i]), &x);
      return __uint_as_float(x);
    }
  };
  auto qv = [&](int i) {
    if constexpr (Staged)
      return qk_at(0, i);
    else
      return qr[i];
  };
  auto kv = [&](int i) {
    if constexpr (Staged)
      return qk_at(1, i);
    else
      return kr[i];
  };
  if (has) {
    const int64_t qoff = (int64_t(n) * p.H + hqk) * K + r0;
    if constexpr (Staged) {
      const InT* q = static_cast<const InT*>(p.q) + (qoff - r0);
      const InT* k = static_cast<const InT*>(p.k) + (qoff - r0);
      constexpr int E = 16 / int(sizeof(InT)), kPieces = K / E;
      if (vec_qk) {
        for (int e = threadIdx.x; e < 2 * kPieces; e += Tr::kThreads) {
          const int w = e / kPieces, c = (e % kPieces) * E;
          cp_async_row<16>(&sqk[w][c], (w ? k : q) + c, true);
        }
      } else {
        for (int e = threadIdx.x; e < 2 * K; e += Tr::kThreads)
          sqk[e / K][e % K] = __ldg((e < K ? q : k) + e % K);
      }
    } else {
      load_n<R, true>(static_cast<const InT*>(p.q) + qoff, vec_qk, qr);
      load_n<R, true>(static_cast<const InT*>(p.k) + qoff, vec_qk, kr);
    }
    if constexpr (kKda)
      load_n<R, true>(p.g + th * K + r0, vec_qk, gr);
    if constexpr (kMma)  // the columns of the lane's sums (mma_col)
      for (int m = 0; m < kMmaCols; ++m) vm[m] = cvt_f(__ldg(vin + mma_col(m)));
    else
      load_n<Vec, true>(vin + v0, vec_io, vv);
    beta = __ldg(p.beta + th);
    if constexpr (kGated)
      a = __ldg(p.g + th);
  }
  if (p.read_slots) {
    rs = rs >= 0 && rs < p.num_slots ? rs : -1;
    ws = ws >= 0 && ws < p.num_slots ? ws : -1;
  }

  const bool vk = !Staged && p.state_layout == DELTAC_STATE_VK;  // Staged: K-first
  // Row i of the lane: stage[i][threadIdx.x] (Staged), else hp[i].
  __shared__ __align__(16) uint32_t stage[Staged ? R : 1][Staged ? Tr::kThreads * kWords : 1];
  Packed<Vec, StT> hp[Staged ? 1 : R] = {};
  // Staged: where thread t's row i lies in stage[i] (in words): kMma
  // swizzles them so that eight rows of a lane are one conflict-free
  // ldmatrix.
  auto at = [&](int i, int t) { return (kMma ? staged_slot(i, t) : t) * kWords; };
  auto row = [&](int i) {
    if constexpr (Staged) {
      Packed<Vec, StT> x;
      lds_words<kWords>(&stage[i][at(i, threadIdx.x)], x.w);
      return x;
    } else {
      return hp[i];
    }
  };
  // The lane's state rows from slot `slot` (-1: zeros).
  auto load_state = [&](int32_t slot) {
    if constexpr (Staged) {
      // Zero-filled rows when there is no state to read (v: a valid
      // address, not read).
      const StT* h0 =
          static_cast<const StT*>(p.h0) + (int64_t(slot >= 0 ? slot : 0) * p.HV + j) * K * V;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        cp_async_row<kWords * 4>(&stage[i][at(i, threadIdx.x)],
                                 slot >= 0 ? static_cast<const void*>(h0 + int64_t(r0 + i) * V + v0)
                                           : p.v,
                                 slot >= 0);
        if ((i + 1) % kRowsPerGroup == 0 || i + 1 == R)
          cp_async_row_commit();
      }
    } else if (slot >= 0) {
      const StT* h0 = static_cast<const StT*>(p.h0) + (int64_t(slot) * p.HV + j) * K * V;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        if (!vk) {
          load_packed<Vec, false>(h0 + int64_t(r0 + i) * V + v0, vec_state, hp[i]);
        } else {
          StT x[Vec];
#pragma unroll
          for (int c = 0; c < Vec; ++c) x[c] = h0[int64_t(v0 + c) * K + r0 + i];
          load_packed<Vec, false>(x, false, hp[i]);
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < R; ++i)
#pragma unroll
        for (auto& w : hp[i].w) w = 0u;
    }
  };
  if constexpr (Staged)
    cp_async_row_commit();  // q, k: the first group, then kGroups of rows
  // A pool's state loads start from the slot read before the PDL wait
  // (guess) instead of waiting for the read after it, and start again where
  // the two differ (after every earlier group landed: the counts below hold).
  const bool guessed = p.read_slots && p.h0 && guess >= 0 && guess < p.num_slots;
  const int32_t ls = !p.read_slots ? rs : guessed ? guess : -1;
  load_state(ls);
  if (rs != ls) {
    if constexpr (Staged)
      cp_async_row_wait<0>();
    load_state(rs);
  }
  StT* ht = ws >= 0 ? static_cast<StT*>(p.ht) + (int64_t(ws) * p.HV + j) * K * V : nullptr;
  // Row i of the state, x in true scale (fp8: stored times 1 / s8).
  auto store_row = [&](int i, float* x) {
    if constexpr (kFp8) {
      const float inv = 1.f / s8;
#pragma unroll
      for (int c = 0; c < Vec; ++c) x[c] *= inv;
    }
    if (!vk) {
      store_n<Vec>(ht + int64_t(r0 + i) * V + v0, vec_state, x);
    } else {
#pragma unroll
      for (int c = 0; c < Vec; ++c) ht[int64_t(v0 + c) * K + r0 + i] = from_float<StT>(x[c]);
    }
  };
  if (!has) {  // no token: the state passes through
    if constexpr (Staged)
      cp_async_row_wait<0>();
    if (ht) {
#pragma unroll
      for (int i = 0; i < R; ++i) {
        float x[Vec];
        unpack(row(i), x);
        if constexpr (kFp8)
#pragma unroll
          for (int c = 0; c < Vec; ++c) x[c] *= s8;
        store_row(i, x);
      }
    }
    return;
  }

  if constexpr (Staged) {  // q and k (all threads' pieces)
    cp_async_row_wait_n(kGroups);
    __syncthreads();
  }
  float dot = 0.f, ssq = 0.f, ssk = 0.f;
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const float qi = qv(i), ki = kv(i);
    dot = fmaf(qi, ki, dot);
    ssq = fmaf(qi, qi, ssq);
    ssk = fmaf(ki, ki, ssk);
  }
  dot = reduce_rows<L>(dot);
  float rq = 1.f, rk = 1.f;
  if (p.qk_l2norm) {
    rq = 1.f / sqrtf(reduce_rows<L>(ssq) + 1e-6f);
    rk = 1.f / sqrtf(reduce_rows<L>(ssk) + 1e-6f);
  }
  const float qk = dot * rq * rk;
  if constexpr (kGated)
    a = expf(a);

  // The products take q and k as loaded, and the norms and a head's one
  // decay factor scale their sums (h'^T k = a rk h^T k_raw) and u (k u^T =
  // k_raw (rk u)^T): the norms' reductions run beside the products, and the
  // first pass has no per-element multiply (kda's factors are per row).
  const float head = (kKda ? 1.f : a) * s8;  // the sums' one factor
  float u[Vec];
  if constexpr (kMma) {
    // The warp's sums on tensor cores (recurrent_mma.cuh): the lanes t = 0
    // of each quad hold those of columns mma_col(m), do their readout and
    // store o; then each lane takes u of its own Vec columns by shuffles.
    cp_async_row_wait<0>();
    float hk[kMmaCols], hq[kMmaCols];
    staged_mma_sums<K, R, L, Tr::WV, InT>(&stage[0][0], Tr::kThreads * kWords, &sqk[0][0], hk,
                                          hq);
    const int tig = lane % 4;
    float um[kMmaCols];
#pragma unroll
    for (int m = 0; m < kMmaCols; ++m) {
      um[m] = beta * (vm[m] - hk[m] * head * rk);
      if (tig == 0)
        static_cast<InT*>(p.o)[th * V + mma_col(m)] =
            from_float<InT>(scale * fmaf(um[m], qk, hq[m] * head * rq));
    }
    // Column c = Vec (lane % L) + j of the strip is mma_col(lane % L) of lane 4 j.
#pragma unroll
    for (int jj = 0; jj < Vec; ++jj)
#pragma unroll
      for (int m = 0; m < kMmaCols; ++m) {
        const float x = __shfl_sync(0xffffffffu, um[m], 4 * jj);
        if (m == lane % L)
          u[jj] = x;
      }
  } else {
    float pk[Vec], pq[Vec];
#pragma unroll
    for (int c = 0; c < Vec; ++c) pk[c] = pq[c] = 0.f;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      if constexpr (Staged)
        if (i % kRowsPerGroup == 0)
          cp_async_row_wait_n(kGroups - 1 - i / kRowsPerGroup);
      const float ki = kv(i), qi = qv(i);
      float x[Vec];
      unpack(row(i), x);
      if constexpr (kKda) {
        gr[i] = expf(gr[i]);
#pragma unroll
        for (int c = 0; c < Vec; ++c) x[c] *= gr[i];
      }
#pragma unroll
      for (int c = 0; c < Vec; ++c) {
        pk[c] = fmaf(x[c], ki, pk[c]);
        pq[c] = fmaf(x[c], qi, pq[c]);
      }
    }
#pragma unroll
    for (int c = 0; c < Vec; ++c) pk[c] *= head * rk, pq[c] *= head * rq;
    float out[Vec];
    readout<L>(pk, pq, vv, beta, qk, scale, u, out);
    if (lane < L)
      store_n<Vec>(static_cast<InT*>(p.o) + th * V + v0, vec_io, out);
  }
  if (ht) {
#pragma unroll
    for (int c = 0; c < Vec; ++c) u[c] *= rk;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const float ai = (kKda ? gr[i] : a) * s8;
      float x[Vec];
      unpack_again(row(i), x);
      const float ki = kv(i);
#pragma unroll
      for (int c = 0; c < Vec; ++c) {
        if (Var != DELTAC_VARIANT_DELTA || kFp8)
          x[c] *= ai;
        x[c] = fmaf(ki, u[c], x[c]);
      }
      store_row(i, x);
    }
  }
}

// Entry points; `skip` as in recurrent.cuh's guarded kernels (may be null).
// strip_one_kernel: at most one token per sequence (strip_one);
// strip_kernel: several (strip_body). Its register bound: about 64 besides
// the state (96 beyond 32 floats of it); without one ptxas took 124 for 32
// floats of state at 4 warps. A minimum of 1 would lift the one-token
// kernel from 80 registers to 115, hence two entries.
template <class Tr>
constexpr int strip_min_blocks() {
  constexpr int state = Tr::R * Tr::kVec;
  return 65536 / (Tr::kThreads * (state + (state <= 32 ? 64 : 96)));
}

template <deltac_variant Var, class Tr, class InT, class StT, bool PerToken>
__global__ void __launch_bounds__(Tr::kThreads, (strip_min_blocks<Tr>()))
    strip_kernel(const deltac_fwd_params p, float scale, bool vec_io, bool vec_state,
                 bool vec_qk, const int32_t* skip, int32_t route) {
  pdl_enter();
  if ((skip && *skip != 0) || routed_away(p, int(blockIdx.x) / Tr::kTiles / p.HV, route))
    return;
  strip_body<Var, Tr, InT, StT, PerToken>(p, scale, vec_io, vec_state);
}

// Before the PDL wait (sm_90): the block's share of its head's state (1 /
// kTiles of it, contiguous) into L2 by cp.async.bulk.prefetch, so that the
// loads after the wait hit L2 where the previous kernel's tail left time.
// The slot read here only picks addresses: a stale value (a predecessor
// still writing the slots) costs a useless prefetch, never a wrong result.
// Small grids only (kRecurrentSmallGrid): larger ones start mostly after
// the predecessor, where a prefetch gains nothing.
template <class Tr, class StT>
__device__ __forceinline__ void prefetch_state(const deltac_fwd_params& p, int32_t guess) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (!p.h0 || gridDim.x > kRecurrentSmallGrid)
    return;
  int bid = blockIdx.x;
  const int tile = bid % Tr::kTiles;
  bid /= Tr::kTiles;
  const int j = bid % p.HV, n = bid / p.HV;
  int64_t slot = n;
  if (p.read_slots) {
    slot = guess;
    if (slot < 0 || slot >= p.num_slots)
      return;
  }
  // One piece a lane. One prefetch a warp (lane 0, the warp's whole share)
  // issued faster (batch 1 without PDL 5.3 -> 4.5 us, H100) but ran 2-7%
  // slower with PDL, the serving path (session 26): kept a lane.
  constexpr int64_t kHead = int64_t(Tr::K) * Tr::V * int64_t(sizeof(StT));
  constexpr int64_t kShare = kHead / Tr::kTiles;
  constexpr int64_t kPiece = (kShare / Tr::kThreads + 15) / 16 * 16;  // 16-byte multiple
  const int64_t lo = tile * kShare + threadIdx.x * kPiece;
  const int64_t hi = lo + kPiece < (tile + 1) * kShare ? lo + kPiece : (tile + 1) * kShare;
  const uintptr_t base = reinterpret_cast<uintptr_t>(p.h0) + slot * p.HV * kHead + j * kHead;
  if (hi > lo && (base + lo) % 16 == 0 && (hi - lo) % 16 == 0)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + lo),
                 "r"(uint32_t(hi - lo))
                 : "memory");
#endif
}

// Before the PDL wait: a pool's read slot for the block's sequence as it
// stands (a predecessor may still write it), from L2 so that the read after
// the wait does not hit this line in L1; -1 without a pool or h0.
template <class Tr>
__device__ __forceinline__ int32_t slot_guess(const deltac_fwd_params& p) {
  if (!p.read_slots || !p.h0)
    return -1;
  return __ldcg(p.read_slots + int(blockIdx.x) / Tr::kTiles / p.HV);
}

// Before the PDL wait: the parameters the kernel reads, so that their
// constant-cache misses are behind it (they never change during a launch).
__device__ __forceinline__ void touch_params(const deltac_fwd_params& p) {
  asm volatile("" ::"l"(p.q), "l"(p.k), "l"(p.v), "l"(p.o), "l"(p.beta), "l"(p.g));
  asm volatile("" ::"l"(p.h0), "l"(p.ht), "l"(p.read_slots), "l"(p.write_slots),
               "l"(p.state_scale), "r"(p.T), "r"(p.HV), "r"(p.H), "r"(p.num_slots),
               "r"(p.qk_l2norm), "r"(p.state_layout));
}

template <deltac_variant Var, class Tr, class InT, class StT>
__global__ void __launch_bounds__(Tr::kThreads)
    strip_one_kernel(const deltac_fwd_params p, float scale, bool vec_io, bool vec_state,
                     bool vec_qk, const int32_t* skip) {
  const int32_t guess = slot_guess<Tr>(p);
  prefetch_state<Tr, StT>(p, guess);
  touch_params(p);
  pdl_enter();
  if (skip && *skip != 0)
    return;
  strip_one<Var, Tr, InT, StT, false>(p, scale, vec_io, vec_state, vec_qk, guess);
}

template <class Tr, class InT, class StT>
struct StagedFits {
  static constexpr bool value =
      strip_staged_fits(Tr::K, Tr::BV, Tr::kWarps, Tr::kVec, int(sizeof(StT)), int(sizeof(InT)));
};

// The staged one-token kernel (strip_one's Staged, where strip_staged_fits;
// the launch asks for K-first states with 16-byte aligned bases). Same
// arguments as strip_one_kernel (vec_state is true then). Its register
// bound (64, kda 72) leaves 13-16 blocks of 64 threads per SM.
template <deltac_variant Var, class Tr, class InT, class StT>
__global__ void __launch_bounds__(Tr::kThreads,
                                  65536 / (Tr::kThreads * (Var == DELTAC_VARIANT_KDA ? 72 : 64)))
    strip_staged_kernel(const deltac_fwd_params p, float scale, bool vec_io, bool vec_state,
                        bool vec_qk, const int32_t* skip) {
  static_assert(StagedFits<Tr, InT, StT>::value,
                "strip_staged_kernel: no staged geometry for these knobs");
  const int32_t guess = slot_guess<Tr>(p);
  prefetch_state<Tr, StT>(p, guess);
  touch_params(p);
  pdl_enter();
  if (skip && *skip != 0)
    return;
  (void)vec_state;  // true: the launch asks for aligned states
  strip_one<Var, Tr, InT, StT, true>(p, scale, vec_io, true, vec_qk, guess);
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_RECURRENT_STRIP_CUH
