// Qwen3-Next Gated DeltaNet layer: 16 q/k heads, 32 value heads (GVA),
// K = V = 128, bf16 activations, f32 state. q/k are L2-normalised in the
// kernel; mode auto lets deltac/schedule.h pick the kernel per call.
delta.layer @qwen3_next_gdn {
  variant = #delta.variant<gated>,
  heads = 16, v_heads = 32, key_dim = 128, value_dim = 128,
  in_dtype = #delta.dtype<bf16>, state_dtype = #delta.dtype<f32>,
  qk_l2norm = true,
  initial_state = true, final_state = true, varlen = true,
  mode = #delta.mode<auto>
}
