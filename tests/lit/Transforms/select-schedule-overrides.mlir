// RUN: delta-opt %s -delta-select-schedule="mode=chunked chunk=64 tile-k=64 stages=2" | FileCheck %s --check-prefix=CHUNK
// RUN: delta-opt %s -delta-select-schedule="tile-k=64 stages=2" | FileCheck %s --check-prefix=AUTO
// RUN: delta-opt %s -delta-select-schedule="mode=recurrent" | FileCheck %s --check-prefix=REC
// RUN: delta-opt %s -delta-select-schedule="target=cuda:sm_90a warps=8 tile-v=64" | FileCheck %s --check-prefix=WARPS
// RUN: delta-opt %s -delta-select-schedule="mode=chunked chunk=16" | FileCheck %s --check-prefix=MODE
// RUN: delta-opt %s -delta-select-schedule="target=sm_90a" | FileCheck %s --check-prefix=SHORT

// Explicit options win and mark the schedule as "override".
// CHUNK: schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 64, tile_k = 64, tile_v = 128, warps = 1, stages = 2, max_tokens = 0, source = "override">]

// They apply to the kernels of the layer's mode: auto on CPU is the one
// unbounded recurrent kernel (deltac::kCpuRecurrentMaxTokens = 0).
// AUTO: schedules = [#delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 64, tile_v = 128, warps = 1, stages = 2, max_tokens = 0, source = "override">]

// A mode override replaces the layer's mode.
// REC: delta.layer @layer
// REC-SAME: mode = #delta.mode<recurrent>
// REC-SAME: schedules = [#delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 128, tile_v = 128, warps = 1, stages = 1, max_tokens = 0, source = "default">]

// WARPS: schedules = [#delta.schedule<target = sm_90a, mode = recurrent, chunk = 0, tile_k = 128, tile_v = 64, warps = 8, stages = 1, max_tokens = 0, source = "override">]

// MODE: mode = #delta.mode<chunked>
// MODE-SAME: schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 16, tile_k = 128, tile_v = 128, warps = 1, stages = 1, max_tokens = 0, source = "override">]

// SHORT: #delta.schedule<target = sm_90a, mode = recurrent
delta.layer @layer {variant = #delta.variant<gated>, heads = 16, v_heads = 32, key_dim = 128, value_dim = 128, in_dtype = #delta.dtype<bf16>}
