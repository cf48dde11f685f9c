// The TMA scan with the state transposed in registers (sm_90a; chunked_stages'
// scan 4, and the rule's pick where its grid fills the GPU: chunked_rules.h): Sᵀ
// (value columns x keys, f32) lives in the accumulators of each consumer
// warpgroup's 64 value columns and enters the
// products as the register A operand (rounded to the 16-bit type: hi + lo for
// K S, hi for Q S), so only the stage's q, k, T, Aqk are read from shared
// memory and no product waits on a block barrier. Per chunk, M = the
// warpgroup's 64 columns, N = the chunk's 64 tokens (or 64 keys):
//   rᵀ  = fb ∘ Vᵀ - fa ∘ ((S_hi + S_lo)ᵀ Kᵀ)   (rounded once, register A)
//   v'ᵀ = rᵀ Tᵀ;  oᵀ = fq ∘ (S_hiᵀ Qᵀ) + v'ᵀ Aqkᵀ
//   Sᵀ  = gamma ∘ Sᵀ + (fk ∘ v')ᵀ K
// Same workspace and tensor maps (but v's box: 64 columns) as the TMA scan
// (chunked_scan_tma.cuh), whose producer warp this one follows. GDN / delta,
// 16-bit inputs, K = 64, 128 or 256, chunk 64; the sequence split as warm-up
// segments only (ws.warm, tma_scan_begin).
// Key split (KS = 2, K = 256, whose Sᵀ of 64 x 256 does not fit one
// warpgroup's registers): two warpgroups on the same 64 columns, each with
// half the keys. Their partial xᵀ are summed through shared memory (each
// writes its own in its half of the stage's q rows, read by its products
// already) so that both hold the whole rᵀ and v'ᵀ; the second's partial oᵀ
// goes the same way to the first, which adds v'ᵀ Aqkᵀ and stores o.
#ifndef DELTAC_CUDA_CHUNKED_SCAN_TMAT_CUH
#define DELTAC_CUDA_CHUNKED_SCAN_TMAT_CUH

#include "deltac/cuda/chunked_scan_tma.cuh"

