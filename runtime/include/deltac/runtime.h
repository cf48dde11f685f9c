/* deltac runtime: C API to run one forward call of a delta-rule layer on the
 * CPU or, when built with CUDA and a GPU is present, on the GPU. */
#ifndef DELTAC_RUNTIME_H
#define DELTAC_RUNTIME_H

#include "deltac/params.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum deltac_device_kind {
  DELTAC_DEVICE_AUTO = 0, /* GPU when present and a kernel exists, else CPU */
  DELTAC_DEVICE_CPU = 1,
  DELTAC_DEVICE_CUDA = 2
} deltac_device_kind;

typedef enum deltac_mode {
  DELTAC_MODE_AUTO = 0, /* the catalogue's default rule (deltac/catalogue.h) */
  DELTAC_MODE_CHUNKED = 1,
  DELTAC_MODE_RECURRENT = 2
} deltac_mode;

/* Bits of the checking mode's error flag (deltac_options.check_flag): which
 * input failed the device-side value check. */
typedef enum deltac_check_bit {
  DELTAC_CHECK_Q = 1,          /* q: inf or NaN */
  DELTAC_CHECK_K = 2,          /* k: inf or NaN */
  DELTAC_CHECK_V = 4,          /* v: inf or NaN */
  DELTAC_CHECK_H0 = 8,         /* h0: inf or NaN */
  DELTAC_CHECK_G = 16,         /* g: NaN or > 0 (-inf is allowed: a reset) */
  DELTAC_CHECK_BETA = 32,      /* beta: NaN or outside [0, 1] / [0, 2] */
  DELTAC_CHECK_CU_SEQLENS = 64, /* cu_seqlens: [0] != 0, decreasing, [N] != T */
  /* read_slots / write_slots / accepted break params.h's pool rules (slot out
   * of range, a slot written twice or read while another sequence writes it
   * in place, accepted outside [0, len], more than DELTAC_MAX_DECODE_TOKENS
   * tokens with state_steps or accepted) */
  DELTAC_CHECK_SLOTS = 128
} deltac_check_bit;

/* A kernel config by name: a family of the kernel catalogue
 * (deltac/catalogue.h: "cpu_recurrent", "cpu_decode", "cpu_chunked",
 * "cuda_recurrent") and its knob values, 0 for knobs the family does not
 * read. What the autotuner times, and a way to pin a schedule. */
typedef struct deltac_kernel_config {
  const char *family; /* NULL or "" = none */
  int32_t chunk, tile_k, tile_v, warps, stages, split;
  /* CPU families: the instruction-set instance to run ("generic", "avx2",
   * "avx512"; no wider than the CPU's or DELTAC_CPU_ISA's); NULL or "" =
   * the catalogue's per-ISA rule (deltac::cpu_isa_for). */
  const char *isa;
  /* cuda_chunked's knob fuse (after isa: the fields above keep their
   * offsets within this struct; deltac_options' later fields moved, so code
   * built against an older header must be rebuilt); split 0 there is the
   * kernel's own rule. */
  int32_t fuse;
  /* cuda_chunked's knob scan (cuda::kChunkedScans, chunked_rules.h): 0 the
   * kernel's rule, 1 the block scan, 3 / 4 the TMA scans (sm_90a; 4 reads
   * split as warm-up segments for gated: docs/performance.md), 5 the block
   * scan with two-term products, unsplit (delta / GDN with 16-bit inputs:
   * what calls with allow_neg_eigval run, whatever the config says). */
  int32_t scan;
} deltac_kernel_config;

