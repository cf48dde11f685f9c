// Two CPU kernels written in the spec: chunked for long sequences, recurrent
// for sequences of <= 8 tokens (whatever mode auto would pick).
delta.layer @d4 {variant = #delta.variant<gated>, heads = 2, key_dim = 64, value_dim = 64, decode_tokens = 4,
  schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 64}, max_tokens = 0, source = "spec">,
               #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 16}, max_tokens = 8, source = "spec">]}
