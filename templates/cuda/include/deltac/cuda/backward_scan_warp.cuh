// The chunked backward's two scans as register-resident chains per warp
// (bf16 q, k, v and dO; the model is the prefill's chunked_scan_warp.cuh).
// Each chain warp owns all K rows of 16 value columns: the state (forward
// scan) or the state gradient (reverse scan) lives transposed, 16 x K f32,
// in mma.sync accumulators; per chunk the products take their A operands
// from registers (accumulators split into bf16 hi + lo, ~2^-17 relative)
// and their B operands by ldmatrix from bf16 rows staged in shared memory by
// a producer warp (a ring of stages, full / empty mbarriers, no block
// barrier in the loop). T and Aqk come from prep as bf16 hi + lo pairs in
// chunks where a β exceeds 1, else as bf16 hi with zero lo (F's [4][1] says
// which), the per-row factors as f32 (Ws::F, below); the state, r, u, du,
// dr enter the products as hi + lo; q, k, v, dO are exact in bf16.
//
// Forward scan, per chunk (S = the chunk-start state; r, u per token i):
//   hs <- Sᵀ (bf16);  rᵀ = fb ∘ Vᵀ - fa ∘ (Sᵀ Kᵀ);  uᵀ = rᵀ Tᵀ (us <- uᵀ, bf16);
//   Sᵀ = γ Sᵀ + (fk ∘ u)ᵀ K
// Reverse scan, chunks in reverse (D = dL/d(the chunk-end state)):
//   dhs <- Dᵀ (bf16);  duᵀ = dOᵀ Aqk + fk ∘ (Dᵀ Kᵀ);  drᵀ = duᵀ T (drs <- drᵀ (bf16),
//   dv = β dr);  Dᵀ = γ Dᵀ + (fq ∘ dO)ᵀ Q - (fa ∘ dr)ᵀ K
// with the factors of token i: fa = β Γ rk, fb = β, fk = e rk, fq = scale
// Γ rq (rk, rq: 1/|k|, 1/|q| with the L2 norm, else 1), γ = e^G_last
// (backward_chunked.cuh states the math). Rows past a sequence are zero.
// Included by backward_chunked.cuh (its Ws, seq_t0, slot0, kWF).
#ifndef DELTAC_CUDA_BACKWARD_SCAN_WARP_CUH
#define DELTAC_CUDA_BACKWARD_SCAN_WARP_CUH

