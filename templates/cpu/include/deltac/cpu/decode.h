// Decode path of the recurrent kernel: every sequence has at most one token.
// Per head, the state is read once (h0) and written once (ht, may alias h0),
// in column tiles of VB columns:
//   sweep 1 (reads h):   hk = h^T (a k),  hq = h^T (a q)
//   u = beta (v - hk),  o = scale (hq + u (k . q))    (h' = a (.) h, per row)
//   sweep 2 (writes ht): ht = a (.) h + k u^T
// KV layout: a tile is [K][VB] floats with row stride V; about half of it
// is still in L1 after sweep 1 (K = 128: 32 columns share few L1 sets, whole
// rows exceed L1), so sweep 2 runs backwards to hit it. Whole rows (VB = V
// <= 128) read a head in address order with 2 VB / W accumulator chains:
// the avx512 rule's tile (catalogue.h, kCpuRules). VK layout: columns are
// contiguous, four at a time (with horizontal sums), each group's update one
// group behind its dot products in one pass (decode_tile_vk).
// Work is split over threads in contiguous ranges of (sequence, head, tile)
// units, so batch 1 keeps every thread busy, and a thread gets the same
// state slices on every call (they stay in its L2 between decode steps).
// A state pool only moves the per-sequence state pointers (read and write
// slot). S, the state's element: float, uint16_t (bf16) or uint8_t (fp8
// e4m3: the head's state_scale folds into a k, a q and u, so the tiles see
// the stored values); widened as read, rounded to nearest even as written.
// state_steps and accepted take recurrent.h's path.
#ifndef DELTAC_CPU_DECODE_H
#define DELTAC_CPU_DECODE_H

#include <type_traits>

#include "deltac/cpu/cache.h"
#include "deltac/cpu/common.h"

