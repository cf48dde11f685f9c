// Runs one deltac-generated CPU entry point on random inputs and compares o
// and the final state with the float64 reference (deltac/reference.h).
// Built per spec with -DDELTA_HEADER="name.h" -DDELTA_NAME=name
// -DDELTA_UPPER=NAME; with -DDELTA_CUDA it calls <name>_forward_cuda on
// device copies instead. Two calls: a prompt (longest sequence > decode
// tokens: the chunked kernel where the layer has one for long sequences, e.g.
// gen_dispatch) and a decode step. With chunk states, every chunk-end state
// against the reference too (CUDA: a device buffer with one spare entry,
// which must come back untouched, after a too-small count is refused).
#include DELTA_HEADER

#include "deltac/convert.h"
#include "deltac/reference.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#ifdef DELTA_CUDA
#include <cuda_runtime.h>
#endif

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#ifdef DELTA_CUDA
#define ENTRY CAT(DELTA_NAME, _forward_cuda)
#define STREAM nullptr,
#else
#define ENTRY CAT(DELTA_NAME, _forward_cpu)
#define STREAM
#endif
#define SPEC_PARAMS CAT(DELTA_NAME, _spec_params)
#define FLAG(x) CAT(DELTA_UPPER, _##x)
#ifdef DELTA_CUDA
#define CS_CHUNK FLAG(CUDA_CHUNK)
#define CHUNK_COUNT CAT(DELTA_NAME, _cuda_chunk_count)
#define CHUNK_CAPACITY CAT(DELTA_NAME, _cuda_chunk_capacity)
#else
#define CS_CHUNK FLAG(CHUNK)
#define CHUNK_COUNT CAT(DELTA_NAME, _chunk_count)
#endif
#if FLAG(CHUNK_STATES) && defined(DELTA_CUDA)
#define CHUNK_ARG dcs, csCount,
#define NULL_CHUNK_ARG nullptr, 0,
#elif FLAG(CHUNK_STATES)
#define CHUNK_ARG chunkStates.data(),
#define NULL_CHUNK_ARG nullptr,
#else
#define CHUNK_ARG
#define NULL_CHUNK_ARG
#endif
#if FLAG(GATE_IN_KERNEL)
#define GATE_ARG aLogArg, dtBiasArg,
#else
#define GATE_ARG
#endif

namespace {

std::mt19937 rng(12345);

float uniform(float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(rng);
}

// The generated code converts with deltac/convert.h too: check that header
// against known bit patterns, so a bug in it cannot hide in both the
// generated code and this driver.
bool conversionsExact() {
  struct Case {
    uint16_t bits;
    float value;
  };
  const Case f16[] = {{0x3c00, 1.0f},         {0xc000, -2.0f},
                      {0x7bff, 65504.0f},     {0x0001, 0x1p-24f},
                      {0x0400, 0x1p-14f},     {0x03ff, 0x3ffp-24f},
                      {0x3555, 0x555p-12f}, // 0.333251953125
                      {0x7c00, INFINITY},     {0x0000, 0.0f}};
  const Case bf16[] = {{0x3f80, 1.0f}, {0xc040, -3.0f}, {0x7f7f, 0x1.fep127f},
                       {0x0001, 0x1p-133f}, {0x3eab, 0x1.56p-2f}};
  bool ok = true;
  for (const Case &c : f16)
    ok &= deltac::f16_to_f32(c.bits) == c.value &&
          deltac::f32_to_f16(c.value) == c.bits;
  for (const Case &c : bf16)
    ok &= deltac::bf16_to_f32(c.bits) == c.value &&
          deltac::f32_to_bf16(c.value) == c.bits;
  // Round to nearest even, overflow, NaN.
  ok &= deltac::f32_to_f16(1.0f + 0x1p-11f) == 0x3c00;  // tie: even
  ok &= deltac::f32_to_f16(1.0f + 0x3p-11f) == 0x3c02;  // tie: even (up)
  ok &= deltac::f32_to_f16(65520.0f) == 0x7c00;         // rounds to inf
  ok &= deltac::f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80;  // tie: even
  ok &= deltac::f32_to_bf16(1.0f + 0x3p-8f) == 0x3f82;  // tie: even (up)
  ok &= std::isnan(deltac::f16_to_f32(deltac::f32_to_f16(NAN)));
  ok &= std::isnan(deltac::bf16_to_f32(deltac::f32_to_bf16(NAN)));
  std::printf("%s conversions (deltac/convert.h bit patterns)\n",
              ok ? "ok" : "FAIL");
  return ok;
}

// A tensor stored in dtype `dt`, with the exact f32 values it holds.
struct Tensor {
  int32_t dt;
  std::vector<float> f32;
  std::vector<uint16_t> half;
  Tensor(int32_t dt, size_t n, float lo, float hi) : dt(dt), f32(n) {
    if (dt != DELTAC_F32)
      half.resize(n);
    for (size_t i = 0; i < n; ++i)
      store(i, uniform(lo, hi));
  }
  void store(size_t i, float x) {
    if (dt == DELTAC_BF16) {
      half[i] = deltac::ref::float_to_bf16(x);
      f32[i] = deltac::ref::bf16_to_float(half[i]);
    } else if (dt == DELTAC_F16) {
      half[i] = deltac::f32_to_f16(x);
      f32[i] = deltac::f16_to_f32(half[i]);
    } else {
      f32[i] = x;
    }
  }
  void *data() { return dt == DELTAC_F32 ? (void *)f32.data() : half.data(); }
  float at(size_t i) const {
    if (dt == DELTAC_BF16)
      return deltac::ref::bf16_to_float(half[i]);
    if (dt == DELTAC_F16)
      return deltac::f16_to_f32(half[i]);
    return f32[i];
  }
};

#ifdef DELTA_CUDA
// Device copies of host buffers; copied back on request.
struct Device {
  std::vector<void *> ptrs;
  ~Device() {
    for (void *p : ptrs)
      cudaFree(p);
  }
  template <class T> T *copy(const T *host, size_t bytes) {
    if (!host)
      return nullptr;
    void *d = nullptr;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) {
      std::printf("cudaMalloc failed\n");
      std::exit(1);
    }
    cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice);
    ptrs.push_back(d);
    return static_cast<T *>(d);
  }
};
size_t bytesOf(int32_t dt) { return dt == DELTAC_F32 ? 4 : 2; }
#endif

