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

// A layer with schedules attached: a catalogue family and its knobs.
// CHECK-LABEL: delta.layer @scheduled
// CHECK-SAME: schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 32 : i64}, max_tokens = 0, source = "override">]
delta.layer @scheduled {variant = #delta.variant<delta>, heads = 2, key_dim = 64, value_dim = 64, mode = #delta.mode<chunked>,
  schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 32}, max_tokens = 0, source = "override">]}

// -----

// Kernel and stage ops parse and print, values flowing from the layer's
// tensors (block arguments) to delta.yield.
// CHECK-LABEL: delta.kernel @k of @l <target = cpu, family = "cpu_chunked", knobs = {chunk = 16 : i64}
// CHECK-SAME: inputs ["q", "k", "v", "beta", "a", "A_log", "dt_bias"] outputs ["o"]
// CHECK-NEXT: ^bb0(%q: !delta.tensor, %k: !delta.tensor, %v: !delta.tensor, %beta: !delta.tensor, %a: !delta.tensor, %A_log: !delta.tensor, %dt_bias: !delta.tensor):
// CHECK-NEXT: %q_f32 = delta.convert "q" %q <f16> to <f32>
// CHECK-NEXT: %k_f32 = delta.convert "k" %k <f16> to <f32>
// CHECK-NEXT: %v_f32 = delta.convert "v" %v <f16> to <f32>
// CHECK-NEXT: %beta_0 = delta.beta_sigmoid <zero_one> %beta
// CHECK-NEXT: %g = delta.gate %a, %A_log, %dt_bias width 32
// A fused group's results carry the names of the values it yields.
// CHECK-NEXT: %o, %ht = delta.fused over "chunks" ["qk_l2norm", "gate_cumsum", "kkt_inverse", "wy", "state_scan", "chunk_output"] -> !delta.tensor, !delta.tensor {
// CHECK-NEXT: %q_n, %k_n = delta.qk_l2norm %q_f32, %k_f32
// CHECK-NEXT: %g_cum = delta.gate_cumsum %g chunk 16 width 32
// CHECK-NEXT: %A = delta.kkt_inverse %k_n, %beta_0 decay %g_cum chunk 16
// CHECK-NEXT: %w, %u = delta.wy %A, %k_n, %v_f32, %beta_0 decay %g_cum chunk 16
// CHECK-NEXT: %h, %v_new, %[[HT:.*]] = delta.state_scan %k_n, %w, %u decay %g_cum chunk 16 {save_chunk_states = false}
// CHECK-NEXT: %[[O:.*]] = delta.chunk_output %q_n, %k_n, %v_new, %h decay %g_cum chunk 16
// CHECK-NEXT: delta.yield %[[O]], %[[HT]]
// CHECK-NEXT: }
// CHECK-NEXT: %o_f16 = delta.convert "o" %o <f32> to <f16>
// CHECK-NEXT: delta.yield %o_f16
delta.layer @l {variant = #delta.variant<kda>, heads = 2, key_dim = 32, value_dim = 32, in_dtype = #delta.dtype<f16>, gate_in_kernel = true, beta_sigmoid = true}
delta.kernel @k of @l <target = cpu, family = "cpu_chunked", knobs = {chunk = 16}, max_tokens = 0, source = "default"> inputs ["q", "k", "v", "beta", "a", "A_log", "dt_bias"] outputs ["o"] {
^bb0(%q: !delta.tensor, %k: !delta.tensor, %v: !delta.tensor, %beta: !delta.tensor, %a: !delta.tensor, %A_log: !delta.tensor, %dt_bias: !delta.tensor):
  %q1 = delta.convert "q" %q <f16> to <f32>
  %k1 = delta.convert "k" %k <f16> to <f32>
  %v1 = delta.convert "v" %v <f16> to <f32>
  %b = delta.beta_sigmoid <zero_one> %beta
  %g = delta.gate %a, %A_log, %dt_bias width 32
  %f:2 = delta.fused over "chunks" ["qk_l2norm", "gate_cumsum", "kkt_inverse", "wy", "state_scan", "chunk_output"] -> !delta.tensor, !delta.tensor {
    %qn, %kn = delta.qk_l2norm %q1, %k1
    %gc = delta.gate_cumsum %g chunk 16 width 32
    %A = delta.kkt_inverse %kn, %b decay %gc chunk 16
    %w, %u = delta.wy %A, %kn, %v1, %b decay %gc chunk 16
    %h, %vn, %ht = delta.state_scan %kn, %w, %u decay %gc chunk 16 {save_chunk_states = false}
    %o = delta.chunk_output %qn, %kn, %vn, %h decay %gc chunk 16
    delta.yield %o, %ht
  }
  %o2 = delta.convert "o" %f#0 <f32> to <f16>
  delta.yield %o2
}

// -----

// The recurrent step, unfused, with a decay and an initial state.
// CHECK-LABEL: delta.kernel @r of @l
// CHECK: %o, %ht = delta.recurrent_step <gated> %q, %k, %v, %beta decay %g init %h0
// CHECK-NEXT: delta.yield %o, %ht
delta.layer @l {variant = #delta.variant<gated>, heads = 2, key_dim = 32, value_dim = 32, initial_state = true, final_state = true}
delta.kernel @r of @l <target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 32, warps = 2}, max_tokens = 0, source = "default"> inputs ["q", "k", "v", "beta", "g", "h0"] outputs ["o", "ht"] {
^bb0(%q: !delta.tensor, %k: !delta.tensor, %v: !delta.tensor, %beta: !delta.tensor, %g: !delta.tensor, %h0: !delta.tensor):
  %o, %ht = delta.recurrent_step <gated> %q, %k, %v, %beta decay %g init %h0
  delta.yield %o, %ht
}