typedef struct deltac_options {
  int32_t device; /* deltac_device_kind */
  int32_t mode;   /* deltac_mode */
  int32_t chunk;  /* 0 (default) or 16, 32, 64; nonzero implies chunked and
                     wins over the tuning database */
  /* CUDA only: 0 = the pointers in the params are host pointers (the runtime
   * allocates device memory, copies, runs and copies back; synchronous);
   * 1 = they are device pointers (cu_seqlens too) and everything is enqueued
   * on cuda_stream without any synchronisation or host copy (graph-
   * capturable). Ignored on the CPU, where pointers are always host
   * pointers. With device pointers the contents of cu_seqlens are not read
   * on the host: the caller guarantees cu_seqlens[0] = 0, non-decreasing,
   * cu_seqlens[N] = T, or turns on check_values. */
  int32_t device_pointers;
  void *cuda_stream; /* cudaStream_t, NULL = default stream */
  /* Checking mode (0 = off, the default; 1 = on): before running, validate
   * the VALUES of the inputs: q, k, v, h0 finite; g <= 0 or -inf (a reset),
   * never NaN; beta in [0, 1] ([0, 2] with allow_neg_eigval); cu_seqlens
   * starts at 0, is non-decreasing and ends at T. Host pointers (CPU, or
   * CUDA with device_pointers = 0): checked on the host, a failure is an
   * error naming the tensor and element, nothing runs. Device pointers:
   * checked by a small kernel enqueued on cuda_stream before the forward
   * kernel; it ORs deltac_check_bit values into *check_flag, and the forward
   * kernel reads the flag first and writes nothing when it is nonzero. No
   * host synchronisation: read the flag when convenient (after syncing the
   * stream), e.g. with deltac_check_flag_string. */
  int32_t check_values;
  /* 1 = beta may be in [0, 2] (negative eigenvalues): the checking mode's
   * bound, and on CUDA with 16-bit delta / GDN inputs the chunked kernel's scan 5
   * (two-term products: near 2 the state does not decay and the other
   * scans' rounding error grows with the length). */
  int32_t allow_neg_eigval;
  /* Checking mode with device pointers: a device int32 the caller owns and
   * zeroes (e.g. cudaMemsetAsync on cuda_stream) before the first call. The
   * runtime only ORs bits into it, so one flag can guard a sequence of calls:
   * after a failure every later forward kernel on it is skipped. Required
   * there (NULL is an error); ignored otherwise. */
  int32_t *check_flag;
  /* A config to run instead of the default rule and the tuning database
   * (family NULL or "", the default: none). It must be legal for the call
   * (deltac::check_config: family fits the problem, knob values listed,
   * tile_v divides V, ...) and precompiled in this runtime; its family's
   * device must be options.device (auto: the family's device), options.mode
   * auto or the family's mode, options.chunk 0. Anything else is an error
   * naming the field; nothing runs. */
  deltac_kernel_config config;
  /* CUDA with device pointers: a device workspace for kernels that need one
   * (the chunked family, and calls run padded: no instance for their K, V),
   * at least deltac_workspace_size() bytes (asked with the same params:
   * the padded buffers depend on which of h0, ht, state_steps are set), 256-byte
   * aligned. NULL (the default): the runtime takes it from the stream-
   * ordered allocator (cudaMallocAsync / cudaFreeAsync on cuda_stream: no
   * host synchronisation, graph-capturable). */
  void *workspace;
  size_t workspace_bytes;
  /* Batch-invariant (deterministic) serving: 0 (the default) = off; 1 = a
   * sequence's outputs and final state are bitwise identical whether it runs
   * alone or at any position of any batch or varlen batch (same spec: variant,
   * dims, dtypes, layout, options). Every choice that changes the arithmetic
   * then depends on the spec and the sequence's own length only: mode auto
   * picks each sequence's family by its own length (CUDA: a varlen call is a
   * mixed batch, see below; CPU: cpu_recurrent for every length, never
   * cpu_decode), the tuning database is not consulted (the default config
   * runs; options.config and options.chunk still win), the CUDA chunked
   * kernel runs its widest V tile and no sequence split, and the CUDA
   * recurrent kernel its wide V tile and one kernel form for every T. Costs
   * speed where a batch is too small to fill the GPU (H200: 1.3-2.3x for one
   * long sequence); docs/performance.md, "Batch-invariant mode". Other values
   * are an error.
   *
   * Mixed batches (CUDA, mode auto, cu_seqlens, no options.config or chunk):
   * one varlen call may hold decode steps and prompts. When the chunked family
   * is chosen (the longest sequence, or T with device cu_seqlens, is over
   * kCudaAutoRecurrentMaxTokens = 16) and the call has sequences of at most 16
   * tokens (device cu_seqlens: assumed), the recurrent kernel runs those and
   * the chunked kernel the others, two launches on the stream, each reading
   * cu_seqlens on the device and writing only its own sequences' o and ht; no
   * host sync. deltac_run_info names the chunked config and its note the
   * recurrent one. */
  int32_t deterministic;
  /* Chunk-end states (NULL, the default: none): f32, the state after each
   * chunk's last token, [chunks, HV, K, V] ([chunks, HV, V, K] for the VK
   * layout), in order of sequence, then chunk; a sequence of len tokens has
   * ceil(len / C) chunks (its last one's state is its final state), C being
   * options.chunk or options.config.chunk, one of which must be set (the
   * buffer's size depends on it); chunk_states_count says how many entries
   * the buffer holds (deltac_chunk_states_count gives the count a call
   * needs). Needs an f32 state and a chunked family: cpu_chunked runs its
   * kernel chunk by chunk; cuda_chunked's block scan writes them (the
   * config's split, scan and fuse run as 1, 1 and 0, or with
   * allow_neg_eigval on 16-bit delta / GDN inputs as 1, 5 and 0; K, V with no
   * precompiled instance run on the CPU under device auto, need
   * options.config under device cuda: a padded run is refused).
   * With device pointers: device memory, 16-byte aligned. */
  float *chunk_states;
  int64_t chunk_states_count;
  /* Saved states for the backward (NULL, the default: none): what the
   * chunked CUDA backward would otherwise recompute, so that
   * deltac_backward given the same buffer (deltac_bwd_params.saved_states)
   * skips that scan: a memory / time option (the buffer lives from the
   * forward to the backward). Device memory (options.device_pointers),
   * 256-byte aligned, at least deltac_saved_states_size() bytes; offered for
   * bf16 inputs, delta or gated, K = 64 or 128, V a multiple of 32 up to
   * 256 (deltac/backward_rules.h: bwd_saves_states, the layout). The forward
   * zeroes its header flag and its kernel sets it where it writes the states
   * (the transposed TMA scan of cuda_chunked, sm_90a, at the call's own dims,
   * no mixed-batch split: a call with it runs every sequence chunked); where
   * the flag stays 0 the backward fills the buffer itself, so any call may
   * pass one. */
  void *saved_states;
  size_t saved_states_bytes;
} deltac_options;

