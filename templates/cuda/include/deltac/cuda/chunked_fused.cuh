// The intra-chunk work and the scan in one launch (chunked.cuh uses it on
// request, where the scan's grid is one wave: value heads x sequences x V
// tiles <= the multiprocessors; measured slower than two launches on the
// H200, since one intra-chunk block per multiprocessor is latency-bound:
// docs/performance.md, version 9). The scan is a chain of latency-bound chunk steps that
// leaves most of each multiprocessor's issue slots idle; here the blocks of
// one grid take roles in the order they start (a ticket): the first
// `workers` blocks run the intra-chunk work of every (chunk, value head), in
// chunk order, and flag each slot when its output is written; the others
// are the scan's blocks and wait, chunk by chunk, for the flags. Two blocks
// fit on a multiprocessor, so a worker runs beside each scan block.
//
// No deadlock whatever the scheduling: workers wait for nothing, take the
// first tickets (they are resident before any scan block), and take items
// from a counter until none is left, so every flag is set.
#ifndef DELTAC_CUDA_CHUNKED_FUSED_CUH
#define DELTAC_CUDA_CHUNKED_FUSED_CUH

#include "deltac/cuda/chunked_prep.cuh"
#include "deltac/cuda/chunked_scan.cuh"
#include "deltac/cuda/chunked_traits.cuh"
#include "deltac/params.h"

#include <cstdint>

namespace deltac::cuda::detail {

// Whether the scan traits TrS can share a kernel with the intra-chunk work
// at two blocks per multiprocessor: 16-bit types, 8 warps (the intra-chunk
// block's threads), one stage, and a small enough state tile to stay within
// 128 registers (K = V = 128: a V tile of 32 columns or fewer).
// (var, K, V, input bytes, chunk C, V tile bv, warps): one-stage scans
// only (the fused kernel's scan traits have one stage).
constexpr bool chunked_fusable(int var, int K, int V, int elem, int C, int bv, int warps) {
  if (elem != 2 || warps != kChunkedPrepWarps || bv < 8 || V % bv != 0 ||
      !chunked_legal(var, K, V, elem, C, bv, warps, 1))
    return false;
  const int mw1 = chunked_detail::gcd(warps, C / 16), mw3 = chunked_detail::gcd(warps, K / 16);
  const int mt1 = C / 16 / mw1, nt1 = bv / 8 / (warps / mw1);
  const int mt3 = K / 16 / mw3, nt3 = bv / 8 / (warps / mw3);
  return mt3 * nt3 <= 4 && mt1 * nt1 <= 2;
}
template <class TrS>
__host__ __device__ constexpr bool chunked_fusable() {
  return TrS::kElem == 2 && TrS::kThreads == kChunkedPrepWarps * 32 && TrS::kStages == 1 &&
         TrS::MT3 * TrS::NT3 <= 4 && TrS::MT1 * TrS::NT1 <= 2;
}
// The fused launch's shared memory: the larger of the intra-chunk kernel's
// and the one-stage scan's.
constexpr size_t chunked_fused_smem(int var, int K, int V, int elem, int C, int bv) {
  const size_t a = chunked_prep_smem(var, K, V, elem, C);
  const size_t b = chunked_scan_smem(var, K, elem, C, bv, 1);
  return a > b ? a : b;
}

__device__ __forceinline__ void set_ready(int32_t* flag) {
#if DELTAC_MMA_OK
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(flag), "r"(1) : "memory");
#else
  __threadfence();
  *reinterpret_cast<volatile int32_t*>(flag) = 1;
#endif
}

// TrP: the intra-chunk traits (the config's), TrS: the scan's (one stage,
// the V tile chosen at run time). workers: blocks that take the
// intra-chunk role; the grid is workers + V / BV x HV x N blocks.
template <deltac_variant Var, class TrP, class TrS>
__global__ void __launch_bounds__(TrS::kThreads, 2)
    chunked_fused_kernel(const deltac_fwd_params p, const ChunkedWs<typename TrS::Ts> ws,
                         float scale, int workers) {
  static_assert(chunked_fusable<TrS>() && TrP::kPrepThreads == TrS::kThreads, "fusable");
  static_assert(TrP::C == TrS::C, "one chunk size");
  constexpr int C = TrS::C;
  __shared__ unsigned long long ticket;
  const int tid = threadIdx.x;
  if (tid == 0)
    ticket = atomicAdd(ws.tickets, 1ull);
  __syncthreads();
  const unsigned long long role = ticket;
  if (role < static_cast<unsigned long long>(workers)) {
    const int64_t items = ws.max_chunks * p.HV;
    const int64_t per = (int64_t(p.T) + C - 1) / C;  // chunks per sequence (no cu_seqlens)
    for (;;) {
      __syncthreads();  // everyone has read the previous item's ticket
      if (tid == 0)
        ticket = atomicAdd(ws.tickets + 1, 1ull);
      __syncthreads();
      const int64_t it = int64_t(ticket);
      if (it >= items)
        return;
      // Chunk order: without cu_seqlens item = (c N + n) HV + j, so that
      // every sequence's chain gets its chunks at the same pace; varlen
      // (one sequence here) in slot order.
      const int j = int(it % p.HV);
      const int64_t q = it / p.HV;
      const int64_t slot_chunk = p.cu_seqlens ? q : (q % p.N) * per + q / p.N;
      chunked_prep_item<Var, TrP>(p, ws, scale, slot_chunk, j);
      __syncthreads();  // the item's global writes are done
      if (tid == 0) {
        __threadfence();
        set_ready(ws.ready + slot_chunk * p.HV + j);
      }
    }
  }
  if (ws.skip && *ws.skip)
    return;
  constexpr int tiles = TrS::V / TrS::BV;
  const int64_t idx = int64_t(role) - workers;
  chunked_scan_block<Var, TrS>(p, ws, int(idx % tiles), int(idx / tiles % p.HV),
                               int(idx / (int64_t(tiles) * p.HV)));
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_CHUNKED_FUSED_CUH
