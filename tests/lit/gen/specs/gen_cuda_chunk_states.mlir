// gen: all targets
// Chunk-end states out on both targets: the CPU entry chunk by chunk, the
// CUDA entry from cuda_chunked's block scan (chunk_states a device buffer of
// chunk_states_count entries). Varlen, initial and final state, vk layout,
// bf16 in and out, GVA 2x. The CUDA schedule asks for split 4 and scan 4 (the
// transposed TMA scan): chunk states run split 1, scan 1 whatever it says.
delta.layer @gen_cuda_chunk_states {
  variant = #delta.variant<gated>, heads = 2, v_heads = 4,
  key_dim = 64, value_dim = 64, in_dtype = #delta.dtype<bf16>,
  state_layout = #delta.layout<vk>,
  initial_state = true, final_state = true, varlen = true,
  chunk_states = true, mode = #delta.mode<chunked>,
  schedules = [#delta.schedule<target = sm_90a, family = "cuda_chunked", knobs = {chunk = 64, tile_v = 64, warps = 8, stages = 2, split = 4, scan = 4}, max_tokens = 0, source = "spec">]
}