#include "deltac/cuda/chunked_scan_warp.cuh"

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace deltac::cuda::bwdc {

constexpr size_t kWBarBytes = 64;
constexpr size_t kWSmemMax = 232448;  // per block (sm_90)
constexpr size_t kWSmemSM = 233472;   // per multiprocessor

// Sizes of a warp scan: chunk C, K, V tile BV (BV / 16 chain warps and one
// producer warp); Rev: the reverse scan (stages Q, Aqk and a dv tile too).
template <int C, int K, int BV, bool Rev>
struct WScan {
  static constexpr int NP = BV / 16, kThreads = 32 * (NP + 1);
  static constexpr int LK = K + 8, LC = C + 8, LB = BV + 8, LO = 24;
  // stage (bf16 elements): K rows, Q rows (Rev), V / dO rows, T hi, T lo,
  // Aqk hi, Aqk lo (Rev), then kWF x C f32 factors
  static constexpr int oK = 0, oQ = C * LK, oV = oQ + (Rev ? C * LK : 0), oTh = oV + C * LB;
  static constexpr int oTl = oTh + C * LC, oAh = oTl + C * LC, oAl = oAh + (Rev ? C * LC : 0);
  static constexpr int oF = oAl + (Rev ? C * LC : 0);
  static constexpr size_t kStage = size_t(oF) * 2 + kWF * C * 4;
  static constexpr size_t kOTile = Rev ? size_t(NP) * C * LO * 2 : 0;
  // per chain warp: the staging rows of its bf16 outputs, X [16][LK], out [16][LC]
  static constexpr size_t kXTile = size_t(NP) * 16 * (LK + LC) * 2;
  static constexpr size_t smem(int ns) { return ns * kStage + kOTile + kXTile + kWBarBytes; }
  // three stages where they fit and leave as many blocks per multiprocessor
  static constexpr int kStages =
      smem(3) <= kWSmemMax && kWSmemSM / (smem(3) + 1024) >= kWSmemSM / (smem(2) + 1024) ? 3 : 2;
  static constexpr size_t kSmem = smem(kStages);
  static_assert(kStage % 16 == 0 && smem(2) <= kWSmemMax, "stage size");
};

// The scan of one block: V tile vt, value head blockIdx.y, sequence
// blockIdx.z; warps 0 .. NP - 1 chain warps, warp NP the producer.
template <int K, int BV, bool Rev>
__device__ __forceinline__ void wscan_block(const Ws& w, int vt) {
  using namespace deltac::cuda::detail;
  using Ts = __nv_bfloat16;
  using Tw = WScan<kBwdChunk, K, BV, Rev>;
  constexpr int C = kBwdChunk, NS = Tw::kStages, NP = Tw::NP;
  constexpr int LK = Tw::LK, LC = Tw::LC, LB = Tw::LB, LO = Tw::LO;
  constexpr int NK = K / 8, NC = C / 8, E = 8;
  const deltac_bwd_params& p = w.p;
  const int v0 = vt * BV, j = int(blockIdx.y), n = int(blockIdx.z);
  const int hk = j / (p.HV / p.H), V = p.V;
  const int64_t t0 = seq_t0(p, n);
  const int64_t t1 = p.cu_seqlens ? p.cu_seqlens[n + 1] : t0 + p.T;
  const int64_t nc = (t1 - t0 + C - 1) / C, sl0 = slot0(p, n);
  if (!Rev && w.saved_flag && *w.saved_flag)
    return;  // the forward saved hs and us

  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int tid = int(threadIdx.x), lane = tid & 31, wid = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int vw = v0 + wid * 16;  // a chain warp's first column
  const uint32_t sm0 = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t bars = sm0 + uint32_t(NS * Tw::kStage + Tw::kOTile + Tw::kXTile);
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (NS + s); };
  if (tid == 0)
    for (int s = 0; s < NS; ++s) {
      mbar_init(full(s), 32);
      mbar_init(empty(s), 32 * NP);
    }
  __syncthreads();

  // Chunk c of the loop (reverse order for Rev) into stage s.
  auto chunk_of = [&](int64_t c) { return Rev ? nc - 1 - c : c; };
  auto issue = [&](int64_t c, int s) {
    const int64_t ci = chunk_of(c), ts = t0 + ci * C, slot = (sl0 + ci) * p.HV + j;
    const int len = int(t1 - ts < C ? t1 - ts : C);
    Ts* b = reinterpret_cast<Ts*>(smem_raw + s * Tw::kStage);
    const Ts* ksrc = static_cast<const Ts*>(p.k) + (ts * p.H + hk) * K;
    const Ts* qsrc = static_cast<const Ts*>(p.q) + (ts * p.H + hk) * K;
    const Ts* vsrc = static_cast<const Ts*>(Rev ? p.dout : p.v) + (ts * p.HV + j) * V + v0;
    auto rows = [&](auto zf) {
      constexpr bool Z = decltype(zf)::value;
      copy_rows<C, 32, K / E, LK, Z>(b + Tw::oK, ksrc, int64_t(p.H) * K, len, lane);
      if constexpr (Rev)
        copy_rows<C, 32, K / E, LK, Z>(b + Tw::oQ, qsrc, int64_t(p.H) * K, len, lane);
      copy_rows<C, 32, BV / E, LB, Z>(b + Tw::oV, vsrc, int64_t(p.HV) * V, len, lane);
    };
    if (len == C)
      rows(std::false_type{});
    else
      rows(std::true_type{});
    // T, Aqk: lower triangular, only their lower blocks are written and read
    // T, Aqk: lower triangular, only their lower blocks are written and
    // read; their low halves read only where prep wrote them (F's [4][1]),
    // else zero-filled (the products run the same either way)
    const float* fs = w.F + slot * kWF * C;
    const bool lo = fs[4 * C + 1] != 0.f;
    const Ts* tsrc = reinterpret_cast<const Ts*>(w.T + slot * C * C);
    copy_lower<C, 32, LC>(b + Tw::oTh, tsrc, lane);
    copy_lower<C, 32, LC>(b + Tw::oTl, tsrc + C * C, lane, lo);
    if constexpr (Rev) {
      const Ts* asrc = reinterpret_cast<const Ts*>(w.Aqk + slot * C * C);
      copy_lower<C, 32, LC>(b + Tw::oAh, asrc, lane);
      copy_lower<C, 32, LC>(b + Tw::oAl, asrc + C * C, lane, lo);
    }
    float* fd = reinterpret_cast<float*>(b + Tw::oF);
    for (int i = lane; i < kWF * C / 4; i += 32) cp_async16(fd + 4 * i, fs + 4 * i);
    cp_async_mbar_arrive(full(s));
  };

  if (wid == NP) {  // the producer: chunk c once the readers released chunk c - NS
    for (int64_t c = 0; c < nc; ++c) {
      const int s = int(c % NS);
      if (c >= NS)
        mbar_wait(empty(s), uint32_t((c / NS - 1) & 1));
      issue(c, s);
    }
    cp_async_wait_all_();
    return;
  }

  // ldmatrix lane offsets (bytes), as chunked_scan_warp.cuh:
  //   offbk, offbc: x4 over [16 n rows][16 k] as B operands (registers 0, 1
  //     n-tile 0; 2, 3 n-tile 1);
  //   offtk, offtc: x4 .trans over [16 k rows][16 n] as B operands (same);
  //   offvb: x4 .trans over [16 tokens][16 columns]: the A fragment of the
  //     transposed tile (rows = columns, k = tokens);
  //   offvo: the same tile's stmatrix .trans (dv).
  const int rb = (lane & 7) + ((lane >> 4) & 1) * 8, cb = ((lane >> 3) & 1) * 8;
  const int rt = (lane & 7) + ((lane >> 3) & 1) * 8, ca = (lane >> 4) * 8;
  const uint32_t offbk = (rb * LK + cb) * 2, offbc = (rb * LC + cb) * 2;
  const uint32_t offtk = (rt * LK + ca) * 2, offtc = (rt * LC + ca) * 2;
  const uint32_t offvb = (rb * LB + wid * 16 + cb) * 2, offvo = (rb * LO + cb) * 2;
  Ts* otile = reinterpret_cast<Ts*>(smem_raw + NS * Tw::kStage) + wid * C * LO;
  const uint32_t sot = static_cast<uint32_t>(__cvta_generic_to_shared(otile));
  Ts* xt = reinterpret_cast<Ts*>(smem_raw + NS * Tw::kStage + Tw::kOTile) + wid * 16 * (LK + LC);
  // acc (the warp's 16 columns as rows, NT n-tiles of 8 along them) as bf16
  // to dst's rows (row r at dst + 8 NT r): stmatrix into the staging rows
  // (stride L), then 16-byte stores (a row is one contiguous run).
  auto rows_out = [&](auto ntc, auto lc, const float(*acc)[4], Ts* tile, Ts* dst) {
    constexpr int NT = decltype(ntc)::value, L = decltype(lc)::value;
    __syncwarp();  // the last reads of the tile are done
#pragma unroll
    for (int m = 0; m < NT / 2; ++m) {
      const uint32_t r[4] = {pack2<Ts>(acc[2 * m][0], acc[2 * m][1]),
                             pack2<Ts>(acc[2 * m][2], acc[2 * m][3]),
                             pack2<Ts>(acc[2 * m + 1][0], acc[2 * m + 1][1]),
                             pack2<Ts>(acc[2 * m + 1][2], acc[2 * m + 1][3])};
      stsm4<L>(reinterpret_cast<uint32_t*>(tile + 16 * m), r);
    }
    __syncwarp();
#pragma unroll
    for (int k = 0; k < NT / 2; ++k) {
      const int i = lane + 32 * k, r = i / NT, q = i % NT;
      *reinterpret_cast<uint4*>(dst + r * 8 * NT + q * 8) =
          *reinterpret_cast<const uint4*>(tile + r * L + q * 8);
    }
  };

  // X: element e of n-tile nt is column vw + g + 8 (e / 2), key nt 8 + 2 t + e % 2.
  const bool vk = p.state_layout == DELTAC_STATE_VK;
  const int64_t sbase = (int64_t(n) * p.HV + j) * K * V;
  float X[NK][4];
  {
    const float* x0 = static_cast<const float*>(Rev ? p.dht : p.h0);
#pragma unroll
    for (int nt = 0; nt < NK; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int key = nt * 8 + 2 * t, col = vw + g + 8 * h;
        float a = 0.f, b = 0.f;
        if (x0) {
          if (vk) {
            const float2 x = *reinterpret_cast<const float2*>(x0 + sbase + int64_t(col) * K + key);
            a = x.x, b = x.y;
          } else {
            a = x0[sbase + int64_t(key) * V + col];
            b = x0[sbase + int64_t(key + 1) * V + col];
          }
        }
        X[nt][2 * h] = a, X[nt][2 * h + 1] = b;
      }
  }

  int s = 0;
  uint32_t ph = 0;
  for (int64_t c = 0; c < nc; ++c) {
    const int64_t ci = chunk_of(c), ts = t0 + ci * C, slot = (sl0 + ci) * p.HV + j;
    const int len = int(t1 - ts < C ? t1 - ts : C);
    // X (the chunk-start state, or the chunk-end state gradient) out: bf16,
    // transposed ([V][K])
    rows_out(std::integral_constant<int, NK>{}, std::integral_constant<int, LK>{}, X, xt,
             static_cast<Ts*>(Rev ? w.dhs : w.hs) + slot * K * V + vw * K);
    mbar_wait(full(s), ph);
    const uint32_t sb = sm0 + s * uint32_t(Tw::kStage);
    const uint32_t sk = sb + Tw::oK * 2, sq = sb + Tw::oQ * 2, sv = sb + Tw::oV * 2;
    const uint32_t sth = sb + Tw::oTh * 2, stl = sb + Tw::oTl * 2;
    const uint32_t sah = sb + Tw::oAh * 2, sal = sb + Tw::oAl * 2;
    const float* fa = reinterpret_cast<const float*>(smem_raw + s * Tw::kStage + Tw::oF * 2);
    const float *fb = fa + C, *fk = fa + 2 * C, *fq = fa + 3 * C;
    const float gam = fa[4 * C];

    // y = Xᵀ Kᵀ (X as hi + lo): columns x tokens
    float y[NC][4];
#pragma unroll
    for (int nt = 0; nt < NC; ++nt) y[nt][0] = y[nt][1] = y[nt][2] = y[nt][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
      uint32_t ah[4], al[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float* x = X[2 * kk + (i >> 1)] + 2 * (i & 1);
        split2<Ts>(x[0], x[1], ah[i], al[i]);
      }
#pragma unroll
      for (int np = 0; np < C / 16; ++np) {
        uint32_t bk[4];
        ldsm4(bk, sk + offbk + (np * 16 * LK + kk * 16) * 2);
        wmma16<Ts>(y[2 * np], ah, bk[0], bk[1]);
        wmma16<Ts>(y[2 * np + 1], ah, bk[2], bk[3]);
        wmma16<Ts>(y[2 * np], al, bk[0], bk[1]);
        wmma16<Ts>(y[2 * np + 1], al, bk[2], bk[3]);
      }
    }
    // Vᵀ / dOᵀ as A fragments (k = tokens), loaded where used
    auto vload = [&](uint32_t f[4], int kb) { ldsm4t(f, sv + offvb + kb * 16 * LB * 2); };

    // The middle step: z = the input of the T product as hi + lo A
    // fragments; out = its result (forward u, reverse dr).
    uint32_t zh[C / 16][4], zl[C / 16][4];
    float out[NC][4];
#pragma unroll
    for (int nt = 0; nt < NC; ++nt) out[nt][0] = out[nt][1] = out[nt][2] = out[nt][3] = 0.f;
    if constexpr (!Rev) {
      // r = fb v - fa y
#pragma unroll
      for (int kb = 0; kb < C / 16; ++kb) {
        uint32_t vk[4];
        vload(vk, kb);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int nt = 2 * kb + h, tok = nt * 8 + 2 * t;
          const float2 a = *reinterpret_cast<const float2*>(fa + tok);
          const float2 bb = *reinterpret_cast<const float2*>(fb + tok);
          const float2 x0 = unpack2<Ts>(vk[2 * h]), x1 = unpack2<Ts>(vk[2 * h + 1]);
          split2<Ts>(bb.x * x0.x - a.x * y[nt][0], bb.y * x0.y - a.y * y[nt][1], zh[kb][2 * h],
                     zl[kb][2 * h]);
          split2<Ts>(bb.x * x1.x - a.x * y[nt][2], bb.y * x1.y - a.y * y[nt][3],
                     zh[kb][2 * h + 1], zl[kb][2 * h + 1]);
        }
      }
      // uᵀ = rᵀ Tᵀ (T lower triangular: k blocks <= the n block)
#pragma unroll
      for (int ip = 0; ip < C / 16; ++ip)
#pragma unroll
        for (int kb = 0; kb <= ip; ++kb) {
          uint32_t bh[4], bl[4];
          ldsm4(bh, sth + offbc + (ip * 16 * LC + kb * 16) * 2);
          ldsm4(bl, stl + offbc + (ip * 16 * LC + kb * 16) * 2);
          wmma16<Ts>(out[2 * ip], zh[kb], bh[0], bh[1]);
          wmma16<Ts>(out[2 * ip + 1], zh[kb], bh[2], bh[3]);
          wmma16<Ts>(out[2 * ip], zl[kb], bh[0], bh[1]);
          wmma16<Ts>(out[2 * ip + 1], zl[kb], bh[2], bh[3]);
          wmma16<Ts>(out[2 * ip], zh[kb], bl[0], bl[1]);
          wmma16<Ts>(out[2 * ip + 1], zh[kb], bl[2], bl[3]);
        }
    } else {
      // du = fk y + dOᵀ Aqk (Aqk[j][i] lower: k blocks >= the n block)
#pragma unroll
      for (int nt = 0; nt < NC; ++nt) {
        const float2 f = *reinterpret_cast<const float2*>(fk + nt * 8 + 2 * t);
        y[nt][0] *= f.x, y[nt][1] *= f.y, y[nt][2] *= f.x, y[nt][3] *= f.y;
      }
#pragma unroll
      for (int kb = 0; kb < C / 16; ++kb) {
        uint32_t vk[4];
        vload(vk, kb);
#pragma unroll
        for (int np = 0; np <= kb; ++np) {
          uint32_t bh[4], bl[4];
          ldsm4t(bh, sah + offtc + (kb * 16 * LC + np * 16) * 2);
          ldsm4t(bl, sal + offtc + (kb * 16 * LC + np * 16) * 2);
          wmma16<Ts>(y[2 * np], vk, bh[0], bh[1]);
          wmma16<Ts>(y[2 * np + 1], vk, bh[2], bh[3]);
          wmma16<Ts>(y[2 * np], vk, bl[0], bl[1]);
          wmma16<Ts>(y[2 * np + 1], vk, bl[2], bl[3]);
        }
      }
#pragma unroll
      for (int kb = 0; kb < C / 16; ++kb)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int nt = 2 * kb + h;
          split2<Ts>(y[nt][0], y[nt][1], zh[kb][2 * h], zl[kb][2 * h]);
          split2<Ts>(y[nt][2], y[nt][3], zh[kb][2 * h + 1], zl[kb][2 * h + 1]);
        }
      // drᵀ = duᵀ T (T[i][j] lower: k blocks >= the n block)
#pragma unroll
      for (int jb = 0; jb < C / 16; ++jb)
#pragma unroll
        for (int ib = jb; ib < C / 16; ++ib) {
          uint32_t bh[4], bl[4];
          ldsm4t(bh, sth + offtc + (ib * 16 * LC + jb * 16) * 2);
          ldsm4t(bl, stl + offtc + (ib * 16 * LC + jb * 16) * 2);
          wmma16<Ts>(out[2 * jb], zh[ib], bh[0], bh[1]);
          wmma16<Ts>(out[2 * jb + 1], zh[ib], bh[2], bh[3]);
          wmma16<Ts>(out[2 * jb], zl[ib], bh[0], bh[1]);
          wmma16<Ts>(out[2 * jb + 1], zl[ib], bh[2], bh[3]);
          wmma16<Ts>(out[2 * jb], zh[ib], bl[0], bl[1]);
          wmma16<Ts>(out[2 * jb + 1], zh[ib], bl[2], bl[3]);
        }
    }
    // out (u or dr) to the workspace: bf16, transposed ([V][C])
    rows_out(std::integral_constant<int, NC>{}, std::integral_constant<int, LC>{}, out,
             xt + 16 * LK, static_cast<Ts*>(Rev ? w.drs : w.us) + slot * C * V + vw * C);
    if constexpr (Rev) {  // dv = β dr -> the per-warp [C][16] tile -> rows
      __syncwarp();  // the previous chunk's reads of the tile are done
#pragma unroll
      for (int np = 0; np < C / 16; ++np) {
        uint32_t x[4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int nt = 2 * np + h;
          const float2 bb = *reinterpret_cast<const float2*>(fb + nt * 8 + 2 * t);
          x[2 * h] = pack2<Ts>(bb.x * out[nt][0], bb.y * out[nt][1]);
          x[2 * h + 1] = pack2<Ts>(bb.x * out[nt][2], bb.y * out[nt][3]);
        }
#if DELTAC_MMA_OK && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(
                         sot + offvo + np * 16 * LO * 2),
                     "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3])
                     : "memory");
