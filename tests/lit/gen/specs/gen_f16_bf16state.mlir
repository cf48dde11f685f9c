// f16 activations and output, bf16 state in vk layout: exercises every
// host conversion stage around the f32/bf16 templates. K != V, GVA 2x.
delta.layer @gen_f16_bf16state {
  variant = #delta.variant<gated>, heads = 2, v_heads = 4,
  key_dim = 64, value_dim = 32,
  in_dtype = #delta.dtype<f16>, out_dtype = #delta.dtype<f16>,
  state_dtype = #delta.dtype<bf16>, state_layout = #delta.layout<vk>,
  initial_state = true, final_state = true, varlen = true
}
