// The chunked scan as a register-resident chain per warp (an alternative to
// chunked_scan.cuh for 16-bit inputs and K = 64, 128 or 256).
// Each warp owns all K rows of 16 value columns of one head (K = 256: a pair
// of warps, each K / 2 rows, below): it holds Sᵀ (16 x K, f32) as mma.sync
// accumulators (K / 2 registers per thread) and runs, per chunk of C tokens
// (from the same workspace and raw rows as the block scan, staged in shared
// memory by cp.async):
//   rᵀ  = fb ∘ Vᵀ - fa ∘ ((Sᵀ_hi + Sᵀ_lo) Kᵀ)   (the residual in f32, rounded once)
//   v'ᵀ = rᵀ Tᵀ
//   oᵀ  = fq ∘ (Sᵀ_hi Qᵀ) + v'ᵀ Aqkᵀ            (staged per warp, written as rows)
//   Sᵀ  = gamma ∘ Sᵀ + (fk ∘ v')ᵀ K             (gamma per key: a column of Sᵀ)
// The A operands come from the accumulators in registers (the C fragment of
// two adjacent n8 tiles is the A fragment of one k16 step), the B operands
// from ldmatrix in the register pairs mma.sync takes, so the chain touches
// no shared memory but the staged operands. The chain warps issue no copy
// and meet no block barrier: a producer warp fills a ring of 2-3 stages
// (full / empty mbarriers). With output warps (SplitO, chunked_stages'
// scan = 2) a second warp per 16 columns computes oᵀ from Sᵀ_hi and v'ᵀ that
// the chain warp stores to shared memory (mbarrier hand-overs) and issues
// the copies, leaving the chain 212 of 296 mma (K = 128, C = 64). No
// sequence split, no fused launch (the block scan keeps those). K = 256:
// each warp of a pair computes rᵀ and Sᵀ_hi Qᵀ over its 128 keys; the pair
// adds the two partials through shared memory (named barriers; both form the
// same rᵀ and v'ᵀ), each warp writes oᵀ for half of the chunk's 16-token
// blocks and updates its own keys of Sᵀ. H200: faster
// than the block scan on GDN 16/32 heads 1x32768 (1.38x, 1.62 µs per
// chunk), 4x8192 (1.35x) and delta K = 64 8x4096 (1.25x); output warps no
// faster (docs/performance.md, version 11); the pairs on GDN K = 256 16/16
// heads 1x32768: 1.76x (scan 2.73 -> 1.36 ms, 2.65 µs per chunk; version 13).
//
// Which scan runs is cuda_chunked's knob scan (chunked_rules.h); the output
// warps are compiled only where DELTAC_CHUNKED_WARP_OUTPUT is nonzero.
#ifndef DELTAC_CUDA_CHUNKED_SCAN_WARP_CUH
#define DELTAC_CUDA_CHUNKED_SCAN_WARP_CUH

#include "deltac/cuda/chunked_mma.cuh"
#include "deltac/cuda/chunked_prep.cuh"
#include "deltac/cuda/chunked_rules.h"
#include "deltac/cuda/chunked_scan.cuh"
#include "deltac/cuda/mbarrier.cuh"
#include "deltac/params.h"

#include <cstddef>
#include <cstdint>
#include <type_traits>

#ifndef DELTAC_CHUNKED_WARP_OUTPUT
#define DELTAC_CHUNKED_WARP_OUTPUT 0
#endif

