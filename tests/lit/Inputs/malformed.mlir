// A spec with a syntax error.
delta.layer @broken {
  variant = #delta.variant<gated>, heads = 16,, key_dim = 128
}