double relRms(const Tensor &x, const std::vector<double> &ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double d = x.at(i) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return den == 0 ? (num == 0 ? 0 : INFINITY) : std::sqrt(num / den);
}

// One call with the given sequence lengths; returns false on a mismatch.
bool runCase(const char *what, const std::vector<int> &lens) {
  deltac_fwd_params p = SPEC_PARAMS();
  std::vector<int64_t> cu{0};
  if (FLAG(VARLEN)) {
    for (int l : lens)
      cu.push_back(cu.back() + l);
    p.B = 1;
    p.T = int32_t(cu.back());
    p.N = int32_t(lens.size());
    p.cu_seqlens = cu.data();
  } else {
    p.B = int32_t(lens.size());
    p.T = lens[0]; // equal lengths without varlen
    p.N = p.B;
  }
  const size_t bt = size_t(p.B) * p.T;
  const bool lowp = p.in_dtype != DELTAC_F32 || p.out_dtype != DELTAC_F32 ||
                    p.state_dtype != DELTAC_F32;
  const double tol = lowp ? 5e-3 : 1e-5;
  const int gw = p.variant == DELTAC_VARIANT_KDA ? p.K : 1;

  // Without the in-kernel L2 norm, small keys keep beta ||k||^2 < 2 (a
  // stable recurrence): entries in +-1/sqrt(K) give ||k||^2 ~ 1/3.
  const float kr = p.qk_l2norm ? 1.0f : 1.0f / std::sqrt(float(p.K));
  Tensor q(p.in_dtype, bt * p.H * p.K, -1, 1), k(p.in_dtype, bt * p.H * p.K, -kr, kr);
  Tensor v(p.in_dtype, bt * p.HV * p.V, -1, 1);
  std::vector<float> betaIn(bt * p.HV), betaRef(bt * p.HV);
  for (size_t i = 0; i < betaIn.size(); ++i) {
    if (FLAG(BETA_SIGMOID)) {
      betaIn[i] = uniform(-3, 3);
      betaRef[i] = FLAG(BETA_RANGE) / (1.0f + std::exp(-betaIn[i]));
    } else {
      betaIn[i] = betaRef[i] = uniform(0.05f, 0.95f);
    }
  }
  std::vector<float> gIn, gRef, aLog(p.HV), dtBias(size_t(p.HV) * gw);
  for (float &x : aLog)
    x = uniform(-2.0f, 0.0f);
  for (float &x : dtBias)
    x = uniform(-1.0f, 1.0f);
  if (p.variant != DELTAC_VARIANT_DELTA) {
    gIn.resize(bt * p.HV * gw);
    gRef.resize(gIn.size());
    for (size_t i = 0; i < gIn.size(); ++i) {
      if (FLAG(GATE_IN_KERNEL)) {
        gIn[i] = uniform(-4, 1);
        size_t h = (i / gw) % p.HV, c = i % gw;
        float x = gIn[i] + dtBias[h * gw + c];
        float sp = x > 20.0f ? x : std::log1p(std::exp(x));
        gRef[i] = -std::exp(aLog[h]) * sp;
      } else {
        gIn[i] = gRef[i] = uniform(-0.2f, 0.0f);
      }
    }
  }
  const size_t nH = size_t(p.N) * p.HV * p.K * p.V;
  Tensor h0(p.state_dtype, FLAG(INITIAL_STATE) ? nH : 0, -0.5f, 0.5f);
  Tensor o(p.out_dtype, bt * p.HV * p.V, 0, 0);
  Tensor ht(p.state_dtype, FLAG(FINAL_STATE) ? nH : 0, 0, 0);

  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.beta = betaIn.data();
  p.g = gIn.empty() ? nullptr : gIn.data();
  p.h0 = FLAG(INITIAL_STATE) ? h0.data() : nullptr;
  p.o = o.data();
  p.ht = FLAG(FINAL_STATE) ? ht.data() : nullptr;

  char err[256] = "";
  const float *aLogArg = aLog.data(), *dtBiasArg = dtBias.data();
  (void)aLogArg;
  (void)dtBiasArg;
#ifdef DELTA_CUDA
  // The same call on device copies; o and ht are copied back.
  Device dev;
  deltac_fwd_params d = p;
  const size_t in = bytesOf(p.in_dtype), st = bytesOf(p.state_dtype);
  d.q = dev.copy((const char *)p.q, q.f32.size() * in);
  d.k = dev.copy((const char *)p.k, k.f32.size() * in);
  d.v = dev.copy((const char *)p.v, v.f32.size() * in);
  d.beta = dev.copy(p.beta, betaIn.size() * 4);
  d.g = dev.copy(p.g, gIn.size() * 4);
  d.h0 = dev.copy((const char *)p.h0, h0.f32.size() * st);
  d.o = dev.copy((char *)p.o, o.f32.size() * bytesOf(p.out_dtype));
  d.ht = dev.copy((char *)p.ht, ht.f32.size() * st);
  d.cu_seqlens = dev.copy(p.cu_seqlens, cu.size() * 8);
  aLogArg = dev.copy(aLog.data(), aLog.size() * 4);
  dtBiasArg = dev.copy(dtBias.data(), dtBias.size() * 4);
#if FLAG(CHUNK_STATES)
  // The capacity (d's cu_seqlens are device memory) and one spare entry,
  // every entry -9 before the call.
  const size_t hsz = size_t(p.HV) * p.K * p.V;
  int64_t csCount = CHUNK_CAPACITY(&d) - 1;
  std::vector<float> chunkStates(size_t(csCount + 2) * hsz, -9.0f);
  float *dcs = dev.copy(chunkStates.data(), chunkStates.size() * 4);
  int rc0 = ENTRY(&d, STREAM CHUNK_ARG GATE_ARG err, sizeof err);
  if (rc0 == 0 || !std::strstr(err, "chunk_states_count")) {
    std::printf("FAIL %s: chunk_states_count below the capacity: rc=%d err=\"%s\"\n",
                what, rc0, err);
    return false;
  }
  csCount += 2;
#endif
  int rc = ENTRY(&d, STREAM CHUNK_ARG GATE_ARG err, sizeof err);
  cudaError_t ce = cudaDeviceSynchronize();
  if (ce != cudaSuccess) {
    std::printf("FAIL %s: %s\n", what, cudaGetErrorString(ce));
    return false;
  }
  cudaMemcpy(p.o, d.o, o.f32.size() * bytesOf(p.out_dtype),
             cudaMemcpyDeviceToHost);
  if (p.ht)
    cudaMemcpy(p.ht, d.ht, ht.f32.size() * st, cudaMemcpyDeviceToHost);
#if FLAG(CHUNK_STATES)
  cudaMemcpy(chunkStates.data(), dcs, chunkStates.size() * 4, cudaMemcpyDeviceToHost);
  // p's cu_seqlens are host memory: the entries written, then the untouched.
  const size_t written = size_t(CHUNK_COUNT(&p)) * hsz;
  for (size_t i = written; i < chunkStates.size(); ++i)
    if (chunkStates[i] != -9.0f) {
      std::printf("FAIL %s: chunk_states written past entry %lld\n", what,
                  (long long)CHUNK_COUNT(&p));
      return false;
    }
  chunkStates.resize(written);
#endif
#else
#if FLAG(CHUNK_STATES)
  std::vector<float> chunkStates(size_t(CHUNK_COUNT(&p)) * p.HV * p.K * p.V);
#endif
  int rc = ENTRY(&p, CHUNK_ARG GATE_ARG err, sizeof err);
#endif
  if (rc != 0) {
    std::printf("FAIL %s: entry returned %d: %s\n", what, rc, err);
    return false;
  }

  // The reference on the f32 values the entry saw, f32 state.
  deltac_fwd_params r = p;
  r.in_dtype = DELTAC_F32;
  r.q = q.f32.data();
  r.k = k.f32.data();
  r.v = v.f32.data();
  r.beta = betaRef.data();
  r.g = gRef.empty() ? nullptr : gRef.data();
  r.state_dtype = DELTAC_F32;
  r.h0 = FLAG(INITIAL_STATE) ? h0.f32.data() : nullptr;
  std::vector<double> oRef, htRef;
  deltac::ref::forward(r, &oRef, &htRef);
  double eo = relRms(o, oRef);
  double eh = FLAG(FINAL_STATE) ? relRms(ht, htRef) : 0.0;
  bool ok = eo <= tol && eh <= tol;
  std::printf("%s %s: T=%d N=%d rel_rms(o)=%.3g rel_rms(ht)=%.3g tol=%.0e\n",
              ok ? "ok" : "FAIL", what, p.T, p.N, eo, eh, tol);
#if FLAG(CHUNK_STATES)
  // Chunk-end states: the reference final state of every chunk-aligned
  // prefix of every sequence.
  std::vector<double> csRef;
  const size_t hs = size_t(p.HV) * p.K * p.V;
  for (int32_t n = 0; n < p.N; ++n) {
    const int64_t start = p.cu_seqlens ? cu[n] : int64_t(n) * p.T;
    const int64_t len = p.cu_seqlens ? cu[n + 1] - start : p.T;
    for (int64_t e = CS_CHUNK; e - CS_CHUNK < len; e += CS_CHUNK) {
      deltac_fwd_params s = r;
      s.B = 1;
      s.N = 1;
      s.T = int32_t(std::min<int64_t>(e, len));
      s.cu_seqlens = nullptr;
      s.q = q.f32.data() + start * p.H * p.K;
      s.k = k.f32.data() + start * p.H * p.K;
      s.v = v.f32.data() + start * p.HV * p.V;
      s.beta = betaRef.data() + start * p.HV;
      s.g = gRef.empty() ? nullptr : gRef.data() + start * p.HV * gw;
      s.h0 = FLAG(INITIAL_STATE) ? h0.f32.data() + n * hs : nullptr;
      std::vector<double> ht1;
      deltac::ref::forward(s, nullptr, &ht1);
      csRef.insert(csRef.end(), ht1.begin(), ht1.end());
    }
  }
  double ec = csRef.size() == chunkStates.size()
                  ? deltac::ref::rel_rms(chunkStates.data(), csRef)
                  : INFINITY;
  bool cok = ec <= 1e-5 || (lowp && ec <= tol);
  std::printf("%s %s chunk states: %zu states rel_rms=%.3g\n",
              cok ? "ok" : "FAIL", what, csRef.size() / hs, ec);
  ok &= cok;
#endif
  return ok;
}

