// Warp-level tensor-core products of the chunked kernels (mma.sync, so they
// build for sm_80, sm_90a and sm_120 alike), plus element conversions.
//
// Every product is "TN": C[16 x 8n] += A[16 x k] * B[8n x k]^T with both
// operands k-contiguous in shared memory (rows padded by 16 bytes, so the
// fragment loads are free of bank conflicts). bf16 and f16 run
// m16n8k16 with f32 accumulation; f32 runs three TF32 m16n8k8 products per
// step (hi*hi + hi*lo + lo*hi), which keeps f32 accuracy.
#ifndef DELTAC_CUDA_CHUNKED_MMA_CUH
#define DELTAC_CUDA_CHUNKED_MMA_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

// The tensor-core instructions need sm_80 or newer; older targets compile a
// trap so that the headers still build for them.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define DELTAC_MMA_OK 0
#else
#define DELTAC_MMA_OK 1
#endif

namespace deltac::cuda::detail {

__device__ __forceinline__ float cvt_f(float x) { return x; }
__device__ __forceinline__ float cvt_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float cvt_f(__half x) { return __half2float(x); }

// Two floats as one register of two 16-bit values (the lower one first).
template <class Ts>
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  uint32_t r;
  if constexpr (std::is_same_v<Ts, __half>) {
    __half2 h = __floats2half2_rn(a, b);
    r = *reinterpret_cast<uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    r = *reinterpret_cast<uint32_t*>(&h);
  }
  return r;
}
template <class Ts>
__device__ __forceinline__ float2 unpack2(uint32_t r) {
  if constexpr (std::is_same_v<Ts, __half>)
    return __half22float2(*reinterpret_cast<__half2*>(&r));
  else
    return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&r));
}

// x rounded to the 16-bit type (hi, as A fragment halves) and the rest
// (lo): x = hi + lo to ~16 more bits. bf16: the halves unpacked by shifts.
template <class Ts>
__device__ __forceinline__ void split2(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  hi = pack2<Ts>(x0, x1);
  if constexpr (std::is_same_v<Ts, __half>) {
    const float2 h = unpack2<Ts>(hi);
    lo = pack2<Ts>(x0 - h.x, x1 - h.y);
  } else {
    lo = pack2<Ts>(x0 - __uint_as_float(hi << 16), x1 - __uint_as_float(hi & 0xffff0000u));
  }
}

template <class T>
__device__ __forceinline__ T cvt_t(float x);
template <>
__device__ __forceinline__ float cvt_t<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 cvt_t<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half cvt_t<__half>(float x) { return __float2half_rn(x); }

// Stores two consecutive elements (p aligned to two elements).
__device__ __forceinline__ void store2(float* p, float a, float b) {
  *reinterpret_cast<float2*>(p) = make_float2(a, b);
}
__device__ __forceinline__ void store2(__nv_bfloat16* p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}
__device__ __forceinline__ void store2(__half* p, float a, float b) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
}

// Four consecutive elements as floats (p aligned to four elements).
__device__ __forceinline__ void load4f(const float* p, float out[4]) {
  float4 x = *reinterpret_cast<const float4*>(p);
  out[0] = x.x, out[1] = x.y, out[2] = x.z, out[3] = x.w;
}
template <class T>
__device__ __forceinline__ void load4f(const T* p, float out[4]) {
  uint2 raw = *reinterpret_cast<const uint2*>(p);
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) out[i] = cvt_f(e[i]);
}

// Two consecutive elements as floats (p aligned to their pair).
__device__ __forceinline__ void load2f(const float* p, float& a, float& b) {
  const float2 x = *reinterpret_cast<const float2*>(p);
  a = x.x, b = x.y;
}
template <class T>
__device__ __forceinline__ void load2f(const T* p, float& a, float& b) {
  const uint32_t raw = *reinterpret_cast<const uint32_t*>(p);
  const T* e = reinterpret_cast<const T*>(&raw);
  a = cvt_f(e[0]), b = cvt_f(e[1]);
}

