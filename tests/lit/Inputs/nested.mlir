// A layer inside a nested module: deltac emits top-level layers only.
delta.layer @top {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}
module @inner {
  delta.layer @deep {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}
}