namespace deltac::cuda::detail {

// PP (two warpgroups): they take turns issuing their products (named
// barriers 1 and 2), so that one's epilogue runs under the other's products.
// KS: warpgroups splitting the keys (1 or 2; 2 takes NWG = 2 and K = 256).
template <deltac_variant Var, int K_, int V_, class Ts_, int NWG_, int NS_, bool PP_ = (NWG_ > 1),
          int KS_ = 1>
struct TmatScanTraits {
  using Ts = Ts_;
  static constexpr int K = K_, V = V_, C = 64, NWG = NWG_, NS = NS_, KS = KS_;
  static constexpr bool PP = PP_ && NWG_ == 2 && KS_ == 1;
  // BV: the block's value columns; NH: 64-key halves of K, NHW: a warpgroup's.
  static constexpr int BV = 64 * NWG / KS, NH = K / 64, NHW = NH / KS;
  static constexpr int kForm = KS == 2 ? kTmatKeySplit : NWG;
  // Two consumer warpgroups need more than 65536 / 288 registers a thread:
  // then a whole producer warpgroup (one warp of it loads) gives its
  // registers to them (setmaxnreg).
  static constexpr bool kRegSplit = NWG > 1;
  static constexpr int kThreads = 128 * NWG + (kRegSplit ? 128 : 32);
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static_assert(!kRegSplit || 128 * kProducerRegs + 128 * NWG * kConsumerRegs <= 65536,
                "tmat scan: registers");
  // A stage: q, k [NH][C][64], v [BV / 64][C][64], T, Aqk [C][C] (all 128-byte
  // swizzled), factors [4][C] and gamma [K] (f32).
  static constexpr int kOffQ = 0, kOffK = NH * C * 128, kOffV = 2 * NH * C * 128;
  static constexpr int kOffT = kOffV + tma_round1k(C * BV * 2);
  static constexpr int kOffA = kOffT + C * C * 2, kOffF = kOffA + C * C * 2;
  static constexpr int kStage = tma_round1k(kOffF + (4 * C + K) * 4);
  static constexpr size_t kOffBars = size_t(NS) * kStage;
  static constexpr size_t kSmem = kOffBars + 16 * NS + 1024;  // + the base's alignment
  static constexpr uint32_t kTxFull = 2 * NH * C * 128 + C * BV * 2 + 2 * C * C * 2 + (4 * C + K) * 4;
  static constexpr uint32_t kTxPart = 2 * C * C * 2 + (4 * C + K) * 4;
  static_assert((K == 64 || K == 128 || K == 256) && (KS == 2) == tmat_keys_split(K) &&
                    (KS == 1 || NWG == 2),
                "tmat scan: K, key split");
  // The key split's exchange: a warpgroup's partial [64 columns][64 tokens]
  // f32 in its half of the stage's q rows.
  static_assert(KS == 1 || NHW * C * 128 == 64 * C * 4, "tmat scan: exchange");
  static_assert(kStage == tmat_scan_stage_bytes(K, C, BV), "stage size");
  static_assert(kThreads == tmat_scan_threads(kForm), "threads");
  static_assert(NS != kTmatScanStages || kSmem == tmat_scan_smem(K, C, kForm), "smem size");
  static_assert(V % BV == 0, "tmat scan: V tile");
};

// The A fragments of a [64 rows][64 columns] accumulator tile x (x[nt][e]:
// rows g + 8 (e / 2) of this warp's 16, column 8 nt + 2 t + e % 2) as four
// 16-deep steps, each element times f[column] (or 1 where f is null).
template <class Ts>
__device__ __forceinline__ void acc_to_a(const float (*x)[4], const float* f, int t,
                                         uint32_t (*a)[4]) {
#pragma unroll
  for (int kb = 0; kb < 4; ++kb)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int nt = 2 * kb + h, c = 8 * nt + 2 * t;
      const float f0 = f ? f[c] : 1.f, f1 = f ? f[c + 1] : 1.f;
      a[kb][2 * h] = pack2<Ts>(x[nt][0] * f0, x[nt][1] * f1);
      a[kb][2 * h + 1] = pack2<Ts>(x[nt][2] * f0, x[nt][3] * f1);
    }
}

// A warp's 16 rows x 64 columns of 16-bit pairs (pk[nt][hh]: row g + 8 hh,
// columns 8 nt + 2 t, + 1) out to 16 global rows of 128 bytes (row r at dst
// + r * ld elements), staged through the warp's own 2 KB of the stage's V
// tile (pieces pc0, pc0 + 1 of every token row: only this warp reads them,
// and it has read them). Staging row r, piece q sits at token row (r % 8) +
// 8 (q / 2 + 4 (r / 8)), piece pc0 + q % 2: no bank conflicts either way.
// Ends on __syncwarp (the staging free again).
template <int C, class Ts>
__device__ __forceinline__ void strip_out(const uint32_t (&pk)[8][2], uint32_t vtile,
                                          const unsigned char* vgen, int pc0, Ts* dst,
                                          int64_t ld, int lane) {
  auto at = [&](int r, int q) {
    return tma_sw128<C>((r & 7) + 8 * ((q >> 1) + 4 * (r >> 3)), pc0 + (q & 1));
  };
  // stmatrix x4: matrix i = (nt = 2 a + i / 2, hh = i % 2); lane l gives
  // matrix l / 8's row l % 8 (staging row 8 hh + l % 8, piece nt).
  const int i = lane >> 3;
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const uint32_t addr = vtile + at(8 * (i & 1) + (lane & 7), 2 * a + (i >> 1));
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr),
                 "r"(pk[2 * a][0]), "r"(pk[2 * a][1]), "r"(pk[2 * a + 1][0]),
                 "r"(pk[2 * a + 1][1])
                 : "memory");
  }
  __syncwarp();
#pragma unroll
  for (int it = 0; it < 4; ++it) {
    const int r = 4 * it + (lane >> 3), q = lane & 7;
    const uint4 w = *reinterpret_cast<const uint4*>(vgen + at(r, q));
    *reinterpret_cast<uint4*>(dst + r * ld + 8 * q) = w;
  }
  __syncwarp();
}

