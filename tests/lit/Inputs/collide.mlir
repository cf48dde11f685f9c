// @a's CPU chunked kernel (mode chunked) would be named @a_cpu_chunked.
delta.layer @a {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, mode = #delta.mode<chunked>}
delta.layer @a_cpu_chunked {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}