// A params struct that does not match the spec must be refused.
bool rejectsMismatch() {
  deltac_fwd_params p = SPEC_PARAMS();
  p.H += 1;
  char err[256] = "";
#if FLAG(GATE_IN_KERNEL)
  int rc = ENTRY(&p, STREAM NULL_CHUNK_ARG nullptr, nullptr, err, sizeof err);
#else
  int rc = ENTRY(&p, STREAM NULL_CHUNK_ARG err, sizeof err);
#endif
  bool ok = rc != 0 && std::strstr(err, "params.H") != nullptr;
  std::printf("%s mismatch: rc=%d err=\"%s\"\n", ok ? "ok" : "FAIL", rc, err);
  return ok;
}

} // namespace

int main() {
#ifdef DELTA_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device\n");
    return 77; // ctest SKIP_RETURN_CODE
  }
#endif
  bool ok = conversionsExact();
  ok &= rejectsMismatch();
  if (FLAG(VARLEN)) {
    ok &= runCase("prompt", {37, 150, 5});
    ok &= runCase("decode", std::vector<int>(3, FLAG(DECODE_TOKENS)));
  } else {
    ok &= runCase("prompt", {150, 150});
    ok &= runCase("decode", {FLAG(DECODE_TOKENS), FLAG(DECODE_TOKENS)});
  }
  return ok ? 0 : 1;
}
