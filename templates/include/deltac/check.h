// Validation of deltac_fwd_params: header-only, used by the runtime and by
// generated code before calling a kernel.
//
// check_params checks the STRUCTURE of a call: variant, dimensions and their
// bounds, N against B and cu_seqlens (its contents too when it is host
// memory), dtypes, layout, the presence and alignment of every pointer, scale,
// qk_l2norm and threads, and the decode fields (check_decode: pool slots,
// accepted counts, the multi-token limit; contents when host memory). check_values checks the VALUES of host tensors
// (finite q/k/v/h0, g <= 0 or -inf, beta in its range): the runtime's
// checking mode (deltac_options.check_values) and `deltac run` call it; the
// kernels' hot path does not. Neither can check what a pointer cannot tell:
// that a buffer is as large as its shape says, or that a device pointer
// points to device memory; with device memory cu_seqlens' contents are the
// caller's duty unless the runtime's device check runs (runtime/README.md).
#ifndef DELTAC_CHECK_H
#define DELTAC_CHECK_H

#include "deltac/params.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace deltac {
namespace detail {

inline bool checkFail(std::string *error, const std::string &msg) {
  if (error)
    *error = msg;
  return false;
}

inline int dtypeSize(int32_t d) {
  return d == DELTAC_F32 ? 4 : d == DELTAC_FP8_E4M3 ? 1 : 2;
}

// The dtype's name as the tuning DB and messages spell it.
inline const char *dtypeName(int32_t d) {
  return d == DELTAC_F32    ? "f32"
         : d == DELTAC_BF16 ? "bf16"
         : d == DELTAC_F16  ? "f16"
         : d == DELTAC_FP8_E4M3 ? "fp8_e4m3"
                                : "?";
}

inline bool isAligned(const void *ptr, std::size_t align) {
  return reinterpret_cast<std::uintptr_t>(ptr) % align == 0;
}

} // namespace detail

// The one bound on the number of sequences N (and so on B). With it and the
// element-count checks below, every index the kernels form fits in int64.
constexpr int64_t kMaxSequences = int64_t(1) << 24;

namespace detail {
inline std::string fieldMsg(const char *field, long long got,
                            const char *expected) {
  std::ostringstream os;
  os << "params." << field << " = " << got << ": expected " << expected;
  return os.str();
}
} // namespace detail

// The part of check_params about sizes and sequences only: variant, B, T, H,
// HV, K, V, N and cu_seqlens (never dtypes or pointers other than
// cu_seqlens). Bounds everything the output sizes are computed from, so a
// caller may size o and ht after it passed.
inline bool check_dims(const deltac_fwd_params &p, std::string *error,
                       bool cu_seqlens_on_host = true) {
  using detail::checkFail;
  auto msg = detail::fieldMsg;

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
  return true;
}

