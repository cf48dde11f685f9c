// The CPU kernel families of the catalogue (deltac/catalogue.h), each with
// its knobs as template parameters, and the one place that turns a
// KernelConfig into a template instance (FlashAttention-style switch):
//
//   deltac::cpu::recurrent_tiled<Var, TileV, KC, VC>(p)  family cpu_recurrent
//   deltac::cpu::decode<Var, TileV, KC, VC>(p)           family cpu_decode
//   deltac::cpu::chunked<Var, Chunk, KC, VC>(p)          family cpu_chunked
//   deltac::cpu::launch<Var, KC, VC>(config, p)          any of them
//   deltac::cpu::launch_dims<Var>(config, p)             over DELTAC_CPU_DIMS
//
// Knob values come first, then the dims (KC/VC = 0: K/V read from p, else
// they must equal p.K/p.V), as chunked<> always had them. Every entry assumes
// p passed deltac::check_params and the config deltac::check_config for p's
// problem (tile_v divides V; decode: no sequence longer than one token).
#ifndef DELTAC_CPU_LAUNCH_H
#define DELTAC_CPU_LAUNCH_H

#include "deltac/catalogue.h"
#include "deltac/cpu/forward.h"

namespace deltac::cpu { inline namespace DELTAC_CPU_NS {

// Token-by-token recurrence over state tiles of TileV columns.
template <deltac_variant Var, int TileV, int KC = 0, int VC = 0>
void recurrent_tiled(const deltac_fwd_params& p) {
  static_assert(TileV == 16 || TileV == 32, "tile_v: 16 or 32");
  static_assert(VC == 0 || VC % TileV == 0, "tile_v must divide V");
  detail::recurrent_impl<Var, TileV, KC, VC>(p);
}

// One token per sequence (at most), two-pass tiled, in place allowed, any
// state dtype. state_steps or accepted counts run the tiled recurrence with
// the same tile, 32 columns for the wider ones (decode.h: decode_fast).
template <deltac_variant Var, int TileV, int KC = 0, int VC = 0>
void decode(const deltac_fwd_params& p) {
  static_assert(TileV == 16 || TileV == 32 || TileV == 64 || TileV == 128,
                "tile_v: 16, 32, 64 or 128");
  static_assert(VC == 0 || VC % TileV == 0, "tile_v must divide V");
  if (detail::decode_fast(p))
    detail::decode_impl<Var, TileV, KC, VC>(p);
  else
    detail::recurrent_impl<Var, (TileV > 32 ? 32 : TileV), KC, VC>(p);
}

namespace detail {

template <deltac_variant Var, int TileV, int KC, int VC>
bool launch_tiled(Family f, const deltac_fwd_params& p) {
  if constexpr (VC != 0 && VC % TileV != 0) {
    return false;  // no such instance: check_config rejects it
  } else if constexpr (TileV > 32) {  // cpu_decode's wide tiles
    if (f != Family::CpuDecode)
      return false;
    decode<Var, TileV, KC, VC>(p);
    return true;
  } else {
    if (f == Family::CpuDecode)
      decode<Var, TileV, KC, VC>(p);
    else
      recurrent_tiled<Var, TileV, KC, VC>(p);
    return true;
  }
}

}  // namespace detail

// Runs c with the instance for dims KC, VC. Returns false (nothing ran) when
// c is not a CPU family or names a knob value without an instance.
template <deltac_variant Var, int KC, int VC>
bool launch(const KernelConfig& c, const deltac_fwd_params& p) {
  switch (c.family) {
    case Family::CpuRecurrent:
    case Family::CpuDecode:
      if (c.tile_v == 16)
        return detail::launch_tiled<Var, 16, KC, VC>(c.family, p);
      if (c.tile_v == 32)
        return detail::launch_tiled<Var, 32, KC, VC>(c.family, p);
      if (c.tile_v == 64)
        return detail::launch_tiled<Var, 64, KC, VC>(c.family, p);
      if (c.tile_v == 128)
        return detail::launch_tiled<Var, 128, KC, VC>(c.family, p);
      return false;
    case Family::CpuChunked:
      switch (c.chunk) {
        case 16: chunked<Var, 16, KC, VC>(p); return true;
        case 32: chunked<Var, 32, KC, VC>(p); return true;
        case 64: chunked<Var, 64, KC, VC>(p); return true;
        default: return false;
      }
    default:
      return false;
  }
}

// launch() with the first instance of DELTAC_CPU_DIMS that fits p (K = V = 0,
// the dims-at-run-time instance, fits every p). *specialized says whether a
// compile-time K/V instance ran.
template <deltac_variant Var>
bool launch_dims(const KernelConfig& c, const deltac_fwd_params& p,
                 bool* specialized) {
#define DELTAC_X(k, v)                                    \
  if ((k == 0 && v == 0) || (p.K == k && p.V == v)) {     \
    *specialized = k != 0;                                \
    return launch<Var, k, v>(c, p);                       \
  }
  DELTAC_CPU_DIMS(DELTAC_X)
#undef DELTAC_X
  return false;
}

}}  // namespace deltac::cpu::DELTAC_CPU_NS

#endif  // DELTAC_CPU_LAUNCH_H