/* What deltac_forward ran; filled when the call succeeds. */
typedef struct deltac_run_info {
  int32_t device; /* DELTAC_DEVICE_CPU or DELTAC_DEVICE_CUDA */
  int32_t mode;   /* DELTAC_MODE_CHUNKED or DELTAC_MODE_RECURRENT */
  int32_t chunk;  /* chunk size, 0 for recurrent */
  int32_t specialized; /* 1 when a compile-time K/V specialisation ran */
  /* The kernel family (catalogue name: "cpu_recurrent", "cpu_decode",
   * "cpu_chunked", "cuda_recurrent"; static storage) and its knob values
   * (0 for knobs the family does not read). */
  const char *family;
  int32_t tile_k, tile_v, warps, stages, split;
  int32_t tuned; /* 1 when a tuning-database record chose the config */
  /* "" or one line about the choice: a tuning database that could not be
   * loaded, a record that is not precompiled in this runtime, or a record
   * measured on another machine or build (its "env" differs from this one:
   * never used); the default config ran instead. Valid until the next call
   * on this thread. */
  const char *note;
  /* CPU worker threads asked of the kernel: params.threads, else a tuning
   * record's "threads", else 0 (the kernel's own rule: all cores). */
  int32_t threads;
  /* CPU: the instruction set the kernel ran with ("avx512", "avx2",
   * "generic"; chosen once from cpuid, DELTAC_CPU_ISA forces one); "" on
   * CUDA. Static storage. */
  const char *isa;
  int32_t fuse; /* cuda_chunked's knob fuse (0 for other families) */
  /* cuda_chunked's knob scan as run (0 for other families; chunk states
   * and allow_neg_eigval override the config's: deltac::call_knobs): 0 is
   * the kernel's rule, so which scan ran follows deltac::cuda::
   * chunked_uses_warp_scan (chunked_rules.h), the grid (the TMA scan where
   * it runs and one wave holds it: chunked.cuh's chunked_run_plan) and the
   * device (shared memory; sm_90a for the TMA scan, scan 3) */
  int32_t scan;
} deltac_run_info;

