// Named tensors -> deltac_fwd_params: the one binder of `deltac run`, the
// tests and language bindings (a PyTorch extension passes its tensors'
// data pointers, dtypes and shapes). It derives B, T, H, HV, K, V and N from
// the shapes, checks every tensor against them and against the variant, and
// names the tensor (its label) in every message, e.g.
//   "k: shape (2, 45, 1, 16): expected (2, 45, 1, 32) [B, T, H, K] (as q)".
// Tensors must be dense, C order (row-major, no strides); the binder does
// not read any value except cu_seqlens when it is host memory.
#ifndef DELTAC_BIND_H
#define DELTAC_BIND_H

#include "deltac/params.h"

#include <cstdint>
#include <string>
#include <vector>

namespace deltac {

enum class ElemType : int32_t { F32, BF16, F16, I32, I64 };
const char *elem_name(ElemType t); // "float32", "bfloat16", ...

struct TensorArg {
  const void *data = nullptr; // device or host memory
  ElemType dtype = ElemType::F32;
  std::vector<int64_t> shape;
  // Names the tensor in messages (a file path, an argument name); empty:
  // the field's name ("q", "cu_seqlens", ...).
  std::string label;
  // Absent: no data and no shape (an optional tensor not given).
  bool present() const { return data != nullptr || !shape.empty(); }
};

struct ForwardTensors {
  int32_t variant = DELTAC_VARIANT_GATED; // deltac_variant
  // Inputs. q, k [B,T,H,K] and v [B,T,HV,V] f32 or bf16 (one dtype); beta
  // [B,T,HV] f32; g f32 (gated [B,T,HV], kda [B,T,HV,K], absent for delta);
  // h0 [N,HV,K,V] ([N,HV,V,K] for the VK layout) f32, optional; cu_seqlens
  // [N+1] int64, optional (then B = 1).
  TensorArg q, k, v, beta, g, h0, cu_seqlens;
  // Outputs: o [B,T,HV,V] f32 or bf16; ht like h0, optional.
  TensorArg o, ht;
  int32_t state_layout = DELTAC_STATE_KV;
  float scale = 0; // 0 = 1/sqrt(K)
  int32_t qk_l2norm = 0;
  int32_t threads = 0;
  // false when cu_seqlens is device memory (its contents are then not read).
  bool cu_seqlens_on_host = true;
};

// Fills every field of *p from t's inputs and options (o and ht null) and
// checks them, including deltac::check_dims (N is bounded here, so o_shape
// and state_shape below are safe to allocate from). Returns false with a
// one-line *error naming the tensor; *p is then unspecified.
bool bind_inputs(const ForwardTensors &t, deltac_fwd_params *p,
                 std::string *error);
// Adds t's o and ht to *p (from bind_inputs) and runs deltac::check_params.
bool bind_outputs(const ForwardTensors &t, deltac_fwd_params *p,
                  std::string *error);
// Both.
bool bind_params(const ForwardTensors &t, deltac_fwd_params *p,
                 std::string *error);

// Shapes of the outputs of a bound call: o [B,T,HV,V], the state [N,HV,K,V]
// (V-first for the VK layout).
std::vector<int64_t> o_shape(const deltac_fwd_params &p);
std::vector<int64_t> state_shape(const deltac_fwd_params &p);

} // namespace deltac

#endif // DELTAC_BIND_H
