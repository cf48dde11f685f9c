// Shared library for bench/cuda/prefill_bench.py: deltac::cuda::chunked for
// the benchmark's shapes behind two extern "C" functions, so that Python
// (torch, flash-linear-attention) can call it on its own device pointers and
// stream and capture it in the same kind of CUDA graph as the peer.
#include "deltac/cuda/chunked.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <tuple>
#include <utility>

namespace {

using bf16 = __nv_bfloat16;
using deltac::cuda::ChunkedConfig;
using deltac::cuda::DefaultChunkedConfig;

// Configs the benchmark can force on GDN and KDA K = V = 128 (index 0: the
// default).
using Sweep = std::tuple<ChunkedConfig<64, 32, 8, 3>, ChunkedConfig<64, 32, 8, 2>,
                         ChunkedConfig<64, 64, 8, 1>, ChunkedConfig<32, 64, 8, 3>,
                         ChunkedConfig<64, 32, 4, 3>, ChunkedConfig<64, 64, 4, 2>,
                         ChunkedConfig<32, 64, 8, 2>>;
constexpr int kSweep = std::tuple_size_v<Sweep>;

struct Call {
  const deltac_fwd_params* p;
  void* ws;
  size_t bytes;
  cudaStream_t stream;
  int stages;  // bit 0 prep, bit 1 scan
  size_t* ws_out;  // non-null: workspace query only
  int split = 0;   // segments per sequence forced (0: the rule)
  int fuse = 0;    // 1: the fused launch where it fits (chunked_stages)
  int scan = 0;    // chunked_stages' scan: 0 the rule (a TMA or the warp scan where it runs), 1
                   // the block scan, 2 the warp scan with output warps, 3 the TMA scan, 4 the
                   // transposed TMA scan, 5 the block scan with two-term products
  int bv = 0;      // the scan's V tile forced (0: chosen at run time)
  float* cstates = nullptr;  // chunk-end states (chunked_run_stages; null: none)
  int64_t cstates_count = 0;
};

template <deltac_variant Var, int K, int V, class Cfg>
cudaError_t run(const Call& c) {
  namespace dd = deltac::cuda::detail;
  if (c.ws_out && c.scan == deltac::cuda::kChunkedScanPrecise) {  // T's low halves too
    const dd::ChunkedKernels& k = dd::chunked_kernels<Var, K, V, bf16, Cfg>();
    bool warp = false;
    const dd::ChunkedPlan pl = dd::chunked_run_plan(k, *c.p, c.bv, 1, c.scan, &warp);
    *c.ws_out = dd::chunked_carve<bf16>(k, *c.p, nullptr, nullptr, 1, pl.precise);
    return cudaSuccess;
  }
  if (c.ws_out) {
    *c.ws_out = deltac::cuda::chunked_workspace_bytes<Var, K, V, bf16, Cfg>(*c.p, c.split);
    return cudaSuccess;
  }
  return dd::chunked_run_stages<bf16>(dd::chunked_kernels<Var, K, V, bf16, Cfg>(), *c.p, c.ws,
                                      c.bytes, c.stream, c.stages, nullptr, c.bv, c.split,
                                      c.fuse, 0, c.scan, c.cstates, c.cstates_count);
}

// Config I of the sweep where it is legal for this variant and shape.
template <deltac_variant Var, int K, int V, size_t I>
cudaError_t run_sweep(const Call& c) {
  using Cf = std::tuple_element_t<I, Sweep>;
  if constexpr (deltac::cuda::chunked_legal(Var, K, V, 2, Cf::kChunk, Cf::kBV, Cf::kWarps,
                                            Cf::kStages))
    return run<Var, K, V, Cf>(c);
  return cudaErrorInvalidValue;
}

template <deltac_variant Var, int K, int V>
cudaError_t run_cfg(const Call& c, int cfg) {
  if (cfg == 0)
    return run<Var, K, V, DefaultChunkedConfig<Var, K, V, bf16>>(c);
  if constexpr ((Var == DELTAC_VARIANT_GATED || Var == DELTAC_VARIANT_KDA) && K == 128 &&
                V == 128) {
    cudaError_t e = cudaErrorInvalidValue;
    [&]<size_t... I>(std::index_sequence<I...>) {
      ((cfg == int(I) + 1 ? (e = run_sweep<Var, K, V, I>(c)) : e), ...);
    }(std::make_index_sequence<kSweep>{});
    return e;
  }
  return cudaErrorInvalidValue;
}

// cfg 100 S + i: config i (0: the default) with the sequence split forced
// to S segments; + 1000: with the fused launch; 2000 + w: the default with
// the warp scan (chunked_scan_warp.cuh), its V tile forced to w (0: chosen);
// 3000 + w: the same with output warps; 4000 + i: config i with the block
// scan; 5000 + i: config i with the TMA scan where it runs; 6000 + i: with
// the transposed TMA scan where it runs (the others run the rule: a TMA or
// the warp scan where it runs and no split or fused launch is asked for);
// 7000 + i: config i with scan 5 (two-term products, unsplit).
cudaError_t dispatch(const Call& c0, int cfg) {
  Call c = c0;
  if (cfg >= 7000)
    c.scan = 5, cfg -= 7000;
  else if (cfg >= 6000)
    c.scan = 4, cfg -= 6000;
  else if (cfg >= 5000)
    c.scan = 3, cfg -= 5000;
  else if (cfg >= 4000)
    c.scan = 1, cfg -= 4000;
  if (cfg >= 2000 && cfg < 4000)
    c.scan = cfg >= 3000 ? 2 : 0, c.bv = cfg % 1000, cfg = 0;
  if (cfg >= 1000)
    c.fuse = 1, cfg %= 1000;
  if (cfg >= 100)
    c.split = cfg / 100, cfg %= 100;
  const int var = c.p->variant, K = c.p->K, V = c.p->V;
  if (var == DELTAC_VARIANT_GATED && K == 128 && V == 128)
    return run_cfg<DELTAC_VARIANT_GATED, 128, 128>(c, cfg);
  if (var == DELTAC_VARIANT_GATED && K == 64 && V == 64)
    return run_cfg<DELTAC_VARIANT_GATED, 64, 64>(c, cfg);
  if (var == DELTAC_VARIANT_GATED && K == 256 && V == 256)
    return run_cfg<DELTAC_VARIANT_GATED, 256, 256>(c, cfg);
  if (var == DELTAC_VARIANT_DELTA && K == 64 && V == 64)
    return run_cfg<DELTAC_VARIANT_DELTA, 64, 64>(c, cfg);
  if (var == DELTAC_VARIANT_DELTA && K == 128 && V == 128)
    return run_cfg<DELTAC_VARIANT_DELTA, 128, 128>(c, cfg);
  if (var == DELTAC_VARIANT_KDA && K == 128 && V == 128)
    return run_cfg<DELTAC_VARIANT_KDA, 128, 128>(c, cfg);
  return cudaErrorInvalidValue;
}

}  // namespace

