// The main job: a Qwen3-Next gated DeltaNet layer (16 q/k heads, 32 value
// heads, K = V = 128, bf16 in, f32 state) compiled by `deltac generate`, run
// on random inputs, checked against the float64 reference, and timed.
// The spec uses mode auto: the generated entries run the kernel the
// catalogue's default rule picks for the longest sequence
// (deltac/catalogue.h); on a machine with a GPU the CUDA kernels run too.
#include "deltac/reference.h"
#include "qwen3_next_gdn.h"
// Header-only; the demo links no runtime library.
#include "deltac/catalogue.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <new>
#include <string>
#include <vector>

#include "demo.h"

namespace {

constexpr int kHeads = 16, kVHeads = 32, kDim = 128;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

// Runs the generated CPU entry `reps` times; returns the median seconds.
double time_cpu(const deltac_fwd_params &p, int reps) {
  std::vector<double> times;
  char err[256];
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    if (qwen3_next_gdn_forward_cpu(&p, err, sizeof err) != 0) {
      std::fprintf(stderr, "deltac demo: CPU kernel refused the call: %s\n", err);
      std::exit(1);
    }
    times.push_back(seconds_since(t0));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The chunk of the kernel that mode auto runs for p on `device` (0: a
// recurrent one): the generated dispatch follows the catalogue's default
// rule, since the spec has no schedules of its own and no tuning database
// is used.
int auto_chunk(deltac::Device device, const deltac_fwd_params &p) {
  deltac::Problem pr = deltac::problem_of(p, deltac::max_seqlen(p));
  deltac::Family f;
  if (!deltac::default_family(device, deltac::Mode::Auto, pr, &f, nullptr))
    return 0;
  return deltac::default_config(f, pr).chunk;
}

// chunk: of the kernel that ran, 0 for the recurrent one (for the FLOPs).
bool report(const char *what, const demo::Problem &pb, demo::Outputs &out,
            double secs, long tokens, int chunk) {
  std::vector<double> o_ref, ht_ref;
  deltac::ref::forward(pb.params(out.o.data(), out.ht.data()), &o_ref, &ht_ref);
  double eo = deltac::ref::rel_rms(out.o.data(), o_ref); // o is bf16
  double eh = deltac::ref::rel_rms(out.ht.data(), ht_ref);
  bool ok = eo <= 5e-3 && eh <= 5e-3;
  double gflop = demo::flops(pb, chunk) * 1e-9;
  std::printf("%-34s err o %.2e  ht %.2e  %s  %9.3f ms  %10.0f tokens/s  %6.1f "
              "GFLOP/s\n",
              what, eo, eh, ok ? "ok  " : "FAIL", secs * 1e3, tokens / secs,
              gflop / secs);
  return ok;
}

} // namespace

int main(int argc, char **argv) try {
  demo::Options opt = demo::parse(argc, argv);
  std::printf("deltac main job: Qwen3-Next gated DeltaNet layer, %d q/k heads, "
              "%d value heads, K = V = %d, bf16 in, f32 state\n",
              kHeads, kVHeads, kDim);
  bool ok = true;
  std::mt19937_64 rng(opt.seed);

  // Prompt: one sequence of opt.tokens tokens.
  demo::Problem prompt(rng, 1, opt.tokens, kHeads, kVHeads, kDim, false);
  demo::Outputs out(prompt);
  deltac_fwd_params p = prompt.params(out.o.data(), out.ht.data());
  p.threads = opt.threads;
  if (opt.cpu) {
    double t = time_cpu(p, opt.reps);
    ok &= report(("cpu prefill T=" + std::to_string(opt.tokens)).c_str(), prompt,
                 out, t, opt.tokens, auto_chunk(deltac::Device::CPU, p));
  }
  // Decode: a batch of sequences with a cached state, one token each.
  demo::Problem step(rng, opt.batch, 1, kHeads, kVHeads, kDim, true);
  demo::Outputs step_out(step);
  deltac_fwd_params s = step.params(step_out.o.data(), step_out.ht.data());
  s.threads = opt.threads;
  if (opt.cpu) {
    double t = time_cpu(s, std::max(opt.reps, 20));
    ok &= report(("cpu decode step batch=" + std::to_string(opt.batch)).c_str(),
                 step, step_out, t, opt.batch, auto_chunk(deltac::Device::CPU, s));
  }
#ifdef DELTAC_DEMO_CUDA
  if (opt.gpu) {
    if (!demo::cuda_present()) {
      std::printf("no CUDA device: GPU runs skipped\n");
    } else {
      double t = demo::time_cuda(prompt, &out, opt.reps);
      ok &= report(("cuda prefill T=" + std::to_string(opt.tokens)).c_str(),
                   prompt, out, t, opt.tokens, auto_chunk(deltac::Device::CUDA, p));
      t = demo::time_cuda(step, &step_out, std::max(opt.reps, 50));
      ok &= report(("cuda decode step batch=" + std::to_string(opt.batch)).c_str(),
                   step, step_out, t, opt.batch, auto_chunk(deltac::Device::CUDA, s));
    }
  }
#endif
  std::printf("%s\n", ok ? "all results within tolerance (rel. RMS <= 5e-3, bf16 inputs)"
                         : "SOME RESULTS ARE OUT OF TOLERANCE");
  return ok ? 0 : 1;
}
catch (const std::bad_alloc &) {
  std::fprintf(stderr, "deltac demo: out of memory for these sizes; try fewer "
                       "--tokens or a smaller --batch\n");
  return 1;
}
