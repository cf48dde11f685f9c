// Running the pipeline twice replaces the kernels instead of duplicating them.
// RUN: delta-opt %s -delta-select-schedule -delta-lower-stages -delta-select-schedule="mode=recurrent" -delta-lower-stages | FileCheck %s

// CHECK: delta.layer @layer
// CHECK-SAME: mode = #delta.mode<recurrent>
// CHECK-NOT: delta.kernel @layer_cpu_chunked
// CHECK: delta.kernel @layer_cpu_recurrent of @layer
// CHECK-NOT: delta.kernel
delta.layer @layer {variant = #delta.variant<gated>, heads = 4, key_dim = 64, value_dim = 64}
