// KDA with the per-channel gate computed in the entry (dt_bias [HV, K]),
// bf16 output from f32 inputs.
delta.layer @gen_kda_gate {
  variant = #delta.variant<kda>, heads = 2, key_dim = 48, value_dim = 64,
  in_dtype = #delta.dtype<f32>, out_dtype = #delta.dtype<bf16>,
  gate_in_kernel = true, qk_l2norm = true,
  initial_state = true, final_state = true, varlen = true
}
