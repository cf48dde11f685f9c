// K = 20 is not a multiple of 16.
delta.layer @bad {variant = #delta.variant<delta>, heads = 4, key_dim = 20, value_dim = 64}
