// Token-by-token recurrent kernel. The value columns of the state evolve
// independently, so each head's state is processed in column tiles of VB
// columns ([K][VB] floats, kept in L1) over a block of TB tokens whose q, k
// (normalised) and decays are prepared once. Per token and tile: one
// read-write pass (rank-1 update + h^T q + next token's h^T k); decays are
// applied lazily through per-row scalars (see rec_pass).
#ifndef DELTAC_CPU_RECURRENT_H
#define DELTAC_CPU_RECURRENT_H

#include "deltac/catalogue.h"
#include "deltac/cpu/common.h"
#include "deltac/cpu/decode.h"

namespace deltac::cpu { inline namespace DELTAC_CPU_NS {
namespace detail {

constexpr int kRecTokens = 64;  // tokens prepared per block

// tile[K][VB] <- columns [v0, v0+VB) of a state in `layout` and `dtype`
// (F32, BF16, or FP8_E4M3 times `fp8_scale`, the head's state_scale; null:
// zeros).
template <int VB>
inline void load_tile(float* tile, const void* src_, int32_t dtype, int layout,
                      int K, int V, int v0, float fp8_scale) {
  if (!src_) {
    std::memset(tile, 0, sizeof(float) * K * VB);
  } else if (dtype == DELTAC_FP8_E4M3) {
    const uint8_t* src = static_cast<const uint8_t*>(src_);
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < VB; ++c)
        tile[k * VB + c] = fp8e4m3_to_f32(layout == DELTAC_STATE_VK
                                              ? src[size_t(v0 + c) * K + k]
                                              : src[size_t(k) * V + v0 + c]) *
                           fp8_scale;
  } else if (dtype == DELTAC_BF16) {
    const uint16_t* src = static_cast<const uint16_t*>(src_);
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < VB; ++c)
        tile[k * VB + c] = bf16_to_f32(layout == DELTAC_STATE_VK
                                           ? src[size_t(v0 + c) * K + k]
                                           : src[size_t(k) * V + v0 + c]);
  } else if (layout == DELTAC_STATE_VK) {
    const float* src = static_cast<const float*>(src_);
    for (int c = 0; c < VB; ++c)
      for (int k = 0; k < K; ++k) tile[k * VB + c] = src[size_t(v0 + c) * K + k];
  } else {
    const float* src = static_cast<const float*>(src_);
    for (int k = 0; k < K; ++k)
      std::memcpy(tile + k * VB, src + size_t(k) * V + v0, sizeof(float) * VB);
  }
}

// fp8: e4m3(x * (1 / fp8_scale)) (params.h).
template <int VB>
inline void store_tile(void* dst_, int32_t dtype, int layout, const float* tile,
                       int K, int V, int v0, float fp8_scale) {
  if (dtype == DELTAC_FP8_E4M3) {
    uint8_t* dst = static_cast<uint8_t*>(dst_);
    const float inv = 1.0f / fp8_scale;
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < VB; ++c)
        (layout == DELTAC_STATE_VK ? dst[size_t(v0 + c) * K + k]
                                   : dst[size_t(k) * V + v0 + c]) =
            f32_to_fp8e4m3(tile[k * VB + c] * inv);
  } else if (dtype == DELTAC_BF16) {
    uint16_t* dst = static_cast<uint16_t*>(dst_);
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < VB; ++c)
        (layout == DELTAC_STATE_VK ? dst[size_t(v0 + c) * K + k]
                                   : dst[size_t(k) * V + v0 + c]) =
            f32_to_bf16(tile[k * VB + c]);
  } else if (layout == DELTAC_STATE_VK) {
    float* dst = static_cast<float*>(dst_);
    for (int c = 0; c < VB; ++c)
      for (int k = 0; k < K; ++k) dst[size_t(v0 + c) * K + k] = tile[k * VB + c];
  } else {
    float* dst = static_cast<float*>(dst_);
    for (int k = 0; k < K; ++k)
      std::memcpy(dst + size_t(k) * V + v0, tile + k * VB, sizeof(float) * VB);
  }
}

// Lazy decay. The tile holds h~ with h = c (.) h~ per key row, c the decay
// accumulated since the last "fold" token. Non-fold tokens then cost what a
// delta-rule token costs (no per-element multiply):
//   h^T k = sum_r h~_r (c_r k_r),  h~_r += (k_r / c_r) u,  o = sum_r h~_r (c_r q_r).
// A fold token applies c to the tile (h = c h~ + k u^T) and resets c to 1;
// folds happen when some c_r drops below kFoldBelow (so k / c stays finite)
// and at the last token of a block (the tile is stored in true scale).
constexpr float kFoldBelow = 0x1p-40f;

