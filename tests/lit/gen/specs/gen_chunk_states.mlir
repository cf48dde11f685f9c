// Chunk-end states out, the CPU entry only here (gen_cuda_chunk_states: both
// targets): varlen, initial and final state, vk layout, K != V, GVA 2x, chunk
// deltac::kCpuDefaultChunk (32).
delta.layer @gen_chunk_states {
  variant = #delta.variant<gated>, heads = 2, v_heads = 4,
  key_dim = 32, value_dim = 48, state_layout = #delta.layout<vk>,
  initial_state = true, final_state = true, varlen = true,
  chunk_states = true, mode = #delta.mode<chunked>
}
