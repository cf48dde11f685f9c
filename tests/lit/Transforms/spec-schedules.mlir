// Schedules written in the spec win over the defaults and the tuning
// database; command-line options still win over them; a mode override
// replaces the kernel set.
// RUN: delta-opt %s -split-input-file -delta-select-schedule | FileCheck %s --check-prefix=KEEP
// RUN: delta-opt %s -split-input-file -delta-select-schedule="chunk=16" | FileCheck %s --check-prefix=OPT
// RUN: delta-opt %s -split-input-file -delta-select-schedule="mode=recurrent" | FileCheck %s --check-prefix=MODE
// RUN: delta-opt %s -split-input-file -delta-select-schedule="tuning-db=%inputs/tuning/good.json" | FileCheck %s --check-prefix=KEEP
// RUN: delta-opt %s -split-input-file -delta-select-schedule -delta-lower-stages | FileCheck %s --check-prefix=LOWER

// KEEP-LABEL: delta.layer @given
// KEEP-SAME: schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 32, tile_k = 64, tile_v = 128, warps = 1, stages = 1, max_tokens = 0, source = "spec">, #delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 128, tile_v = 128, warps = 1, stages = 1, max_tokens = 4, source = "spec">]
// OPT-LABEL: delta.layer @given
// OPT-SAME: schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 16, tile_k = 64, tile_v = 128, warps = 1, stages = 1, max_tokens = 0, source = "override">, #delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 128, tile_v = 128, warps = 1, stages = 1, max_tokens = 4, source = "spec">]
// MODE-LABEL: delta.layer @given
// MODE-SAME: schedules = [#delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 128, tile_v = 128, warps = 1, stages = 1, max_tokens = 0, source = "spec">]
// LOWER: delta.kernel @given_cpu_chunked of @given <target = cpu, mode = chunked, chunk = 32,
// LOWER: delta.kernel @given_cpu_recurrent of @given <target = cpu, mode = recurrent, {{.*}} max_tokens = 4,
delta.layer @given {variant = #delta.variant<gated>, heads = 16, v_heads = 32, key_dim = 128, value_dim = 128, in_dtype = #delta.dtype<bf16>,
  schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 32, tile_k = 64, tile_v = 128, warps = 1, stages = 1, max_tokens = 0, source = "spec">,
               #delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 128, tile_v = 128, warps = 1, stages = 1, max_tokens = 4, source = "spec">]}

// -----

// A kernel written in the spec whose body is what lowering builds is kept
// (not duplicated).
// LOWER-LABEL: delta.layer @handwritten
// LOWER: delta.kernel @handwritten_cpu_recurrent of @handwritten
// LOWER-NOT: delta.kernel
delta.layer @handwritten {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, mode = #delta.mode<recurrent>,
  schedules = [#delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 64, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "spec">]}
delta.kernel @handwritten_cpu_recurrent of @handwritten <target = cpu, mode = recurrent, chunk = 0, tile_k = 64, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "spec"> {
  delta.fused over "tokens" ["recurrent_step"] {
    delta.recurrent_step <delta>
  }
}