__device__ __forceinline__ uint32_t ld32(const void* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
#if DELTAC_MMA_OK
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
#else
  r = __float_as_uint(x);
#endif
  return r;
}

// cp.async (sm_80+): 16 bytes global -> shared, completed by wait_all.
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
#if DELTAC_MMA_OK
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
#else
  *static_cast<uint4*>(dst) = *static_cast<const uint4*>(src);
#endif
}
// 16 bytes, or 16 zero bytes when !valid (src is not read then).
__device__ __forceinline__ void cp_async16_zfill(void* dst, const void* src, bool valid) {
#if DELTAC_MMA_OK
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n));
#else
  *static_cast<uint4*>(dst) = valid ? *static_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if DELTAC_MMA_OK
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// Waits until at most N of this thread's cp.async groups are pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if DELTAC_MMA_OK
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
__device__ __forceinline__ void cp_async_wait_all() {
#if DELTAC_MMA_OK
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

// Four 8 x 8 matrices of 16-bit elements, transposed, from shared memory:
// lanes 8j .. 8j + 7 give the eight 16-byte rows of matrix j (shared-space
// address `addr`), r[j] is this lane's part of it.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
#if DELTAC_MMA_OK
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#else
  (void)addr;
  r[0] = r[1] = r[2] = r[3] = 0;
#endif
}

template <class Ts>
struct Mma;

template <class Ts>
struct Mma16 {
  struct FragA {
    uint32_t r[4];
  };
  struct FragB {
    uint32_t r[2];
  };
  // 16 x 16 tile of A at a (row stride lda elements; rows 16-byte aligned):
  // one ldmatrix.x4, lane i addressing row i % 16, column 8 (i / 16).
  __device__ static __forceinline__ void load_a(FragA& f, const Ts* a, int lda) {
    const int lane = threadIdx.x & 31;
#if DELTAC_MMA_OK
    const uint32_t addr = static_cast<uint32_t>(
        __cvta_generic_to_shared(a + (lane & 15) * lda + (lane >> 4) * 8));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3])
                 : "r"(addr));
#else
    const int g = lane >> 2, t = lane & 3;
    f.r[0] = ld32(a + g * lda + 2 * t);
    f.r[1] = ld32(a + (g + 8) * lda + 2 * t);
    f.r[2] = ld32(a + g * lda + 2 * t + 8);
    f.r[3] = ld32(a + (g + 8) * lda + 2 * t + 8);
#endif
  }
  // 8 (n) x 16 (k) tile of B at b (row stride ldb elements): ldmatrix.x2,
  // lanes 0-7 address rows n at k 0, lanes 8-15 at k 8.
  __device__ static __forceinline__ void load_b(FragB& f, const Ts* b, int ldb) {
    const int lane = threadIdx.x & 31;
#if DELTAC_MMA_OK
    const uint32_t addr = static_cast<uint32_t>(
        __cvta_generic_to_shared(b + (lane & 7) * ldb + ((lane >> 3) & 1) * 8));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(f.r[0]), "=r"(f.r[1])
                 : "r"(addr));
#else
    const int g = lane >> 2, t = lane & 3;
    f.r[0] = ld32(b + g * ldb + 2 * t);
    f.r[1] = ld32(b + g * ldb + 2 * t + 8);
#endif
  }
  // The same fragments from the transposed storage: A from a [k][m] tile
  // (a at (k0, m0), row stride lda), B from a [k][n] tile (ldmatrix .trans).
  __device__ static __forceinline__ void load_a_t(FragA& f, const Ts* a, int lda) {
    const int lane = threadIdx.x & 31, mat = lane >> 3;
    ldmatrix_x4_trans(f.r, static_cast<uint32_t>(__cvta_generic_to_shared(
                               a + ((lane & 7) + (mat >> 1) * 8) * lda + (mat & 1) * 8)));
  }
  __device__ static __forceinline__ void load_b_t(FragB& f, const Ts* b, int ldb) {
    const int lane = threadIdx.x & 31;
#if DELTAC_MMA_OK
    const uint32_t addr = static_cast<uint32_t>(
        __cvta_generic_to_shared(b + ((lane & 7) + ((lane >> 3) & 1) * 8) * ldb));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(f.r[0]), "=r"(f.r[1])
                 : "r"(addr));