#else
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // register i: tokens 2t, 2t + 1 of tile i / 2, column g + 8 (i % 2)
          const Ts* e = reinterpret_cast<const Ts*>(&x[i]);
          Ts* d = otile + (np * 16 + (i >> 1) * 8 + 2 * t) * LO + g + 8 * (i & 1);
          d[0] = e[0];
          d[LO] = e[1];
        }
#endif
      }
      __syncwarp();
      Ts* orow = static_cast<Ts*>(p.dv) + ts * int64_t(p.HV) * V + int64_t(j) * V + vw;
#pragma unroll
      for (int m = 0; m < 2 * C / 32; ++m) {
        const int idx = lane + 32 * m, tok = idx >> 1, half = idx & 1;
        if (tok < len)
          *reinterpret_cast<uint4*>(orow + tok * int64_t(p.HV) * V + half * 8) =
              *reinterpret_cast<const uint4*>(otile + tok * LO + half * 8);
      }
    }
    // X = γ X + Σ over k blocks of (A hi + A lo) B
#pragma unroll
    for (int nt = 0; nt < NK; ++nt) X[nt][0] *= gam, X[nt][1] *= gam, X[nt][2] *= gam, X[nt][3] *= gam;
#pragma unroll
    for (int kb = 0; kb < C / 16; ++kb) {
      uint32_t ph1[4], pl1[4], ph2[4], pl2[4], vk[4];
      if constexpr (Rev)
        vload(vk, kb);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int nt = 2 * kb + h, tok = nt * 8 + 2 * t;
        if constexpr (!Rev) {  // (fk u)
          const float2 f = *reinterpret_cast<const float2*>(fk + tok);
          split2<Ts>(f.x * out[nt][0], f.y * out[nt][1], ph1[2 * h], pl1[2 * h]);
          split2<Ts>(f.x * out[nt][2], f.y * out[nt][3], ph1[2 * h + 1], pl1[2 * h + 1]);
        } else {  // (-fa dr) and (fq dO)
          const float2 f = *reinterpret_cast<const float2*>(fa + tok);
          split2<Ts>(-f.x * out[nt][0], -f.y * out[nt][1], ph1[2 * h], pl1[2 * h]);
          split2<Ts>(-f.x * out[nt][2], -f.y * out[nt][3], ph1[2 * h + 1], pl1[2 * h + 1]);
          const float2 q = *reinterpret_cast<const float2*>(fq + tok);
          const float2 d0 = unpack2<Ts>(vk[2 * h]), d1 = unpack2<Ts>(vk[2 * h + 1]);
          split2<Ts>(q.x * d0.x, q.y * d0.y, ph2[2 * h], pl2[2 * h]);
          split2<Ts>(q.x * d1.x, q.y * d1.y, ph2[2 * h + 1], pl2[2 * h + 1]);
        }
      }