/* Default options: everything automatic, host pointers, no checking. */
deltac_options deltac_default_options(void);

/* Validates p (deltac::check_params) and runs it. opt may be NULL (defaults),
 * info may be NULL. Returns 0 on success, nonzero on error; the message is
 * then available from deltac_last_error(). */
int deltac_forward(const deltac_fwd_params *p, const deltac_options *opt);
int deltac_forward_info(const deltac_fwd_params *p, const deltac_options *opt,
                        deltac_run_info *info);

/* Chunk-end state entries deltac_forward(p, opt) writes into
 * options.chunk_states: the sum over sequences of ceil(len / C), C =
 * options.chunk or options.config.chunk (cu_seqlens read on the host; with
 * options.device_pointers and cu_seqlens, the bound for any split of the
 * tokens: (B * T + N * (C - 1)) / C). Returns
 * 0, or nonzero with deltac_last_error() set (neither chunk size set, bad
 * sizes or cu_seqlens: deltac/check.h's check_dims). */
int deltac_chunk_states_count(const deltac_fwd_params *p, const deltac_options *opt,
                              int64_t *count);

/* Device workspace bytes the call deltac_forward(p, opt) would need with
 * device pointers (0 when its kernel needs none) into *bytes. Returns 0, or
 * nonzero with deltac_last_error() set when the call would be refused. */
int deltac_workspace_size(const deltac_fwd_params *p, const deltac_options *opt,
                          size_t *bytes);

/* Bytes of options.saved_states for a forward of B * T tokens in `sequences`
 * sequences (N with cu_seqlens, else B), HV value heads, K, V
 * (bwd_saved_layout); 0 where passing none is the better choice: not offered
 * (bwd_saves_states: variant, K, V, in_dtype) or the backward's rule runs
 * the recurrent sweep, which reads none (bwd_use_chunked: sequences under
 * two chunks on average). */
size_t deltac_saved_states_size(int32_t variant, int64_t tokens, int64_t sequences,
                                int32_t HV, int32_t K, int32_t V, int32_t in_dtype);

/* 1 where passing saved states to such a forward (and its backward) is the
 * faster choice on the current CUDA device, else 0. Where
 * deltac_saved_states_size is not 0: the loaded tuning database's backward
 * record for the variant, K, V, in_dtype, HV and tokens per sequence
 * (tokens / sequences, rounded up; deltac-tune --backward measures both
 * choices and writes one) if it has one measured here; else the rule, as
 * measured: K = 64 and the forward's own kernel writes them there (the
 * transposed TMA scan on sm_90, K, V a precompiled chunked pair, sequences x
 * HV x V / 64 blocks leaving at most 1/8 of the SMs idle). Elsewhere the
 * backward fills the buffer itself (no faster), or at K = 128 gains nothing
 * measurable: more memory held between the calls for no time. Never fails;
 * 0 without a usable CUDA device. */
int deltac_saved_states_pay(int32_t variant, int64_t tokens, int64_t sequences, int32_t HV,
                            int32_t K, int32_t V, int32_t in_dtype);

/* Message of the last failing call on this thread ("" if none). */
const char *deltac_last_error(void);