// One pass over the tile for one token. ks, qs, kn: per-row scalars (see
// above; kn = c k of the next token), av: c (fold tokens).
template <bool Fold, int NV, int P>
inline void rec_pass(float* tile, int K, const float* ks, const float* qs,
                     const float* kn, const float* av, const simd::vf* u,
                     simd::vf (&oa)[P][NV], simd::vf (&hk)[P][NV]) {
  using namespace simd;
  constexpr int VB = NV * W;
  for (int r = 0; r < K; r += P) {
#pragma GCC unroll 4
    for (int s = 0; s < P; ++s) {
      const vf kv = set1(ks[r + s]), qv = set1(qs[r + s]), nv = set1(kn[r + s]);
      vf a = zero();
      if (Fold)
        a = set1(av[r + s]);
      float* h = tile + (r + s) * VB;
#pragma GCC unroll 4
      for (int c = 0; c < NV; ++c) {
        vf x = load(h + c * W);
        if (Fold)
          x *= a;
        x = fma(kv, u[c], x);
        store(h + c * W, x);
        oa[s][c] = fma(x, qv, oa[s][c]);
        hk[s][c] = fma(x, nv, hk[s][c]);
      }
    }
  }
}

// Runs tokens [0, nt) of a prepared block over one state tile. Per token t
// ([nt][K] rows): ks, qs, kd (= c k, for h^T k), av (= c, fold tokens);
// fold[t] != 0 marks fold tokens; vb [nt][V]; bb beta [nt]. Outputs
// (unscaled) go to ob[t][VB]. One pass over the tile per token: while token
// t's update is written, h^T k for token t+1 is accumulated.
template <int VB, int KC>
inline void rec_tile(float* tile, int K_, int V, int v0, int nt, const float* ks,
                     const float* qs, const float* kd, const float* av,
                     const float* fold, const float* vb, const float* bb,
                     float* ob) {
  using namespace simd;
  constexpr int NV = VB / W;
  constexpr int P = NV >= 4 ? 1 : 2;  // partial sums per accumulator
  const int K = KC ? KC : K_;
  vf hk[P][NV];
  for (int s = 0; s < P; ++s)
    for (int c = 0; c < NV; ++c) hk[s][c] = zero();
  for (int r = 0; r < K; r += P)
#pragma GCC unroll 4
    for (int s = 0; s < P; ++s) {
      const vf kv = set1(kd[r + s]);
#pragma GCC unroll 4
      for (int c = 0; c < NV; ++c)
        hk[s][c] = fma(load(tile + (r + s) * VB + c * W), kv, hk[s][c]);
    }
  for (int t = 0; t < nt; ++t) {
    const size_t row = size_t(t) * K;
    const float* kn = kd + (t + 1 < nt ? row + K : row);
    vf u[NV];
    const vf beta = set1(bb[t]);
    for (int c = 0; c < NV; ++c) {
      vf x = hk[0][c];
      for (int s = 1; s < P; ++s) x += hk[s][c];
      u[c] = beta * (load(vb + size_t(t) * V + v0 + c * W) - x);
    }
    vf oa[P][NV];
    for (int s = 0; s < P; ++s)
      for (int c = 0; c < NV; ++c) oa[s][c] = hk[s][c] = zero();
    if (fold[t] != 0.0f)
      rec_pass<true, NV, P>(tile, K, ks + row, qs + row, kn, av + row, u, oa, hk);
    else
      rec_pass<false, NV, P>(tile, K, ks + row, qs + row, kn, av + row, u, oa, hk);
    for (int c = 0; c < NV; ++c) {
      vf o = oa[0][c];
      for (int s = 1; s < P; ++s) o += oa[s][c];
      store(ob + t * VB + c * W, o);
    }
  }
}

