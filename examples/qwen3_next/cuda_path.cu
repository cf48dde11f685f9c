// GPU side of the main job: device buffers, the generated CUDA entry, events.
#include "demo.h"
#include "qwen3_next_gdn.h"

#include <cuda_runtime.h>

#include <algorithm>

namespace demo {
namespace {

void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "deltac demo: %s failed: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <class T, class A> T *upload(const std::vector<T, A> &x) {
  if (x.empty()) return nullptr;
  T *d = nullptr;
  check(cudaMalloc(&d, x.size() * sizeof(T)), "cudaMalloc");
  check(cudaMemcpy(d, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

} // namespace

bool cuda_present() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

double time_cuda(const Problem &pb, Outputs *out, int reps) {
  deltac_fwd_params p = pb.params(nullptr, nullptr);
  p.q = upload(pb.q), p.k = upload(pb.k), p.v = upload(pb.v);
  p.g = upload(pb.g), p.beta = upload(pb.beta), p.h0 = upload(pb.h0);
  uint16_t *o = nullptr;
  float *ht = nullptr;
  check(cudaMalloc(&o, out->o.size() * 2), "cudaMalloc");
  check(cudaMalloc(&ht, out->ht.size() * 4), "cudaMalloc");
  check(cudaMemset(o, 0xff, out->o.size() * 2), "cudaMemset"); // poison
  p.o = o, p.ht = ht;
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  char err[256];
  std::vector<float> times;
  for (int r = 0; r < reps + 1; ++r) { // the first run warms up
    check(cudaEventRecord(a, stream), "cudaEventRecord");
    if (qwen3_next_gdn_forward_cuda(&p, stream, err, sizeof err) != 0) {
      std::fprintf(stderr, "deltac demo: CUDA kernel refused the call: %s\n", err);
      std::exit(1);
    }
    check(cudaEventRecord(b, stream), "cudaEventRecord");
    check(cudaEventSynchronize(b), "kernel");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    if (r > 0) times.push_back(ms);
  }
  check(cudaMemcpy(out->o.data(), o, out->o.size() * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
  check(cudaMemcpy(out->ht.data(), ht, out->ht.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  for (const void *ptr : {p.q, p.k, p.v, (const void *)p.g, (const void *)p.beta, p.h0})
    cudaFree(const_cast<void *>(ptr));
  cudaFree(o), cudaFree(ht);
  cudaEventDestroy(a), cudaEventDestroy(b), cudaStreamDestroy(stream);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2] * 1e-3;
}

} // namespace demo
