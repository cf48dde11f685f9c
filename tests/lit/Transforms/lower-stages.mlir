// RUN: delta-opt %s -split-input-file -delta-select-schedule -delta-lower-stages | FileCheck %s
// RUN: delta-opt %s -split-input-file -delta-select-schedule=target=cuda:sm_90a -delta-lower-stages | FileCheck %s --check-prefix=CUDA

// Gated, with CPU schedules written in the spec (chunked for long sequences,
// recurrent for <= 8 tokens; independent of what mode auto picks): a chunked
// kernel (all stages fused per chunk) and a recurrent kernel (one fused step)
// after the layer, which stays. On CUDA mode auto gives the recurrent kernel.
// CHECK-LABEL: delta.layer @gdn
// CHECK: delta.kernel @gdn_cpu_chunked of @gdn <target = cpu, mode = chunked, chunk = 64, tile_k = 128, tile_v = 128, warps = 1, stages = 1, max_tokens = 0, source = "spec"> {
// CHECK-NEXT: delta.fused over "chunks" ["qk_l2norm", "gate_cumsum", "kkt_inverse", "wy", "state_scan", "chunk_output"] {
// CHECK-NEXT: delta.qk_l2norm
// CHECK-NEXT: delta.gate_cumsum chunk 64 width 1
// CHECK-NEXT: delta.kkt_inverse chunk 64
// CHECK-NEXT: delta.wy chunk 64
// CHECK-NEXT: delta.state_scan chunk 64 {save_chunk_states = false}
// CHECK-NEXT: delta.chunk_output chunk 64
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK: delta.kernel @gdn_cpu_recurrent of @gdn <target = cpu, mode = recurrent, chunk = 0, {{.*}} max_tokens = 8
// CHECK-NEXT: delta.fused over "tokens" ["qk_l2norm", "recurrent_step"] {
// CHECK-NEXT: delta.qk_l2norm
// CHECK-NEXT: delta.recurrent_step <gated>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CUDA-LABEL: delta.layer @gdn
// CUDA: delta.kernel @gdn_sm_90a_recurrent of @gdn <target = sm_90a, mode = recurrent
// CUDA-NEXT: delta.fused over "tokens" ["qk_l2norm", "recurrent_step"] {
delta.layer @gdn {variant = #delta.variant<gated>, heads = 16, v_heads = 32, key_dim = 128, value_dim = 128, in_dtype = #delta.dtype<bf16>, qk_l2norm = true,
  schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 64, tile_k = 128, tile_v = 128, warps = 1, stages = 1, max_tokens = 0, source = "spec">,
               #delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 128, tile_v = 128, warps = 1, stages = 1, max_tokens = 8, source = "spec">]}

// -----

// Delta rule: no gate cumsum; no qk_l2norm stage when it is off.
// CHECK-LABEL: delta.layer @dn
// CHECK: delta.kernel @dn_cpu_chunked
// CHECK-NEXT: delta.fused over "chunks" ["kkt_inverse", "wy", "state_scan", "chunk_output"] {
// CHECK-NEXT: delta.kkt_inverse chunk 64
// CHECK: delta.kernel @dn_cpu_recurrent
// CHECK-NEXT: delta.fused over "tokens" ["recurrent_step"] {
// CHECK-NEXT: delta.recurrent_step <delta>
delta.layer @dn {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 64, tile_k = 64, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "spec">,
               #delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 64, tile_v = 64, warps = 1, stages = 1, max_tokens = 8, source = "spec">]}

// -----

// KDA: the gate cumsum is per key channel (width K).
// CHECK-LABEL: delta.layer @kda
// CHECK: delta.gate_cumsum chunk 64 width 96
// CHECK: delta.recurrent_step <kda>
delta.layer @kda {variant = #delta.variant<kda>, heads = 4, key_dim = 96, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 64, tile_k = 96, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "spec">,
               #delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 96, tile_v = 64, warps = 1, stages = 1, max_tokens = 8, source = "spec">]}

// -----

// Pre-processing the templates do not do: f16 inputs and a bf16 state are
// converted around the call, beta and the gate are computed before it.
// CHECK-LABEL: delta.layer @conv
// CHECK: delta.kernel @conv_cpu_recurrent
// CHECK-NEXT: delta.convert "q" <f16> to <f32>
// CHECK-NEXT: delta.convert "k" <f16> to <f32>
// CHECK-NEXT: delta.convert "v" <f16> to <f32>
// CHECK-NEXT: delta.convert "h0" <bf16> to <f32>
// CHECK-NEXT: delta.beta_sigmoid <zero_two>
// CHECK-NEXT: delta.gate width 1
// CHECK-NEXT: delta.fused over "tokens"
// CHECK-NEXT: delta.recurrent_step <gated>
// CHECK-NEXT: }
// CHECK-NEXT: delta.convert "o" <f32> to <f16>
// CHECK-NEXT: delta.convert "ht" <f32> to <bf16>
// CHECK-NEXT: }
// On CUDA the template writes o in its input type (f32 after conversion).
// CUDA-LABEL: delta.layer @conv
// CUDA: delta.convert "q" <f16> to <f32>
// CUDA: delta.convert "o" <f32> to <f16>
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
// CUDA: delta.recurrent_step <delta>
// CUDA-NEXT: }
// CUDA-NEXT: delta.convert "o" <bf16> to <f32>
delta.layer @mixed {variant = #delta.variant<delta>, heads = 2, key_dim = 32, value_dim = 32,
  in_dtype = #delta.dtype<bf16>, out_dtype = #delta.dtype<f32>, mode = #delta.mode<recurrent>}

// -----

// KDA gate in kernel: one gate value per key channel.
// CHECK-LABEL: delta.layer @kda_gate
// CHECK: delta.gate width 64
delta.layer @kda_gate {variant = #delta.variant<kda>, heads = 2, key_dim = 64, value_dim = 32, gate_in_kernel = true, mode = #delta.mode<recurrent>}
