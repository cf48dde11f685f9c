// deltac_backward: checks a deltac_bwd_params (naming the field) and runs the
// CPU backward (deltac/cpu/backward.h) of the active instruction set, or with
// device pointers the CUDA backward (cuda_backward.cu).
#include "deltac/runtime.h"

#include "deltac/check.h"
#include "deltac/cpu/isa.h"
#include "cuda_backward.h"
#include "dispatch.h"

#include <cmath>
#include <exception>
#include <new>
#include <sstream>
#include <string>

namespace deltac::rt {
void cpu_backward_bwd_generic(const deltac_bwd_params&);
#if defined(__x86_64__) || defined(_M_X64)
void cpu_backward_bwd_avx2(const deltac_bwd_params&);
void cpu_backward_bwd_avx512(const deltac_bwd_params&);
#endif
}  // namespace deltac::rt

namespace {

int fail(const std::string& msg) { return deltac::rt::set_last_error(msg); }

std::string field(const char* name, long long got, const char* expected) {
  std::ostringstream os;
  os << "params." << name << " = " << got << ": expected " << expected;
  return os.str();
}

// "" when p is a call the CPU (cuda: the CUDA) backward can run, else the message.
std::string check(const deltac_bwd_params& p, bool cuda = false) {
  // Dims, N and cu_seqlens: the forward's rules (deltac/check.h).
  deltac_fwd_params f{};
  f.variant = p.variant;
  f.B = p.B, f.T = p.T, f.H = p.H, f.HV = p.HV, f.K = p.K, f.V = p.V, f.N = p.N;
  f.cu_seqlens = p.cu_seqlens;
  std::string err;
  if (!deltac::check_dims(f, &err, /*cu_seqlens_on_host=*/!cuda)) return err;
  if (cuda) {
    const std::string why = deltac::rt::cuda_backward_unsupported(p);
    if (!why.empty()) return why;
  }
  const bool f64 = p.in_dtype == DELTAC_BWD_F64;
  const bool f16 = cuda && p.in_dtype == DELTAC_F16;
  if (p.in_dtype != DELTAC_F32 && p.in_dtype != DELTAC_BF16 && !f64 && !f16)
    return field("in_dtype", p.in_dtype, "0 (f32), 1 (bf16) or 3 (DELTAC_BWD_F64)");
  if (f64 ? p.out_dtype != DELTAC_BWD_F64
          : (p.out_dtype != DELTAC_F32 && p.out_dtype != DELTAC_BF16 &&
             !(cuda && p.out_dtype == DELTAC_F16)))
    return field("out_dtype", p.out_dtype,
                 f64 ? "3 (DELTAC_BWD_F64, as in_dtype)" : "0 (f32) or 1 (bf16)");
  if (p.state_layout != DELTAC_STATE_KV && p.state_layout != DELTAC_STATE_VK)
    return field("state_layout", p.state_layout, "0 (KV) or 1 (VK)");
  const size_t in = f64 ? 8 : p.in_dtype == DELTAC_F32 ? 4 : 2;
  const size_t out = f64 ? 8 : p.out_dtype == DELTAC_F32 ? 4 : 2;  // bf16, f16: 2
  const size_t fl = f64 ? 8 : 4;
  const bool gated = p.variant != DELTAC_VARIANT_DELTA;
  struct Ptr {
    const char* name;
    const void* ptr;
    bool required;
    size_t align;
  };
  const Ptr ptrs[] = {
      {"q", p.q, true, in},         {"k", p.k, true, in},       {"v", p.v, true, in},
      {"g", p.g, gated, fl},        {"beta", p.beta, true, fl}, {"h0", p.h0, false, fl},
      {"dout", p.dout, true, out},  {"dht", p.dht, false, fl},  {"dq", p.dq, true, in},
      {"dk", p.dk, true, in},       {"dv", p.dv, true, in},     {"dg", p.dg, gated, fl},
      {"dbeta", p.dbeta, true, fl}, {"dh0", p.dh0, false, fl},
  };
  for (const Ptr& x : ptrs) {
    if (!x.ptr) {
      if (!x.required) continue;
      std::string m = std::string("params.") + x.name + " is null: expected a pointer";
      if (x.name == std::string("g") || x.name == std::string("dg"))
        m += " (required for the gated and kda variants)";
      return m;
    }
    if (reinterpret_cast<uintptr_t>(x.ptr) % x.align) {
      std::ostringstream os;
      os << "params." << x.name << ": expected " << x.align << "-byte alignment";
      return os.str();
    }
  }
  if (!std::isfinite(p.scale) || p.scale < 0.0f) {
    std::ostringstream os;
    os << "params.scale = " << p.scale << ": expected a finite value > 0 (or 0 for 1/sqrt(K))";
    return os.str();
  }
  if (p.qk_l2norm != 0 && p.qk_l2norm != 1) return field("qk_l2norm", p.qk_l2norm, "0 or 1");
  if (p.threads < 0) return field("threads", p.threads, ">= 0 (0 = all cores)");
  if (p.chunk < 0 || p.chunk > 4096) return field("chunk", p.chunk, "0 (default) or 1..4096");
  if (p.saved_states) {
    if (!cuda)
      return "params.saved_states is set: the saved states are device memory (a CUDA call, "
             "options.device_pointers = 1)";
    return deltac::rt::saved_states_refusal("params", p, p.saved_states, p.saved_states_bytes);
  }
  return "";
}

void run_cpu(const deltac_bwd_params& p) {
  using deltac::cpu::isa::Isa;
#if defined(__x86_64__) || defined(_M_X64)
  switch (deltac::cpu::isa::active()) {
    case Isa::avx512: deltac::rt::cpu_backward_bwd_avx512(p); return;
    case Isa::avx2: deltac::rt::cpu_backward_bwd_avx2(p); return;
    default: break;
  }
#endif
  deltac::rt::cpu_backward_bwd_generic(p);
}

// Whether opt sends the call to CUDA (device pointers), or the message.
bool on_cuda(const deltac_options& opt, std::string* err) {
  if (opt.device == DELTAC_DEVICE_CUDA && !opt.device_pointers) {
    *err = "options.device = 2 (cuda) with options.device_pointers = 0: the CUDA backward "
           "takes device pointers (set device_pointers = 1)";
    return false;
  }
  if (opt.device != DELTAC_DEVICE_AUTO && opt.device != DELTAC_DEVICE_CPU &&
      opt.device != DELTAC_DEVICE_CUDA) {
    *err = field("device", opt.device, "0 (auto), 1 (cpu) or 2 (cuda)").replace(0, 6, "options");
    return false;
  }
  if (opt.device == DELTAC_DEVICE_CPU && opt.device_pointers) {
    *err = "options.device = 1 (cpu) with options.device_pointers = 1: the CPU backward takes "
           "host pointers";
    return false;
  }
  return opt.device_pointers != 0;  // auto: the device of the pointers
}

}  // namespace