// The decode fields (params.h: state pool, state_steps, accepted). Structure
// always; the contents of read_slots, write_slots and accepted (and
// cu_seqlens' lengths against DELTAC_MAX_DECODE_TOKENS) only when
// on_host: device arrays are the caller's duty or the runtime's device check.
inline bool check_decode(const deltac_fwd_params &p, std::string *error,
                         bool on_host = true) {
  using detail::checkFail;
  auto msg = detail::fieldMsg;
  if (p.num_slots < 0)
    return checkFail(error, msg("num_slots", p.num_slots, ">= 0"));
  if (!p.read_slots) {
    if (p.num_slots != 0)
      return checkFail(error, msg("num_slots", p.num_slots,
                                  "0 without read_slots (no pool)"));
    if (p.write_slots)
      return checkFail(error, "params.write_slots is set but read_slots is "
                              "null: expected read_slots with a pool");
  } else {
    if (p.num_slots <= 0)
      return checkFail(error, msg("num_slots", p.num_slots,
                                  "> 0 with read_slots (the pool's states)"));
    const long double poolElems = (long double)p.num_slots * p.HV * p.K * p.V;
    if (poolElems > 9.0e18L)
      return checkFail(error, "params: num_slots*HV*K*V overflows 64-bit indexing");
  }
  const bool mtp = p.state_steps || p.accepted;
  if (mtp && !p.cu_seqlens && p.T > DELTAC_MAX_DECODE_TOKENS) {
    std::ostringstream os;
    os << "params.T = " << p.T << ": expected at most "
       << DELTAC_MAX_DECODE_TOKENS << " tokens with "
       << (p.state_steps ? "state_steps" : "accepted");
    return checkFail(error, os.str());
  }
  if (!on_host)
    return true;
  auto len = [&](int32_t n) -> int64_t {
    return p.cu_seqlens ? p.cu_seqlens[n + 1] - p.cu_seqlens[n] : p.T;
  };
  if (mtp && p.cu_seqlens)
    for (int32_t n = 0; n < p.N; ++n)
      if (len(n) > DELTAC_MAX_DECODE_TOKENS) {
        std::ostringstream os;
        os << "params.cu_seqlens: sequence " << n << " has " << len(n)
           << " tokens: expected at most " << DELTAC_MAX_DECODE_TOKENS
           << " with " << (p.state_steps ? "state_steps" : "accepted");
        return checkFail(error, os.str());
      }
  if (p.accepted)
    for (int32_t n = 0; n < p.N; ++n)
      if (p.accepted[n] < 0 || p.accepted[n] > len(n)) {
        std::ostringstream os;
        os << "params.accepted[" << n << "] = " << p.accepted[n]
           << ": expected a count in [0, " << len(n)
           << "] (the tokens of sequence " << n << ")";
        return checkFail(error, os.str());
      }
  if (!p.read_slots)
    return true;
  const int32_t *ws = p.write_slots ? p.write_slots : p.read_slots;
  const char *wsName = p.write_slots ? "write_slots" : "read_slots";
  // writer[s]: 1 + the sequence that writes slot s, or 0.
  std::vector<int32_t> writer(size_t(p.num_slots), 0);
  for (int32_t n = 0; n < p.N; ++n) {
    for (int which = 0; which < 2; ++which) {
      const int32_t s = which ? ws[n] : p.read_slots[n];
      if (s < -1 || s >= p.num_slots) {
        std::ostringstream os;
        os << "params." << (which ? wsName : "read_slots") << "[" << n
           << "] = " << s << ": expected a slot in [0, " << p.num_slots
           << ") or -1";
        return checkFail(error, os.str());
      }
    }
    const int32_t s = ws[n];
    if (s < 0)
      continue;
    if (writer[size_t(s)] != 0) {
      std::ostringstream os;
      os << "params." << wsName << "[" << n << "] = " << s
         << ": slot already written by sequence " << writer[size_t(s)] - 1
         << " (each slot is written by at most one sequence per call)";
      return checkFail(error, os.str());
    }
    writer[size_t(s)] = n + 1;
  }
  if (p.h0 && p.h0 == p.ht)
    for (int32_t n = 0; n < p.N; ++n) {
      const int32_t s = p.read_slots[n];
      if (s >= 0 && writer[size_t(s)] != 0 && writer[size_t(s)] != n + 1) {
        std::ostringstream os;
        os << "params.read_slots[" << n << "] = " << s
           << ": slot written by sequence " << writer[size_t(s)] - 1
           << " in the same call (h0 == ht: a sequence may read only slots "
              "no other sequence writes)";
        return checkFail(error, os.str());
      }
    }
  return true;
}

