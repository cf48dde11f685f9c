// The C entries the Python package (deltac/_lib.py, ctypes) calls besides the
// runtime's own: the layout of deltac_fwd_params, which the package mirrors
// and checks at import, and a forward call that takes the few options it sets
// as plain arguments, so that deltac_options and deltac_run_info can grow
// (new fields keep deltac_default_options()' values) without the package
// mirroring them.
#include "deltac/runtime.h"

#include <cstddef>

namespace {
// out[0..n) = v[0..n); returns total (the number of values, may exceed n).
int copy_layout(const long long *v, int total, long long *out, int n) {
  for (int i = 0; i < n && i < total; ++i)
    out[i] = v[i];
  return total;
}
} // namespace

extern "C" {

// Fills out[0..n) with sizeof(deltac_fwd_params), then the offset of each
// field in declaration order. Returns the number of values (may exceed n).
int deltac_abi_layout(long long *out, int n) {
  const long long v[] = {
      (long long)sizeof(deltac_fwd_params),
      (long long)offsetof(deltac_fwd_params, variant),
      (long long)offsetof(deltac_fwd_params, B),
      (long long)offsetof(deltac_fwd_params, T),
      (long long)offsetof(deltac_fwd_params, H),
      (long long)offsetof(deltac_fwd_params, HV),
      (long long)offsetof(deltac_fwd_params, K),
      (long long)offsetof(deltac_fwd_params, V),
      (long long)offsetof(deltac_fwd_params, N),
      (long long)offsetof(deltac_fwd_params, in_dtype),
      (long long)offsetof(deltac_fwd_params, out_dtype),
      (long long)offsetof(deltac_fwd_params, state_dtype),
      (long long)offsetof(deltac_fwd_params, state_layout),
      (long long)offsetof(deltac_fwd_params, q),
      (long long)offsetof(deltac_fwd_params, k),
      (long long)offsetof(deltac_fwd_params, v),
      (long long)offsetof(deltac_fwd_params, g),
      (long long)offsetof(deltac_fwd_params, beta),
      (long long)offsetof(deltac_fwd_params, h0),
      (long long)offsetof(deltac_fwd_params, o),
      (long long)offsetof(deltac_fwd_params, ht),
      (long long)offsetof(deltac_fwd_params, cu_seqlens),
      (long long)offsetof(deltac_fwd_params, scale),
      (long long)offsetof(deltac_fwd_params, qk_l2norm),
      (long long)offsetof(deltac_fwd_params, threads),
      (long long)offsetof(deltac_fwd_params, num_slots),
      (long long)offsetof(deltac_fwd_params, read_slots),
      (long long)offsetof(deltac_fwd_params, write_slots),
      (long long)offsetof(deltac_fwd_params, state_steps),
      (long long)offsetof(deltac_fwd_params, accepted),
      (long long)offsetof(deltac_fwd_params, state_scale),
  };
  return copy_layout(v, int(sizeof(v) / sizeof(v[0])), out, n);
}

// deltac_forward_info with deltac_default_options() and these set; flags:
// bit 0 device_pointers, bit 1 allow_neg_eigval (beta may exceed 1).
// ran (may be NULL) receives what ran: device, mode, chunk, specialized.
// saved, saved_bytes: options.saved_states (deltac_py_call_forward_saved).
static int py_forward(const deltac_fwd_params *p, int32_t device, int32_t mode, int32_t chunk,
                      int32_t flags, void *cuda_stream, int32_t *ran, void *saved,
                      size_t saved_bytes) {
  deltac_options opt = deltac_default_options();
  opt.saved_states = saved;
  opt.saved_states_bytes = saved_bytes;
  opt.device = device;
  opt.mode = mode;
  opt.chunk = chunk;
  opt.device_pointers = flags & 1;
  opt.allow_neg_eigval = (flags >> 1) & 1;
  opt.cuda_stream = cuda_stream;
  deltac_run_info info;
  const int rc = deltac_forward_info(p, &opt, &info);
  if (rc == 0 && ran) {
    ran[0] = info.device;
    ran[1] = info.mode;
    ran[2] = info.chunk;
    ran[3] = info.specialized;
  }
  return rc;
}

int deltac_py_forward(const deltac_fwd_params *p, int32_t device, int32_t mode,
                      int32_t chunk, int32_t flags, void *cuda_stream,
                      int32_t *ran) {
  return py_forward(p, device, mode, chunk, flags, cuda_stream, ran, nullptr, 0);
}

// One call in one struct: the params, then deltac_py_forward's options. The
// package packs it with one struct.pack (deltac/_lib.py CALL_STRUCT) and
// passes one pointer: ctypes converts each argument it is given (~0.15 us per
// int32), so one argument instead of seven saves ~1 us per call.
struct deltac_py_call {
  deltac_fwd_params p;
  int32_t device, mode, chunk, flags; // flags: deltac_py_forward's
  void *cuda_stream;
};

// sizeof(deltac_py_call), then the offsets of p, device, mode, chunk,
// flags, cuda_stream. Returns the number of values.
int deltac_abi_call_layout(long long *out, int n) {
  const long long v[] = {
      (long long)sizeof(deltac_py_call),
      (long long)offsetof(deltac_py_call, p),
      (long long)offsetof(deltac_py_call, device),
      (long long)offsetof(deltac_py_call, mode),
      (long long)offsetof(deltac_py_call, chunk),
      (long long)offsetof(deltac_py_call, flags),
      (long long)offsetof(deltac_py_call, cuda_stream),
  };
  return copy_layout(v, int(sizeof(v) / sizeof(v[0])), out, n);
}

// deltac_py_forward on a packed call (what ran is not reported).
int deltac_py_call_forward(const deltac_py_call *c) {
  if (!c) // the runtime's "params is null" error
    return deltac_forward_info(nullptr, nullptr, nullptr);
  return deltac_py_forward(&c->p, c->device, c->mode, c->chunk, c->flags, c->cuda_stream,
                           nullptr);
}

// The same with options.saved_states (the backward's saved states).
int deltac_py_call_forward_saved(const deltac_py_call *c, void *saved, size_t saved_bytes) {
  if (!c)
    return deltac_forward_info(nullptr, nullptr, nullptr);
  return py_forward(&c->p, c->device, c->mode, c->chunk, c->flags, c->cuda_stream, nullptr,
                    saved, saved_bytes);
}

// deltac_abi_layout for deltac_bwd_params (deltac/backward.h).
int deltac_abi_bwd_layout(long long *out, int n) {
#define DELTAC_OFF(f) (long long)offsetof(deltac_bwd_params, f)
  const long long v[] = {
      (long long)sizeof(deltac_bwd_params),
      DELTAC_OFF(variant), DELTAC_OFF(B), DELTAC_OFF(T), DELTAC_OFF(H),
      DELTAC_OFF(HV), DELTAC_OFF(K), DELTAC_OFF(V), DELTAC_OFF(N),
      DELTAC_OFF(in_dtype), DELTAC_OFF(out_dtype), DELTAC_OFF(state_layout),
      DELTAC_OFF(q), DELTAC_OFF(k), DELTAC_OFF(v), DELTAC_OFF(g),
      DELTAC_OFF(beta), DELTAC_OFF(h0), DELTAC_OFF(dout), DELTAC_OFF(dht),
      DELTAC_OFF(dq), DELTAC_OFF(dk), DELTAC_OFF(dv), DELTAC_OFF(dg),
      DELTAC_OFF(dbeta), DELTAC_OFF(dh0), DELTAC_OFF(cu_seqlens),
      DELTAC_OFF(scale), DELTAC_OFF(qk_l2norm), DELTAC_OFF(threads),
      DELTAC_OFF(chunk), DELTAC_OFF(saved_states), DELTAC_OFF(saved_states_bytes),
  };
#undef DELTAC_OFF
  return copy_layout(v, int(sizeof(v) / sizeof(v[0])), out, n);
}

// deltac_backward with deltac_default_options() and these set; with need
// non-NULL, deltac_backward_workspace_size into *need instead.
int deltac_py_backward(const deltac_bwd_params *p, int32_t device_pointers, void *cuda_stream,
                       void *workspace, size_t workspace_bytes, size_t *need) {
  deltac_options opt = deltac_default_options();
  opt.device_pointers = device_pointers;
  opt.cuda_stream = cuda_stream;
  opt.workspace = workspace;
  opt.workspace_bytes = workspace_bytes;
  if (need)
    return deltac_backward_workspace_size(p, &opt, need);
  return deltac_backward(p, &opt);
}

} // extern "C"
