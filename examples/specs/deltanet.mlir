// DeltaNet layer (no decay): 16 heads, K = V = 128, f32 throughout.
delta.layer @deltanet {
  variant = #delta.variant<delta>,
  heads = 16, key_dim = 128, value_dim = 128,
  in_dtype = #delta.dtype<f32>,
  qk_l2norm = true, final_state = true
}
