// RUN: delta-opt %s -split-input-file -delta-select-schedule="chunk=16" -delta-lower-stages | FileCheck %s
// RUN: not delta-opt %s -split-input-file -delta-lower-stages 2>&1 | FileCheck %s --check-prefix=NOSCHED

// The chunk of the schedule reaches every chunked stage.
// CHECK-LABEL: delta.layer @c16
// CHECK: delta.kernel @c16_cpu_chunked of @c16 <target = cpu, family = "cpu_chunked", knobs = {chunk = 16 : i64}
// CHECK-SAME: outputs ["o", "chunk_states"]
// CHECK: %g_cum = delta.gate_cumsum %g chunk 16 width 1
// CHECK: %A = delta.kkt_inverse %k, %beta decay %g_cum chunk 16
// CHECK: %w, %u = delta.wy %A, %k, %v, %beta decay %g_cum chunk 16
// CHECK: %h, %v_new, %ht = delta.state_scan %k, %w, %u decay %g_cum chunk 16 {save_chunk_states = true}
// CHECK: %o = delta.chunk_output %q, %k, %v_new, %h decay %g_cum chunk 16
// The chunk states are the state_scan's h.
// CHECK: delta.yield %o, %h
// CHECK-NOT: delta.kernel
// NOSCHED: error: 'delta.layer' op has no schedule: run delta-select-schedule first
delta.layer @c16 {variant = #delta.variant<gated>, heads = 2, key_dim = 32, value_dim = 32, mode = #delta.mode<chunked>, chunk_states = true}
