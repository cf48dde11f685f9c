// mode = chunked: one kernel, no dispatch; delta rule, vk state.
delta.layer @gen_chunked_only {
  variant = #delta.variant<delta>, heads = 3, key_dim = 128, value_dim = 64,
  state_layout = #delta.layout<vk>, initial_state = true,
  final_state = true, mode = #delta.mode<chunked>
}