#else
    (void)lane;
    f.r[0] = f.r[1] = 0;
#endif
  }
};

template <>
struct Mma<__nv_bfloat16> : Mma16<__nv_bfloat16> {
  __device__ static __forceinline__ void mma(float c[4], const FragA& a, const FragB& b) {
#if DELTAC_MMA_OK
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
#else
    __trap();
#endif
  }
};

template <>
struct Mma<__half> : Mma16<__half> {
  __device__ static __forceinline__ void mma(float c[4], const FragA& a, const FragB& b) {
#if DELTAC_MMA_OK
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
#else
    __trap();
#endif
  }
};

template <>
struct Mma<float> {
  struct FragA {
    uint32_t hi[2][4], lo[2][4];
  };
  struct FragB {
    uint32_t hi[2][2], lo[2][2];
  };
  __device__ static __forceinline__ void split(float x, uint32_t& hi, uint32_t& lo) {
    hi = to_tf32(x);
    lo = to_tf32(x - __uint_as_float(hi));
  }
  __device__ static __forceinline__ void load_a(FragA& f, const float* a, int lda) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float* p = a + 8 * h;
      split(p[g * lda + t], f.hi[h][0], f.lo[h][0]);
      split(p[(g + 8) * lda + t], f.hi[h][1], f.lo[h][1]);
      split(p[g * lda + t + 4], f.hi[h][2], f.lo[h][2]);
      split(p[(g + 8) * lda + t + 4], f.hi[h][3], f.lo[h][3]);
    }
  }
  __device__ static __forceinline__ void load_b(FragB& f, const float* b, int ldb) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float* p = b + 8 * h;
      split(p[g * ldb + t], f.hi[h][0], f.lo[h][0]);
      split(p[g * ldb + t + 4], f.hi[h][1], f.lo[h][1]);
    }
  }
  // Transposed storage: A from [k][m], B from [k][n] (see Mma16).
  __device__ static __forceinline__ void load_a_t(FragA& f, const float* a, int lda) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float* p = a + 8 * h * lda;
      split(p[t * lda + g], f.hi[h][0], f.lo[h][0]);
      split(p[t * lda + g + 8], f.hi[h][1], f.lo[h][1]);
      split(p[(t + 4) * lda + g], f.hi[h][2], f.lo[h][2]);
      split(p[(t + 4) * lda + g + 8], f.hi[h][3], f.lo[h][3]);
    }
  }
  __device__ static __forceinline__ void load_b_t(FragB& f, const float* b, int ldb) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float* p = b + 8 * h * ldb;
      split(p[t * ldb + g], f.hi[h][0], f.lo[h][0]);
      split(p[(t + 4) * ldb + g], f.hi[h][1], f.lo[h][1]);
    }
  }
  __device__ static __forceinline__ void mma1(float c[4], const uint32_t a[4],
                                              const uint32_t b[2]) {
#if DELTAC_MMA_OK
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    __trap();
#endif
  }
  __device__ static __forceinline__ void mma(float c[4], const FragA& a, const FragB& b) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mma1(c, a.lo[h], b.hi[h]);
      mma1(c, a.hi[h], b.lo[h]);
      mma1(c, a.hi[h], b.hi[h]);
    }
  }
};