extern "C" {

// Workspace bytes for p (bf16 in, f32 state) under config `cfg`; 0 if none.
size_t deltac_bench_chunked_ws(const deltac_fwd_params* p, int cfg) {
  size_t bytes = 0;
  Call c{p, nullptr, 0, nullptr, 3, &bytes};
  return dispatch(c, cfg) == cudaSuccess ? bytes : 0;
}

// Launches the chunked forward on `stream` (stages: 3 all, 1 prep, 2 scan
// with the split's fold and fix-up, 4 the fold and fix-up alone)
// under config `cfg` (0: the default; 100 S + i: config i with S segments
// per sequence, 100: the default with no split; + 1000: the fused launch);
// returns the cudaError_t. Stages other than 3 never fuse.
int deltac_bench_chunked(const deltac_fwd_params* p, void* ws, size_t ws_bytes, void* stream,
                         int cfg, int stages) {
  Call c{p, ws, ws_bytes, static_cast<cudaStream_t>(stream), stages, nullptr};
  return int(dispatch(c, cfg));
}

// deltac_bench_chunked(p, ws, ws_bytes, stream, cfg, 3) writing chunk-end
// states into cstates (count entries, [chunk][HV][K][V] f32): the block
// scan, unsplit and unfused, whatever cfg asks.
int deltac_bench_chunked_cstates(const deltac_fwd_params* p, void* ws, size_t ws_bytes,
                                 void* stream, int cfg, float* cstates, int64_t count) {
  Call c{p, ws, ws_bytes, static_cast<cudaStream_t>(stream), 3, nullptr};
  c.cstates = cstates, c.cstates_count = count;
  return int(dispatch(c, cfg));
}

// The default config's chunk (bf16 in) for variant var at K, V.
int deltac_bench_default_chunk(int var, int K, int V) {
  return deltac::cuda::chunked_default(var, K, V, 2).chunk;
}

// Configs deltac_bench_chunked takes for GDN and KDA K = V = 128 (1..n; 0
// default).
int deltac_bench_sweep_size() { return kSweep; }

// sizeof(deltac_fwd_params), for the Python side to check its layout.
size_t deltac_bench_params_size() { return sizeof(deltac_fwd_params); }

}  // extern "C"
