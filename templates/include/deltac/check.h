// Validation of deltac_fwd_params: header-only, used by the runtime and by
// generated code before calling a kernel. The kernels assume a validated
// params struct, so everything they rely on is checked here.
#ifndef DELTAC_CHECK_H
#define DELTAC_CHECK_H

#include "deltac/params.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

namespace deltac {
namespace detail {

inline bool checkFail(std::string *error, const std::string &msg) {
  if (error)
    *error = msg;
  return false;
}

inline int dtypeSize(int32_t d) { return d == DELTAC_F32 ? 4 : 2; }

inline bool isAligned(const void *ptr, std::size_t align) {
  return reinterpret_cast<std::uintptr_t>(ptr) % align == 0;
}

} // namespace detail

// The one bound on the number of sequences N (and so on B). With it and the
// element-count checks below, every index the kernels form fits in int64.
constexpr int64_t kMaxSequences = int64_t(1) << 24;

// Returns true when p describes a forward call the kernels can run. On
// failure returns false and, when error is non-null, stores a one-line
// message naming the field and what was expected.
//
// cu_seqlens_on_host = false is for callers whose cu_seqlens is device
// memory: the pointer's presence, alignment and the N/B rules are checked,
// but its contents are not read. The kernels then trust those contents: the
// caller must guarantee cu_seqlens[0] == 0, non-decreasing values and
// cu_seqlens[N] == T (other values make the kernels read or write out of
// bounds).
inline bool check_params(const deltac_fwd_params &p, std::string *error,
                         bool cu_seqlens_on_host = true) {
  using detail::checkFail;
  auto msg = [](const char *field, long long got, const char *expected) {
    std::ostringstream os;
    os << "params." << field << " = " << got << ": expected " << expected;
    return os.str();
  };

  if (p.variant != DELTAC_VARIANT_DELTA && p.variant != DELTAC_VARIANT_GATED &&
      p.variant != DELTAC_VARIANT_KDA)
    return checkFail(error, msg("variant", p.variant,
                                "0 (delta), 1 (gated) or 2 (kda)"));

  // Dimensions.
  if (p.B <= 0)
    return checkFail(error, msg("B", p.B, "> 0"));
  if (p.T <= 0)
    return checkFail(error, msg("T", p.T, "> 0"));
  if (p.H <= 0)
    return checkFail(error, msg("H", p.H, "> 0"));
  if (p.HV <= 0)
    return checkFail(error, msg("HV", p.HV, "> 0"));
  if (p.HV % p.H != 0) {
    std::ostringstream os;
    os << "params.HV = " << p.HV << ": expected a multiple of H = " << p.H;
    return checkFail(error, os.str());
  }
  if (p.K < 16 || p.K > 256 || p.K % 16 != 0)
    return checkFail(error,
                     msg("K", p.K, "a multiple of 16 in [16, 256]"));
  if (p.V < 16 || p.V > 256 || p.V % 16 != 0)
    return checkFail(error,
                     msg("V", p.V, "a multiple of 16 in [16, 256]"));
  // Element counts must fit comfortably in 64-bit indices.
  const long double elems =
      (long double)p.B * p.T * p.HV * (p.K > p.V ? p.K : p.V);
  if (elems > 9.0e18L)
    return checkFail(error, "params: B*T*HV*max(K,V) overflows 64-bit indexing");
  if (p.N <= 0 || p.N > kMaxSequences) {
    std::ostringstream os;
    os << "params.N = " << p.N << ": expected a sequence count in [1, "
       << kMaxSequences << "]";
    return checkFail(error, os.str());
  }
  const long double stateElems = (long double)p.N * p.HV * p.K * p.V;
  if (stateElems > 9.0e18L)
    return checkFail(error, "params: N*HV*K*V overflows 64-bit indexing");

  // Sequences.
  if (p.cu_seqlens) {
    if (p.B != 1)
      return checkFail(error,
                       msg("B", p.B, "1 when cu_seqlens is given"));
    if (!detail::isAligned(p.cu_seqlens, alignof(int64_t)))
      return checkFail(error, "params.cu_seqlens: expected 8-byte alignment");
  }
  if (p.cu_seqlens && cu_seqlens_on_host) {
    if (p.cu_seqlens[0] != 0)
      return checkFail(error, msg("cu_seqlens[0]", (long long)p.cu_seqlens[0],
                                  "0"));
    for (int32_t n = 0; n < p.N; ++n) {
      if (p.cu_seqlens[n + 1] < p.cu_seqlens[n]) {
        std::ostringstream os;
        os << "params.cu_seqlens[" << n + 1 << "] = " << p.cu_seqlens[n + 1]
           << ": expected non-decreasing values (>= " << p.cu_seqlens[n]
           << ")";
        return checkFail(error, os.str());
      }
    }
    if (p.cu_seqlens[p.N] != p.T) {
      std::ostringstream os;
      os << "params.cu_seqlens[N=" << p.N << "] = " << p.cu_seqlens[p.N]
         << ": expected T = " << p.T;
      return checkFail(error, os.str());
    }
  } else if (!p.cu_seqlens && p.N != p.B) {
    std::ostringstream os;
    os << "params.N = " << p.N << ": expected N == B = " << p.B
       << " without cu_seqlens";
    return checkFail(error, os.str());
  }

  // Dtypes and layout.
  if (p.in_dtype != DELTAC_F32 && p.in_dtype != DELTAC_BF16)
    return checkFail(error, msg("in_dtype", p.in_dtype,
                                "0 (f32) or 1 (bf16)"));
  if (p.out_dtype != DELTAC_F32 && p.out_dtype != DELTAC_BF16)
    return checkFail(error, msg("out_dtype", p.out_dtype,
                                "0 (f32) or 1 (bf16)"));
  if (p.state_dtype != DELTAC_F32)
    return checkFail(error, msg("state_dtype", p.state_dtype, "0 (f32)"));
  if (p.state_layout != DELTAC_STATE_KV && p.state_layout != DELTAC_STATE_VK)
    return checkFail(error, msg("state_layout", p.state_layout,
                                "0 (KV) or 1 (VK)"));

  // Pointers: presence and alignment to the element size.
  const std::size_t inSize = detail::dtypeSize(p.in_dtype);
  const std::size_t outSize = detail::dtypeSize(p.out_dtype);
  struct Ptr {
    const char *name;
    const void *ptr;
    bool required;
    std::size_t align;
  };
  const bool gated = p.variant != DELTAC_VARIANT_DELTA;
  const Ptr ptrs[] = {
      {"q", p.q, true, inSize},      {"k", p.k, true, inSize},
      {"v", p.v, true, inSize},      {"beta", p.beta, true, 4},
      {"g", p.g, gated, 4},          {"h0", p.h0, false, 4},
      {"o", p.o, true, outSize},     {"ht", p.ht, false, 4},
  };
  for (const Ptr &x : ptrs) {
    if (!x.ptr) {
      if (!x.required)
        continue;
      std::string m = std::string("params.") + x.name +
                      " is null: expected a pointer";
      if (x.name[0] == 'g' && x.name[1] == 0)
        m += " (required for the gated and kda variants)";
      return checkFail(error, m);
    }
    if (!detail::isAligned(x.ptr, x.align)) {
      std::ostringstream os;
      os << "params." << x.name << ": expected " << x.align
         << "-byte alignment";
      return checkFail(error, os.str());
    }
  }

  // 0 selects the default 1/sqrt(K) (the convention of the kernels).
  if (!std::isfinite(p.scale) || p.scale < 0.0f) {
    std::ostringstream os;
    os << "params.scale = " << p.scale
       << ": expected a finite value > 0 (or 0 for 1/sqrt(K))";
    return checkFail(error, os.str());
  }
  if (p.qk_l2norm != 0 && p.qk_l2norm != 1)
    return checkFail(error, msg("qk_l2norm", p.qk_l2norm, "0 or 1"));
  if (p.threads < 0)
    return checkFail(error, msg("threads", p.threads, ">= 0 (0 = all cores)"));
  return true;
}

} // namespace deltac

#endif // DELTAC_CHECK_H
