// Device memory for the runtime's GPU tests (only files built with CUDA).
#ifndef DELTAC_TESTS_RUNTIME_TEST_CUDA_UTIL_H
#define DELTAC_TESTS_RUNTIME_TEST_CUDA_UTIL_H

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace deltac {
namespace test {

// Device memory freed at scope end.
struct DevMem {
  void *ptr = nullptr;
  explicit DevMem(size_t bytes) { EXPECT_EQ(cudaMalloc(&ptr, bytes), cudaSuccess); }
  DevMem(DevMem &&o) noexcept : ptr(o.ptr) { o.ptr = nullptr; }
  DevMem(const DevMem &) = delete;
  DevMem &operator=(const DevMem &) = delete;
  ~DevMem() {
    if (ptr)
      cudaFree(ptr);
  }
};

// A device copy of x (one spare byte, so that an empty x still allocates).
template <class T> DevMem upload(const std::vector<T> &x) {
  DevMem m(x.size() * sizeof(T) + 1);
  EXPECT_EQ(cudaMemcpy(m.ptr, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return m;
}

} // namespace test
} // namespace deltac

#endif // DELTAC_TESTS_RUNTIME_TEST_CUDA_UTIL_H
