// RUN: delta-opt %s -split-input-file -verify-diagnostics

// expected-error @+2 {{schedule mode must be chunked or recurrent (auto is resolved into one schedule per mode)}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, mode = auto, chunk = 64, tile_k = 64, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{chunked schedule: chunk must be 16, 32 or 64, got 48}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 48, tile_k = 64, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{recurrent schedule: chunk must be 0, got 64}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, mode = recurrent, chunk = 64, tile_k = 64, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{schedule tiles must be multiples of 16 in 16..256, got tile_k = 24, tile_v = 64}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 64, tile_k = 24, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{schedule warps must be in 1..32, got 64}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = sm_90a, mode = recurrent, chunk = 0, tile_k = 64, tile_v = 64, warps = 64, stages = 1, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{schedule stages must be in 1..8, got 0}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 64, tile_k = 64, tile_v = 64, warps = 1, stages = 0, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{schedule max_tokens must be >= 0 (0 = unbounded), got -1}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, mode = recurrent, chunk = 0, tile_k = 64, tile_v = 64, warps = 1, stages = 1, max_tokens = -1, source = "default">]}

// -----

// expected-error @+2 {{schedule source must be default, tuning-db, override or spec, got 'guess'}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 64, tile_k = 64, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "guess">]}

// -----

delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}
// expected-error @below {{'delta.kernel' op 'layer' must name a delta.layer, 'missing' does not}}
delta.kernel @k of @missing <target = cpu, mode = recurrent, chunk = 0, tile_k = 64, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "default"> {
  delta.fused over "tokens" ["recurrent_step"] {
    delta.recurrent_step <delta>
  }
}

// -----

delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}
delta.kernel @k of @l <target = cpu, mode = recurrent, chunk = 0, tile_k = 64, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "default"> {
  // expected-error @below {{'over' must be "chunks" or "tokens", got "heads"}}
  delta.fused over "heads" ["recurrent_step"] {
    delta.recurrent_step <delta>
  }
}

// -----

delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}
delta.kernel @k of @l <target = cpu, mode = chunked, chunk = 64, tile_k = 64, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "default"> {
  // expected-error @below {{'stages' must list the body's ops in order (kkt_inverse, wy)}}
  delta.fused over "chunks" ["wy", "kkt_inverse"] {
    delta.kkt_inverse chunk 64
    delta.wy chunk 64
  }
}

// -----

delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}
// expected-error @below {{'delta.fused' op expects parent op 'delta.kernel'}}
delta.fused over "tokens" ["recurrent_step"] {
  delta.recurrent_step <delta>
}
