// Timing of one runtime call for the runtime-level CUDA benchmarks: the call
// captured once in a CUDA graph and replayed (launch cost out of the time).
#ifndef DELTAC_BENCH_CUDA_BENCH_GRAPH_CUH
#define DELTAC_BENCH_CUDA_BENCH_GRAPH_CUH

#include "bench_fill.cuh"
#include "deltac/runtime.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace deltac::bench {

// Median ms of deltac_forward(p, opt) on stream s (opt's workspace set, one
// warm call made): 5 warm-up replays, then 15 samples of 20 back-to-back
// replays between CUDA events. Exits with "<tool>: ..." on any failure.
inline float replay_median_ms(const deltac_fwd_params &p, const deltac_options &opt,
                              cudaStream_t s, const char *tool) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), tool, "capture");
  const int rc = deltac_forward(&p, &opt);
  check(cudaStreamEndCapture(s, &graph), tool, "end capture");
  if (rc != 0) {
    std::fprintf(stderr, "%s: %s\n", tool, deltac_last_error());
    std::exit(1);
  }
  check(cudaGraphInstantiate(&exec, graph, 0), tool, "instantiate");
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 5; ++i)
    cudaGraphLaunch(exec, s);
  std::vector<float> ms;
  for (int t = 0; t < 15; ++t) {
    cudaEventRecord(a, s);
    for (int i = 0; i < 20; ++i)
      cudaGraphLaunch(exec, s);
    cudaEventRecord(b, s);
    check(cudaEventSynchronize(b), tool, "replay");
    float x = 0;
    cudaEventElapsedTime(&x, a, b);
    ms.push_back(x / 20);
  }
  std::sort(ms.begin(), ms.end());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms[ms.size() / 2];
}

// Median ms of deltac_forward(p, opt) on stream s (device pointers): a
// workspace of deltac_workspace_size() bytes, one warm call (loads the
// kernels; its run info into *info), then replay_median_ms.
inline float time_runtime_call(const deltac_fwd_params &p, deltac_options opt, cudaStream_t s,
                               const char *tool, deltac_run_info *info) {
  size_t ws = 0;
  if (deltac_workspace_size(&p, &opt, &ws) != 0) {
    std::fprintf(stderr, "%s: %s\n", tool, deltac_last_error());
    std::exit(1);
  }
  void *wsp = nullptr;
  check(cudaMalloc(&wsp, ws ? ws : 256), tool, "malloc ws");
  opt.workspace = wsp, opt.workspace_bytes = ws;
  if (deltac_forward_info(&p, &opt, info) != 0) {
    std::fprintf(stderr, "%s: %s\n", tool, deltac_last_error());
    std::exit(1);
  }
  check(cudaStreamSynchronize(s), tool, "warm call");
  const float med = replay_median_ms(p, opt, s, tool);
  cudaFree(wsp);
  return med;
}

}  // namespace deltac::bench

#endif  // DELTAC_BENCH_CUDA_BENCH_GRAPH_CUH
