/* deltac runtime: C API to run one forward call of a delta-rule layer on the
 * CPU or, when built with CUDA and a GPU is present, on the GPU. */
#ifndef DELTAC_RUNTIME_H
#define DELTAC_RUNTIME_H

#include "deltac/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum deltac_device_kind {
  DELTAC_DEVICE_AUTO = 0, /* GPU when present and a kernel exists, else CPU */
  DELTAC_DEVICE_CPU = 1,
  DELTAC_DEVICE_CUDA = 2
} deltac_device_kind;

typedef enum deltac_mode {
  DELTAC_MODE_AUTO = 0, /* deltac::default_schedule */
  DELTAC_MODE_CHUNKED = 1,
  DELTAC_MODE_RECURRENT = 2
} deltac_mode;

typedef struct deltac_options {
  int32_t device; /* deltac_device_kind */
  int32_t mode;   /* deltac_mode */
  int32_t chunk;  /* 0 (default) or 16, 32, 64; nonzero implies chunked */
  /* CUDA only: 0 = the pointers in the params are host pointers (the runtime
   * allocates device memory, copies, runs and copies back; synchronous);
   * 1 = they are device pointers (cu_seqlens too) and the kernel is enqueued
   * on cuda_stream without synchronisation. Ignored on the CPU, where
   * pointers are always host pointers. */
  int32_t device_pointers;
  void *cuda_stream; /* cudaStream_t, NULL = default stream */
} deltac_options;

/* What deltac_forward chose; filled when the call succeeds. */
typedef struct deltac_run_info {
  int32_t device; /* DELTAC_DEVICE_CPU or DELTAC_DEVICE_CUDA */
  int32_t mode;   /* DELTAC_MODE_CHUNKED or DELTAC_MODE_RECURRENT */
  int32_t chunk;  /* chunk size, 0 for recurrent */
  int32_t specialized; /* 1 when a compile-time K/V specialisation ran */
} deltac_run_info;

/* Default options: everything automatic, host pointers. */
deltac_options deltac_default_options(void);

/* Validates p (deltac::check_params) and runs it. opt may be NULL (defaults),
 * info may be NULL. Returns 0 on success, nonzero on error; the message is
 * then available from deltac_last_error(). */
int deltac_forward(const deltac_fwd_params *p, const deltac_options *opt);
int deltac_forward_info(const deltac_fwd_params *p, const deltac_options *opt,
                        deltac_run_info *info);

/* Message of the last failing call on this thread ("" if none). */
const char *deltac_last_error(void);

/* 1 when built with CUDA and a CUDA device is usable, else 0. Never fails on
 * machines without a GPU driver. */
int deltac_cuda_available(void);

/* 1 when a CUDA kernel exists for this variant, K, V and in_dtype. */
int deltac_cuda_supports(int32_t variant, int32_t K, int32_t V,
                         int32_t in_dtype);

#ifdef __cplusplus
}
#endif

#endif /* DELTAC_RUNTIME_H */