template <deltac_variant Var, class Tt>
__global__ void __launch_bounds__(Tt::kThreads, 1)
    chunked_scan_tmat_kernel(const deltac_fwd_params p, const ChunkedWs<typename Tt::Ts> ws,
                             const __grid_constant__ TmaScanMaps maps) {
#if DELTAC_WGMMA_OK
  using Ts = typename Tt::Ts;
  constexpr int C = Tt::C, K = Tt::K, V = Tt::V, BV = Tt::BV, NS = Tt::NS, NHW = Tt::NHW;
  constexpr int NWG = Tt::NWG;
  constexpr bool kSplit = Tt::KS == 2;
  const int j = int(blockIdx.y), v0 = int(blockIdx.x) * BV;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  TmaScanBlock bk;
  if (!tma_scan_begin<Tt>(p, ws, smem_raw, 4 * NWG, bk))
    return;
  const int n = bk.n;
  const int64_t s0 = bk.s0, s1 = bk.s1, nchunks = bk.nchunks;
  // Saved states: the slot of this block's chunk 0 (bwd_slots' numbering:
  // the sequence's first token / C + n + its chunk); block (0, 0, 0) flags them.
  // (Not under the key split, whose warpgroups share the V tile's bytes: the
  // backward then finds no flag and recomputes.)
  int64_t slot0 = 0;
  if (!kSplit && ws.saved_h) {
    int64_t q0 = 0, q1 = 0;
    seq_bounds(p, n, q0, q1);
    slot0 = q0 / C + n + (s0 - q0) / C;
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0)
      *ws.saved_flag = 1;
  }
  unsigned char* const smem = bk.smem;
  const uint32_t sm0 = bk.sm0;
  const int tid = int(threadIdx.x), lane = tid & 31, wid = tid >> 5;
  const int hqk = j / (p.HV / p.H);

  if (wid >= 4 * NWG) {  // the producer warp(group)
    if constexpr (Tt::kRegSplit)
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Tt::kProducerRegs));
    if (wid > 4 * NWG)
      return;
    const Ts* vsrc = static_cast<const Ts*>(p.v);
    tma_scan_produce<Tt>(
        p, ws, maps, bk, j, hqk, lane,
        [&](uint32_t sb, int64_t t0, uint32_t bar) {
#pragma unroll
          for (int h = 0; h < BV / 64; ++h)
            tma_load3(sb + Tt::kOffV + h * C * 128, &maps.v, v0 + 64 * h, j, int(t0), bar);
        },
        [&](unsigned char* b, int64_t t0, int len, int ln) {
          tma_copy_sw<C, BV>(b + Tt::kOffV, vsrc + (t0 * p.HV + j) * V + v0,
                             int64_t(p.HV) * V, len, ln);
        });
    return;
  }

  if constexpr (Tt::kRegSplit)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Tt::kConsumerRegs));
  // A consumer warpgroup: value columns v0 + cw .. + 63 and key halves kh0 ..
  // kh0 + NHW - 1; this thread's rows (columns) m0 = cw + 16 ww + g and m0 + 8.
  const int wg = wid >> 2, ww = wid & 3, g = lane >> 2, t = lane & 3;
  const int cw = kSplit ? 0 : 64 * wg, m0 = cw + 16 * ww + g, kh0 = kSplit ? NHW * wg : 0;
  // The key split's leader: adds v'ᵀ Aqkᵀ and the other's oᵀ, stores o.
  const bool lead = !kSplit || wg == 0;
  // The turns (PP): warpgroup w waits on barrier 1 + w before it issues and
  // then lets the other go; warpgroup 1 lets warpgroup 0 go first, which
  // takes that extra turn back after its loop (no arrival left pending).
  auto turn = [&] {
    if constexpr (Tt::PP)
      bar_sync_n(1 + wg, 256);
  };
  auto pass = [&] {
    if constexpr (Tt::PP)
      bar_arrive_n(2 - wg, 256);
  };
  if constexpr (Tt::PP)
    if (wg == 1)
      bar_arrive_n(1, 256);

  // S[h][nt][e]: column v0 + m0 + 8 (e / 2), key 64 (kh0 + h) + 8 nt + 2 t + e % 2.
  const int64_t sbase = (int64_t(n) * p.HV + j) * K * V;
  const bool vk = p.state_layout == DELTAC_STATE_VK;
  auto sidx = [&](int h, int nt, int e) {
    const int key = 64 * (kh0 + h) + 8 * nt + 2 * t + (e & 1), col = v0 + m0 + 8 * (e >> 1);
    return vk ? int64_t(col) * K + key : int64_t(key) * V + col;
  };
  float S[NHW][8][4];