// Every decode field of params.h is served here: pool slots, a bf16 or fp8 state,
// and with state_steps or accepted one token per block (each block ends on
// a fold, so the tile holds the true state after every token).
template <deltac_variant Var, int VB, int KC, int VC>
void recurrent_impl(const deltac_fwd_params& p) {
  const int K = KC ? KC : p.K, V = VC ? VC : p.V;
  const bool per_token = p.state_steps || p.accepted;
  const int TB = per_token ? 1 : kRecTokens;
  const int group = p.HV / p.H;
  const float scale = kernel_scale(p, K);
  // Scratch: S [K][V] (state between token blocks, tile-major), tile; per
  // token of a block: qs, ks, kd, av [TB][K] (see rec_pass), v [TB][V],
  // beta, fold flag; o [TB][VB]; running decay c [K].
  const size_t nS = pad16(size_t(K) * V), nT = pad16(size_t(K) * VB),
               nK = pad16(size_t(TB) * K), nV = pad16(size_t(TB) * V);
  const size_t total =
      nS + nT + 4 * nK + nV + 2 * pad16(TB) + pad16(TB * VB) + pad16(K);

  for_each_head(p, [&](int n, int j) {
    float* S = scratch(total);
    float* tile = S + nS;
    float* qb = tile + nT;  // q, then qs
    float* kb = qb + nK;    // k, then ks
    float* kd = kb + nK;    // c (.) k
    float* ab = kd + nK;    // c of fold tokens
    float* vb = ab + nK;
    float* bb = vb + nV;
    float* fl = bb + pad16(TB);  // fold flags [TB]
    float* ob = fl + pad16(TB);
    float* cs = ob + pad16(TB * VB);  // running decay c [K]

    int64_t t0, t1;
    seq_range(p, n, &t0, &t1);
    const int hk = j / group;
    const size_t hsize = size_t(K) * V;
    const size_t esz = deltac::detail::dtypeSize(p.state_dtype);
    const float s8 = p.state_scale ? p.state_scale[j] : 1.0f;  // fp8 states
    const int32_t rs = read_slot(p, n), ws = write_slot(p, n);
    const void* h0 = rs >= 0 ? static_cast<const char*>(p.h0) +
                                   (size_t(rs) * p.HV + j) * hsize * esz
                             : nullptr;
    void* ht = ws >= 0 ? static_cast<char*>(p.ht) +
                             (size_t(ws) * p.HV + j) * hsize * esz
                       : nullptr;
    // ht receives the state after `acc` tokens (params.h: accepted).
    int64_t acc = t1 - t0;
    if (p.accepted)
      acc = p.accepted[n] < 0 ? 0 : p.accepted[n] < acc ? p.accepted[n] : acc;
    if (acc == 0) {  // no token kept: ht = the state read
      if (ht && ht != h0)
        for (int v0 = 0; v0 < V; v0 += VB) {
          load_tile<VB>(tile, h0, p.state_dtype, p.state_layout, K, V, v0, s8);
          store_tile<VB>(ht, p.state_dtype, p.state_layout, tile, K, V, v0, s8);
        }
      ht = nullptr;
    }
    if (t0 == t1)
      return;
    for (int64_t b0 = t0; b0 < t1; b0 += TB) {
      const int nt = int(t1 - b0 < TB ? t1 - b0 : TB);
      const bool first = b0 == t0, last = b0 + nt == t1;
      for (int t = 0; t < nt; ++t) {
        const int64_t tok = b0 + t;
        const int64_t qo = (tok * p.H + hk) * K;
        const int64_t th = tok * p.HV + j;
        float* q = qb + size_t(t) * K;
        float* k = kb + size_t(t) * K;
        load_qk(q, k, p, qo, K);
        load_row(vb + size_t(t) * V, p.v, p.in_dtype, th * V, V);
        bb[t] = p.beta[th];
        // Lazy-decay scalars (see rec_pass); cs holds c for this token.
        float* k1 = kd + size_t(t) * K;
        if (Var == DELTAC_VARIANT_DELTA) {
          std::memcpy(k1, k, sizeof(float) * K);
          fl[t] = 0.0f;
          continue;
        }
        if (t == 0)
          for (int r = 0; r < K; ++r) cs[r] = 1.0f;
        if (Var == DELTAC_VARIANT_KDA) {
          const float* g = p.g + th * K;
          for (int r = 0; r < K; r += simd::W)
            simd::store(cs + r, simd::load(cs + r) * simd::exp(simd::load(g + r)));
        } else {
          const float a = std::exp(p.g[th]);
          for (int r = 0; r < K; ++r) cs[r] *= a;
        }
        // c k, and whether some c is below kFoldBelow (or NaN): a fold.
        // Vectorised: the scalar minimum was a chain of dependent vminss.
        simd::vi low{};
        for (int r = 0; r < K; r += simd::W) {
          const simd::vf c = simd::load(cs + r);
          simd::store(k1 + r, c * simd::load(k + r));
          low |= ~(c >= simd::set1(kFoldBelow));
        }
        bool below = false;
        for (int i = 0; i < simd::W; ++i) below |= low[i] != 0;
        if (t == nt - 1 || below) {
          fl[t] = 1.0f;
          std::memcpy(ab + size_t(t) * K, cs, sizeof(float) * K);
          for (int r = 0; r < K; ++r) cs[r] = 1.0f;
        } else {
          fl[t] = 0.0f;
          for (int r = 0; r < K; ++r) {
            k[r] /= cs[r];
            q[r] *= cs[r];
          }
        }
      }
      // Touch the next block's rows (see prefetch()), a slice before each
      // tile. (Spreading the touches between the tokens of a tile measured
      // 10% slower than these bursts.)
      const int64_t nb0 = b0 + TB, nb1 = b0 + 2 * TB < t1 ? b0 + 2 * TB : t1;
      const int per_tile = (TB + V / VB - 1) / (V / VB);
      int64_t pf = nb0;
      for (int v0 = 0; v0 < V; v0 += VB) {
        for (int c = 0; c < per_tile && pf < nb1; ++c, ++pf)
          prefetch_token(p, pf, j, hk, K, V);
        // The tile lives in S (tile-major) between token blocks.
        float* st = S + size_t(v0) * K;
        if (first)
          load_tile<VB>(tile, h0, p.state_dtype, p.state_layout, K, V, v0, s8);
        else
          std::memcpy(tile, st, sizeof(float) * K * VB);
        rec_tile<VB, KC>(tile, K, V, v0, nt, kb, qb, kd, ab, fl, vb, bb, ob);
        if (!last)
          std::memcpy(st, tile, sizeof(float) * K * VB);
        if (ht && b0 + nt - t0 == acc)
          store_tile<VB>(ht, p.state_dtype, p.state_layout, tile, K, V, v0, s8);
        if (p.state_steps)  // TB = 1: the state after token b0
          store_tile<VB>(static_cast<char*>(p.state_steps) +
                             (size_t(b0) * p.HV + j) * hsize * esz,
                         p.state_dtype, p.state_layout, tile, K, V, v0, s8);
        for (int t = 0; t < nt; ++t)
          store_row(p.o, p.out_dtype, ((b0 + t) * p.HV + j) * V + v0,
                    ob + t * VB, VB, scale);
      }
    }
  });
}