// A shared-memory operand of row stride LD (elements) for the scan's inner
// loops: the lane's ldmatrix row addresses are formed once, and every load
// takes a compile-time element offset (16-bit types: one ldmatrix at
// [reg + imm]; f32: the scalar loads of Mma<float>).
//   la(f, off):  A fragment of a [m][k] tile at element offset off
//   lat(f, off): A fragment of a [k][m] tile (transposed storage)
//   lbt(f, off): B fragment of a [k][n] tile
template <class Ts, int LD>
struct Tile {
  using Op = Mma<Ts>;
  const Ts* p;
  uint32_t a, at, bt;
  __device__ __forceinline__ explicit Tile(const Ts* base) : p(base) {
    const int lane = threadIdx.x & 31;
    const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(base));
    constexpr uint32_t B = sizeof(Ts);
    a = s + ((lane & 15) * LD + (lane >> 4) * 8) * B;
    at = s + (((lane & 7) + ((lane >> 4) & 1) * 8) * LD + ((lane >> 3) & 1) * 8) * B;
    bt = s + ((lane & 7) + ((lane >> 3) & 1) * 8) * LD * B;
  }
  __device__ __forceinline__ void la(typename Op::FragA& f, int off) const {
    if constexpr (sizeof(Ts) == 2) {
#if DELTAC_MMA_OK
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3])
                   : "r"(a + off * 2));
#endif
    } else {
      Op::load_a(f, p + off, LD);
    }
  }
  __device__ __forceinline__ void lat(typename Op::FragA& f, int off) const {
    if constexpr (sizeof(Ts) == 2) {
#if DELTAC_MMA_OK
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3])
                   : "r"(at + off * 2));
#endif
    } else {
      Op::load_a_t(f, p + off, LD);
    }
  }
  __device__ __forceinline__ void lbt(typename Op::FragB& f, int off) const {
    if constexpr (sizeof(Ts) == 2) {
#if DELTAC_MMA_OK
      asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                   : "=r"(f.r[0]), "=r"(f.r[1])
                   : "r"(bt + off * 2));
#endif
    } else {
      Op::load_b_t(f, p + off, LD);
    }
  }
};

// Block-cooperative C[M x N] = A[M x KD] * (B + B2)[N x KD]^T (B2 may be
// null): the warps of the block take units of 16 rows x (8 NT) columns in
// turn; epi(row, col, x0, x1) receives the elements (row, col) and
// (row, col + 1) of each unit. `skip(m0, n0)` says a unit is not needed.
template <class Ts, int M, int N, int KD, int NT, class Epi, class Skip>
__device__ __forceinline__ void block_gemm_tn(const Ts* A, int lda, const Ts* B, const Ts* B2,
                                              int ldb, int warp, int nwarps, Epi&& epi,
                                              Skip&& skip) {
  static_assert(M % 16 == 0 && N % (8 * NT) == 0 && KD % 16 == 0, "tile shape");
  using Op = Mma<Ts>;
  constexpr int kMt = M / 16, kNg = N / (8 * NT);
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  for (int u = warp; u < kMt * kNg; u += nwarps) {
    const int m0 = (u / kNg) * 16, n0 = (u % kNg) * 8 * NT;
    if (skip(m0, n0))
      continue;
    float acc[NT][4];
#pragma unroll
    for (int i = 0; i < NT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
#pragma unroll 2
    for (int k0 = 0; k0 < KD; k0 += 16) {
      typename Op::FragA fa;
      Op::load_a(fa, A + m0 * lda + k0, lda);
#pragma unroll
      for (int i = 0; i < NT; ++i) {
        typename Op::FragB fb;
        Op::load_b(fb, B + (n0 + 8 * i) * ldb + k0, ldb);
        Op::mma(acc[i], fa, fb);
        if (B2) {
          Op::load_b(fb, B2 + (n0 + 8 * i) * ldb + k0, ldb);
          Op::mma(acc[i], fa, fb);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < NT; ++i) {
      epi(m0 + g, n0 + 8 * i + 2 * t, acc[i][0], acc[i][1]);
      epi(m0 + g + 8, n0 + 8 * i + 2 * t, acc[i][2], acc[i][3]);
    }
  }
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_CHUNKED_MMA_CUH