#pragma unroll
      for (int np = 0; np < K / 16; ++np) {
        uint32_t b[4];
        ldsm4t(b, sk + offtk + (kb * 16 * LK + np * 16) * 2);
        wmma16<Ts>(X[2 * np], ph1, b[0], b[1]);
        wmma16<Ts>(X[2 * np + 1], ph1, b[2], b[3]);
        wmma16<Ts>(X[2 * np], pl1, b[0], b[1]);
        wmma16<Ts>(X[2 * np + 1], pl1, b[2], b[3]);
        if constexpr (Rev) {
          uint32_t bq[4];
          ldsm4t(bq, sq + offtk + (kb * 16 * LK + np * 16) * 2);
          wmma16<Ts>(X[2 * np], ph2, bq[0], bq[1]);
          wmma16<Ts>(X[2 * np + 1], ph2, bq[2], bq[3]);
          wmma16<Ts>(X[2 * np], pl2, bq[0], bq[1]);
          wmma16<Ts>(X[2 * np + 1], pl2, bq[2], bq[3]);
        }
      }
    }
    mbar_arrive(empty(s));  // this warp's reads of the stage are done
    if (++s == NS)
      s = 0, ph ^= 1;
  }
  if (Rev && p.dh0) {
    float* d0 = static_cast<float*>(p.dh0) + sbase;
#pragma unroll
    for (int nt = 0; nt < NK; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int key = nt * 8 + 2 * t, col = vw + g + 8 * h;
        if (vk) {
          *reinterpret_cast<float2*>(d0 + int64_t(col) * K + key) =
              make_float2(X[nt][2 * h], X[nt][2 * h + 1]);
        } else {
          d0[int64_t(key) * V + col] = X[nt][2 * h];
          d0[int64_t(key + 1) * V + col] = X[nt][2 * h + 1];
        }
      }
  }
}

template <int K, int BV, bool Rev>
__global__ void __launch_bounds__(WScan<kBwdChunk, K, BV, Rev>::kThreads, 1)
    wscan_kernel(const __grid_constant__ Ws w) {
  wscan_block<K, BV, Rev>(w, int(blockIdx.x));
}

// Both scans in one launch (they share no data: the reverse scan reads no
// output of the forward one), for grids that one wave holds together: block
// x < V / BV runs the forward scan of V tile x, the others the reverse scan
// of tile x - V / BV, so the two chains run side by side on the GPU.
template <int K, int BV>
__global__ void __launch_bounds__(WScan<kBwdChunk, K, BV, false>::kThreads, 1)
    wscan2_kernel(const __grid_constant__ Ws w) {
  static_assert(WScan<kBwdChunk, K, BV, false>::kThreads == WScan<kBwdChunk, K, BV, true>::kThreads,
                "one block shape for both scans");
  const int nt = w.p.V / BV, x = int(blockIdx.x);
  if (x < nt)
    wscan_block<K, BV, false>(w, x);
  else
    wscan_block<K, BV, true>(w, x - nt);
}

}  // namespace deltac::cuda::bwdc

#endif  // DELTAC_CUDA_BACKWARD_SCAN_WARP_CUH
