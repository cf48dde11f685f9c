// RUN: delta-opt %s -split-input-file -delta-select-schedule -delta-lower-stages | FileCheck %s
// RUN: delta-opt %s -split-input-file -delta-select-schedule=target=cuda:sm_90a -delta-lower-stages | FileCheck %s --check-prefix=CUDA

// Gated, with CPU schedules written in the spec (chunked for long sequences,
// recurrent for <= 8 tokens; independent of what mode auto picks): a chunked
// kernel and a recurrent kernel after the layer, which stays. Each is a
// data-flow graph from the layer's tensors (block arguments) to delta.yield,
// unfused (delta-fuse-stages groups the stages). On CUDA mode auto gives
// the recurrent kernel.
// CHECK-LABEL: delta.layer @gdn
// CHECK: delta.kernel @gdn_cpu_chunked of @gdn <target = cpu, family = "cpu_chunked", knobs = {chunk = 64 : i64}, max_tokens = 0, source = "spec"> inputs ["q", "k", "v", "beta", "g"] outputs ["o"] {
// CHECK-NEXT: ^bb0(%q: !delta.tensor, %k: !delta.tensor, %v: !delta.tensor, %beta: !delta.tensor, %g: !delta.tensor):
// CHECK-NEXT: %q_n, %k_n = delta.qk_l2norm %q, %k
// CHECK-NEXT: %g_cum = delta.gate_cumsum %g chunk 64 width 1
// CHECK-NEXT: %A = delta.kkt_inverse %k_n, %beta decay %g_cum chunk 64
// CHECK-NEXT: %w, %u = delta.wy %A, %k_n, %v, %beta decay %g_cum chunk 64
// CHECK-NEXT: %h, %v_new, %ht = delta.state_scan %k_n, %w, %u decay %g_cum chunk 64 {save_chunk_states = false}
// CHECK-NEXT: %o = delta.chunk_output %q_n, %k_n, %v_new, %h decay %g_cum chunk 64
// CHECK-NEXT: delta.yield %o
// CHECK-NEXT: }
// CHECK: delta.kernel @gdn_cpu_recurrent of @gdn <target = cpu, family = "cpu_recurrent", {{.*}} max_tokens = 8
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %q_n, %k_n = delta.qk_l2norm %q, %k
// CHECK-NEXT: %o, %ht = delta.recurrent_step <gated> %q_n, %k_n, %v, %beta decay %g
// CHECK-NEXT: delta.yield %o
// CHECK-NEXT: }
// CUDA-LABEL: delta.layer @gdn
// CUDA: delta.kernel @gdn_cuda_recurrent of @gdn <target = sm_90a, family = "cuda_recurrent"
// CUDA: delta.recurrent_step <gated>
delta.layer @gdn {variant = #delta.variant<gated>, heads = 16, v_heads = 32, key_dim = 128, value_dim = 128, in_dtype = #delta.dtype<bf16>, qk_l2norm = true,
  schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 64}, max_tokens = 0, source = "spec">,
               #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32}, max_tokens = 8, source = "spec">]}

// -----

// Delta rule: no gate cumsum; no qk_l2norm stage when it is off.
// CHECK-LABEL: delta.layer @dn
// CHECK: delta.kernel @dn_cpu_chunked
// CHECK-NEXT: ^bb0(%q: !delta.tensor, %k: !delta.tensor, %v: !delta.tensor, %beta: !delta.tensor):
// CHECK-NEXT: %A = delta.kkt_inverse %k, %beta chunk 64
// CHECK-NEXT: %w, %u = delta.wy %A, %k, %v, %beta chunk 64
// CHECK-NEXT: %h, %v_new, %ht = delta.state_scan %k, %w, %u chunk 64
// CHECK-NEXT: %o = delta.chunk_output %q, %k, %v_new, %h chunk 64
// CHECK: delta.kernel @dn_cpu_recurrent
// CHECK: %o, %ht = delta.recurrent_step <delta> %q, %k, %v, %beta
// CHECK-NEXT: delta.yield %o
delta.layer @dn {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 64}, max_tokens = 0, source = "spec">,
               #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32}, max_tokens = 8, source = "spec">]}

// -----