namespace deltac::cpu { inline namespace DELTAC_CPU_NS { namespace detail {

// Locality hint of the next head's prefetches (prefetcht1, into L2).
constexpr int kPrefetchLocality = 2;
// A separate ht of at least this many bytes is written with streaming stores.
constexpr double kStreamStateBytes = 16.0 * (1 << 20);

// Slot sequence n reads from h0 / writes to ht (params.h, state pool):
// -1 = none (the zero state / not written). Without a pool, n (or -1 when
// h0 / ht is null). Slots out of range count as -1 (never out of bounds).
inline int32_t read_slot(const deltac_fwd_params& p, int n) {
  if (!p.h0)
    return -1;
  if (!p.read_slots)
    return n;
  const int32_t s = p.read_slots[n];
  return s >= 0 && s < p.num_slots ? s : -1;
}
inline int32_t write_slot(const deltac_fwd_params& p, int n) {
  if (!p.ht)
    return -1;
  if (!p.read_slots)
    return n;
  const int32_t s = (p.write_slots ? p.write_slots : p.read_slots)[n];
  return s >= 0 && s < p.num_slots ? s : -1;
}

// Whether decode_impl's two-pass kernel takes p: no state_steps and no
// accepted counts (a pool is fine). Other calls run the tiled recurrence
// (recurrent.h), which takes every decode field.
inline bool decode_fast(const deltac_fwd_params& p) {
  return !p.state_steps && !p.accepted;
}

// A state vector's W elements as f32, and back.
inline simd::vf load_state(const float* p) { return simd::load(p); }
inline simd::vf load_state(const uint16_t* p) { return simd::load_bf16(p); }
inline simd::vf load_state(const uint8_t* p) { return simd::load_fp8e4m3(p); }
inline void store_state(float* p, simd::vf x) { simd::store(p, x); }
inline void store_state(uint16_t* p, simd::vf x) { simd::store_bf16(p, x); }
inline void store_state(uint8_t* p, simd::vf x) { simd::store_fp8e4m3(p, x); }

// True when the decode path applies: no sequence longer than one token.
inline bool decode_applies(const deltac_fwd_params& p) {
  if (!p.cu_seqlens)
    return p.T <= 1;
  for (int n = 0; n < p.N; ++n)
    if (p.cu_seqlens[n + 1] - p.cu_seqlens[n] > 1)
      return false;
  return true;
}

// One [K][VB] tile at columns already offset into src/dst (row stride V).
// src null: h = 0. dst null: the state is not written (o needs only sweep 1).
// ka = a k, qa = a q, k, av = a (per row; unused without Decay); v, ob: the
// tile's VB columns of v and of the unscaled output. next: K * VB elements
// (or null) to prefetch, in address order, spread over the two sweeps. us:
// 1, or 1 / state_scale for an fp8 state (ka, qa carry state_scale).
template <int NV, bool Decay, typename S>
inline void decode_tile(const S* src, S* dst, int K, int V,
                        const float* ka, const float* qa, const float* k,
                        const float* av, float beta, float kq, const float* v,
                        float* ob, const S* next, bool stream, float us) {
  using namespace simd;
  // next's lines a row (NV * W elements of it), the first half prefetched
  // in sweep 1, the rest in sweep 2 (whole rows took two of eight before:
  // 2-core Intel Xeon, gated, batch 8 x 16 heads, 230 -> 216 us).
  constexpr int kLine = 64 / sizeof(S);  // elements a cache line
  constexpr int kRowLines = (NV * W + kLine - 1) / kLine, kHalf = (kRowLines + 1) / 2;
  vf hk[NV], hq[NV];
  for (int c = 0; c < NV; ++c) hk[c] = hq[c] = zero();
  if (src)
    for (int r = 0; r < K; ++r) {
      const vf kv = set1(ka[r]), qv = set1(qa[r]);
      const S* h = src + size_t(r) * V;
      if (next)
        for (int l = 0; l < kHalf; ++l)
          __builtin_prefetch(next + size_t(r) * NV * W + l * kLine, 0, kPrefetchLocality);
#pragma GCC unroll 8
      for (int c = 0; c < NV; ++c) {
        vf x = load_state(h + c * W);
#if DELTAC_CPU_AVX
        // One load for both FMAs: GCC otherwise folds it into each (two
        // loads per vector, and the load ports become the limit).
        asm("" : "+x"(x));
#endif
        hk[c] = fma(x, kv, hk[c]);
        hq[c] = fma(x, qv, hq[c]);
      }
    }
  vf u[NV];
  const vf bv = set1(beta), kqv = set1(kq);
  for (int c = 0; c < NV; ++c) {
    u[c] = bv * (load(v + c * W) - hk[c]);
    store(ob + c * W, fma(kqv, u[c], hq[c]));
    u[c] *= set1(us);  // in the stored state's scale
  }
  if (!dst)
    return;
  // Rows in reverse: the rows sweep 1 read last are still in L1 (see top).
  for (int r = K - 1; r >= 0; --r) {
    const vf kv = set1(k[r]);
    S* d = dst + size_t(r) * V;
    if (!src) {
#pragma GCC unroll 8
      for (int c = 0; c < NV; ++c) store_state(d + c * W, kv * u[c]);
      continue;
    }
    const S* h = src + size_t(r) * V;
    if (next)
      for (int l = kHalf; l < kRowLines; ++l)
        __builtin_prefetch(next + size_t(r) * NV * W + l * kLine, 0, kPrefetchLocality);
    const vf a = set1(Decay ? av[r] : 1.0f);
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) {
      vf x = load_state(h + c * W);
      if (Decay)
        x *= a;
      const vf y = fma(kv, u[c], x);
      if constexpr (std::is_same_v<S, float>) {
#if DELTAC_CPU_AVX512
        if (stream) { // a separate, large ht: skip reading its lines first
          _mm512_stream_ps(d + c * W, y);
          continue;
        }
#elif DELTAC_CPU_AVX
        if (stream) { // a separate, large ht: skip reading its lines first
          _mm256_stream_ps(d + c * W, y);
          continue;
        }
#endif
      }
      store_state(d + c * W, y);
    }
  }
}

#if DELTAC_CPU_FMA
// The four horizontal sums of a[0..3].
__attribute__((always_inline)) inline __m128 hsum4(const simd::vf (&a)[4]) {
#if DELTAC_CPU_AVX512  // fold each 16-lane vector to 8 lanes first
  __m256 b[4];
  for (int i = 0; i < 4; ++i)
    b[i] = _mm256_add_ps(_mm512_castps512_ps256(a[i]),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[i]), 1)));
