// RUN: delta-opt %s -split-input-file -delta-select-schedule | FileCheck %s --check-prefix=CPU
// RUN: delta-opt %s -split-input-file -delta-select-schedule=target=cuda:sm_90a | FileCheck %s --check-prefix=CUDA
// RUN: delta-opt %s -split-input-file -delta-select-schedule=target=all | FileCheck %s --check-prefix=ALL

// mode auto follows deltac::kCpuRecurrentMaxTokens (runtime/include/deltac/
// schedule.h), now 0 = no limit: one unbounded recurrent schedule on CPU
// (the recurrence measured faster at every length), as on CUDA. If the
// constant changes, this test must change with it.
// CPU-LABEL: delta.layer @auto_mode
// CPU-SAME: schedules = [#delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 128, tile_v = 128, warps = 1, stages = 1, max_tokens = 0, source = "default">]
// CPU-NOT: mode = chunked
// CUDA-LABEL: delta.layer @auto_mode
// CUDA-SAME: schedules = [#delta.schedule<target = sm_90a, mode = recurrent, chunk = 0, tile_k = 128, tile_v = 32, warps = 4, stages = 1, max_tokens = 0, source = "default">]
// ALL-LABEL: delta.layer @auto_mode
// ALL-SAME: schedules = [#delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 128, tile_v = 128, warps = 1, stages = 1, max_tokens = 0, source = "default">, #delta.schedule<target = sm_90a, mode = recurrent
delta.layer @auto_mode {variant = #delta.variant<gated>, heads = 16, v_heads = 32, key_dim = 128, value_dim = 128}

// -----

// decode_tokens is information only: the bound stays kCpuRecurrentMaxTokens.
// CPU-LABEL: delta.layer @decode4
// CPU-SAME: schedules = [#delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 64, tile_v = 32, warps = 1, stages = 1, max_tokens = 0, source = "default">]
delta.layer @decode4 {variant = #delta.variant<kda>, heads = 4, key_dim = 64, value_dim = 32, decode_tokens = 4}

// -----

// mode recurrent: one unbounded recurrent schedule per target.
// CPU-LABEL: delta.layer @recurrent_mode
// CPU-SAME: schedules = [#delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 64, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "default">]
// CUDA-LABEL: delta.layer @recurrent_mode
// CUDA-SAME: schedules = [#delta.schedule<target = sm_90a, mode = recurrent, chunk = 0, tile_k = 64, tile_v = 32, warps = 4, stages = 1, max_tokens = 0, source = "default">]
// ALL-LABEL: delta.layer @recurrent_mode
// ALL-SAME: schedules = [#delta.schedule<target = cpu, mode = recurrent
// ALL-SAME: #delta.schedule<target = sm_90a, mode = recurrent
delta.layer @recurrent_mode {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, mode = #delta.mode<recurrent>}

// -----

// Small value dims keep the whole V on CUDA.
// CUDA-LABEL: delta.layer @small_v
// CUDA-SAME: tile_k = 16, tile_v = 16, warps = 4
delta.layer @small_v {variant = #delta.variant<delta>, heads = 1, key_dim = 16, value_dim = 16, mode = #delta.mode<recurrent>}

// -----

// Schedules already on the layer (from the spec or an earlier run) are
// kept for the targets asked for (so re-running is idempotent); others are
// dropped.
// CPU-LABEL: delta.layer @rerun
// CPU-SAME: schedules = [#delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 256, tile_v = 256, warps = 1, stages = 1, max_tokens = 0, source = "override">]
// CUDA-LABEL: delta.layer @rerun
// CUDA-SAME: schedules = [#delta.schedule<target = sm_90a, mode = recurrent, chunk = 0, tile_k = 32, tile_v = 32, warps = 4, stages = 1, max_tokens = 0, source = "default">]
delta.layer @rerun {variant = #delta.variant<delta>, heads = 1, key_dim = 32, value_dim = 32, mode = #delta.mode<recurrent>,
  schedules = [#delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 256, tile_v = 256, warps = 1, stages = 1, max_tokens = 0, source = "override">]}
