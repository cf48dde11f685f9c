// mode auto with one bounded schedule written in the spec: the entry
// refuses longer sequences.
delta.layer @bounded {variant = #delta.variant<gated>, heads = 2, key_dim = 32, value_dim = 32,
  schedules = [#delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32}, max_tokens = 8, source = "spec">]}
