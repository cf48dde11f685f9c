// delta-fuse-stages rewrites each kernel's stage graph into delta.fused
// groups (one kernel each); which stages share a kernel is the `fuse` choice.
// RUN: delta-opt %s -delta-select-schedule="mode=chunked" -delta-lower-stages -delta-fuse-stages | FileCheck %s --check-prefix=ALL
// RUN: delta-opt %s -delta-select-schedule="mode=chunked" -delta-lower-stages -delta-fuse-stages=fuse=chunk_local | FileCheck %s --check-prefix=LOCAL
// RUN: delta-opt %s -delta-select-schedule="mode=chunked" -delta-lower-stages -delta-fuse-stages=fuse=none | FileCheck %s --check-prefix=NONE
// Re-running with another choice regroups (the groups are dissolved first).
// RUN: delta-opt %s -delta-select-schedule="mode=chunked" -delta-lower-stages -delta-fuse-stages=fuse=none -delta-fuse-stages=fuse=chunk_local | FileCheck %s --check-prefix=LOCAL
// Re-lowering a fused kernel keeps it (it is the lowering of its schedule).
// RUN: delta-opt %s -delta-select-schedule="mode=chunked" -delta-lower-stages -delta-fuse-stages -delta-lower-stages | FileCheck %s --check-prefix=ALL
// Recurrent kernels: one group over tokens whatever the choice but none.
// RUN: delta-opt %s -delta-select-schedule="mode=recurrent" -delta-lower-stages -delta-fuse-stages=fuse=chunk_local | FileCheck %s --check-prefix=REC
// RUN: not delta-opt %s -delta-fuse-stages=fuse=some 2>&1 | FileCheck %s --check-prefix=BAD

// all: every stage in one kernel, the conversion of o after it reads the
// group's result. A group's results carry the names of the values it
// yields (the ones inside get a suffix).
// ALL-LABEL: delta.kernel @gdn_cpu_chunked
// ALL-NEXT: ^bb0(%q: !delta.tensor, %k: !delta.tensor, %v: !delta.tensor, %beta: !delta.tensor, %g: !delta.tensor, %h0: !delta.tensor):
// ALL-NEXT: %q_f32 = delta.convert "q" %q <f16> to <f32>
// ALL-NEXT: %k_f32 = delta.convert "k" %k <f16> to <f32>
// ALL-NEXT: %v_f32 = delta.convert "v" %v <f16> to <f32>
// ALL-NEXT: %ht, %o = delta.fused over "chunks" ["qk_l2norm", "gate_cumsum", "kkt_inverse", "wy", "state_scan", "chunk_output"] -> !delta.tensor, !delta.tensor {
// ALL-NEXT: %q_n, %k_n = delta.qk_l2norm %q_f32, %k_f32
// ALL-NEXT: %g_cum = delta.gate_cumsum %g chunk 32 width 1
// ALL-NEXT: %A = delta.kkt_inverse %k_n, %beta decay %g_cum chunk 32
// ALL-NEXT: %w, %u = delta.wy %A, %k_n, %v_f32, %beta decay %g_cum chunk 32
// ALL-NEXT: %h, %v_new, %[[HT:.*]] = delta.state_scan %k_n, %w, %u decay %g_cum init %h0 chunk 32 {save_chunk_states = false}
// ALL-NEXT: %[[O:.*]] = delta.chunk_output %q_n, %k_n, %v_new, %h decay %g_cum chunk 32
// ALL-NEXT: delta.yield %[[HT]], %[[O]]
// ALL-NEXT: }
// ALL-NEXT: %o_f16 = delta.convert "o" %o <f32> to <f16>
// ALL-NEXT: delta.yield %o_f16, %ht
// ALL-NOT: delta.kernel

// chunk_local: the chunk-parallel stages, the sequential state scan, the
// chunk-parallel output; values flow between the groups.
// LOCAL-LABEL: delta.kernel @gdn_cpu_chunked
// LOCAL: %q_n, %k_n, %g_cum, %w, %u = delta.fused over "chunks" ["qk_l2norm", "gate_cumsum", "kkt_inverse", "wy"]
// LOCAL: delta.yield
// LOCAL-NEXT: }
// LOCAL-NEXT: %h, %v_new, %ht = delta.fused over "chunks" ["state_scan"]
// LOCAL-NEXT: = delta.state_scan %k_n, %w, %u decay %g_cum init %h0 chunk 32
// LOCAL: %o = delta.fused over "chunks" ["chunk_output"] -> !delta.tensor {
// LOCAL-NEXT: = delta.chunk_output %q_n, %k_n, %v_new, %h decay %g_cum chunk 32
// LOCAL: %o_f16 = delta.convert "o" %o <f32> to <f16>
// LOCAL-NEXT: delta.yield %o_f16, %ht

// none: one kernel per stage.
// NONE-LABEL: delta.kernel @gdn_cpu_chunked
// NONE-COUNT-6: delta.fused over "chunks" [{{"[a-z_0-9]+"}}]

// REC-LABEL: delta.kernel @gdn_cpu_decode
// REC: delta.fused over "tokens" ["qk_l2norm", "recurrent_step"]
// REC-LABEL: delta.kernel @gdn_cpu_recurrent
// REC: delta.fused over "tokens" ["qk_l2norm", "recurrent_step"]

// BAD: delta-fuse-stages: fuse must be all, chunk_local or none, got 'some'
delta.layer @gdn {variant = #delta.variant<gated>, heads = 4, key_dim = 64, value_dim = 64, qk_l2norm = true,
  in_dtype = #delta.dtype<f16>, initial_state = true, final_state = true}
