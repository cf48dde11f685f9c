// RUN: delta-opt %s -split-input-file -verify-diagnostics

// Schedules are checked against the kernel catalogue: the family exists,
// runs on the target, and has exactly its knobs with listed values.
// expected-error @+2 {{schedule family 'cpu_fast' is not in the kernel catalogue (cpu_recurrent, cpu_decode, cpu_chunked, cuda_recurrent, cuda_chunked)}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, family = "cpu_fast", knobs = {}, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{schedule family cuda_recurrent runs on cuda, not on target cpu}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, family = "cuda_recurrent", knobs = {tile_v = 32, warps = 4}, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{schedule family cpu_chunked: chunk = 48, expected one of 16, 32, 64}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 48}, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{schedule family cpu_recurrent has no knob 'tile_k' (it reads: tile_v)}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_k = 64, tile_v = 32}, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{schedule family cpu_chunked has no knob 'stages' (it reads: chunk)}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 32, stages = 1}, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{schedule family cuda_recurrent needs knob 'warps'}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 32}, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{schedule family cuda_chunked needs knob 'stages'}}
delta.layer @l {variant = #delta.variant<gated>, heads = 4, key_dim = 128, value_dim = 128,
  schedules = [#delta.schedule<target = sm_90a, family = "cuda_chunked", knobs = {chunk = 64, tile_v = 32, warps = 4}, max_tokens = 0, source = "default">]}

// -----

// split and fuse may be absent (0: the kernel's rule, three launches), but
// a value must be listed.
// expected-error @+2 {{schedule family cuda_chunked: split = 3, expected one of 0, 1, 2, 4, 8, 16}}
delta.layer @l {variant = #delta.variant<gated>, heads = 4, key_dim = 128, value_dim = 128,
  schedules = [#delta.schedule<target = sm_90a, family = "cuda_chunked", knobs = {chunk = 64, tile_v = 64, warps = 8, stages = 2, split = 3}, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{schedule family cuda_chunked: fuse = 2, expected one of 0, 1}}
delta.layer @l {variant = #delta.variant<gated>, heads = 4, key_dim = 128, value_dim = 128,
  schedules = [#delta.schedule<target = sm_90a, family = "cuda_chunked", knobs = {chunk = 64, tile_v = 64, warps = 8, stages = 2, fuse = 2}, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{schedule family cuda_recurrent: warps = 64, expected one of 1, 2, 4, 8}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 32, warps = 64}, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{schedule knob 'tile_v' must be an integer}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = "wide"}, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{schedule family cpu_decode takes sequences of at most 1 tokens: max_tokens must be in 1..1, got 0}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, family = "cpu_decode", knobs = {tile_v = 32}, max_tokens = 0, source = "default">]}

// -----

// expected-error @+2 {{schedule max_tokens must be >= 0 (0 = unbounded), got -1}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32}, max_tokens = -1, source = "default">]}

// -----

// expected-error @+2 {{schedule source must be default, tuning-db, override or spec, got 'guess'}}
delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 64}, max_tokens = 0, source = "guess">]}

// -----

delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}
// expected-error @below {{'delta.kernel' op 'layer' must name a delta.layer, 'missing' does not}}
delta.kernel @k of @missing <target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32}, max_tokens = 0, source = "default"> inputs ["q", "k", "v", "beta"] outputs ["o"] {
^bb0(%q: !delta.tensor, %k: !delta.tensor, %v: !delta.tensor, %beta: !delta.tensor):
  %o, %ht = delta.recurrent_step <delta> %q, %k, %v, %beta
  delta.yield %o
}

// -----

delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}
// expected-error @below {{'delta.kernel' op yields 2 values but 'outputs' names 1}}
delta.kernel @k of @l <target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32}, max_tokens = 0, source = "default"> inputs ["q", "k", "v", "beta"] outputs ["o"] {
^bb0(%q: !delta.tensor, %k: !delta.tensor, %v: !delta.tensor, %beta: !delta.tensor):
  %o, %ht = delta.recurrent_step <delta> %q, %k, %v, %beta
  delta.yield %o, %ht
}

// -----

delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}
// expected-error @below {{'delta.kernel' op has 3 block arguments but 'inputs' names 4}}
delta.kernel @k of @l <target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32}, max_tokens = 0, source = "default"> inputs ["q", "k", "v", "beta"] outputs ["o"] {
^bb0(%q: !delta.tensor, %k: !delta.tensor, %v: !delta.tensor):
  %o, %ht = delta.recurrent_step <delta> %q, %k, %v, %v
  delta.yield %o
}

// -----

delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}
delta.kernel @k of @l <target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32}, max_tokens = 0, source = "default"> inputs ["q", "k", "v", "beta"] outputs ["o"] {
^bb0(%q: !delta.tensor, %k: !delta.tensor, %v: !delta.tensor, %beta: !delta.tensor):
  // expected-error @below {{'over' must be "chunks" or "tokens", got "heads"}}
  %f:2 = delta.fused over "heads" ["recurrent_step"] -> !delta.tensor, !delta.tensor {
    %o, %ht = delta.recurrent_step <delta> %q, %k, %v, %beta
    delta.yield %o, %ht
  }
  delta.yield %f#0
}

// -----

delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}
delta.kernel @k of @l <target = cpu, family = "cpu_chunked", knobs = {chunk = 64}, max_tokens = 0, source = "default"> inputs ["q", "k", "v", "beta"] outputs ["o"] {
^bb0(%q: !delta.tensor, %k: !delta.tensor, %v: !delta.tensor, %beta: !delta.tensor):
  // expected-error @below {{'stages' must list the body's ops in order (kkt_inverse, wy)}}
  %f:2 = delta.fused over "chunks" ["wy", "kkt_inverse"] -> !delta.tensor, !delta.tensor {
    %A = delta.kkt_inverse %k, %beta chunk 64
    %w, %u = delta.wy %A, %k, %v, %beta chunk 64
    delta.yield %w, %u
  }
  delta.yield %f#0
}

// -----

delta.layer @l {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}
delta.kernel @k of @l <target = cpu, family = "cpu_chunked", knobs = {chunk = 64}, max_tokens = 0, source = "default"> inputs ["q", "k", "v", "beta"] outputs ["o"] {
^bb0(%q: !delta.tensor, %k: !delta.tensor, %v: !delta.tensor, %beta: !delta.tensor):
  // expected-error @below {{body must end with a delta.yield of its 2 results}}
  %f:2 = delta.fused over "chunks" ["kkt_inverse"] -> !delta.tensor, !delta.tensor {
    %A = delta.kkt_inverse %k, %beta chunk 64
    delta.yield %A
  }
  delta.yield %f#0
}