// KDA: the gate cumsum is per key channel (width K).
// CHECK-LABEL: delta.layer @kda
// CHECK: %g_cum = delta.gate_cumsum %g chunk 64 width 96
// CHECK: delta.recurrent_step <kda> %q, %k, %v, %beta decay %g
delta.layer @kda {variant = #delta.variant<kda>, heads = 4, key_dim = 96, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 64}, max_tokens = 0, source = "spec">,
               #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32}, max_tokens = 8, source = "spec">]}

// -----

// Pre-processing the templates do not do: f16 inputs and a bf16 state are
// converted around the call, beta and the gate are computed before it;
// mode recurrent on the CPU: cpu_decode (1-token calls), cpu_recurrent.
// On CUDA the template writes o in its input type (f32 after conversion).
// CHECK-LABEL: delta.layer @conv
// CHECK: delta.kernel @conv_cpu_decode
// CHECK: delta.kernel @conv_cpu_recurrent of @conv {{.*}} inputs ["q", "k", "v", "beta", "a", "A_log", "dt_bias", "h0"] outputs ["o", "ht"]
// CHECK-NEXT: ^bb0(%q: !delta.tensor, %k: !delta.tensor, %v: !delta.tensor, %beta: !delta.tensor, %a: !delta.tensor, %A_log: !delta.tensor, %dt_bias: !delta.tensor, %h0: !delta.tensor):
// CHECK-NEXT: %q_f32 = delta.convert "q" %q <f16> to <f32>
// CHECK-NEXT: %k_f32 = delta.convert "k" %k <f16> to <f32>
// CHECK-NEXT: %v_f32 = delta.convert "v" %v <f16> to <f32>
// CHECK-NEXT: %h0_f32 = delta.convert "h0" %h0 <bf16> to <f32>
// CHECK-NEXT: %beta_0 = delta.beta_sigmoid <zero_two> %beta
// CHECK-NEXT: %g = delta.gate %a, %A_log, %dt_bias width 1
// CHECK-NEXT: %o, %ht = delta.recurrent_step <gated> %q_f32, %k_f32, %v_f32, %beta_0 decay %g init %h0_f32
// CHECK-NEXT: %o_f16 = delta.convert "o" %o <f32> to <f16>
// CHECK-NEXT: %ht_bf16 = delta.convert "ht" %ht <f32> to <bf16>
// CHECK-NEXT: delta.yield %o_f16, %ht_bf16
// CHECK-NEXT: }
// On CUDA the template writes o in its input type (f32 after conversion).
// CUDA-LABEL: delta.layer @conv
// CUDA: %q_f32 = delta.convert "q" %q <f16> to <f32>
// CUDA: %o_f16 = delta.convert "o" %o <f32> to <f16>
delta.layer @conv {variant = #delta.variant<gated>, heads = 2, key_dim = 32, value_dim = 32,
  in_dtype = #delta.dtype<f16>, state_dtype = #delta.dtype<bf16>, initial_state = true, final_state = true,
  beta_sigmoid = true, beta_range = #delta.beta_range<zero_two>, gate_in_kernel = true, mode = #delta.mode<recurrent>}

// -----

// bf16 in, f32 out: the CPU template writes f32 directly; the CUDA
// template writes bf16, converted after the call.
// CHECK-LABEL: delta.layer @mixed
// CHECK: delta.kernel @mixed_cpu_recurrent
// CHECK-NOT: delta.convert
// CHECK: delta.recurrent_step
// CUDA-LABEL: delta.layer @mixed
// CUDA: %o, %ht = delta.recurrent_step <delta>
// CUDA-NEXT: %o_f32 = delta.convert "o" %o <bf16> to <f32>
// CUDA-NEXT: delta.yield %o_f32
delta.layer @mixed {variant = #delta.variant<delta>, heads = 2, key_dim = 32, value_dim = 32,
  in_dtype = #delta.dtype<bf16>, out_dtype = #delta.dtype<f32>, mode = #delta.mode<recurrent>}

// -----

// KDA gate in kernel: one gate value per key channel.
// CHECK-LABEL: delta.layer @kda_gate
// CHECK: %g = delta.gate %a, %A_log, %dt_bias width 64
// CHECK-NEXT: delta.recurrent_step <kda> %q, %k, %v, %beta decay %g
delta.layer @kda_gate {variant = #delta.variant<kda>, heads = 2, key_dim = 64, value_dim = 32, gate_in_kernel = true, mode = #delta.mode<recurrent>}