extern "C" {

int deltac_backward(const deltac_bwd_params* pp, const deltac_options* optp) {
  deltac::rt::set_last_error("");
  if (!pp) return fail("deltac_backward: params is null");
  const deltac_options opt = optp ? *optp : deltac_default_options();
  std::string err;
  const bool cuda = on_cuda(opt, &err);
  if (!err.empty()) return fail(err);
  err = check(*pp, cuda);
  if (!err.empty()) return fail(err);
  if (cuda) {
    if (!deltac::rt::cuda_backward(*pp, opt.cuda_stream, opt.workspace, opt.workspace_bytes, &err))
      return fail(err);
    return 0;
  }
  try {
    run_cpu(*pp);
  } catch (const std::bad_alloc&) {
    return fail("deltac_backward: out of memory");
  } catch (const std::exception& e) {
    return fail(std::string("deltac_backward: ") + e.what());
  }
  return 0;
}

int deltac_backward_workspace_size(const deltac_bwd_params* pp, const deltac_options* optp,
                                   size_t* bytes) {
  deltac::rt::set_last_error("");
  if (!pp) return fail("deltac_backward_workspace_size: params is null");
  if (!bytes) return fail("deltac_backward_workspace_size: bytes is null");
  *bytes = 0;
  const deltac_options opt = optp ? *optp : deltac_default_options();
  std::string err;
  const bool cuda = on_cuda(opt, &err);
  if (!err.empty()) return fail(err);
  err = check(*pp, cuda);
  if (!err.empty()) return fail(err);
  if (cuda && !deltac::rt::cuda_backward_workspace(*pp, bytes, &err)) return fail(err);
  return 0;
}

}  // extern "C"
