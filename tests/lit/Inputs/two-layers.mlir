// Two layers in one spec: each gets its sources and header; one manifest.
delta.layer @first {variant = #delta.variant<delta>, heads = 2, key_dim = 32, value_dim = 32}
delta.layer @second {variant = #delta.variant<kda>, heads = 2, key_dim = 32, value_dim = 64, mode = #delta.mode<recurrent>}