#pragma unroll
  for (int h = 0; h < NHW; ++h)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        S[h][nt][e] = p.h0 && bk.from_h0
                          ? static_cast<const float*>(p.h0)[sbase + sidx(h, nt, e)]
                          : 0.f;

  Ts* const obase = static_cast<Ts*>(p.o) + int64_t(j) * V + v0 + m0;
  const int64_t ostride = int64_t(p.HV) * V;
  float x[8][4] = {}, o[8][4] = {};  // first written by products with scale-d 0
  int s = 0;
  uint32_t ph = 0;
  for (int64_t c = 0; c < nchunks; ++c) {
    const bool save = !kSplit && ws.saved_h && c >= bk.out0;
    // Sᵀ as A fragments: key step kk = 4 h + kb covers S[h][2 kb], S[h][2 kb + 1].
    uint32_t shi[NHW * 4][4], slo[NHW * 4][4];
#pragma unroll
    for (int h = 0; h < NHW; ++h)
#pragma unroll
      for (int kb = 0; kb < 4; ++kb)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const float* y = S[h][2 * kb + hh];
          split2<Ts>(y[0], y[1], shi[4 * h + kb][2 * hh], slo[4 * h + kb][2 * hh]);
          split2<Ts>(y[2], y[3], shi[4 * h + kb][2 * hh + 1], slo[4 * h + kb][2 * hh + 1]);
        }
    mbar_wait(bk.full(s), ph);
    const uint32_t sb = sm0 + uint32_t(s * Tt::kStage);
    const unsigned char* bs = smem + s * Tt::kStage;
    const float* F = reinterpret_cast<const float*>(bs + Tt::kOffF);
    const int64_t t0 = s0 + c * C;
    const int len = int(s1 - t0 < C ? s1 - t0 : C);
    if (len < C)
      fence_proxy_async();  // the partial chunk's cp.async rows, for the products

    // G1: xᵀ = (S_hi + S_lo)ᵀ Kᵀ; G3: oᵀ = S_hiᵀ Qᵀ (over this warpgroup's keys).
    constexpr int kSteps = NHW * 4;
    const int kk0 = 4 * kh0;
    turn();
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk)
      wgmma_rs_n64<Ts, 0>(x, shi[kk], dsc_ak<C>(sb + Tt::kOffK, kk0 + kk), kk);
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk)
      wgmma_rs_n64<Ts, 0>(x, slo[kk], dsc_ak<C>(sb + Tt::kOffK, kk0 + kk), 1);
    wg_commit();
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk)
      wgmma_rs_n64<Ts, 0>(o, shi[kk], dsc_ak<C>(sb + Tt::kOffQ, kk0 + kk), kk);
    wg_commit();
    pass();
    // Key split: this warpgroup's q rows are free once G3 is done; the
    // partial xᵀ goes there (thread tw's 8 float4 at [nt][tw]) and the
    // other's is added: both hold the same sum (f32 addition commutes).
    float4* const xmine =
        reinterpret_cast<float4*>(smem + s * Tt::kStage + Tt::kOffQ + wg * NHW * C * 128);
    float4* const xother =
        reinterpret_cast<float4*>(smem + s * Tt::kStage + Tt::kOffQ + (1 - wg) * NHW * C * 128);
    const int tw = tid & 127;
    if constexpr (kSplit) {
      wg_wait<0>();
      wg_keep<8>(x);
      wg_keep<8>(o);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
        xmine[nt * 128 + tw] = make_float4(x[nt][0], x[nt][1], x[nt][2], x[nt][3]);
      bar_sync_n(1, 256);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const float4 y = xother[nt * 128 + tw];
        x[nt][0] += y.x, x[nt][1] += y.y, x[nt][2] += y.z, x[nt][3] += y.w;
      }
      if (wg == 0)
        bar_arrive_n(2, 256);  // read: the other may write its oᵀ there
    } else {
      wg_wait<1>();
      wg_keep<8>(x);
    }

    // rᵀ = fb ∘ Vᵀ - fa ∘ xᵀ (columns are tokens), as A fragments. Vᵀ in the
    // accumulator layout by ldmatrix.trans: call i, lanes 8 q .. 8 q + 7
    // address the rows of the 8 x 8 tile (tokens 8 (2 i + q / 2) .., columns
    // cw + 16 ww + 8 (q % 2) ..); register q then holds tokens 2 t, 2 t + 1 of
    // column m0 + 8 (q % 2).
    uint32_t ra[4][4];
    {
      const int q = lane >> 3;
      const int pc = (cw + 16 * ww) / 8 + (q & 1);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        uint32_t vr[4];
        const int row = 8 * (2 * i + (q >> 1)) + (lane & 7);
        ldmatrix_x4_trans(vr, sb + Tt::kOffV + tma_sw128<C>(row, pc));
#pragma unroll
        for (int qq = 0; qq < 4; ++qq) {
          const int nt = 2 * i + (qq >> 1), hh = qq & 1, tok = 8 * nt + 2 * t;
          const float2 vv = unpack2<Ts>(vr[qq]);
          x[nt][2 * hh] = F[C + tok] * vv.x - F[tok] * x[nt][2 * hh];
          x[nt][2 * hh + 1] = F[C + tok + 1] * vv.y - F[tok + 1] * x[nt][2 * hh + 1];
        }
      }
      acc_to_a<Ts>(x, nullptr, t, ra);
    }

    // G2: v'ᵀ = rᵀ Tᵀ (into x).
    turn();
    wg_fence();