namespace deltac::cuda::detail {

// Sizes of the warp scan for (variant, K, V, 16-bit type Ts, chunk C, V tile
// BV, SplitO): BV / 16 chain warps, then (SplitO) as many output warps, which
// take oᵀ off the chain warps and issue the stages' copies, or else one
// producer warp that issues them.
template <deltac_variant Var, int K_, int V_, class Ts_, int C_, int BV_, bool SplitO_ = false>
struct WarpScanTraits {
  using Ts = Ts_;
  static constexpr int K = K_, V = V_, C = C_, BV = BV_;
  static constexpr bool kSplitO = SplitO_;
  static constexpr int kPairs = BV / 16;  // 16-column groups
  // Chain warps per 16 columns (K = 256: two, each owning K / 2 keys of Sᵀ,
  // exchanging partial products through shared memory) and keys per warp.
  static constexpr int kKS = warp_scan_key_split(K), KW = K / kKS;
  static constexpr int kChains = kPairs * kKS;
  static constexpr int kWarps = warp_scan_warps(K, BV, kSplitO), kThreads = 32 * kWarps;
  static constexpr int kCopiers = kSplitO ? 32 * kPairs : 32;      // threads issuing copies
  static constexpr int kConsumers = 32 * (kSplitO ? 2 * kPairs : kChains);  // stage readers
  static constexpr bool kKda = Var == DELTAC_VARIANT_KDA;
  static constexpr int LK = K + 8, LC = C + 8, LB = BV + 8, LO = 16 + 8;  // padded rows
  static constexpr int kOffK = C * LK, kOffKd = kKda ? 2 * C * LK : C * LK;
  static constexpr int kOffV = (kKda ? 3 : 2) * C * LK;
  static constexpr int kOffT = kOffV + C * LB, kOffA = kOffT + C * LC;
  static constexpr int kStageTs = kOffA + C * LC;
  static constexpr int kStageBytes = kStageTs * 2 + (4 * C + K) * 4;
  static constexpr int kStages = warp_scan_stages(Var, K, C, BV, kSplitO);
  static constexpr int LS = K + 8, LV = C + 8;  // Sᵀ_hi and v'ᵀ rows (SplitO)
  static constexpr size_t kOTile = size_t(kPairs) * C * LO * 2;
  static constexpr size_t kSHBytes = kSplitO ? 2 * size_t(kPairs) * 16 * LS * 2 : 0;
  static constexpr size_t kVPBytes = kSplitO ? size_t(kPairs) * 16 * LV * 2 : 0;
  // kKS = 2: per pair and warp, its partial rᵀ (C / 8 n-tiles) and the
  // partner's tokens of its partial oᵀ (C / 16 n-tiles), 16 bytes per lane.
  static constexpr int kXTiles = C / 8 + C / 16;
  static constexpr size_t kXBytes = kKS == 2 ? size_t(kPairs) * 2 * kXTiles * 512 : 0;
  static constexpr size_t kOffX = size_t(kStages) * kStageBytes + kOTile + kSHBytes + kVPBytes;
  static constexpr size_t kOffBars = kOffX + kXBytes;
  static constexpr size_t kSmem = kOffBars + kWarpScanBarBytes;
  static_assert(!(kSplitO && kKS > 1), "output warps: K <= 128");
  static_assert(3 * kPairs < 16, "named barriers");
  static_assert(kStageBytes % 16 == 0, "stage alignment");
  static_assert(size_t(kStageBytes) == warp_scan_stage_bytes(Var, K, C, BV), "stage size");
  static_assert(kSmem == warp_scan_smem(Var, K, C, BV, kSplitO, kStages), "smem size");
  static_assert((2 * kStages + 6 * kPairs) * 8 <= int(kWarpScanBarBytes), "mbarriers");
  static_assert(kWarps == (kSplitO ? 2 * kPairs : kChains + 1), "warps");
};

// c += a b (m16n8k16, f32 accumulate); not volatile: the scheduler may
// interleave the independent products.
template <class Ts>
__device__ __forceinline__ void wmma16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if DELTAC_MMA_OK
  if constexpr (std::is_same_v<Ts, __half>)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();
#endif
}