/* 1 when built with CUDA and a CUDA device is usable, else 0. Never fails on
 * machines without a GPU driver. */
int deltac_cuda_available(void);

/* 1 when this build runs this variant, K, V and in_dtype on CUDA (out dtype
 * = in dtype, f32 state in either layout): a precompiled instance of the
 * catalogue's list, or one it runs padded (every K, V in 16..256, multiples
 * of 16); 0 otherwise (also in builds without CUDA). */
int deltac_cuda_supports(int32_t variant, int32_t K, int32_t V,
                         int32_t in_dtype);

/* The tuning database (deltac/tuning_db.h, JSON written by the autotuner).
 * When one is loaded, deltac_forward runs the record that
 * deltac::TuningDB::lookup finds for the call (device, mode, variant, K, V,
 * in_dtype, longest sequence) instead of the catalogue's default config;
 * options.chunk and options.config still win. Only records whose "env"
 * matches this machine and build (deltac_environment; records without env
 * make no claim and are used) are considered: a record from another CPU,
 * GPU, deltac version or template hash never runs, and when one would have
 * matched the call, deltac_run_info.note says so and the default rule runs.
 * A record's "threads" applies when params.threads is 0. Process-wide and
 * thread-safe.
 *
 * deltac_load_tuning_db(path) loads and validates path and makes it the
 * database of every later call; on failure it returns nonzero, the message
 * (naming the file, record and field) is in deltac_last_error(), and the
 * previous database stays. path NULL or "" unloads it (the default rule).
 * Without a call, the first deltac_forward loads the file named by the
 * environment variable DELTAC_TUNING_DB, once; if that fails, every call runs
 * the default rule and says why in deltac_run_info.note. */
int deltac_load_tuning_db(const char *path);

/* The environment this runtime matches tuning records against (JSON object
 * text, e.g. {"device": "cpu", "cpu": "<model>", "isa": "avx2 fma",
 * "cores": "2", "deltac": "0.1.0", "templates": "<hash>"}) for device
 * DELTAC_DEVICE_CPU or DELTAC_DEVICE_CUDA. A record whose "env" differs in
 * one of these keys is never used (docs/autotune.md). Static storage. */
const char *deltac_environment(int32_t device);

/* The names of the bits set in a checking-mode flag, e.g. "q, beta" ("" for
 * 0). Valid until the next call on this thread. */
const char *deltac_check_flag_string(int32_t flag);

#ifdef __cplusplus
}
#endif

#endif /* DELTAC_RUNTIME_H */

/* ---- Backward (deltac/backward.h) ---------------------------------------- */
#ifndef DELTAC_RUNTIME_BACKWARD_H
#define DELTAC_RUNTIME_BACKWARD_H

#include "deltac/backward.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checks p (each failure names the field) and computes the gradients. opt
 * may be NULL (the CPU). With options.device_pointers = 0 (device auto or
 * cpu) the pointers are host pointers and the CPU backward runs (the
 * instruction set of deltac_forward's CPU kernels). With device_pointers = 1
 * (device auto or cuda) they are CUDA device pointers (cu_seqlens too, its
 * contents trusted) and the CUDA backward is enqueued on options.cuda_stream
 * without host synchronisation: K = 64, 128 or 256, in_dtype / out_dtype f32,
 * bf16 or f16, f32 states; options.workspace (at least
 * deltac_backward_workspace_size() bytes, 256-byte aligned) or NULL for one
 * from the stream-ordered allocator. The other options are ignored.
 * Returns 0 on success, nonzero on error with the message in
 * deltac_last_error(). */
int deltac_backward(const deltac_bwd_params *p, const deltac_options *opt);

/* Device workspace bytes deltac_backward(p, opt) needs into *bytes (0 on the
 * CPU). Returns 0, or nonzero with deltac_last_error() set when the call
 * would be refused. */
int deltac_backward_workspace_size(const deltac_bwd_params *p, const deltac_options *opt,
                                   size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* DELTAC_RUNTIME_BACKWARD_H */
