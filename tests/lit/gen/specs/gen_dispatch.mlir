// Two CPU kernels written in the spec: cpu_chunked, chunk 16, for sequences
// longer than 8 tokens, cpu_recurrent (tile_v 16) for the rest; the
// generated entry dispatches on the longest sequence (decode_tokens = 4:
// the decode case runs the recurrent kernel). Varlen, initial and final
// state; CUDA: mode auto, cuda_recurrent for calls of at most 16 tokens,
// then cuda_chunked (cu_seqlens read on the host for the dispatch).
delta.layer @gen_dispatch {
  variant = #delta.variant<gated>, heads = 2, v_heads = 4,
  key_dim = 32, value_dim = 32, qk_l2norm = true,
  initial_state = true, final_state = true, varlen = true, decode_tokens = 4,
  schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 16}, max_tokens = 0, source = "spec">,
               #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 16}, max_tokens = 8, source = "spec">]
}