#else
  const simd::vf (&b)[4] = a;
#endif
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(b[0], b[1]),
                                  _mm256_hadd_ps(b[2], b[3]));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}
#endif

// VK layout ([V][K]: each state column is K contiguous elements) in one
// pass, four columns a group: group g is read for its dot products (8
// accumulators, then their horizontal sums) while group g - 1 (read one
// group before: in L1) is updated in the same loop, so each state line
// comes from L2 or memory once and no update waits on its own group's sums
// (against two sweeps: 20 -> 15 us at batch 1, 240 -> 198 at batch 8; 2-core
// Intel Xeon, docs/performance.md). PerKey: a per row (kda); else one a for
// the head (av[0]). Same arguments as decode_tile, src/dst at the tile's
// first column (stride K).
template <int VB, bool Decay, bool PerKey, int KC, typename S>
inline void decode_tile_vk(const S* src, S* dst, int K_,
                           const float* ka, const float* qa, const float* k,
                           const float* av, float beta, float kq,
                           const float* v, float* ob, const S* next,
                           float us) {
  using namespace simd;
  static_assert(VB % W == 0 && VB % 4 == 0, "tile_v: a multiple of the vector width");
  const int K = KC ? KC : K_;
  constexpr int kLine = 64 / sizeof(S);  // elements a cache line
  alignas(64) float uu[VB];              // u in the stored state's scale
  if (!src) {  // the zero state: o = kq u, ht = k u^T
    for (int c = 0; c < VB; ++c) {
      const float u = beta * v[c];
      ob[c] = kq * u;
      uu[c] = u * us;
    }
    if (dst)
      for (int c = 0; c < VB; ++c)
        for (int r = 0; r < K; r += W)
          store_state(dst + size_t(c) * K + r, load(k + r) * set1(uu[c]));
    return;
  }
  const vf ah = set1(Decay && !PerKey ? av[0] : 1.0f);
  // Dots of group c0 (Dots) and the update of group p0 = c0 - 4 (Upd).
  auto step = [&](auto dots, auto upd, int c0) __attribute__((always_inline)) {
    constexpr bool Dots = decltype(dots)::value, Upd = decltype(upd)::value;
    const int p0 = c0 - 4;
    vf ak[4], aq[4];
    for (int i = 0; i < 4; ++i) ak[i] = aq[i] = zero();
    const S* pf = Dots && next ? next + size_t(c0) * K : nullptr;
#pragma GCC unroll 2
    for (int r = 0; r < K; r += W) {
      if constexpr (Dots) {
        const vf kv = load(ka + r), qv = load(qa + r);
        if (pf)
          for (int l = 0; l < 4 * W; l += kLine)
            __builtin_prefetch(pf + 4 * r + l, 0, kPrefetchLocality);
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
          vf x = load_state(src + size_t(c0 + i) * K + r);
#if DELTAC_CPU_AVX
          asm("" : "+x"(x));  // one load for both FMAs (see decode_tile)
#endif
          ak[i] = fma(x, kv, ak[i]);
          aq[i] = fma(x, qv, aq[i]);
        }
      }
      if constexpr (Upd) {
        const vf kr = load(k + r);
        const vf a = PerKey ? load(av + r) : ah;
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
          vf x = load_state(src + size_t(p0 + i) * K + r);
          if (Decay)
            x *= a;
          store_state(dst + size_t(p0 + i) * K + r, fma(kr, set1(uu[p0 + i]), x));
        }
      }
    }
    if constexpr (!Dots)
      return;
#if DELTAC_CPU_FMA
    alignas(16) float hk[4], hq[4];
    _mm_store_ps(hk, hsum4(ak));
    _mm_store_ps(hq, hsum4(aq));
#else
    float hk[4], hq[4];
    for (int i = 0; i < 4; ++i) hk[i] = hsum(ak[i]), hq[i] = hsum(aq[i]);
#endif
    for (int i = 0; i < 4; ++i) {
      const float u = beta * (v[c0 + i] - hk[i]);
      ob[c0 + i] = std::fma(kq, u, hq[i]);
      uu[c0 + i] = u * us;
    }
  };
  using yes = std::true_type;
  using no = std::false_type;
  step(yes{}, no{}, 0);
  if (!dst) {  // o only: dots
    for (int c0 = 4; c0 < VB; c0 += 4) step(yes{}, no{}, c0);
    return;
  }
  for (int c0 = 4; c0 < VB; c0 += 4) step(yes{}, yes{}, c0);
  step(no{}, yes{}, VB);
}

