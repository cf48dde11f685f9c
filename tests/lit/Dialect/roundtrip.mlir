// RUN: delta-opt %s -split-input-file | FileCheck %s
// RUN: delta-opt %s -split-input-file | delta-opt -split-input-file | FileCheck %s

// Minimal layer: defaults are filled in and not printed.
// CHECK-LABEL: delta.layer @minimal
// CHECK-SAME: heads = 4 : i64
// CHECK-SAME: key_dim = 64 : i64
// CHECK-SAME: value_dim = 64 : i64
// CHECK-SAME: variant = #delta.variant<delta>
// CHECK-NOT: v_heads
delta.layer @minimal {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}

// -----

// Every attribute set.
// CHECK-LABEL: delta.layer @everything
// CHECK-SAME: beta_range = #delta.beta_range<zero_two>
// CHECK-SAME: beta_sigmoid = true
// CHECK-SAME: chunk_states = true
// CHECK-SAME: decode_tokens = 8 : i64
// CHECK-SAME: final_state = true
// CHECK-SAME: gate_in_kernel = true
// CHECK-SAME: in_dtype = #delta.dtype<bf16>
// CHECK-SAME: initial_state = true
// CHECK-SAME: mode = #delta.mode<chunked>
// CHECK-SAME: out_dtype = #delta.dtype<f32>
// CHECK-SAME: qk_l2norm = true
// CHECK-SAME: scale = 1.250000e-01 : f64
// CHECK-SAME: state_dtype = #delta.dtype<bf16>
// CHECK-SAME: state_layout = #delta.layout<vk>
// CHECK-SAME: v_heads = 32 : i64
// CHECK-SAME: variant = #delta.variant<gated>
// CHECK-SAME: varlen = true
delta.layer @everything {
  variant = #delta.variant<gated>, heads = 16, v_heads = 32,
  key_dim = 64, value_dim = 256,
  in_dtype = #delta.dtype<bf16>, out_dtype = #delta.dtype<f32>,
  state_dtype = #delta.dtype<bf16>, state_layout = #delta.layout<vk>,
  scale = 0.125 : f64, beta_range = #delta.beta_range<zero_two>,
  qk_l2norm = true, beta_sigmoid = true, gate_in_kernel = true,
  initial_state = true, final_state = true, chunk_states = true,
  varlen = true, decode_tokens = 8, mode = #delta.mode<chunked>
}

// -----

// KDA, f16 inputs, recurrent mode.
// CHECK-LABEL: delta.layer @kda
// CHECK-SAME: in_dtype = #delta.dtype<f16>
// CHECK-SAME: mode = #delta.mode<recurrent>
// CHECK-SAME: variant = #delta.variant<kda>
delta.layer @kda {variant = #delta.variant<kda>, heads = 32, key_dim = 128, value_dim = 128, in_dtype = #delta.dtype<f16>, mode = #delta.mode<recurrent>}

// -----

// Two layers in one module; an explicit default (mode auto) is elided.
// CHECK-LABEL: delta.layer @first
// CHECK-NOT: mode
// CHECK-LABEL: delta.layer @second
delta.layer @first {variant = #delta.variant<delta>, heads = 1, key_dim = 16, value_dim = 16, mode = #delta.mode<auto>}
delta.layer @second {variant = #delta.variant<delta>, heads = 1, key_dim = 256, value_dim = 256}

// -----

// A layer with schedules attached.
// CHECK-LABEL: delta.layer @scheduled
// CHECK-SAME: schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 32, tile_k = 64, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "override">]
delta.layer @scheduled {variant = #delta.variant<delta>, heads = 2, key_dim = 64, value_dim = 64, mode = #delta.mode<chunked>,
  schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 32, tile_k = 64, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "override">]}

// -----

// Kernel and stage ops parse and print.
// CHECK-LABEL: delta.kernel @k of @l <target = cpu, mode = chunked, chunk = 16
// CHECK-NEXT: delta.convert "q" <f16> to <f32>
// CHECK-NEXT: delta.beta_sigmoid <zero_one>
// CHECK-NEXT: delta.gate width 32
// CHECK-NEXT: delta.fused over "chunks" ["qk_l2norm", "gate_cumsum", "kkt_inverse", "wy", "state_scan", "chunk_output"] {
// CHECK-NEXT: delta.qk_l2norm
// CHECK-NEXT: delta.gate_cumsum chunk 16 width 32
// CHECK-NEXT: delta.kkt_inverse chunk 16
// CHECK-NEXT: delta.wy chunk 16
// CHECK-NEXT: delta.state_scan chunk 16 {save_chunk_states = false}
// CHECK-NEXT: delta.chunk_output chunk 16
// CHECK-NEXT: }
// CHECK-NEXT: delta.convert "o" <f32> to <f16>
delta.layer @l {variant = #delta.variant<kda>, heads = 2, key_dim = 32, value_dim = 32, in_dtype = #delta.dtype<f16>}
delta.kernel @k of @l <target = cpu, mode = chunked, chunk = 16, tile_k = 32, tile_v = 32, warps = 1, stages = 1, max_tokens = 0, source = "default"> {
  delta.convert "q" <f16> to <f32>
  delta.beta_sigmoid <zero_one>
  delta.gate width 32
  delta.fused over "chunks" ["qk_l2norm", "gate_cumsum", "kkt_inverse", "wy", "state_scan", "chunk_output"] {
    delta.qk_l2norm
    delta.gate_cumsum chunk 16 width 32
    delta.kkt_inverse chunk 16
    delta.wy chunk 16
    delta.state_scan chunk 16 {save_chunk_states = false}
    delta.chunk_output chunk 16
  }
  delta.convert "o" <f32> to <f16>
}

// -----

// The recurrent step.
// CHECK-LABEL: delta.kernel @r of @l
// CHECK: delta.fused over "tokens" ["recurrent_step"] {
// CHECK-NEXT: delta.recurrent_step <delta>
delta.layer @l {variant = #delta.variant<delta>, heads = 2, key_dim = 32, value_dim = 32}
delta.kernel @r of @l <target = sm_90a, mode = recurrent, chunk = 0, tile_k = 32, tile_v = 32, warps = 4, stages = 1, max_tokens = 0, source = "default"> {
  delta.fused over "tokens" ["recurrent_step"] {
    delta.recurrent_step <delta>
  }
}
