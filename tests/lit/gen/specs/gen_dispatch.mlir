// Two CPU kernels written in the spec (mode auto alone gives only the
// recurrent one on CPU now, deltac::kCpuRecurrentMaxTokens = 0): chunked,
// chunk 16, for sequences longer than 8 tokens, recurrent for the rest; the
// generated entry dispatches on the longest sequence. Varlen, initial and
// final state; CUDA: mode auto, the recurrent kernel.
delta.layer @gen_dispatch {
  variant = #delta.variant<gated>, heads = 2, v_heads = 4,
  key_dim = 32, value_dim = 32, qk_l2norm = true,
  initial_state = true, final_state = true, varlen = true,
  schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 16, tile_k = 32, tile_v = 32, warps = 1, stages = 1, max_tokens = 0, source = "spec">,
               #delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 32, tile_v = 32, warps = 1, stages = 1, max_tokens = 8, source = "spec">]
}
