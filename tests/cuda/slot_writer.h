// A kernel that writes a pool's read slots late (slot_writer.cu).
#ifndef DELTAC_TESTS_CUDA_SLOT_WRITER_H
#define DELTAC_TESTS_CUDA_SLOT_WRITER_H

#include <cuda_runtime.h>

#include <cstdint>

namespace deltac::test {

// One block on `stream`: lets its PDL dependents launch at once (sm_90),
// waits delay_ns, then copies src[0..n) to dst[0..n) (device pointers).
cudaError_t launch_slot_writer(int32_t* dst, const int32_t* src, int n, unsigned delay_ns,
                               cudaStream_t stream);

}  // namespace deltac::test

#endif  // DELTAC_TESTS_CUDA_SLOT_WRITER_H
