// Knobs other than the defaults, written in the spec: 16-column state tiles
// for the CPU decode and recurrent kernels (V = 48: 32 does not divide it),
// 2 warps for the CUDA kernel; the generated code instantiates them and
// runs against the reference (prompt: cpu_recurrent, decode: cpu_decode).
delta.layer @gen_knobs {
  variant = #delta.variant<kda>, heads = 2, v_heads = 4,
  key_dim = 64, value_dim = 48, qk_l2norm = true,
  initial_state = true, final_state = true, varlen = true,
  schedules = [#delta.schedule<target = cpu, family = "cpu_decode", knobs = {tile_v = 16}, max_tokens = 1, source = "spec">,
               #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 16}, max_tokens = 0, source = "spec">,
               #delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 16, warps = 2}, max_tokens = 0, source = "spec">]
}