// Returns true when p's structure is one the kernels can run (its values are
// check_values' business). On failure returns false and, when error is non-null, stores a one-line
// message naming the field and what was expected.
//
// cu_seqlens_on_host = false is for callers whose cu_seqlens is device
// memory: the pointer's presence, alignment and the N/B rules are checked,
// but its contents are not read. The kernels then trust those contents: the
// caller must guarantee cu_seqlens[0] == 0, non-decreasing values and
// cu_seqlens[N] == T (other values make the kernels read or write out of
// bounds), or has them checked on the device (the runtime's checking mode).
// The same flag says whether read_slots, write_slots and accepted are host
// memory (their contents checked) or device memory (the kernels stay in
// bounds whatever they hold: slots out of range are skipped, counts clamped).
inline bool check_params(const deltac_fwd_params &p, std::string *error,
                         bool cu_seqlens_on_host = true) {
  using detail::checkFail;
  auto msg = detail::fieldMsg;
  if (!check_dims(p, error, cu_seqlens_on_host))
    return false;

  // Dtypes and layout (which kernel family takes which dtypes is the
  // catalogue's check_family: f16 runs on CUDA's chunked kernel only).
  if (p.in_dtype < DELTAC_F32 || p.in_dtype > DELTAC_F16)
    return checkFail(error, msg("in_dtype", p.in_dtype,
                                "0 (f32), 1 (bf16) or 2 (f16)"));
  if (p.out_dtype < DELTAC_F32 || p.out_dtype > DELTAC_F16)
    return checkFail(error, msg("out_dtype", p.out_dtype,
                                "0 (f32), 1 (bf16) or 2 (f16)"));
  if (p.state_dtype != DELTAC_F32 && p.state_dtype != DELTAC_BF16 &&
      p.state_dtype != DELTAC_FP8_E4M3)
    return checkFail(error, msg("state_dtype", p.state_dtype,
                                "0 (f32), 1 (bf16) or 3 (fp8 e4m3)"));
  if (p.state_scale && p.state_dtype != DELTAC_FP8_E4M3)
    return checkFail(error, "params.state_scale is set: it applies to fp8 "
                            "e4m3 states only (state_dtype 3), expected null");
  if (p.state_layout != DELTAC_STATE_KV && p.state_layout != DELTAC_STATE_VK)
    return checkFail(error, msg("state_layout", p.state_layout,
                                "0 (KV) or 1 (VK)"));

  // Pointers: presence and alignment to the element size.
  const std::size_t inSize = detail::dtypeSize(p.in_dtype);
  const std::size_t outSize = detail::dtypeSize(p.out_dtype);
  const std::size_t stateSize = detail::dtypeSize(p.state_dtype);
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
      {"g", p.g, gated, 4},          {"h0", p.h0, false, stateSize},
      {"o", p.o, true, outSize},     {"ht", p.ht, false, stateSize},
      {"read_slots", p.read_slots, false, 4},
      {"write_slots", p.write_slots, false, 4},
      {"state_steps", p.state_steps, false, stateSize},
      {"accepted", p.accepted, false, 4},
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
  return check_decode(p, error, cu_seqlens_on_host);
}

namespace detail {

// bf16/f16 bits whose exponent is all ones: inf or NaN.
inline bool finite16(uint16_t x, int32_t dtype) {
  return dtype == DELTAC_BF16 ? (x & 0x7f80u) != 0x7f80u
                              : (x & 0x7c00u) != 0x7c00u;
}

inline std::string valueMsg(const char *name, int64_t i, float x,
                            const std::string &expected) {
  std::ostringstream os;
  os << "params." << name << "[" << i << "] = " << x << ": expected "
     << expected;
  return os.str();
}

// First element of n (dtype) that is not finite, or -1.
inline int64_t firstNonFinite(const void *ptr, int32_t dtype, int64_t n,
                              float *value) {
  if (dtype == DELTAC_F32) {
    const float *x = static_cast<const float *>(ptr);
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(x[i])) {
        *value = x[i];
        return i;
      }
    return -1;
  }
  if (dtype == DELTAC_FP8_E4M3) { // e4m3fn: no inf, NaN is S.1111.111
    const uint8_t *b = static_cast<const uint8_t *>(ptr);
    for (int64_t i = 0; i < n; ++i)
      if ((b[i] & 0x7fu) == 0x7fu) {
        *value = NAN;
        return i;
      }
    return -1;
  }
  const uint16_t *x = static_cast<const uint16_t *>(ptr);
  for (int64_t i = 0; i < n; ++i)
    if (!finite16(x[i], dtype)) {
      // inf or nan: the sign and whether any mantissa bit is set say which.
      const bool nan = dtype == DELTAC_BF16 ? (x[i] & 0x7f) : (x[i] & 0x3ff);
      *value = nan ? NAN : (x[i] & 0x8000u) ? -INFINITY : INFINITY;
      return i;
    }
  return -1;
}

} // namespace detail

