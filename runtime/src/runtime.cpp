// The C API: option handling, validation, device and config choice
// (select.cpp) and dispatch to the one launch point per device.
#include "deltac/runtime.h"

#include "deltac/catalogue.h"
#include "deltac/check.h"
#include "deltac/cpu/isa.h"
#include "deltac/cuda/chunked_rules.h"
#include "deltac/env.h"
#include "chunk_states.h"
#include "dispatch.h"
#include "select.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <vector>

namespace {

using namespace deltac;

thread_local std::string lastError;
thread_local std::string lastNote;
thread_local std::string flagString;

int failWith(const std::string &msg) {
  lastError = msg;
  return 1;
}

} // namespace

int deltac::rt::set_last_error(const std::string &msg) { return failWith(msg); }

namespace {

std::string validateOptions(const deltac_options &opt) {
  auto bad = [](const char *field, int32_t got, const char *expected) {
    return std::string("options.") + field + " = " + std::to_string(got) +
           ": expected " + expected;
  };
  if (opt.device < DELTAC_DEVICE_AUTO || opt.device > DELTAC_DEVICE_CUDA)
    return bad("device", opt.device, "0 (auto), 1 (cpu) or 2 (cuda)");
  if (opt.mode < DELTAC_MODE_AUTO || opt.mode > DELTAC_MODE_RECURRENT)
    return bad("mode", opt.mode, "0 (auto), 1 (chunked) or 2 (recurrent)");
  if (opt.chunk != 0 && opt.chunk != 16 && opt.chunk != 32 && opt.chunk != 64)
    return bad("chunk", opt.chunk, "0 (default), 16, 32 or 64");
  if (opt.chunk != 0 && opt.mode == DELTAC_MODE_RECURRENT)
    return bad("chunk", opt.chunk,
               "0: a chunk size needs the chunked mode, not recurrent");
  if (opt.device_pointers != 0 && opt.device_pointers != 1)
    return bad("device_pointers", opt.device_pointers, "0 or 1");
  if (opt.device_pointers && opt.device != DELTAC_DEVICE_CUDA)
    return "options.device_pointers = 1 needs options.device = 2 (cuda)";
  if (opt.check_values != 0 && opt.check_values != 1)
    return bad("check_values", opt.check_values, "0 or 1");
  if (opt.allow_neg_eigval != 0 && opt.allow_neg_eigval != 1)
    return bad("allow_neg_eigval", opt.allow_neg_eigval, "0 or 1");
  if (opt.deterministic != 0 && opt.deterministic != 1)
    return bad("deterministic", opt.deterministic, "0 or 1");
  if (opt.config.family && *opt.config.family && opt.chunk != 0)
    return bad("chunk", opt.chunk,
               "0: options.config names the kernel, chunk included");
  if (opt.chunk_states && opt.chunk == 0 &&
      !(opt.config.family && *opt.config.family))
    return "options.chunk_states is set: it needs options.chunk (16, 32 or "
           "64) or options.config (a chunked family and its chunk), which "
           "size the buffer";
  if (opt.chunk_states && opt.chunk_states_count < 0)
    return "options.chunk_states_count = " +
           std::to_string(opt.chunk_states_count) +
           ": expected the entries options.chunk_states holds (>= 0)";
  if (opt.saved_states && !opt.device_pointers)
    return "options.saved_states is set: it needs options.device_pointers = 1 "
           "(device memory the CUDA backward reads)";
  if (opt.check_values && opt.device_pointers && !opt.check_flag)
    return "options.check_flag is null: checking mode with device pointers "
           "needs a device int32 flag (zeroed by the caller)";
  return "";
}

// Why CUDA cannot run prob, or "" when it can.
std::string cudaRefusal(const Problem &prob, Mode m) {
  if (!rt::cuda_built())
    return "this build of deltac has no CUDA support";
  if (!rt::cuda_available())
    return "no usable CUDA device (no GPU or no driver)";
  std::string why = rt::cuda_kernel_refusal(prob, m);
  return why.empty() ? why : "no CUDA kernel: " + why;
}

// Whether CUDA runs prob under m padded (no instance of its K, V).
bool cudaRunsPadded(const Problem &prob, Mode m) {
  Family f;
  std::string why;
  Problem run;
  return rt::shipped_family(Device::CUDA, m, prob, &f, &why, &run) &&
         (run.K != prob.K || run.V != prob.V);
}

// Device choice: CUDA when asked (an error when it cannot), or under auto
// when it can and no chunked kernel was asked for.
bool chooseDevice(const deltac_options &opt, const Problem &prob,
                  Device *out, std::string *error) {
  KernelConfig pinned;
  bool hasConfig = false;
  if (!rt::config_from_options(opt, &pinned, &hasConfig, error))
    return false;
  if (hasConfig && opt.device == DELTAC_DEVICE_AUTO) {
    // options.config names the device.
    *out = family_info(pinned.family).device;
    if (*out == Device::CUDA) {
      std::string why = cudaRefusal(prob, family_info(pinned.family).mode);
      if (!why.empty()) {
        *error = std::string("options.config: ") +
                 family_info(pinned.family).name + ": " + why;
        return false;
      }
    }
    return true;
  }
  const bool wantChunked = opt.mode == DELTAC_MODE_CHUNKED || opt.chunk != 0 ||
                           (hasConfig && family_info(pinned.family).mode ==
                                             Mode::Chunked);
  const Mode m = wantChunked ? Mode::Chunked : static_cast<Mode>(opt.mode);
  *out = Device::CPU;
  if (opt.device == DELTAC_DEVICE_CUDA) {
    std::string why = cudaRefusal(prob, m);
    if (!why.empty()) {
      *error = "device cuda: " + why;
      return false;
    }
    *out = Device::CUDA;
  } else if (opt.device == DELTAC_DEVICE_AUTO && cudaRefusal(prob, m).empty() &&
             !(prob.chunk_states && cudaRunsPadded(prob, m))) {
    *out = Device::CUDA; // chunk states at dims CUDA would pad: the CPU's
  }
  return true;
}

void fillInfo(deltac_run_info *info, Device d, const rt::Choice &c,
              bool specialized, int32_t threads) {
  lastNote = c.note;
  if (!info)
    return;
  const FamilyInfo &f = family_info(c.config.family);
  *info = deltac_run_info{};
  info->device = d == Device::CUDA ? DELTAC_DEVICE_CUDA : DELTAC_DEVICE_CPU;
  info->mode =
      f.mode == Mode::Chunked ? DELTAC_MODE_CHUNKED : DELTAC_MODE_RECURRENT;
  info->chunk = c.config.chunk;
  info->specialized = specialized ? 1 : 0;
  info->family = f.name;
  info->tile_k = c.config.tile_k;
  info->tile_v = c.config.tile_v;
  info->warps = c.config.warps;
  info->stages = c.config.stages;
  info->split = c.config.split;
  info->fuse = c.config.fuse;
  info->scan = c.config.scan;
  info->tuned = c.tuned ? 1 : 0;
  info->note = lastNote.c_str();
  info->threads = threads;
  info->isa = d == Device::CUDA ? "" : cpu_isa_name(c.isa);
}

bool runCpu(const deltac_fwd_params &p, const KernelConfig &c, CpuIsa isa,
            bool *spec) {
  switch (p.variant) {
  case DELTAC_VARIANT_DELTA:
    return rt::cpu_run_delta(p, c, isa, spec);
  case DELTAC_VARIANT_GATED:
    return rt::cpu_run_gated(p, c, isa, spec);
  default:
    return rt::cpu_run_kda(p, c, isa, spec);
  }
}

// Mixed batches (issue 8): a varlen call under mode auto whose chosen family
// is cuda_chunked also runs cuda_recurrent, which takes the sequences of at
// most kCudaAutoRecurrentMaxTokens tokens (each kernel reads cu_seqlens on
// the device and skips the other's sequences): when the lengths are known
// (host cu_seqlens) and some are that short, or always when they are not
// (device cu_seqlens). Pinned configs, options.chunk and other modes run
// one family. route 0: no mixed batch.
rt::Mixed mixedBatch(const deltac_fwd_params &p, const deltac_options &opt,
                     const Problem &prob, bool hostMemory, std::string *note) {
  rt::Mixed m;
  const int64_t L = kCudaAutoRecurrentMaxTokens;
  if (opt.mode != DELTAC_MODE_AUTO || opt.chunk || (opt.config.family && *opt.config.family) ||
      !p.cu_seqlens || p.N < 2)
    return m;
  if (hostMemory) {
    int64_t shortest = L + 1;
    for (int32_t n = 0; n < p.N; ++n)
      shortest = std::min<int64_t>(shortest, p.cu_seqlens[n + 1] - p.cu_seqlens[n]);
    if (shortest > L)
      return m;
  }
  Problem sp = prob;
  sp.max_seqlen = L;
  Family f;
  std::string why;
  Problem run;
  if (!rt::shipped_family(Device::CUDA, Mode::Recurrent, sp, &f, &why, &run) ||
      f != Family::CudaRecurrent || run.K != sp.K || run.V != sp.V)
    return m;
  m.short_config = default_config(f, sp);
  m.route = int32_t(L);
  *note = "mixed batch: sequences of at most " + std::to_string(L) + " tokens ran " +
          rt::config_string(m.short_config) + (note->empty() ? "" : "; " + *note);
  return m;
}

// CPU mixed batches (host cu_seqlens, mode auto, nothing pinned, not
// deterministic): each sequence's own length picks its family by the default
// rule (or a tuning record); runs of consecutive sequences with the same
// config are one call each (pointers, states and cu_seqlens shifted to the
// run). False when one config fits every sequence (*err empty: run p as one
// call) or a run failed (*err set).
bool runCpuMixed(const deltac_fwd_params &p, const deltac_options &opt,
                 const rt::Choice &choice, std::string *note, bool *specialized,
                 std::string *err) {
  if (opt.mode != DELTAC_MODE_AUTO || opt.chunk || opt.deterministic ||
      (opt.config.family && *opt.config.family) || !p.cu_seqlens || p.N < 2)
    return false;
  std::vector<KernelConfig> cfg(size_t(p.N));
  std::vector<int32_t> threads(size_t(p.N));
  std::vector<CpuIsa> isa(size_t(p.N));
  bool mixed = false;
  for (int32_t n = 0; n < p.N; ++n) {
    rt::Choice c = choice;
    // An empty sequence runs with the whole call's choice (its own problem
    // would say max_seqlen 0, "unknown", and pick the unbounded family).
    const int64_t len = p.cu_seqlens[n + 1] - p.cu_seqlens[n];
    Problem prob = problem_of(p, len);
    cpu::isa::set_problem(&prob);
    if (len > 0 && !rt::choose_config(Device::CPU, opt, prob, &c, err))
      return false;
    cfg[size_t(n)] = c.config;
    threads[size_t(n)] = p.threads ? p.threads : c.threads;
    isa[size_t(n)] = c.isa;
    mixed = mixed || !(c.config == choice.config) || c.isa != choice.isa;
  }
  if (!mixed)
    return false;
  const size_t in = detail::dtypeSize(p.in_dtype), out = detail::dtypeSize(p.out_dtype),
               st = detail::dtypeSize(p.state_dtype);
  const size_t state = size_t(p.HV) * p.K * p.V * st;
  std::string ran;
  *specialized = true;
  for (int32_t s = 0; s < p.N;) {
    int32_t e = s + 1;
    while (e < p.N && cfg[size_t(e)] == cfg[size_t(s)] && threads[size_t(e)] == threads[size_t(s)] &&
           isa[size_t(e)] == isa[size_t(s)])
      ++e;
    const int64_t t0 = p.cu_seqlens[s];
    std::vector<int64_t> cu;
    for (int32_t n = s; n <= e; ++n)
      cu.push_back(p.cu_seqlens[n] - t0);
    deltac_fwd_params r = p;
    r.N = e - s, r.T = int32_t(cu.back()), r.cu_seqlens = cu.data();
    r.threads = threads[size_t(s)];
    const size_t tok = size_t(t0);
    r.q = static_cast<const char *>(p.q) + tok * p.H * p.K * in;
    r.k = static_cast<const char *>(p.k) + tok * p.H * p.K * in;
    r.v = static_cast<const char *>(p.v) + tok * p.HV * p.V * in;
    r.beta = p.beta + tok * p.HV;
    if (p.g)
      r.g = p.g + tok * p.HV * (p.variant == DELTAC_VARIANT_KDA ? p.K : 1);
    r.o = static_cast<char *>(p.o) + tok * p.HV * p.V * out;
    if (p.state_steps)
      r.state_steps = static_cast<char *>(p.state_steps) + tok * state;
    if (p.read_slots) { // a pool: the same pool, this run's slots
      r.read_slots = p.read_slots + s;
      r.write_slots = p.write_slots ? p.write_slots + s : nullptr;
    } else {
      r.h0 = p.h0 ? static_cast<const char *>(p.h0) + size_t(s) * state : nullptr;
      r.ht = p.ht ? static_cast<char *>(p.ht) + size_t(s) * state : nullptr;
    }
    if (p.accepted)
      r.accepted = p.accepted + s;
    bool spec = false;
    if (!runCpu(r, cfg[size_t(s)], isa[size_t(s)], &spec)) {
      *err = "no CPU instance for " + rt::config_string(cfg[size_t(s)]);
      return false;
    }
    *specialized = *specialized && spec;
    if (!(cfg[size_t(s)] == choice.config) && ran.find(rt::config_string(cfg[size_t(s)])) == std::string::npos)
      ran += (ran.empty() ? "" : ", ") + rt::config_string(cfg[size_t(s)]);
    s = e;
  }
  *note = "mixed batch: the sequences whose own length picks it ran " + ran +
          (note->empty() ? "" : "; " + *note);
  return true;
}

// ws_bytes: null for a run; else only the choice is made and the workspace
// it needs is stored there (deltac_workspace_size).
int forward(const deltac_fwd_params *pp, const deltac_options *optp,
            deltac_run_info *info, size_t *ws_bytes = nullptr) {
  if (!pp)
    return failWith("deltac_forward: params is null");
  const deltac_options opt = optp ? *optp : deltac_default_options();
  if (ws_bytes)
    *ws_bytes = 0;
  std::string err = validateOptions(opt);
  if (!err.empty())
    return failWith(err);

  deltac_fwd_params p = *pp;
  if (p.scale == 0.0f && p.K > 0)
    p.scale = float(1.0 / std::sqrt(double(p.K)));
  // Device memory is never read here: with device pointers cu_seqlens'
  // contents are the caller's duty or the device check's.
  const bool hostMemory = !opt.device_pointers;
  if (!check_params(p, &err, /*cu_seqlens_on_host=*/hostMemory))
    return failWith(err);
  if (opt.check_values && hostMemory &&
      !check_values(p, opt.allow_neg_eigval ? 2.0f : 1.0f, &err))
    return failWith("checking mode: " + err);
  if (opt.saved_states &&
      !(err = rt::saved_states_refusal("options", p, opt.saved_states, opt.saved_states_bytes))
           .empty())
    return failWith(err);

  // With device cu_seqlens the longest sequence is unknown: T bounds it.
  Problem prob = problem_of(p, hostMemory ? max_seqlen(p) : int64_t(p.T));
  prob.deterministic = opt.deterministic != 0;
  prob.chunk_states = opt.chunk_states != nullptr;
  prob.beta_two = opt.allow_neg_eigval != 0;
  Device device;
  if (!chooseDevice(opt, prob, &device, &err))
    return failWith(err);
  // Batch-invariant: no choice may read the device's size against the
  // batch (sm_count stays 0).
  if (device == Device::CUDA && !opt.deterministic)
    prob.sm_count = rt::cuda_sm_count();
  if (device == Device::CPU)
    cpu::isa::set_problem(&prob);
  rt::Choice choice;
  if (!rt::choose_config(device, opt, prob, &choice, &err))
    return failWith(err);
  // kda with beta up to 2 on 16-bit inputs: the chunked kernels' 16-bit
  // decayed key operands keep the two reflections from cancelling (o
  // 1.7e-2 from float64 at 2000 tokens, docs/performance.md "Scan 5"); the
  // f32 instance on f32 copies of q, k, v (o rounded back) is exact.
  const bool upcast = device == Device::CUDA && deltac::f32_copies(prob, choice.config.family);
  if (upcast) {
    Problem f = prob;
    f.in_dtype = f.out_dtype = DELTAC_F32;
    rt::Choice c32;
    deltac_options o32 = opt; // a config pinned for the 16-bit call may not fit f32
    if (!rt::choose_config(device, opt, f, &c32, &err)) {
      o32.config = deltac_default_options().config;
      if (!rt::choose_config(device, o32, f, &c32, &err))
        return failWith("kda with allow_neg_eigval on 16-bit inputs runs the f32 chunked "
                        "kernel on f32 copies: " + err);
    }
    err.clear();
    c32.note = "kda with beta up to 2: f32 copies of q, k, v" +
               (c32.note.empty() ? "" : "; " + c32.note);
    choice = c32;
    prob = f;
  }
  // CUDA dims with no instance: the call runs padded (runtime/src/cuda_pad.cu).
  rt::Pad pad;
  if (device == Device::CUDA && (upcast || choice.K != p.K || choice.V != p.V)) {
    pad.K = choice.K, pad.V = choice.V;
    pad.dtype = upcast ? DELTAC_F32 : -1;
    prob.K = choice.K, prob.V = choice.V;
  }
  const bool padDims = pad.K && (pad.K != p.K || pad.V != p.V);
  // Chunk-end states on CUDA: at the call's own dims, every sequence in one
  // launch (the knobs below).
  if (opt.chunk_states && device == Device::CUDA) {
    if (padDims)
      return failWith("options.chunk_states: K = " + std::to_string(p.K) + ", V = " +
                      std::to_string(p.V) + " has no precompiled cuda_chunked instance "
                      "and would run padded to " + std::to_string(pad.K) + "/" +
                      std::to_string(pad.V) + ", which writes no chunk-end states: pin "
                      "options.config (compiled at run time by NVRTC) or run on the CPU "
                      "(options.device = 1)");
  }
  // The knobs CUDA's chunked kernels run, whatever the config says
  // (call_knobs: chunk-end states; scan 5 where beta may exceed 1).
  if (device == Device::CUDA)
    choice.config = call_knobs(choice.config, prob);
  rt::Mixed mixed;
  if (device == Device::CUDA && choice.config.family == Family::CudaChunked &&
      !opt.chunk_states && !opt.saved_states)
    mixed = mixedBatch(p, opt, prob, hostMemory, &choice.note);
  if (padDims)
    choice.note = "padded K=" + std::to_string(p.K) + ",V=" + std::to_string(p.V) +
                  " to " + std::to_string(pad.K) + "/" + std::to_string(pad.V) +
                  (choice.note.empty() ? "" : "; " + choice.note);

  // A tuned record's thread count, unless the caller set one.
  if (device == Device::CPU && p.threads == 0 && choice.threads > 0)
    p.threads = choice.threads;
  if (opt.chunk_states) { // check_family let a chunked family through
    // Device cu_seqlens are not read here: the bound over any split.
    const bool bound = !hostMemory && p.cu_seqlens;
    const int64_t need = rt::chunk_states_needed(p, choice.config.chunk, !hostMemory);
    if (opt.chunk_states_count < need)
      return failWith("options.chunk_states_count = " +
                      std::to_string(opt.chunk_states_count) +
                      ": expected at least " + std::to_string(need) + " (" +
                      (bound ? "the bound for device cu_seqlens" : "the chunks of this call") +
                      " at chunk " + std::to_string(choice.config.chunk) +
                      ": deltac_chunk_states_count)");
    if (!hostMemory && reinterpret_cast<uintptr_t>(opt.chunk_states) % 16 != 0)
      return failWith("options.chunk_states: a device pointer must be 16-byte aligned");
  }
  if (ws_bytes) { // deltac_workspace_size: the choice, not the run
    if (device == Device::CUDA)
      *ws_bytes = rt::cuda_workspace_size(p, choice.config, opt.deterministic != 0,
                                          mixed.route, pad);
    return 0;
  }

  try {
    bool specialized = false;
    if (device == Device::CUDA) {
      if (!rt::cuda_run(p, choice.config, opt, &err, mixed, pad))
        return failWith(err);
      specialized = true; // CUDA instances are compiled per (K, V)
    } else if (opt.chunk_states) {
      if (!rt::run_chunk_states(
              p, choice.config.chunk, opt.chunk_states,
              [&](const deltac_fwd_params &c) {
                return runCpu(c, choice.config, choice.isa, &specialized);
              }))
        return failWith("no CPU instance for " +
                        rt::config_string(choice.config));
    } else if (runCpuMixed(p, opt, choice, &choice.note, &specialized, &err)) {
    } else if (!err.empty()) {
      return failWith(err);
    } else if (!runCpu(p, choice.config, choice.isa, &specialized)) {
      return failWith("no CPU instance for " +
                      rt::config_string(choice.config));
    }
    fillInfo(info, device, choice, specialized,
             device == Device::CPU ? p.threads : 0);
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
  deltac_options o{};
  o.device = DELTAC_DEVICE_AUTO;
  o.mode = DELTAC_MODE_AUTO;
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

int deltac_chunk_states_count(const deltac_fwd_params *p, const deltac_options *opt,
                              int64_t *count) {
  lastError.clear();
  if (!p || !opt || !count)
    return failWith(std::string("deltac_chunk_states_count: ") +
                    (!p ? "params" : !opt ? "options" : "count") + " is null");
  *count = 0;
  const int32_t chunk = opt->chunk ? opt->chunk : opt->config.chunk;
  if (chunk != 16 && chunk != 32 && chunk != 64)
    return failWith("deltac_chunk_states_count: options.chunk = " +
                    std::to_string(opt->chunk) + ", options.config.chunk = " +
                    std::to_string(opt->config.chunk) +
                    ": expected one of them to be 16, 32 or 64");
  // Device cu_seqlens are not read here: the bound.
  const bool host = !(opt->device_pointers && p->cu_seqlens);
  std::string err;
  if (!check_dims(*p, &err, /*cu_seqlens_on_host=*/host))
    return failWith(err);
  *count = rt::chunk_states_needed(*p, chunk, opt->device_pointers != 0);
  return 0;
}

int deltac_workspace_size(const deltac_fwd_params *p, const deltac_options *opt,
                          size_t *bytes) {
  lastError.clear();
  if (!bytes)
    return failWith("deltac_workspace_size: bytes is null");
  return forward(p, opt, nullptr, bytes);
}

const char *deltac_last_error(void) { return lastError.c_str(); }

namespace {
// Whether the forward on the current device writes the saved states itself
// under the rule: the transposed TMA scan (sm_90a, a precompiled chunked
// instance of K, V, chunk 64) runs where its grid of sequences x HV x V / 64
// blocks leaves at most 1/8 of the SMs idle (chunked.cuh, chunked_run_plan;
// K = 64 or 128 here, no warm-up segments). Elsewhere the backward would
// fill the buffer and gain nothing (docs/performance.md, "Backward (CUDA)",
// versions 17 and 18).
bool forward_writes_saved(int32_t variant, int64_t sequences, int32_t HV, int32_t K,
                          int32_t V) {
  Problem pr;
  pr.variant = variant, pr.K = K, pr.V = V;
  pr.in_dtype = pr.out_dtype = DELTAC_BF16;
  if (!deltac::precompiled(deltac::default_config(Family::CudaChunked, pr), pr) ||
      !deltac::cuda::chunked_tmat_runs(variant, K, V, 2, 64) ||
      !rt::cuda_built() || !rt::cuda_available() || rt::cuda_cc() != 90)
    return false;
  return deltac::cuda::chunked_tmat_fills(sequences * HV, V, rt::cuda_sm_count());
}
} // namespace

size_t deltac_saved_states_size(int32_t variant, int64_t tokens, int64_t sequences,
                                int32_t HV, int32_t K, int32_t V, int32_t in_dtype) {
  if (!deltac::bwd_saves_states(variant, K, V, in_dtype) || tokens < 0 || sequences < 0 ||
      HV <= 0 || !deltac::bwd_use_chunked(variant, K, V, tokens, sequences))
    return 0;
  return size_t(deltac::bwd_saved_layout(tokens, sequences, HV, K, V).total);
}

// A tuning database's backward record (deltac-tune --backward) for the
// call's dims, value heads and tokens per sequence decides where it has one;
// else the rule: where keeping them paid (docs/performance.md, "Backward
// (CUDA)", version 18, H100): K = 64 (delta 32/32 K = V = 64 8x4096:
// fwd+bwd 2.944 -> 2.881 ms); not K = 128 (GDN 16/32 4x8192: 5.420 -> 5.433
// ms, 0.8 GB more held; not profiled).
int deltac_saved_states_pay(int32_t variant, int64_t tokens, int64_t sequences, int32_t HV,
                            int32_t K, int32_t V, int32_t in_dtype) {
  if (deltac_saved_states_size(variant, tokens, sequences, HV, K, V, in_dtype) == 0 ||
      !rt::cuda_built() || !rt::cuda_available())
    return 0;
  const int tuned = rt::tuned_saved_states(variant, K, V, in_dtype, HV,
                                           (tokens + sequences - 1) / sequences);
  if (tuned >= 0)
    return tuned;
  return K == 64 && forward_writes_saved(variant, sequences, HV, K, V) ? 1 : 0;
}

int deltac_cuda_available(void) {
  return rt::cuda_built() && rt::cuda_available() ? 1 : 0;
}

int deltac_cuda_supports(int32_t variant, int32_t K, int32_t V,
                         int32_t in_dtype) {
  Problem prob;
  prob.variant = variant;
  prob.K = K;
  prob.V = V;
  prob.in_dtype = in_dtype;
  prob.out_dtype = in_dtype;
  prob.max_seqlen = 0; // any length: the recurrent kernel
  return rt::cuda_built() && rt::cuda_kernel_refusal(prob, Mode::Auto).empty()
             ? 1
             : 0;
}

int deltac_load_tuning_db(const char *path) {
  lastError.clear();
  std::string err;
  if (!rt::load_tuning_db(path, &err))
    return failWith(err);
  return 0;
}

const char *deltac_environment(int32_t device) {
  auto json = [](const Env &env) {
    auto quote = [](const std::string &x) {
      std::string q = "\"";
      for (char c : x) {
        if (c == '"' || c == '\\')
          q += '\\';
        if (static_cast<unsigned char>(c) >= 0x20)
          q += c;
      }
      return q + "\"";
    };
    std::string s;
    for (const auto &kv : env)
      s += (s.empty() ? "{" : ", ") + quote(kv.first) + ": " + quote(kv.second);
    return s.empty() ? std::string("{}") : s + "}";
  };
  static const std::string cpu = json(current_env(Device::CPU));
  if (device != DELTAC_DEVICE_CUDA)
    return cpu.c_str();
  static const std::string cuda = json(current_env(Device::CUDA));
  return cuda.c_str();
}

const char *deltac_check_flag_string(int32_t flag) {
  static const char *const kNames[] = {"q",    "k",    "v",          "h0",
                                       "g",    "beta", "cu_seqlens", "slots"};
  flagString.clear();
  for (int i = 0; i < 8; ++i)
    if (flag & (1 << i))
      flagString += (flagString.empty() ? "" : ", ") + std::string(kNames[i]);
  if (flag & ~0xff)
    flagString += (flagString.empty() ? "" : ", ") + std::string("unknown bits");
  return flagString.c_str();
}

} // extern "C"
