// RUN: delta-opt %s -split-input-file -verify-diagnostics

// expected-error @below {{'heads' must be in 1..65536, got 0}}
delta.layer @zero_heads {variant = #delta.variant<delta>, heads = 0, key_dim = 64, value_dim = 64}

// -----

// expected-error @below {{'v_heads' (24) must be a multiple of 'heads' (16) in 1..65536: each q/k head serves v_heads/heads value heads}}
delta.layer @gva_not_multiple {variant = #delta.variant<gated>, heads = 16, v_heads = 24, key_dim = 128, value_dim = 128}

// -----

// expected-error @below {{'v_heads' (8) must be a multiple of 'heads' (16) in 1..65536: each q/k head serves v_heads/heads value heads}}
delta.layer @fewer_value_heads {variant = #delta.variant<gated>, heads = 16, v_heads = 8, key_dim = 128, value_dim = 128}

// -----

// expected-error @below {{'key_dim' must be in 16..256 and a multiple of 16, got 100}}
delta.layer @k_not_multiple {variant = #delta.variant<delta>, heads = 4, key_dim = 100, value_dim = 64}

// -----

// expected-error @below {{'key_dim' must be in 16..256 and a multiple of 16, got 512}}
delta.layer @k_too_large {variant = #delta.variant<delta>, heads = 4, key_dim = 512, value_dim = 64}

// -----

// expected-error @below {{'key_dim' must be in 16..256 and a multiple of 16, got 0}}
delta.layer @k_zero {variant = #delta.variant<delta>, heads = 4, key_dim = 0, value_dim = 64}

// -----

// expected-error @below {{'value_dim' must be in 16..256 and a multiple of 16, got 8}}
delta.layer @v_too_small {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 8}

// -----

// expected-error @below {{'value_dim' must be in 16..256 and a multiple of 16, got 272}}
delta.layer @v_too_large {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 272}

// -----

// expected-error @below {{'state_dtype' must be f32 or bf16, got f16}}
delta.layer @f16_state {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, state_dtype = #delta.dtype<f16>}

// -----

// expected-error @below {{'scale' must be > 0 and a finite normal float (1.2e-38..3.4e+38), got -1}}
delta.layer @negative_scale {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, scale = -1.0 : f64}

// -----

// expected-error @below {{'scale' must be > 0 and a finite normal float (1.2e-38..3.4e+38), got 0}}
delta.layer @zero_scale {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, scale = 0.0 : f64}

// -----

// 1e300 overflows the float literal of the generated code.
// expected-error @below {{'scale' must be > 0 and a finite normal float (1.2e-38..3.4e+38), got 1.0}}
delta.layer @huge_scale {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, scale = 1.0e300 : f64}

// -----

// 1e-300 would become 0.0f, which the kernels read as "the default scale".
// expected-error @below {{'scale' must be > 0 and a finite normal float (1.2e-38..3.4e+38), got 1.0}}
delta.layer @tiny_scale {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, scale = 1.0e-300 : f64}

// -----

// expected-error @below {{two schedules of family cpu_chunked: at most one per family}}
delta.layer @twice {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 64}, max_tokens = 0, source = "spec">,
               #delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 32}, max_tokens = 8, source = "spec">]}

// -----

// expected-error @below {{two schedules for target cpu with max_tokens = 0 (no bound)}}
delta.layer @two_unbounded {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64,
  schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 64}, max_tokens = 0, source = "spec">,
               #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32}, max_tokens = 0, source = "spec">]}

// -----

// expected-error @below {{'gate_in_kernel' needs a decay: allowed with variant gated or kda, not delta}}
delta.layer @gate_on_delta {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, gate_in_kernel = true}

// -----

// expected-error @below {{'chunk_states' needs mode = chunked (only the chunked kernel has chunk-end states), got mode = recurrent}}
delta.layer @chunk_states_recurrent {variant = #delta.variant<gated>, heads = 4, key_dim = 64, value_dim = 64, chunk_states = true, mode = #delta.mode<recurrent>}

// -----

// expected-error @below {{'chunk_states' needs mode = chunked (only the chunked kernel has chunk-end states), got mode = auto}}
delta.layer @chunk_states_auto {variant = #delta.variant<gated>, heads = 4, key_dim = 64, value_dim = 64, chunk_states = true}

// -----

// expected-error @below {{'decode_tokens' must be in 1..8, got 9}}
delta.layer @decode_too_many {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, decode_tokens = 9}

// -----

// expected-error @below {{'decode_tokens' must be in 1..8, got 0}}
delta.layer @decode_zero {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, decode_tokens = 0}

// -----

// expected-error @below {{schedule family cpu_chunked is not run by mode = recurrent on cpu (it runs cpu_decode, cpu_recurrent)}}
delta.layer @sched_contradicts {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, mode = #delta.mode<recurrent>,
  schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 64}, max_tokens = 0, source = "default">]}

// -----

// Mode chunked on CUDA runs cuda_chunked only (the catalogue's families_for).
// expected-error @below {{schedule family cuda_recurrent is not run by mode = chunked on cuda:sm_90a (it runs cuda_chunked)}}
delta.layer @chunked_cuda {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, mode = #delta.mode<chunked>,
  schedules = [#delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 32, warps = 4}, max_tokens = 0, source = "default">]}

// -----

// The catalogue's check_config for the layer's shapes: tile_v divides V.
// expected-error @below {{schedule on cpu: cpu_recurrent: tile_v = 32 must divide V = 48}}
delta.layer @tile_v_divides {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 48,
  schedules = [#delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32}, max_tokens = 0, source = "spec">]}

// -----

// cuda_chunked configs are checked by the catalogue (chunked_rules.h's
// chunked_legal): 8 warps cannot tile a 16 x 16 output tile.
// expected-error @below {{schedule on cuda:sm_90a: cuda_chunked: chunk = 16, tile_v = 16, warps = 8, stages = 1 does not fit (warp tiling or shared memory, chunked_rules.h)}}
delta.layer @chunked_cuda_tiling {variant = #delta.variant<gated>, heads = 4, key_dim = 128, value_dim = 128, mode = #delta.mode<chunked>,
  schedules = [#delta.schedule<target = sm_90a, family = "cuda_chunked", knobs = {chunk = 16, tile_v = 16, warps = 8, stages = 1}, max_tokens = 0, source = "spec">]}

// -----

// ... and the CUDA warps split K into whole row groups.
// expected-error @below {{schedule on cuda:sm_90a: cuda_recurrent: warps = 8 does not split K = 16 with tile_v = 32 into whole row groups of at most 16 rows}}
delta.layer @warps_split {variant = #delta.variant<delta>, heads = 4, key_dim = 16, value_dim = 64,
  schedules = [#delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 32, warps = 8}, max_tokens = 0, source = "spec">]}

// -----

// expected-error @below {{'delta.layer' op attribute 'variant' failed to satisfy constraint}}
delta.layer @variant_wrong_kind {variant = #delta.dtype<f32>, heads = 4, key_dim = 64, value_dim = 64}

// -----

// expected-error @below {{requires attribute 'key_dim'}}
delta.layer @missing_key_dim {variant = #delta.variant<delta>, heads = 4, value_dim = 64}

// -----

// expected-error @below {{expected ::mlir::delta::Variant to be one of: delta, gated, kda}}
// expected-error @below {{failed to parse Delta_VariantAttr parameter 'value'}}
delta.layer @unknown_variant {variant = #delta.variant<mamba>, heads = 4, key_dim = 64, value_dim = 64}

// -----

// expected-error @below {{name 'my-layer' must be a C identifier (letters, digits and _, not starting with a digit): it prefixes the generated entry points}}
delta.layer @"my-layer" {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}

// -----

// expected-error @below {{'heads' must be in 1..65536, got 99999999999}}
delta.layer @too_many_heads {variant = #delta.variant<delta>, heads = 99999999999, key_dim = 64, value_dim = 64}

// -----

// expected-error @below {{'v_heads' (131072) must be a multiple of 'heads' (16) in 1..65536}}
delta.layer @too_many_value_heads {variant = #delta.variant<delta>, heads = 16, v_heads = 131072, key_dim = 64, value_dim = 64}
