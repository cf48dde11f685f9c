// The CUDA kernel families of the catalogue (deltac/catalogue.h) with their
// knobs as template parameters, and what turns a KernelConfig into a
// template instance of one (K, V):
//
//   deltac::cuda::recurrent_cfg<Var, K, V, InT, BV, Warps>(p, stream, skip[, det])
//       family cuda_recurrent: tile_v = BV, warps = Warps
//   deltac::cuda::chunked_cfg<Var, K, V, InT, Chunk, BV, Warps, Stages, Split, Fuse,
//                             Scan>(p, stream, workspace, workspace_bytes[, skip, det,
//                                   route, cstates, cstates_count])
//       family cuda_chunked: chunk, tile_v = BV, warps, stages, split, fuse,
//       scan. Split: segments per sequence (0: chunked_default_split's rule
//       on the device; 1: none; 2..16 forced where it can run); Fuse: 1 the
//       block scan's fused launch where it fits (chunked_stages), 0 three
//       launches; Scan: 0 the rule (the TMA scan where it runs and the grid
//       is one wave, else the warp scan where it runs: chunked_uses_warp_scan;
//       it reads Split, not Fuse), 1 the block scan (reads BV, Warps, Stages,
//       Split, Fuse), 3 the TMA scan where it runs (reads none; sm_90a,
//       chunked_tma_runs), 4 the transposed TMA scan where it runs
//       (chunked_rules.h), else as 0. All three are
//       run-time values of the kernel: chunked_run<..., Stages>(..., split,
//       fuse, scan) takes them as arguments. With no workspace it takes
//       one from the stream-ordered allocator (cudaMallocAsync /
//       cudaFreeAsync on `stream`: no host sync, graph-capturable);
//       chunked_cfg_workspace<...>(p[, det, route, cstates]) is the size to
//       pass. cstates (null: none): the f32 state after every chunk slot e
//       < cstates_count, [e][HV][K][V] (vk: [e][HV][V][K]; a sequence's
//       chunks after those of the sequences before it), 16-byte aligned;
//       it forces split 1, scan 1, no fused launch.
//   deltac::cuda::detail::launch_chunked<Var, K, V, InT> / workspace_chunked
//   deltac::cuda::detail::launch_recurrent<Var, K, V, InT, BV, SD>
//       config -> the runtime's precompiled instance of one (K, V) (chunked:
//       the default config's chunk, tile_v, warps, stages, any split,
//       fuse and scan; recurrent: tile_v BV, the default warps, state
//       dtype SD); the runtime compiles each in its own translation unit,
//       one per entry of DELTAC_CUDA_CHUNKED_DIMS / DELTAC_CUDA_RECURRENT_DIMS
//       (and dtype, tile_v, state dtype), and switches on them in
//       runtime/src/cuda_dispatch.h
//
// p holds device pointers and passed deltac::check_params (cu_seqlens'
// contents are trusted); the config passed deltac::check_config. `skip`, when
// not null, is a device int32: the kernel reads it first and returns without
// writing anything when it is nonzero (set by a device-side check enqueued
// before, so a failed check never needs a host round trip). The chunked
// family's scan reads it (its intra-chunk kernel writes only the workspace).
//
// det (deltac_options.deterministic, batch-invariant): every choice that
// changes the arithmetic depends on the config and the spec only, never on
// the grid (sequences x heads): the chunked family runs the config's V tile
// (BV; the warp scan its widest legal one), no sequence split and no fused
// launch (split, fuse ignored); the recurrent family one kernel
// form for every call (the several-token form also for T = 1 calls, where it
// would otherwise run the packed one-token form). Each sequence's blocks then
// compute the same operations in the same order wherever it sits in a batch.
//
// route (mixed batches: prompts and decode steps in one varlen call; 0: off):
// the cuda_chunked instance runs only the sequences of more than route
// tokens (no split then), the cuda_recurrent one only those of at most route
// tokens; each reads cu_seqlens on the device and writes no o or ht of the
// other's sequences. The runtime launches both with route =
// kCudaAutoRecurrentMaxTokens on one stream.
#ifndef DELTAC_CUDA_LAUNCH_CUH
#define DELTAC_CUDA_LAUNCH_CUH

// Both families; a unit that needs one includes its header alone.
#include "deltac/cuda/launch_chunked.cuh"
#include "deltac/cuda/launch_recurrent.cuh"

#endif  // DELTAC_CUDA_LAUNCH_CUH