#pragma unroll
    for (int kb = 0; kb < 4; ++kb)
      wgmma_rs_n64<Ts, 0>(x, ra[kb], dsc_ak<C>(sb + Tt::kOffT, kb), kb);
    wg_commit();
    pass();
    // The chunk-start Sᵀ, [V][K] 16-bit, under G2 (S is not written before G4).
    const int pcw = (cw + 16 * ww) / 8;
    const unsigned char* const vgen = bs + Tt::kOffV;
    if (save) {
      Ts* hb = ws.saved_h + ((slot0 + c) * p.HV + j) * int64_t(K) * V +
               int64_t(v0 + cw + 16 * ww) * K + 64 * kh0;
#pragma unroll
      for (int h = 0; h < NHW; ++h) {
        uint32_t pk[8][2];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) pk[nt][hh] = pack2<Ts>(S[h][nt][2 * hh], S[h][nt][2 * hh + 1]);
        strip_out<C>(pk, sb + Tt::kOffV, vgen, pcw, hb + 64 * h, K, lane);
      }
    }
    wg_wait<0>();
    wg_keep<8>(x);
    wg_keep<8>(o);

    // Sᵀ = gamma ∘ Sᵀ (columns are keys); oᵀ = fq ∘ oᵀ; v' and fk ∘ v' as A.
    uint32_t va[4][4], vd[4][4];
    acc_to_a<Ts>(x, nullptr, t, va);
    acc_to_a<Ts>(x, F + 3 * C, t, vd);
    {
      const float* gam = F + 4 * C;
#pragma unroll
      for (int h = 0; h < NHW; ++h)
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          const int key = 64 * (kh0 + h) + 8 * nt + 2 * t;
          const float g0 = gam[key], g1 = gam[key + 1];
          S[h][nt][0] *= g0, S[h][nt][1] *= g1, S[h][nt][2] *= g0, S[h][nt][3] *= g1;
        }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int tok = 8 * nt + 2 * t;
        const float q0 = F[2 * C + tok], q1 = F[2 * C + tok + 1];
        o[nt][0] *= q0, o[nt][1] *= q1, o[nt][2] *= q0, o[nt][3] *= q1;
      }
    }

    // G4: Sᵀ += (fk ∘ v')ᵀ K (K as MN-major B, a half of 64 keys each);
    // G5: oᵀ += v'ᵀ Aqkᵀ (key split: the other adds zeros, as a product in a
    // branch would make ptxas serialise every product, C7520).
    if (!lead)