// decode_impl with tile VB when vb == VB and VB divides V; else false.
template <deltac_variant Var, int VB, int KC, int VC>
bool decode_if(int vb, const deltac_fwd_params& p) {
  if constexpr (VC != 0 && VC % VB != 0) {
    return false;
  } else {
    if (vb != VB || p.V % VB != 0)
      return false;
    decode_impl<Var, VB, KC, VC>(p);
    return true;
  }
}

}  // namespace detail

// Recurrent forward. KC/VC = 0: dims from p; otherwise they must equal p.K/p.V.
// Decode calls take cpu_decode's default tile for this instance's vector
// width (the catalogue's avx512 or avx2 row).
template <deltac_variant Var, int KC = 0, int VC = 0>
void recurrent(const deltac_fwd_params& p) {
  const int K = KC ? KC : p.K, V = VC ? VC : p.V;
  if (detail::decode_applies(p) && detail::decode_fast(p)) {  // see decode.h
    Problem pr;
    pr.V = V;
    pr.cpu_isa = simd::W == 16 ? CpuIsa::avx512 : CpuIsa::avx2;
    const int vb = default_config(Family::CpuDecode, pr).tile_v;
    if (!detail::decode_if<Var, 128, KC, VC>(vb, p) &&
        !detail::decode_if<Var, 64, KC, VC>(vb, p) &&
        !detail::decode_if<Var, 32, KC, VC>(vb, p))
      detail::decode_impl<Var, 16, KC, VC>(p);
    return;
  }
  if (V % 32 == 0 && K <= 128)
    detail::recurrent_impl<Var, 32, KC, VC>(p);
  else
    detail::recurrent_impl<Var, 16, KC, VC>(p);
}

}}  // namespace deltac::cpu::DELTAC_CPU_NS

#endif  // DELTAC_CPU_RECURRENT_H
