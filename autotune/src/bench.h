// Inside the autotuner: the inputs it measures on and the two backends that
// check and time candidates (CPU through the runtime's C API in
// autotune.cpp, CUDA through the tuner's own instances in cuda_bench.cu).
#ifndef DELTAC_TUNE_BENCH_H
#define DELTAC_TUNE_BENCH_H

#include "deltac/autotune.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace deltac::tune {

// One set of host tensors for B sequences of T tokens (q, k L2-normalised
// rows; bf16 copies when the spec's dtypes are bf16).
struct Tensors {
  int32_t B = 0, T = 0;
  std::vector<float> q, k, v, g, beta, h0, o, ht;
  std::vector<uint16_t> qb, kb, vb, ob;

  size_t bytes() const {
    return 4 * (q.size() + k.size() + v.size() + g.size() + beta.size() +
                h0.size() + o.size() + ht.size()) +
           2 * (qb.size() + kb.size() + vb.size() + ob.size());
  }
};

Tensors make_tensors(const Spec &sp, int32_t B, int32_t T, uint64_t seed);
// Params over t's host buffers (f32 state, K-first, h0 in, ht out).
deltac_fwd_params params_of(const Spec &sp, Tensors &t);

// A candidate's output in t (o, ht) against the float64 reference: "" or
// "wrong answer: ..." with the errors in *eo, *eh. s.corrupt (testing)
// corrupts the named candidate's output first.
std::string judge(const Spec &sp, const Settings &s, const Candidate &c, Tensors *t,
                  const std::vector<double> &o, const std::vector<double> &ht, double *eo,
                  double *eh);

// Times candidates on one bucket's inputs.
class Bench {
public:
  virtual ~Bench() = default;
  // Warm-up call and the calls per sample (enough to last min_sample_s);
  // *us: the warm-up call's time. "" or why it did not run.
  virtual std::string warm(const Candidate &c, int32_t *calls, double *us = nullptr) = 0;
  // One sample: microseconds per call over `calls` calls; a failed call
  // makes it infinite (a failure is never fast).
  virtual double sample(const Candidate &c, int32_t calls) = 0;
};

// Checks candidates against the float64 reference on a small problem.
class Checker {
public:
  virtual ~Checker() = default;
  // "" when c's output matches (errors in *eo, *eh).
  virtual std::string check(const Candidate &c, double *eo, double *eh) = 0;
  // The compiler's resource report of c's kernels: the most registers and
  // local (spill) bytes per thread of any of them; false when none (CPU,
  // a family that does not report).
  virtual bool resources(const Candidate &, int *regs, int *spill) { return false; }
};

// The backward's saved-states option on CUDA (cuda_backward.cu): forward +
// backward of one bucket's problem through the runtime's C API on device
// buffers, the chunk states kept (options.saved_states, then
// deltac_bwd_params.saved_states) or recomputed by the backward.
class BackwardBench {
public:
  virtual ~BackwardBench() = default;
  // Warm-up call and the calls per sample; *us: the warm-up's time.
  virtual std::string warm(bool keep, int32_t *calls, double *us) = 0;
  // Microseconds per forward + backward over `calls` calls (infinite when a
  // call failed).
  virtual double sample(bool keep, int32_t calls) = 0;
  // Bytes of the saved states, and of the backward's workspace either way.
  virtual uint64_t saved_bytes() const = 0;
  virtual uint64_t workspace_bytes(bool keep) const = 0;
};
// nullptr with *why when it cannot run (no CUDA, allocation, a refused call).
std::unique_ptr<BackwardBench> cuda_backward_bench(const Spec &sp, const Settings &s,
                                                   int32_t B, int32_t T, std::string *why);
// The gradients of one forward + backward of B sequences of T tokens, kept
// or recomputed, against the float64 reference backward: "" or why not (a
// failure, or "wrong answer: ..."), the worst relative RMS over dq, dk, dv,
// dbeta, dg, dh0 in *err.
std::string cuda_backward_check(const Spec &sp, const Settings &s, int32_t B, int32_t T,
                                bool keep, double *err);

// CUDA backend (cuda_bench.cu; cuda_bench_none.cpp without CUDA).
std::unique_ptr<Bench> cuda_bench(const Spec &sp, const Settings &s, int32_t B, int32_t T);
std::unique_ptr<Checker> cuda_checker(const Spec &sp, const Settings &s, int64_t tokens);

} // namespace deltac::tune

#endif // DELTAC_TUNE_BENCH_H