// One value that fails the checking mode's rules.
struct BadValue {
  const char *tensor = nullptr; // "q", "k", "v", "h0", "g", "beta", ...
  int64_t index = -1;           // flat element index
  float value = 0;
  std::string expected; // "finite values", "values in [0, 1]", ...
};

// Checking mode: the values of a call whose tensors are HOST memory and
// which passed check_params. Finds, in the order state_scale, q, k, v, h0,
// g, beta, the first element that breaks a rule:
//   state_scale not a finite value > 0;
//   q, k, v, h0 not finite (inf or NaN);
//   g NaN or > 0 (g = -inf is allowed: a decay of 0, a full reset);
//   beta NaN or outside [0, beta_max] (beta_max 1, or 2 for negative
//   eigenvalues).
// Returns false and fills *bad when one does. cu_seqlens is checked by
// check_params; o and ht are outputs, never read.
inline bool find_bad_value(const deltac_fwd_params &p, float beta_max,
                           BadValue *bad) {
  const int64_t tok = int64_t(p.B) * p.T;
  const int64_t nqk = tok * p.H * p.K, nv = tok * p.HV * p.V;
  const int64_t nb = tok * p.HV;
  const int64_t ng = p.variant == DELTAC_VARIANT_KDA     ? nb * p.K
                     : p.variant == DELTAC_VARIANT_GATED ? nb
                                                         : 0;
  const int64_t ns =
      int64_t(p.read_slots ? p.num_slots : p.N) * p.HV * p.K * p.V;
  struct Input {
    const char *name;
    const void *ptr;
    int32_t dtype;
    int64_t n;
  };
  const Input finite[] = {{"q", p.q, p.in_dtype, nqk},
                          {"k", p.k, p.in_dtype, nqk},
                          {"v", p.v, p.in_dtype, nv},
                          {"h0", p.h0, p.state_dtype, ns}};
  if (p.state_scale)
    for (int64_t i = 0; i < p.HV; ++i)
      if (!(std::isfinite(p.state_scale[i]) && p.state_scale[i] > 0.0f)) {
        *bad = {"state_scale", i, p.state_scale[i], "finite values > 0"};
        return false;
      }
  for (const Input &in : finite) {
    float x = 0;
    const int64_t i =
        in.ptr ? detail::firstNonFinite(in.ptr, in.dtype, in.n, &x) : -1;
    if (i >= 0) {
      *bad = {in.name, i, x, "finite values"};
      return false;
    }
  }
  if (p.g)
    for (int64_t i = 0; i < ng; ++i)
      if (!(p.g[i] <= 0.0f)) { // NaN or > 0; -inf passes
        *bad = {"g", i, p.g[i], "log decays <= 0 (-inf: a reset)"};
        return false;
      }
  for (int64_t i = 0; i < nb; ++i)
    if (!(p.beta[i] >= 0.0f && p.beta[i] <= beta_max)) {
      std::ostringstream os;
      os << "values in [0, " << beta_max << "]";
      *bad = {"beta", i, p.beta[i], os.str()};
      return false;
    }
  return true;
}

// find_bad_value with a one-line message: "params.beta[7] = 1.5: expected
// values in [0, 1]".
inline bool check_values(const deltac_fwd_params &p, float beta_max,
                         std::string *error) {
  BadValue bad;
  if (find_bad_value(p, beta_max, &bad))
    return true;
  return detail::checkFail(error, detail::valueMsg(bad.tensor, bad.index,
                                                   bad.value, bad.expected));
}

} // namespace deltac

#endif // DELTAC_CHECK_H
