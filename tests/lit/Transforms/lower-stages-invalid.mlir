// RUN: delta-opt %s -split-input-file -delta-select-schedule -delta-lower-stages -verify-diagnostics

// A generated kernel name that another symbol already uses is an error at
// the layer (not a verifier failure after the pass).
// expected-error @below {{its cpu_chunked kernel would be named @a_cpu_chunked, which another symbol already uses: rename the layer or that symbol}}
delta.layer @a {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, mode = #delta.mode<chunked>}
// expected-note @below {{@a_cpu_chunked is defined here}}
delta.layer @a_cpu_chunked {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}

// -----

// A hand-written kernel whose stages differ from the lowering of its
// schedule is refused rather than silently replaced.
delta.layer @h {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, mode = #delta.mode<recurrent>, qk_l2norm = true,
  schedules = [#delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32}, max_tokens = 0, source = "spec">]}
// expected-error @below {{body differs from the stages delta-lower-stages builds for its schedule}}
delta.kernel @h_cpu_recurrent of @h <target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32}, max_tokens = 0, source = "spec"> inputs ["q", "k", "v", "beta"] outputs ["o"] {
^bb0(%q: !delta.tensor, %k: !delta.tensor, %v: !delta.tensor, %beta: !delta.tensor):
  %o, %ht = delta.recurrent_step <delta> %q, %k, %v, %beta
  delta.yield %o
}
