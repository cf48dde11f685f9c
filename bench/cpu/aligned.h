// 64-byte aligned float storage for the CPU benchmarks, as inference
// frameworks allocate tensors (PyTorch; ggml's CPU buffers). A plain
// std::vector puts large blocks 16 bytes past a cache line, and a state so
// placed costs decode ~1.5x (every 64-byte row vector spans two lines).
#ifndef DELTAC_BENCH_ALIGNED_H
#define DELTAC_BENCH_ALIGNED_H

#include <cstddef>
#include <new>
#include <vector>

namespace deltac::bench {

template <class T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <class U>
  Aligned64(const Aligned64<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64)));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  bool operator==(const Aligned64&) const { return true; }
  bool operator!=(const Aligned64&) const { return false; }
};
using Buf = std::vector<float, Aligned64<float>>;

}  // namespace deltac::bench

#endif  // DELTAC_BENCH_ALIGNED_H
