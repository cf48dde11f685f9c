// Gate and beta computed in the entry: g = -exp(A_log) softplus(a + dt_bias),
// beta = 2 sigmoid(logits); decode steps of up to 4 tokens; custom scale.
delta.layer @gen_fused_gate {
  variant = #delta.variant<gated>, heads = 2, v_heads = 6,
  key_dim = 32, value_dim = 48, in_dtype = #delta.dtype<f32>,
  beta_range = #delta.beta_range<zero_two>, beta_sigmoid = true,
  gate_in_kernel = true, qk_l2norm = true, scale = 0.25 : f64,
  final_state = true, decode_tokens = 4
}
