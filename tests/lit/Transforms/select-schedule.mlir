// RUN: delta-opt %s -split-input-file -delta-select-schedule | FileCheck %s --check-prefix=CPU
// RUN: delta-opt %s -split-input-file -delta-select-schedule=target=cuda:sm_90a | FileCheck %s --check-prefix=CUDA
// RUN: delta-opt %s -split-input-file -delta-select-schedule=target=all | FileCheck %s --check-prefix=ALL

// mode auto follows the kernel catalogue (families_for): on the CPU
// cpu_decode for calls of at most one token (its max_tokens), then
// cpu_recurrent for every length; on CUDA cuda_recurrent for calls of at
// most kCudaAutoRecurrentMaxTokens = 16 tokens, then cuda_chunked for every
// length. Knobs are the catalogue's default_config: tile_v 32 where it
// divides V (K <= 128 for cpu_recurrent), CUDA warps from the row-group
// rule, cuda_chunked's from chunked_rules.h's chunked_default (f32 K = V =
// 128: chunk 64, tile_v 64, 8 warps, 1 stage).
// CPU-LABEL: delta.layer @auto_mode
// CPU-SAME: schedules = [#delta.schedule<target = cpu, family = "cpu_decode", knobs = {tile_v = 32 : i64}, max_tokens = 1, source = "default">, #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32 : i64}, max_tokens = 0, source = "default">]
// CPU-NOT: cpu_chunked
// CUDA-LABEL: delta.layer @auto_mode
// CUDA-SAME: schedules = [#delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 32 : i64, warps = 2 : i64}, max_tokens = 16, source = "default">, #delta.schedule<target = sm_90a, family = "cuda_chunked", knobs = {chunk = 64 : i64, fuse = 0 : i64, scan = 0 : i64, split = 0 : i64, stages = 1 : i64, tile_v = 64 : i64, warps = 8 : i64}, max_tokens = 0, source = "default">]
// ALL-LABEL: delta.layer @auto_mode
// ALL-SAME: schedules = [#delta.schedule<target = cpu, family = "cpu_decode", {{.*}}, #delta.schedule<target = cpu, family = "cpu_recurrent", {{.*}}, #delta.schedule<target = sm_90a, family = "cuda_recurrent", {{.*}}, max_tokens = 16, {{.*}}, #delta.schedule<target = sm_90a, family = "cuda_chunked", {{.*}}, max_tokens = 0, source = "default">]
delta.layer @auto_mode {variant = #delta.variant<gated>, heads = 16, v_heads = 32, key_dim = 128, value_dim = 128}

// -----

// decode_tokens is information only: cpu_decode still takes 1-token calls.
// K = 256: cpu_recurrent's default tile_v is 16.
// CPU-LABEL: delta.layer @decode4
// CPU-SAME: schedules = [#delta.schedule<target = cpu, family = "cpu_decode", knobs = {tile_v = 32 : i64}, max_tokens = 1, source = "default">, #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 16 : i64}, max_tokens = 0, source = "default">]
delta.layer @decode4 {variant = #delta.variant<kda>, heads = 4, key_dim = 256, value_dim = 32, decode_tokens = 4}

// -----

// mode recurrent: the catalogue's recurrent families (decode first).
// CPU-LABEL: delta.layer @recurrent_mode
// CPU-SAME: schedules = [#delta.schedule<target = cpu, family = "cpu_decode", knobs = {tile_v = 32 : i64}, max_tokens = 1, source = "default">, #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32 : i64}, max_tokens = 0, source = "default">]
// CUDA-LABEL: delta.layer @recurrent_mode
// CUDA-SAME: schedules = [#delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 32 : i64, warps = 2 : i64}, max_tokens = 0, source = "default">]
delta.layer @recurrent_mode {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, mode = #delta.mode<recurrent>}

// -----

// A value dim that 32 does not divide: 16-column tiles; K = 16 gives two
// row groups: 2 warps.
// CUDA-LABEL: delta.layer @small_v
// CUDA-SAME: knobs = {tile_v = 16 : i64, warps = 2 : i64}
delta.layer @small_v {variant = #delta.variant<delta>, heads = 1, key_dim = 16, value_dim = 16, mode = #delta.mode<recurrent>}

// -----

// Schedules already on the layer (from the spec or an earlier run) are
// kept for the targets asked for (so re-running is idempotent); others are
// dropped.
// CPU-LABEL: delta.layer @rerun
// CPU-SAME: schedules = [#delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 16 : i64}, max_tokens = 0, source = "override">]
// CUDA-LABEL: delta.layer @rerun
// CUDA-SAME: schedules = [#delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 32 : i64, warps = 2 : i64}, max_tokens = 0, source = "default">]
delta.layer @rerun {variant = #delta.variant<delta>, heads = 1, key_dim = 32, value_dim = 32, mode = #delta.mode<recurrent>,
  schedules = [#delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 16}, max_tokens = 0, source = "override">]}

// -----

// Auto on CUDA for K = 64, V = 256: once beyond the chunked kernel (V at most
// about 2K), now chunked beyond 16 tokens like every shape (the scan reads
// raw v rows). Where a call cannot run chunked (a state pool) the runtime
// falls back to the recurrence: tests/catalogue, FamilyOrderPerDeviceAndMode.
// CUDA-LABEL: delta.layer @wide_v
// CUDA-SAME: schedules = [#delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 32 : i64, warps = 2 : i64}, max_tokens = 16, source = "default">, #delta.schedule<target = sm_90a, family = "cuda_chunked", knobs = {chunk = 64 : i64, fuse = 0 : i64, scan = 0 : i64, split = 0 : i64, stages = 1 : i64, tile_v = 64 : i64, warps = 8 : i64}, max_tokens = 0, source = "default">]
delta.layer @wide_v {variant = #delta.variant<gated>, heads = 4, key_dim = 64, value_dim = 256}

// -----

// Auto on CUDA with f16 inputs: the generated code converts f16 q/k/v to
// f32 around the call (templateInType), so the f32 kernels and defaults.
// CUDA-LABEL: delta.layer @half
// CUDA-SAME: schedules = [#delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 32 : i64, warps = 2 : i64}, max_tokens = 16, source = "default">, #delta.schedule<target = sm_90a, family = "cuda_chunked", knobs = {chunk = 64 : i64, fuse = 0 : i64, scan = 0 : i64, split = 0 : i64, stages = 1 : i64, tile_v = 64 : i64, warps = 8 : i64}, max_tokens = 0, source = "default">]
delta.layer @half {variant = #delta.variant<gated>, heads = 4, key_dim = 128, value_dim = 128, in_dtype = #delta.dtype<f16>}

// -----

// Beta in (0, 2) on bf16 inputs: cuda_chunked runs scan 5 (two-term
// products, unsplit, unfused: deltac::call_knobs) whatever its sources say.
// CUDA-LABEL: delta.layer @beta_two_bf16
// CUDA-SAME: family = "cuda_chunked", knobs = {chunk = 64 : i64, fuse = 0 : i64, scan = 5 : i64, split = 1 : i64
delta.layer @beta_two_bf16 {variant = #delta.variant<delta>, heads = 4, key_dim = 128, value_dim = 128, in_dtype = #delta.dtype<bf16>, beta_range = #delta.beta_range<zero_two>}
