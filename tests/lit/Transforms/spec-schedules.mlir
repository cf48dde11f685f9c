// Schedules written in the spec win over the defaults and the tuning
// database; command-line options still win over them; a mode override
// replaces the kernel set.
// RUN: delta-opt %s -split-input-file -delta-select-schedule | FileCheck %s --check-prefix=KEEP
// RUN: delta-opt %s -split-input-file -delta-select-schedule="tile-v=32" | FileCheck %s --check-prefix=OPT
// RUN: delta-opt %s -split-input-file -delta-select-schedule="mode=recurrent" | FileCheck %s --check-prefix=MODE
// RUN: delta-opt %s -split-input-file -delta-select-schedule="tuning-db=%inputs/tuning/good.json" | FileCheck %s --check-prefix=KEEP
// RUN: delta-opt %s -split-input-file -delta-select-schedule -delta-lower-stages | FileCheck %s --check-prefix=LOWER

// KEEP-LABEL: delta.layer @given
// KEEP-SAME: schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 32 : i64}, max_tokens = 0, source = "spec">, #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 16 : i64}, max_tokens = 4, source = "spec">]
// OPT-LABEL: delta.layer @given
// OPT-SAME: schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 32 : i64}, max_tokens = 0, source = "spec">, #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32 : i64}, max_tokens = 4, source = "override">]
// MODE-LABEL: delta.layer @given
// MODE-SAME: schedules = [#delta.schedule<target = cpu, family = "cpu_decode", knobs = {tile_v = 32 : i64}, max_tokens = 1, source = "default">, #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 16 : i64}, max_tokens = 0, source = "spec">]
// LOWER: delta.kernel @given_cpu_chunked of @given <target = cpu, family = "cpu_chunked", knobs = {chunk = 32 : i64}
// LOWER: delta.kernel @given_cpu_recurrent of @given <target = cpu, family = "cpu_recurrent", {{.*}} max_tokens = 4,
delta.layer @given {variant = #delta.variant<gated>, heads = 16, v_heads = 32, key_dim = 128, value_dim = 128, in_dtype = #delta.dtype<bf16>,
  schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 32}, max_tokens = 0, source = "spec">,
               #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 16}, max_tokens = 4, source = "spec">]}

// -----

// A kernel written in the spec whose graph is what lowering builds is kept
// (not duplicated), fused or not.
// LOWER-LABEL: delta.layer @handwritten
// LOWER: delta.kernel @handwritten_cpu_recurrent of @handwritten
// LOWER: delta.fused over "tokens"
// LOWER-NOT: delta.kernel
delta.layer @handwritten {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, mode = #delta.mode<recurrent>,
  schedules = [#delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32}, max_tokens = 0, source = "spec">]}
delta.kernel @handwritten_cpu_recurrent of @handwritten <target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32}, max_tokens = 0, source = "spec"> inputs ["q", "k", "v", "beta"] outputs ["o"] {
^bb0(%q: !delta.tensor, %k: !delta.tensor, %v: !delta.tensor, %beta: !delta.tensor):
  %f:2 = delta.fused over "tokens" ["recurrent_step"] -> !delta.tensor, !delta.tensor {
    %o, %ht = delta.recurrent_step <delta> %q, %k, %v, %beta
    delta.yield %o, %ht
  }
  delta.yield %f#0
}