#pragma unroll
      for (int kb = 0; kb < 4; ++kb)
#pragma unroll
        for (int i = 0; i < 4; ++i) va[kb][i] = 0u;
    turn();
    wg_fence();
#pragma unroll
    for (int h = 0; h < NHW; ++h)
#pragma unroll
      for (int kb = 0; kb < 4; ++kb)
        wgmma_rs_n64<Ts, 1>(S[h], vd[kb], dsc_amn<C>(sb + Tt::kOffK, kh0 + h, kb), 1);
    wg_commit();
#pragma unroll
    for (int kb = 0; kb < 4; ++kb)
      wgmma_rs_n64<Ts, 0>(o, va[kb], dsc_ak<C>(sb + Tt::kOffA, kb), 1);
    wg_commit();
    pass();
    if (save && lead) {  // u = v'ᵀ, [V][C] 16-bit, under G4 / G5
      uint32_t pk[8][2];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) pk[nt][hh] = va[nt >> 1][2 * (nt & 1) + hh];
      strip_out<C>(pk, sb + Tt::kOffV, vgen, pcw,
                   ws.saved_u + ((slot0 + c) * p.HV + j) * int64_t(C) * V +
                       int64_t(v0 + cw + 16 * ww) * C,
                   C, lane);
    }
    wg_wait<0>();
#pragma unroll
    for (int h = 0; h < NHW; ++h) wg_keep<8>(S[h]);
    wg_keep<8>(o);
    if constexpr (kSplit) {  // the second's oᵀ to the leader, through its q rows
      if (wg == 1) {
        bar_sync_n(2, 256);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
          xmine[nt * 128 + tw] = make_float4(o[nt][0], o[nt][1], o[nt][2], o[nt][3]);
        bar_arrive_n(3, 256);
      } else {
        bar_sync_n(3, 256);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          const float4 y = xother[nt * 128 + tw];
          o[nt][0] += y.x, o[nt][1] += y.y, o[nt][2] += y.z, o[nt][3] += y.w;
        }
      }
      fence_proxy_async();  // these shared accesses before the stage's next TMA fill
    }
    if (save)
      fence_proxy_async();  // the staging writes before the stage's next TMA fill
    __syncwarp();
    if (lane == 0)
      mbar_arrive(bk.empty(s));  // this warp is done with the stage

    // oᵀ: column m0 + 8 hh, token 8 nt + 2 t (+ 1); none in a warm-up.
    if (lead && c >= bk.out0) {
      Ts* orow = obase + t0 * ostride;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int tok = 8 * nt + 2 * t + (e & 1);
          if (tok < len)
            orow[tok * ostride + 8 * (e >> 1)] = cvt_t<Ts>(o[nt][e]);
        }
    }
    if (++s == NS)
      s = 0, ph ^= 1;
  }

  if constexpr (Tt::PP)
    if (wg == 0)
      bar_sync_n(1, 256);
  if (p.ht && bk.last) {
    float* ht = static_cast<float*>(p.ht) + sbase;
#pragma unroll
    for (int h = 0; h < NHW; ++h)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) ht[sidx(h, nt, e)] = S[h][nt][e];
  }
#else
  __shared__ int tmat_scan_stub[4];
  if (p.K < 0)
    tmat_scan_stub[threadIdx.x & 3] = 1;
  __trap();
#endif
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_CHUNKED_SCAN_TMAT_CUH