__device__ __forceinline__ void ldsm4(uint32_t r[4], uint32_t addr) {
#if DELTAC_MMA_OK
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}
__device__ __forceinline__ void ldsm4t(uint32_t r[4], uint32_t addr) {
#if DELTAC_MMA_OK
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}
// A 16 x 16 A fragment (rows g, g + 8; k 2 t, 2 t + 8: the registers of
// ldmatrix.x4 at row lane % 16, column 8 (lane / 16)) into the [16][LD] tile
// at p (stmatrix on sm_90+).
template <int LD>
__device__ __forceinline__ void stsm4(uint32_t* p16, const uint32_t r[4]) {
  const int lane = int(threadIdx.x) & 31;
#if DELTAC_MMA_OK && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int row = (lane & 7) + ((lane >> 3) & 1) * 8, col = (lane >> 4) * 8;
  const uint32_t a = static_cast<uint32_t>(
      __cvta_generic_to_shared(reinterpret_cast<uint16_t*>(p16) + row * LD + col));
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(a),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#else
  const int g = lane >> 2, t = lane & 3;
  uint16_t* b = reinterpret_cast<uint16_t*>(p16);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    *reinterpret_cast<uint32_t*>(b + (g + 8 * (i & 1)) * LD + 8 * (i >> 1) + 2 * t) = r[i];
#endif
}
// Named barrier `id` over n threads: wait for all, or arrive only.
__device__ __forceinline__ void bar_sync_n(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive_n(int id, int n) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
// K = 256: the m-th 16-token block whose oᵀ warp kh of a pair writes (C = 64:
// blocks 0, 3 and 1, 2: the same share of Aqk's triangle; C = 32: block kh).
__device__ __forceinline__ constexpr int warp_scan_block(int m, int kh) {
  return 2 * m + ((m & 1) ? 1 - kh : kh);
}

__device__ __forceinline__ void cp_async_wait_all_() {
#if DELTAC_MMA_OK
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// The scan of one block: V tile blockIdx.x (BV / 16 chain warps of 16
// columns), value head blockIdx.y, sequence blockIdx.z. The stages are a
// ring of kStages buffers: the copiers fill chunk c's buffer (full[c % NS]
// completes when its copies landed) after every reader released chunk
// c - NS (empty[c % NS]); no block barrier in the loop.
template <deltac_variant Var, class Tw>
__global__ void __launch_bounds__(Tw::kThreads)
    chunked_scan_warp_kernel(const deltac_fwd_params p, const ChunkedWs<typename Tw::Ts> ws) {
  using Ts = typename Tw::Ts;
  constexpr int C = Tw::C, K = Tw::K, V = Tw::V, BV = Tw::BV, NS = Tw::kStages;
  constexpr int NCP = Tw::kCopiers;
  constexpr int LK = Tw::LK, LC = Tw::LC, LB = Tw::LB, LO = Tw::LO;
  constexpr bool kKda = Tw::kKda;
  constexpr int E = 8;             // elements per 16-byte copy
  constexpr int KS = Tw::kKS, KW = Tw::KW;  // chain warps per 16 columns, keys per warp
  constexpr int NK = KW / 8;       // n8 tiles of this warp's Sᵀ (keys)
  constexpr int NC = C / 8;        // n8 tiles of a chunk (tokens)
  if (ws.skip && *ws.skip)  // the whole grid: before any barrier or write
    return;
  // Sequence split (ws.split > 1, chunked_split.cuh): blockIdx.z = sequence
  // x split + segment; V tiles past V are the identity columns of later
  // segments (state from the identity, v = 0, outputs to ws.qt, final state
  // P to ws.pst; the real columns' final state to ws.cst).
  const int nsplit = ws.split;
  const int n = int(blockIdx.z) / nsplit, seg = int(blockIdx.z) % nsplit;
  const int j = int(blockIdx.y), v0 = int(blockIdx.x) * BV;
  const bool ident = v0 >= V;
  if (ident && seg == 0)
    return;  // the whole block
  int64_t s0, s1, first, last;
  seq_bounds(p, n, s0, s1);
  if (ws.route > 0 && p.cu_seqlens && s1 - s0 <= ws.route)
    return;  // mixed batches: the recurrent kernel's sequence (the whole block)
  seq_slots(p, ws.offsets, n, C, first, last);
  if (last > ws.max_chunks)
    last = ws.max_chunks;
  int64_t nchunks = last > first ? last - first : 0;
  if (nsplit > 1) {  // segment seg: chunks [seg L, seg L + L) of the sequence
    const int64_t L = (nchunks + nsplit - 1) / nsplit, cb = seg * L;
    if (seg > 0 && cb >= nchunks)
      return;  // an empty segment (the whole block)
    const int64_t ce = cb + L < nchunks ? cb + L : nchunks;
    first += cb;
    s0 += cb * C;
    nchunks = ce - cb;
  }

  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr bool kSplitO = Tw::kSplitO;
  constexpr int NP = Tw::kPairs, LS = Tw::LS, LV = Tw::LV;
  constexpr int NCH = Tw::kChains;
  const int tid = int(threadIdx.x), lane = tid % 32, wid = tid / 32;
  const bool chain = wid < NCH;                     // a chain warp (Sᵀ)
  const bool ow = kSplitO && wid >= NP;             // an output warp (SplitO)
  const bool copier = kSplitO ? ow : wid == NCH;    // issues the stages' copies
  const int ctid = kSplitO ? tid - 32 * NP : lane;  // its index among the copiers
  // This warp's 16 columns and (KS = 2) its half of the keys, from key kb0.
  const int pair = kSplitO ? wid % NP : (chain ? wid / KS : 0);
  const int kh = chain ? wid % KS : 0, kb0 = kh * KW;
  const int g = lane >> 2, t = lane & 3;
  const int vw = v0 + pair * 16;  // this warp's first column
  const int hqk = j / (p.HV / p.H);
  const uint32_t sm0 = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  Ts* otile = reinterpret_cast<Ts*>(smem_raw + NS * Tw::kStageBytes) + pair * C * LO;
  const uint32_t sot = static_cast<uint32_t>(__cvta_generic_to_shared(otile));
  // SplitO: Sᵀ_hi for chunk c in shbuf(c % 2), v'ᵀ of the chunk in vpbuf.
  uint32_t* const shb0 =
      reinterpret_cast<uint32_t*>(smem_raw + NS * Tw::kStageBytes + Tw::kOTile);
  auto shbuf = [&](int64_t c) { return shb0 + ((c & 1) * NP + pair) * 16 * LS / 2; };
  uint32_t* const vpbuf = shb0 + 2 * NP * 16 * LS / 2 + pair * 16 * LV / 2;
  // KS = 2: this warp's exchange tiles (xw) and its partner's (xr), lane-major
  // float4; named barriers 1 + 3 pair (both wrote) and 2 + 3 pair + w (warp
  // w's tiles were read by its partner, w may write again).
  constexpr int XT = Tw::kXTiles;
  float4* const xbase = reinterpret_cast<float4*>(smem_raw + Tw::kOffX) + lane;
  float4* const xw = xbase + (pair * 2 + kh) * XT * 32;
  const float4* const xr = xbase + (pair * 2 + (kh ^ 1)) * XT * 32;
  const int bar_full = 1 + 3 * pair, bar_read = 2 + 3 * pair;
  // mbarriers: full[NS], empty[NS], then per pair (SplitO) shf[2], she[2],
  // vpf, vpe (Sᵀ_hi written / read, v'ᵀ written / read).
  const uint32_t bars = sm0 + uint32_t(Tw::kOffBars);
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (NS + s); };
  const uint32_t pb = bars + 8 * (2 * NS + 6 * pair);
  if (tid == 0) {
    for (int s = 0; s < NS; ++s) {
      mbar_init(full(s), NCP);
      mbar_init(empty(s), Tw::kConsumers);
    }
    if constexpr (kSplitO)
      for (int i = 0; i < 6 * NP; ++i) mbar_init(bars + 8 * (2 * NS + i), 32);
  }
  __syncthreads();  // the last block barrier

  const Ts* qsrc = static_cast<const Ts*>(p.q);
  const Ts* ksrc = static_cast<const Ts*>(p.k);
  const Ts* vsrc = static_cast<const Ts*>(p.v);
  // The copies of chunk c into stage s by the copiers (rows past the
  // sequence zero-filled), then their arrival on full(s).
  auto issue = [&](int64_t c, int s) {
    const int64_t slot = (first + c) * p.HV + j;
    const int64_t t0 = s0 + c * C;
    const int len = int(s1 - t0 < C ? s1 - t0 : C);
    Ts* b = reinterpret_cast<Ts*>(smem_raw + s * Tw::kStageBytes);
    auto rows = [&](auto zf) {
      constexpr bool Z = decltype(zf)::value;
      if constexpr (kKda) {
        copy_rows<C, NCP, K / E, LK, Z>(b, ws.qg + slot * C * K, K, len, ctid);
        copy_rows<C, NCP, K / E, LK, Z>(b + Tw::kOffK, ws.kg + slot * C * K, K, len, ctid);
        copy_rows<C, NCP, K / E, LK, Z>(b + Tw::kOffKd, ws.kd + slot * C * K, K, len, ctid);
      } else {
        const int64_t off = (t0 * p.H + hqk) * K;
        copy_rows<C, NCP, K / E, LK, Z>(b, qsrc + off, int64_t(p.H) * K, len, ctid);
        copy_rows<C, NCP, K / E, LK, Z>(b + Tw::kOffK, ksrc + off, int64_t(p.H) * K, len, ctid);
      }
      if (ident)  // v = 0: zero-filled, nothing read
        copy_rows<C, NCP, BV / E, LB, true>(b + Tw::kOffV, vsrc, 0, 0, ctid);
      else
        copy_rows<C, NCP, BV / E, LB, Z>(b + Tw::kOffV, vsrc + (t0 * p.HV + j) * V + v0,
                                         int64_t(p.HV) * V, len, ctid);
    };
    if (len == C)
      rows(std::false_type{});
    else
      rows(std::true_type{});
    copy_rows<C, NCP, C / E, LC, false>(b + Tw::kOffT, ws.t + slot * C * C, C, C, ctid);
    copy_rows<C, NCP, C / E, LC, false>(b + Tw::kOffA, ws.aqk + slot * C * C, C, C, ctid);
    float* fb = reinterpret_cast<float*>(b + Tw::kStageTs);
    for (int i = ctid; i < C + K / 4; i += NCP) {
      if (i < C)
        cp_async16(fb + 4 * i, ws.f + slot * 4 * C + 4 * i);
      else
        cp_async16(fb + 4 * C + 4 * (i - C), ws.gamma + slot * K + 4 * (i - C));
    }
    cp_async_mbar_arrive(full(s));
  };
  // The copiers' part of an iteration: chunk c + NS - 1 into its stage once
  // chunk c - 1 (the stage's last user) is released; chunks 0 .. NS - 2 first.
  auto produce = [&](int64_t c) {
    const int64_t cn = c + NS - 1;
    if (cn >= nchunks)
      return;
    const int s = int(cn % NS);
    if (cn >= NS)
      mbar_wait(empty(s), uint32_t((cn / NS - 1) & 1));
    issue(cn, s);
  };

  // Lane offsets (bytes) of the ldmatrix addresses:
  //   offbk, offbc: x4 over a [16 (n) rows][16 (k)] tile as B operands: rows
  //          lane % 8 + 8 (lane / 16), column 8 (lane / 8 % 2): registers
  //          0, 1 are n-tile rows 0-7 (k 0-7, 8-15), 2, 3 rows 8-15, each a
  //          register pair that mma.sync takes as it is;
  //   offas, offav: x4 over a [16 rows][16] tile as an A fragment (row lane % 16,
  //          column 8 (lane / 16));
  //   offtk:  x4 .trans over a [16 (k)][16 (n)] tile (rows lane % 8 + 8 (lane / 8 % 2),
  //          column 8 (lane / 16)): registers 0, 1 n-tile 0, 2, 3 n-tile 1;
  //   offv:  x4 .trans over a [16 tokens][16 columns] tile (rows lane % 8 +
  //          8 (lane / 16), column 8 (lane / 8 % 2)): the accumulator layout of
  //          the transposed tile (registers: tile 0 rows g, g + 8, tile 1 ...).
  const int ra = lane & 15, ca = (lane >> 4) * 8;
  const int rb = (lane & 7) + ((lane >> 4) & 1) * 8, cb = ((lane >> 3) & 1) * 8;
  const int rt = (lane & 7) + ((lane >> 3) & 1) * 8;
  const int rv = (lane & 7) + ((lane >> 4) & 1) * 8, cv = ((lane >> 3) & 1) * 8;
  const uint32_t offbk = (rb * LK + cb) * 2, offbc = (rb * LC + cb) * 2;
  const uint32_t offtk = (rt * LK + ca) * 2;
  const uint32_t offvb = (rv * LB + pair * 16 + cv) * 2, offvo = (rv * LO + cv) * 2;
  const uint32_t offas = (ra * LS + ca) * 2, offav = (ra * LV + ca) * 2;

  if (copier)
    for (int64_t c = 0; c < NS - 1 && c < nchunks; ++c) issue(c, int(c));
  if (!chain && !ow) {  // the producer warp
    for (int64_t c = 0; c < nchunks; ++c) produce(c);
    cp_async_wait_all_();
    return;
  }

  // Sᵀ: element e of n-tile nt is column vw + g + 8 (e / 2), key nt 8 + 2 t + e % 2.
  const int64_t sbase = (int64_t(n) * p.HV + j) * K * V;
  const bool vk = p.state_layout == DELTAC_STATE_VK;
  float S[NK][4];
  if (ident) {  // the identity: column c of the extra tiles is key c
#pragma unroll
    for (int nt = 0; nt < NK; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        S[nt][e] = kb0 + nt * 8 + 2 * t + (e & 1) == vw - V + g + 8 * (e >> 1) ? 1.f : 0.f;
  } else if (p.h0 && chain && seg == 0) {
    const float* h0 = static_cast<const float*>(p.h0) + sbase;
#pragma unroll
    for (int nt = 0; nt < NK; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int key = kb0 + nt * 8 + 2 * t, col = vw + g + 8 * h;
        if (vk) {
          const float2 x = *reinterpret_cast<const float2*>(h0 + int64_t(col) * K + key);
          S[nt][2 * h] = x.x, S[nt][2 * h + 1] = x.y;
        } else {
          S[nt][2 * h] = h0[int64_t(key) * V + col];
          S[nt][2 * h + 1] = h0[int64_t(key + 1) * V + col];
        }
      }
  } else {
#pragma unroll
    for (int nt = 0; nt < NK; ++nt) S[nt][0] = S[nt][1] = S[nt][2] = S[nt][3] = 0.f;
  }

  // SplitO: the chain warp hands Sᵀ_hi of the state chunk c starts from to
  // the output warp in shbuf(c) (shf(c % 2)), once the output warp has read
  // chunk c - 2's (she(c % 2)).
  auto put_shi = [&](int64_t c) {
    if (c >= 2)
      mbar_wait(pb + 8 * (2 + (c & 1)), uint32_t(((c - 2) >> 1) & 1));
    uint32_t* d = shbuf(c);
#pragma unroll
    for (int kk = 0; kk < KW / 16; ++kk) {
      uint32_t ah[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float* x = S[2 * kk + (i >> 1)] + 2 * (i & 1);
        ah[i] = pack2<Ts>(x[0], x[1]);
      }
      stsm4<LS>(d + kk * 8, ah);
    }
    mbar_arrive(pb + 8 * (c & 1));
  };
  if constexpr (kSplitO)
    if (chain)
      put_shi(0);

  // Outputs: o, or (identity columns) qt = [token][HV][K], the column vw - V.
  Ts* const obase = ident ? ws.qt + int64_t(j) * K + (vw - V)
                          : static_cast<Ts*>(p.o) + int64_t(j) * V + vw;
  const int64_t ostride = int64_t(p.HV) * (ident ? K : V);
  int s = 0;
  uint32_t ph = 0;  // stage s of chunk c, and the parity of its fill
  for (int64_t c = 0; c < nchunks; ++c) {
    if (ow)
      produce(c);
    mbar_wait(full(s), ph);  // chunk c landed
    const uint32_t sb = sm0 + s * Tw::kStageBytes;
    const uint32_t kofs = uint32_t(kb0) * 2;  // this warp's first key (bytes)
    const uint32_t sq = sb + kofs, sk = sb + Tw::kOffK * 2 + kofs;
    const uint32_t skd = sb + Tw::kOffKd * 2 + kofs;
    const uint32_t sv = sb + Tw::kOffV * 2, st = sb + Tw::kOffT * 2, sa = sb + Tw::kOffA * 2;
    const float* fa = reinterpret_cast<const float*>(smem_raw + s * Tw::kStageBytes +
                                                     Tw::kStageTs * 2);
    const float* fbv = fa + C;
    const float* fq = fa + 2 * C;
    const float* fk = fa + 3 * C;
    const float* gam = fa + 4 * C + kb0;
    const int64_t t0 = s0 + c * C;
    const int len = int(s1 - t0 < C ? s1 - t0 : C);

    // oᵀ by slot pairs: n-tiles 2 m, 2 m + 1 hold token block blk(m): m, or
    // (KS = 2) this warp's blocks first, then its partner's (sent to it).
    constexpr int NO = KS == 2 ? C / 32 : C / 16;  // slot pairs this warp writes
    auto blk = [&](int m) {
      if constexpr (KS == 1)
        return m;
      else
        return m < NO ? warp_scan_block(m, kh) : warp_scan_block(m - NO, kh ^ 1);
    };
    float o[NC][4];
    uint32_t vf[C / 16][4];  // A fragments of v' (for o)
#pragma unroll
    for (int nt = 0; nt < NC; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
    if (chain) {
      // rᵀ = (Sᵀ_hi + Sᵀ_lo) Kᵀ (then scaled below) and, beside it from the
      // same Sᵀ_hi fragments, oᵀ = Sᵀ_hi Qᵀ (off the state's chain).
      float r[NC][4];
#pragma unroll
      for (int nt = 0; nt < NC; ++nt) r[nt][0] = r[nt][1] = r[nt][2] = r[nt][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < KW / 16; ++kk) {
        uint32_t ah[4], al[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float* x = S[2 * kk + (i >> 1)] + 2 * (i & 1);
          split2<Ts>(x[0], x[1], ah[i], al[i]);
        }
        uint32_t bk[C / 16][4];
#pragma unroll
        for (int np = 0; np < C / 16; ++np) {
          ldsm4(bk[np], sk + offbk + (np * 16 * LK + kk * 16) * 2);
          wmma16<Ts>(r[2 * np], ah, bk[np][0], bk[np][1]);
          wmma16<Ts>(r[2 * np + 1], ah, bk[np][2], bk[np][3]);
        }
        if constexpr (!kSplitO) {
#pragma unroll
          for (int np = 0; np < C / 16; ++np) {
            uint32_t b[4];
            ldsm4(b, sq + offbk + (blk(np) * 16 * LK + kk * 16) * 2);
            wmma16<Ts>(o[2 * np], ah, b[0], b[1]);
            wmma16<Ts>(o[2 * np + 1], ah, b[2], b[3]);
          }
        }
#pragma unroll
        for (int np = 0; np < C / 16; ++np) {
          wmma16<Ts>(r[2 * np], al, bk[np][0], bk[np][1]);
          wmma16<Ts>(r[2 * np + 1], al, bk[np][2], bk[np][3]);
        }
      }
      if constexpr (KS == 2) {
        // The pair's partial rᵀ (all tokens) and oᵀ (the owner's tokens)
        // summed: x + y == y + x, so both warps form the same rᵀ.
        if (c >= 1)
          bar_sync_n(bar_read + kh, 64);  // the partner read chunk c - 1's
#pragma unroll
        for (int nt = 0; nt < NC; ++nt)
          xw[nt * 32] = make_float4(r[nt][0], r[nt][1], r[nt][2], r[nt][3]);
#pragma unroll
        for (int nt = 2 * NO; nt < NC; ++nt)
          xw[(NC - 2 * NO + nt) * 32] = make_float4(o[nt][0], o[nt][1], o[nt][2], o[nt][3]);
        bar_sync_n(bar_full, 64);
#pragma unroll
        for (int nt = 0; nt < NC; ++nt) {
          const float4 y = xr[nt * 32];
          r[nt][0] += y.x, r[nt][1] += y.y, r[nt][2] += y.z, r[nt][3] += y.w;
        }
#pragma unroll
        for (int nt = 0; nt < 2 * NO; ++nt) {
          const float4 y = xr[(NC + nt) * 32];
          o[nt][0] += y.x, o[nt][1] += y.y, o[nt][2] += y.z, o[nt][3] += y.w;
        }
        if (c + 1 < nchunks)
          bar_arrive_n(bar_read + (kh ^ 1), 64);  // the partner may write again
      }
      // r = fb v - fa (K S), rounded once into A fragments (k = tokens): the
      // registers of n-tiles 2 np, 2 np + 1 (rows g, g + 8 each) are those of
      // k step np.
      uint32_t rf[C / 16][4];
#pragma unroll
      for (int np = 0; np < C / 16; ++np) {
        uint32_t vv[4];
        ldsm4t(vv, sv + offvb + np * 16 * LB * 2);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int nt = 2 * np + h, tok = nt * 8 + 2 * t;
          const float2 a = *reinterpret_cast<const float2*>(fa + tok);
          const float2 bb = *reinterpret_cast<const float2*>(fbv + tok);
          const float2 x0 = unpack2<Ts>(vv[2 * h]), x1 = unpack2<Ts>(vv[2 * h + 1]);
          rf[np][2 * h] = pack2<Ts>(bb.x * x0.x - a.x * r[nt][0], bb.y * x0.y - a.y * r[nt][1]);
          rf[np][2 * h + 1] =
              pack2<Ts>(bb.x * x1.x - a.x * r[nt][2], bb.y * x1.y - a.y * r[nt][3]);
        }
      }
      // v'ᵀ = rᵀ Tᵀ (T lower triangular: k blocks <= the n block).
      float vp[NC][4];
#pragma unroll
      for (int nt = 0; nt < NC; ++nt) vp[nt][0] = vp[nt][1] = vp[nt][2] = vp[nt][3] = 0.f;
#pragma unroll
      for (int ip = 0; ip < C / 16; ++ip)
#pragma unroll
        for (int kb = 0; kb <= ip; ++kb) {
          uint32_t b[4];
          ldsm4(b, st + offbc + (ip * 16 * LC + kb * 16) * 2);
          wmma16<Ts>(vp[2 * ip], rf[kb], b[0], b[1]);
          wmma16<Ts>(vp[2 * ip + 1], rf[kb], b[2], b[3]);
        }
      // A fragments of v' and of fk ∘ v' (for S).
      uint32_t vd[C / 16][4];
#pragma unroll
      for (int kb = 0; kb < C / 16; ++kb)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int nt = 2 * kb + h;
          const float2 f = *reinterpret_cast<const float2*>(fk + nt * 8 + 2 * t);
          vf[kb][2 * h] = pack2<Ts>(vp[nt][0], vp[nt][1]);
          vf[kb][2 * h + 1] = pack2<Ts>(vp[nt][2], vp[nt][3]);
          vd[kb][2 * h] = pack2<Ts>(f.x * vp[nt][0], f.y * vp[nt][1]);
          vd[kb][2 * h + 1] = pack2<Ts>(f.x * vp[nt][2], f.y * vp[nt][3]);
        }
      if constexpr (kSplitO) {  // v' to the output warp, once it read chunk c - 1's
        if (c >= 1)
          mbar_wait(pb + 8 * 5, uint32_t((c - 1) & 1));
#pragma unroll
        for (int kb = 0; kb < C / 16; ++kb) stsm4<LV>(vpbuf + kb * 8, vf[kb]);
        mbar_arrive(pb + 8 * 4);
      }
      // S = gamma ∘ S + (fk ∘ v')ᵀ K.
#pragma unroll
      for (int nt = 0; nt < NK; ++nt) {
        const float2 gm = *reinterpret_cast<const float2*>(gam + nt * 8 + 2 * t);
        S[nt][0] *= gm.x, S[nt][1] *= gm.y, S[nt][2] *= gm.x, S[nt][3] *= gm.y;
      }
#pragma unroll
      for (int kb = 0; kb < C / 16; ++kb)
#pragma unroll
        for (int np = 0; np < KW / 16; ++np) {
          uint32_t b[4];
          ldsm4t(b, skd + offtk + (kb * 16 * LK + np * 16) * 2);
          wmma16<Ts>(S[2 * np], vd[kb], b[0], b[1]);
          wmma16<Ts>(S[2 * np + 1], vd[kb], b[2], b[3]);
        }
      if constexpr (kSplitO) {
        mbar_arrive(empty(s));  // the chain's reads of the stage are done
        put_shi(c + 1);
      }
    }
    if (!kSplitO || ow) {  // the output
      if constexpr (kSplitO) {  // oᵀ = Sᵀ_hi Qᵀ, Sᵀ_hi from the chain warp
        mbar_wait(pb + 8 * (c & 1), uint32_t((c >> 1) & 1));
        const uint32_t shs = static_cast<uint32_t>(__cvta_generic_to_shared(shbuf(c))) + offas;
#pragma unroll
        for (int kk = 0; kk < K / 16; ++kk) {
          uint32_t ah[4];
          ldsm4(ah, shs + kk * 32);
#pragma unroll
          for (int np = 0; np < C / 16; ++np) {
            uint32_t b[4];
            ldsm4(b, sq + offbk + (np * 16 * LK + kk * 16) * 2);
            wmma16<Ts>(o[2 * np], ah, b[0], b[1]);
            wmma16<Ts>(o[2 * np + 1], ah, b[2], b[3]);
          }
        }
        mbar_arrive(pb + 8 * (2 + (c & 1)));  // shbuf(c) read
      }
      // o = fq ∘ (S_hi Q) + Aqk v' (Aqk lower triangular).
#pragma unroll
      for (int nt = 0; nt < 2 * NO; ++nt) {
        const float2 f =
            *reinterpret_cast<const float2*>(fq + blk(nt >> 1) * 16 + (nt & 1) * 8 + 2 * t);
        o[nt][0] *= f.x, o[nt][1] *= f.y, o[nt][2] *= f.x, o[nt][3] *= f.y;
      }
      if constexpr (kSplitO) {
        mbar_wait(pb + 8 * 4, uint32_t(c & 1));  // v' of this chunk is in vpbuf
        const uint32_t vps = static_cast<uint32_t>(__cvta_generic_to_shared(vpbuf)) + offav;
#pragma unroll
        for (int kb = 0; kb < C / 16; ++kb) ldsm4(vf[kb], vps + kb * 32);
        mbar_arrive(pb + 8 * 5);  // vpbuf read
      }
      if constexpr (KS == 1) {
#pragma unroll
        for (int ip = 0; ip < C / 16; ++ip)
#pragma unroll
          for (int kb = 0; kb <= ip; ++kb) {
            uint32_t b[4];
            ldsm4(b, sa + offbc + (ip * 16 * LC + kb * 16) * 2);
            wmma16<Ts>(o[2 * ip], vf[kb], b[0], b[1]);
            wmma16<Ts>(o[2 * ip + 1], vf[kb], b[2], b[3]);
          }
      } else {  // this warp's blocks (their index known at run time)
#pragma unroll
        for (int m = 0; m < NO; ++m) {
          const int ip = blk(m);
#pragma unroll
          for (int kb = 0; kb < C / 16; ++kb)
            if (kb <= ip) {
              uint32_t b[4];
              ldsm4(b, sa + offbc + (ip * 16 * LC + kb * 16) * 2);
              wmma16<Ts>(o[2 * m], vf[kb], b[0], b[1]);
              wmma16<Ts>(o[2 * m + 1], vf[kb], b[2], b[3]);
            }
        }
      }
      mbar_arrive(empty(s));  // this warp's reads of the stage are done
      // oᵀ -> the [C][16] tile of the columns (transposed: rows are tokens) -> o rows.
      __syncwarp();  // the previous chunk's reads of the tile are done
#pragma unroll
      for (int np = 0; np < NO; ++np) {
        const uint32_t x0 = pack2<Ts>(o[2 * np][0], o[2 * np][1]);
        const uint32_t x1 = pack2<Ts>(o[2 * np][2], o[2 * np][3]);
        const uint32_t x2 = pack2<Ts>(o[2 * np + 1][0], o[2 * np + 1][1]);
        const uint32_t x3 = pack2<Ts>(o[2 * np + 1][2], o[2 * np + 1][3]);
#if DELTAC_MMA_OK && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::
                         "r"(sot + offvo + blk(np) * 16 * LO * 2),
                     "r"(x0), "r"(x1), "r"(x2), "r"(x3)
                     : "memory");
#else
        const uint32_t xs[4] = {x0, x1, x2, x3};
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // register i: tokens 2t, 2t + 1 of tile i / 2, column g + 8 (i % 2)
          const Ts* e = reinterpret_cast<const Ts*>(&xs[i]);
          Ts* d = otile + (blk(np) * 16 + (i >> 1) * 8 + 2 * t) * LO + g + 8 * (i & 1);
          d[0] = e[0];
          d[LO] = e[1];
        }
#endif
      }
      __syncwarp();
      Ts* orow = obase + t0 * ostride;
#pragma unroll
      for (int m = 0; m < 2 * NO * 16 / 32; ++m) {  // this warp's tokens, 2 lanes each
        const int idx = lane + 32 * m, half = idx & 1;
        const int tok = KS == 1 ? idx >> 1 : blk(idx >> 5) * 16 + ((idx >> 1) & 15);
        if (tok < len)
          *reinterpret_cast<uint4*>(orow + tok * ostride + half * 8) =
              *reinterpret_cast<const uint4*>(otile + tok * LO + half * 8);
      }
    }
    if (++s == NS)
      s = 0, ph ^= 1;
  }
  if (ow)
    cp_async_wait_all_();

  if (nsplit > 1 && chain) {  // the segment's final state (identity columns: P)
    int ld;
    float* dst = split_state(ws, p.HV, n, seg, j, ident, K, V, &ld);
    const int cb = ident ? vw - V : vw;
#pragma unroll
    for (int nt = 0; nt < NK; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int key = kb0 + nt * 8 + 2 * t, col = cb + g + 8 * h;
        dst[int64_t(key) * ld + col] = S[nt][2 * h];
        dst[int64_t(key + 1) * ld + col] = S[nt][2 * h + 1];
      }
  } else if (p.ht && chain) {
    float* ht = static_cast<float*>(p.ht) + sbase;
#pragma unroll
    for (int nt = 0; nt < NK; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int key = kb0 + nt * 8 + 2 * t, col = vw + g + 8 * h;
        if (vk) {
          *reinterpret_cast<float2*>(ht + int64_t(col) * K + key) =
              make_float2(S[nt][2 * h], S[nt][2 * h + 1]);
        } else {
          ht[int64_t(key) * V + col] = S[nt][2 * h];
          ht[int64_t(key + 1) * V + col] = S[nt][2 * h + 1];
        }
      }
  }
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_CHUNKED_SCAN_WARP_CUH
