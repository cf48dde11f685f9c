// mode = recurrent: the recurrent kernel for every length.
delta.layer @gen_recurrent_only {
  variant = #delta.variant<kda>, heads = 2, v_heads = 4, key_dim = 16,
  value_dim = 256, in_dtype = #delta.dtype<bf16>,
  out_dtype = #delta.dtype<f32>, final_state = true,
  mode = #delta.mode<recurrent>
}