template <typename S, deltac_variant Var, int VB, int KC, int VC>
void decode_typed(const deltac_fwd_params& p) {
  using namespace simd;
  constexpr int NV = VB / W;
  constexpr bool Decay = Var != DELTAC_VARIANT_DELTA;
  const int K = KC ? KC : p.K, V = VC ? VC : p.V;
  const int HV = p.HV, group = p.HV / p.H, tiles = V / VB;
  const float scale = kernel_scale(p, K);
  const int64_t units = int64_t(num_seqs(p)) * HV * tiles;
  const S* h0 = static_cast<const S*>(p.h0);
  S* ht = static_cast<S*>(p.ht);
  const size_t nK = pad16(K);
  const bool vk = p.state_layout == DELTAC_STATE_VK;
  const bool fp8 = std::is_same_v<S, uint8_t> && p.state_scale;
  // ht apart from h0, larger than caches hold, rows on 64-byte lines: write
  // it with streaming stores (gated, batch 8 x 32 heads, 16 MiB each way:
  // 1.40 -> 0.84 ms). Small states stay cached for the next step instead.
  const bool stream = std::is_same_v<S, float> && ht && ht != h0 &&
                      V * 4 % 64 == 0 && VB * 4 % 64 == 0 &&
                      (reinterpret_cast<uintptr_t>(ht) & 63) == 0 &&
                      double(units / tiles) * K * V * 4 >= kStreamStateBytes;

  // VK heads are contiguous: from the last-level cache the hardware's
  // streamer fetches them well and the next-head prefetch only costs (2-core
  // Intel guest, gated batch 8 x 16 heads, 8 MiB in place: 196-204 -> 170-190
  // us without it); from memory it pays (batch 64 x 32 heads, 128 MiB:
  // 3.5-4.2 ms with it, 5.3-6.3 without). The call's state bytes past a
  // quarter of that cache (a guest's share of it is smaller) count as memory.
  const double unit_bytes = double(K) * VB * sizeof(S) * (ht && ht != h0 ? 2 : 1);
  const bool vk_fetch = double(units) * unit_bytes > 0.25 * double(l3_cache_bytes());

  // Units [u0, u1) in (sequence, head, tile) order; a head's q, k, v, decay
  // are prepared once per thread.
  auto run = [&](int64_t u0, int64_t u1) {
    // A thread's slices (h0 and ht) within half its L2 stay there between
    // steps: no next-head prefetch then (its instructions only cost).
    const bool fetch =
        (vk_fetch || !vk) && double(u1 - u0) * unit_bytes > 0.5 * double(l2_cache_bytes());
    float* q = scratch(5 * nK + pad16(V) + pad16(VB));
    float* k = q + nK;
    float* ka = k + nK;
    float* qa = ka + nK;
    float* av = qa + nK;
    float* vb = av + nK;
    float* ob = vb + pad16(V);
    int64_t cur = -1, th = 0;
    bool empty = false;
    float beta = 0.0f, kq = 0.0f, us = 1.0f;
    const S* src = nullptr;  // this head's state in h0 / ht, or null
    S* dst = nullptr;
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t hidx = u / tiles;
      const int v0 = int(u % tiles) * VB;
      const int n = int(hidx / HV), j = int(hidx % HV);
      if (hidx != cur) {
        cur = hidx;
        const int32_t rs = read_slot(p, n), ws = write_slot(p, n);
        src = rs >= 0 ? h0 + (size_t(rs) * HV + j) * K * V : nullptr;
        dst = ws >= 0 ? ht + (size_t(ws) * HV + j) * K * V : nullptr;
        int64_t t0, t1;
        seq_range(p, n, &t0, &t1);
        empty = t0 == t1;
        if (!empty) {
          const int64_t qo = (t0 * p.H + j / group) * K;
          th = t0 * HV + j;
          load_qk(q, k, p, qo, K);
          load_row(vb, p.v, p.in_dtype, th * V, V);
          beta = p.beta[th];
          vf s = zero();
          for (int r = 0; r < K; r += W) s = fma(load(q + r), load(k + r), s);
          kq = hsum(s);
          if (Var == DELTAC_VARIANT_KDA) {
            const float* g = p.g + th * K;
            for (int r = 0; r < K; r += W)
              store(av + r, simd::exp(load(g + r)));
          } else if (Var == DELTAC_VARIANT_GATED) {
            const vf a = set1(std::exp(p.g[th]));
            for (int r = 0; r < K; r += W) store(av + r, a);
          }
          // ka, qa also carry an fp8 state's scale (stored value x scale).
          const vf sc = set1(fp8 ? p.state_scale[j] : 1.0f);
          for (int r = 0; r < K; r += W) {
            const vf a = Decay ? load(av + r) * sc : sc;
            store(ka + r, a * load(k + r));
            store(qa + r, a * load(q + r));
          }
          us = fp8 ? 1.0f / p.state_scale[j] : 1.0f;
        }
      }
      if (empty && vk) {  // no token: the written state is the read one
        if (dst && dst != src) {
          S* d = dst + size_t(v0) * K;
          if (src)
            std::memcpy(d, src + size_t(v0) * K, sizeof(S) * K * VB);
          else
            std::memset(d, 0, sizeof(S) * K * VB);
        }
        continue;
      }
      if (empty) {
        if (dst && dst != src)
          for (int r = 0; r < K; ++r) {
            S* d = dst + size_t(r) * V + v0;
            if (src)
              std::memcpy(d, src + size_t(r) * V + v0, sizeof(S) * VB);
            else
              std::memset(d, 0, sizeof(S) * VB);
          }
        continue;
      }
      // The next head's state (if this thread does it), the part of it that
      // matches this tile's share, prefetched in address order: the tiles'
      // strided rows alone defeat the hardware prefetcher (batch 64 from
      // DRAM: 9.2 -> 6.1 ms on one thread). Next head of another sequence:
      // its read slot's.
      const S* next = nullptr;
      if (fetch && h0 && (hidx + 1) * tiles < u1) {
        const int nn = int((hidx + 1) / HV), nj = int((hidx + 1) % HV);
        const int32_t ns = nn == n ? 0 : read_slot(p, nn);
        if (nn == n)
          next = src ? src + size_t(K) * V : nullptr;
        else if (ns >= 0)
          next = h0 + (size_t(ns) * HV + nj) * K * V;
        if (next)
          next += size_t(v0) * K;
      }
      if (vk)
        decode_tile_vk<VB, Decay, Var == DELTAC_VARIANT_KDA, KC>(
            src ? src + size_t(v0) * K : nullptr,
            dst ? dst + size_t(v0) * K : nullptr, K, ka, qa, k, av, beta, kq,
            vb + v0, ob, next, us);
      else
        decode_tile<NV, Decay>(src ? src + v0 : nullptr,
                             dst ? dst + v0 : nullptr, K, V, ka, qa, k,
                             av, beta, kq, vb + v0, ob, next, stream, us);
      store_row(p.o, p.out_dtype, th * V + v0, ob, VB, scale);
    }
#if DELTAC_CPU_AVX
    if (stream)
      _mm_sfence(); // streaming stores visible before the caller reads ht
#endif
  };

  int nt = thread_count(p);
  if (nt > units)
    nt = int(units > 0 ? units : 1);
  if (nt <= 1) {
    run(0, units);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int64_t t = omp_get_thread_num(), m = omp_get_num_threads();
    run(units * t / m, units * (t + 1) / m);
  }
}

// decode_fast(p) holds.
template <deltac_variant Var, int VB, int KC, int VC>
void decode_impl(const deltac_fwd_params& p) {
  if (p.state_dtype == DELTAC_BF16)
    decode_typed<uint16_t, Var, VB, KC, VC>(p);
  else if (p.state_dtype == DELTAC_FP8_E4M3)
    decode_typed<uint8_t, Var, VB, KC, VC>(p);
  else
    decode_typed<float, Var, VB, KC, VC>(p);
}

}}}  // namespace deltac::cpu::DELTAC_CPU_NS::detail

#endif  // DELTAC_CPU_DECODE_H
