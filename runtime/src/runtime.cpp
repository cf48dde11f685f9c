// The C API: option handling, validation, schedule choice and dispatch.
#include "deltac/runtime.h"

#include "deltac/check.h"
#include "deltac/schedule.h"
#include "dispatch.h"

#include <cmath>
#include <exception>
#include <new>
#include <string>

namespace {

thread_local std::string lastError;

int failWith(const std::string &msg) {
  lastError = msg;
  return 1;
}

const char *variantName(int32_t v) {
  return v == DELTAC_VARIANT_DELTA   ? "delta"
         : v == DELTAC_VARIANT_GATED ? "gated"
                                     : "kda";
}

// Why CUDA cannot run p, or "" when it can.
std::string cudaRefusal(const deltac_fwd_params &p) {
  using namespace deltac::rt;
  if (!cuda_built())
    return "this build of deltac has no CUDA support";
  if (!cuda_available())
    return "no usable CUDA device (no GPU or no driver)";
  if (!cuda_supports(p))
    return std::string("no CUDA kernel for variant ") + variantName(p.variant) +
           " with K = " + std::to_string(p.K) + ", V = " +
           std::to_string(p.V) +
           (p.in_dtype == DELTAC_BF16 ? ", bf16" : ", f32") +
           " (needs out dtype == in dtype, f32 state in KV layout)";
  return "";
}

int forward(const deltac_fwd_params *pp, const deltac_options *optp,
            deltac_run_info *info) {
  if (!pp)
    return failWith("deltac_forward: params is null");
  deltac_options opt = optp ? *optp : deltac_default_options();
  if (opt.device < DELTAC_DEVICE_AUTO || opt.device > DELTAC_DEVICE_CUDA)
    return failWith("options.device = " + std::to_string(opt.device) +
                    ": expected 0 (auto), 1 (cpu) or 2 (cuda)");
  if (opt.mode < DELTAC_MODE_AUTO || opt.mode > DELTAC_MODE_RECURRENT)
    return failWith("options.mode = " + std::to_string(opt.mode) +
                    ": expected 0 (auto), 1 (chunked) or 2 (recurrent)");
  if (opt.chunk != 0 && opt.chunk != 16 && opt.chunk != 32 && opt.chunk != 64)
    return failWith("options.chunk = " + std::to_string(opt.chunk) +
                    ": expected 0 (default), 16, 32 or 64");
  if (opt.chunk != 0 && opt.mode == DELTAC_MODE_RECURRENT)
    return failWith("options.chunk = " + std::to_string(opt.chunk) +
                    ": a chunk size needs the chunked mode, not recurrent");
  if (opt.device_pointers != 0 && opt.device_pointers != 1)
    return failWith("options.device_pointers = " +
                    std::to_string(opt.device_pointers) + ": expected 0 or 1");
  const bool wantChunked = opt.mode == DELTAC_MODE_CHUNKED || opt.chunk != 0;

  deltac_fwd_params p = *pp;
  if (p.scale == 0.0f && p.K > 0)
    p.scale = float(1.0 / std::sqrt(double(p.K)));

  if (opt.device_pointers) {
    // Device memory cannot be inspected here: cuda_run validates.
    if (opt.device != DELTAC_DEVICE_CUDA)
      return failWith("options.device_pointers = 1 needs options.device = "
                      "2 (cuda)");
  } else {
    std::string err;
    if (!deltac::check_params(p, &err))
      return failWith(err);
  }

  // Device choice.
  bool useCuda = false;
  if (opt.device == DELTAC_DEVICE_CUDA) {
    if (wantChunked)
      return failWith("the chunked mode is not available on CUDA (only "
                      "recurrent): use mode auto or recurrent");
    std::string why = cudaRefusal(p);
    if (!why.empty())
      return failWith("device cuda: " + why);
    useCuda = true;
  } else if (opt.device == DELTAC_DEVICE_AUTO && !wantChunked) {
    useCuda = cudaRefusal(p).empty();
  }

  try {
    if (useCuda) {
      std::string err;
      if (!deltac::rt::cuda_run(p, opt, &err))
        return failWith(err);
      if (info)
        *info = {DELTAC_DEVICE_CUDA, DELTAC_MODE_RECURRENT, 0, 1};
      return 0;
    }
    int chunk = 0;
    if (wantChunked) {
      chunk = opt.chunk ? opt.chunk : deltac::kCpuDefaultChunk;
    } else if (opt.mode == DELTAC_MODE_AUTO) {
      deltac::Schedule s = deltac::default_schedule(deltac::Device::CPU, p);
      chunk = s.mode == deltac::Schedule::Chunked ? s.chunk : 0;
    }
    bool spec = false;
    switch (p.variant) {
    case DELTAC_VARIANT_DELTA:
      spec = deltac::rt::cpu_run_delta(p, chunk);
      break;
    case DELTAC_VARIANT_GATED:
      spec = deltac::rt::cpu_run_gated(p, chunk);
      break;
    default:
      spec = deltac::rt::cpu_run_kda(p, chunk);
      break;
    }
    if (info)
      *info = {DELTAC_DEVICE_CPU,
               chunk ? DELTAC_MODE_CHUNKED : DELTAC_MODE_RECURRENT, chunk,
               spec ? 1 : 0};
    return 0;
  } catch (const std::bad_alloc &) {
    return failWith("deltac_forward: out of memory");
  } catch (const std::exception &e) {
    return failWith(std::string("deltac_forward: ") + e.what());
  }
}

} // namespace

extern "C" {

deltac_options deltac_default_options(void) {
  deltac_options o;
  o.device = DELTAC_DEVICE_AUTO;
  o.mode = DELTAC_MODE_AUTO;
  o.chunk = 0;
  o.device_pointers = 0;
  o.cuda_stream = nullptr;
  return o;
}

int deltac_forward_info(const deltac_fwd_params *p, const deltac_options *opt,
                        deltac_run_info *info) {
  lastError.clear();
  return forward(p, opt, info);
}

int deltac_forward(const deltac_fwd_params *p, const deltac_options *opt) {
  return deltac_forward_info(p, opt, nullptr);
}

const char *deltac_last_error(void) { return lastError.c_str(); }

int deltac_cuda_available(void) {
  return deltac::rt::cuda_built() && deltac::rt::cuda_available() ? 1 : 0;
}

int deltac_cuda_supports(int32_t variant, int32_t K, int32_t V,
                         int32_t in_dtype) {
  deltac_fwd_params p{};
  p.variant = variant;
  p.K = K;
  p.V = V;
  p.in_dtype = in_dtype;
  p.out_dtype = in_dtype;
  p.state_dtype = DELTAC_F32;
  p.state_layout = DELTAC_STATE_KV;
  return deltac::rt::cuda_built() && deltac::rt::cuda_supports(p) ? 1 : 0;
}

} // extern "C"
