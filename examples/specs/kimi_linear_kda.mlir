// Kimi Linear KDA layer: one decay per key channel, 32 q/k and 32 value
// heads, K = V = 128, bf16 activations, f32 state.
delta.layer @kimi_linear_kda {
  variant = #delta.variant<kda>,
  heads = 32, v_heads = 32, key_dim = 128, value_dim = 128,
  in_dtype = #delta.dtype<bf16>, state_dtype = #delta.dtype<f32>,
  qk_l2norm = true,
  initial_state = true, final_state = true, varlen = true
}
