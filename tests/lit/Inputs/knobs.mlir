// Knobs written in the spec: one CUDA warp over 16-column tiles, a CPU
// recurrence over 16-column tiles.
delta.layer @knobs {variant = #delta.variant<delta>, heads = 2, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 16}, max_tokens = 0, source = "spec">,
               #delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 16, warps = 1}, max_tokens = 0, source = "spec">]}
