// RUN: delta-opt %s -split-input-file -delta-select-schedule="chunk=16" -delta-lower-stages | FileCheck %s
// RUN: not delta-opt %s -split-input-file -delta-lower-stages 2>&1 | FileCheck %s --check-prefix=NOSCHED

// The chunk of the schedule reaches every chunked stage.
// CHECK-LABEL: delta.layer @c16
// CHECK: delta.kernel @c16_cpu_chunked of @c16 <target = cpu, mode = chunked, chunk = 16
// CHECK: delta.gate_cumsum chunk 16 width 1
// CHECK: delta.kkt_inverse chunk 16
// CHECK: delta.wy chunk 16
// CHECK: delta.state_scan chunk 16 {save_chunk_states = true}
// CHECK: delta.chunk_output chunk 16
// CHECK-NOT: delta.kernel
// NOSCHED: error: 'delta.layer' op has no schedule: run delta-select-schedule first
delta.layer @c16 {variant = #delta.variant<gated>, heads = 2, key_dim = 32, value_dim = 32, mode = #delta.mode<chunked>, chunk_states = true}
