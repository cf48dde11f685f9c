// RUN: delta-opt %s -split-input-file -delta-select-schedule="target=all tuning-db=%inputs/tuning/good.json" | FileCheck %s
// RUN: delta-opt %s -split-input-file -delta-select-schedule="target=cpu mode=chunked tuning-db=%inputs/tuning/good.json" | FileCheck %s --check-prefix=CHK
// RUN: delta-opt %s -split-input-file -delta-select-schedule="target=all tuning-db=%inputs/tuning/good.json tile-k=32 chunk=64" | FileCheck %s --check-prefix=OVR
// RUN: delta-opt %s -split-input-file -delta-select-schedule="target=cpu mode=chunked tuning-db=%inputs/tuning/good.json tile-k=32 chunk=64" | FileCheck %s --check-prefix=OVRC

// Matching records (target, variant, K, V, in_dtype, mode) replace the
// defaults of the kernels the mode asks for (auto on CPU: the unbounded
// recurrent kernel, deltac::kCpuRecurrentMaxTokens = 0); a record without
// "mode" serves both modes.
// CHECK-LABEL: delta.layer @gdn
// CHECK-SAME: schedules = [#delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 128, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "tuning-db">, #delta.schedule<target = sm_90a, mode = recurrent, chunk = 0, tile_k = 128, tile_v = 16, warps = 2, stages = 3, max_tokens = 0, source = "tuning-db">]
// CHK-LABEL: delta.layer @gdn
// CHK-SAME: schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 32, tile_k = 64, tile_v = 128, warps = 1, stages = 1, max_tokens = 0, source = "tuning-db">]
// Explicit options win over the database.
// OVR-LABEL: delta.layer @gdn
// OVR-SAME: #delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 32, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "override">
// OVR-SAME: #delta.schedule<target = sm_90a, mode = recurrent, chunk = 0, tile_k = 32, tile_v = 16, warps = 2, stages = 3, max_tokens = 0, source = "override">
// OVRC-LABEL: delta.layer @gdn
// OVRC-SAME: schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 64, tile_k = 32, tile_v = 128, warps = 1, stages = 1, max_tokens = 0, source = "override">]
delta.layer @gdn {variant = #delta.variant<gated>, heads = 16, v_heads = 32, key_dim = 128, value_dim = 128, in_dtype = #delta.dtype<bf16>}

// -----

// A different in_dtype does not match: defaults (chunk
// deltac::kCpuDefaultChunk = 32).
// CHECK-LABEL: delta.layer @gdn_f32
// CHECK-SAME: #delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 128, tile_v = 128, warps = 1, stages = 1, max_tokens = 0, source = "default">
// CHK-LABEL: delta.layer @gdn_f32
// CHK-SAME: schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 32, tile_k = 128, tile_v = 128, warps = 1, stages = 1, max_tokens = 0, source = "default">]
delta.layer @gdn_f32 {variant = #delta.variant<gated>, heads = 16, v_heads = 32, key_dim = 128, value_dim = 128, in_dtype = #delta.dtype<f32>}

// -----

// KDA record without a mode: its chunk applies to the chunked schedule only.
// CHECK-LABEL: delta.layer @kda
// CHECK-SAME: #delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 64, tile_v = 64, warps = 1, stages = 2, max_tokens = 0, source = "tuning-db">
// No CUDA record for it: defaults.
// CHECK-SAME: #delta.schedule<target = sm_90a, mode = recurrent, chunk = 0, tile_k = 64, tile_v = 32, warps = 4, stages = 1, max_tokens = 0, source = "default">
// CHK-LABEL: delta.layer @kda
// CHK-SAME: schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 16, tile_k = 64, tile_v = 64, warps = 1, stages = 2, max_tokens = 0, source = "tuning-db">]
delta.layer @kda {variant = #delta.variant<kda>, heads = 2, key_dim = 64, value_dim = 64}
