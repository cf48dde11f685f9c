// RUN: delta-opt %s -split-input-file -delta-select-schedule=target=cuda:sm_90a -delta-lower-stages | FileCheck %s

// kda with beta up to 2 on bf16 inputs: cuda_chunked runs on f32 copies
// (deltac::f32_copies: its 16-bit products drift past 5e-3 over long
// sequences there), so q, k, v are converted to f32 before it and o back to
// bf16 after; the recurrent kernel (short calls) reads bf16 as is.
// CHECK-LABEL: delta.layer @kda_two
// CHECK: delta.kernel @kda_two_cuda_recurrent of @kda_two <target = sm_90a, family = "cuda_recurrent"
// CHECK-NOT: delta.convert
// CHECK: delta.recurrent_step <kda>
// CHECK: delta.kernel @kda_two_cuda_chunked of @kda_two <target = sm_90a, family = "cuda_chunked"
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: %q_f32 = delta.convert "q" %q <bf16> to <f32>
// CHECK-NEXT: %k_f32 = delta.convert "k" %k <bf16> to <f32>
// CHECK-NEXT: %v_f32 = delta.convert "v" %v <bf16> to <f32>
// CHECK: %o_bf16 = delta.convert "o" %o <f32> to <bf16>
delta.layer @kda_two {variant = #delta.variant<kda>, heads = 4, key_dim = 128, value_dim = 128, in_dtype = #delta.dtype<bf16>, beta_range = #delta.beta_range<zero_two>}

// -----

// Beta in (0, 1), or a scalar gate with beta up to 2: the bf16 kernel runs
// the call as is (GDN's two-term products take care of beta near 2).
// CHECK-LABEL: delta.layer @kda_one
// CHECK: delta.kernel @kda_one_cuda_chunked
// CHECK-NOT: delta.convert
// CHECK-LABEL: delta.layer @gdn_two
// CHECK: delta.kernel @gdn_two_cuda_chunked
// CHECK-NOT: delta.convert
delta.layer @kda_one {variant = #delta.variant<kda>, heads = 4, key_dim = 128, value_dim = 128, in_dtype = #delta.dtype<bf16>}
delta.layer @gdn_two {variant = #delta.variant<gated>, heads = 4, key_dim = 128, value_dim = 128, in_dtype = #delta.dtype<bf16>, beta_range = #delta.beta_range<zero_two>}
