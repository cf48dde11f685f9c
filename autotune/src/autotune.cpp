// The autotuner's search (deltac/autotune.h): enumeration from the kernel
// catalogue, the reference check, timing and successive halving.
#include "deltac/autotune.h"

#include "bench.h"
#include "deltac/backward_rules.h"
#include "deltac/cpu/cache.h"
#include "deltac/cpu/isa.h"
#include "deltac/tune_cuda.h"
#include "deltac/reference.h"
#include "deltac/runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sys/stat.h>
#include <thread>

namespace deltac::tune {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Whether a candidate of config c can run: the CPU runtime's instances take
// any K, V; CUDA candidates are the tuner's own instances (deltac/tune_cuda.h).
bool compiled(const Spec &sp, const KernelConfig &c, const Problem &prob) {
  if (sp.device == Device::CPU)
    return precompiled(c, prob);
  return cuda::find(sp.variant, sp.K, sp.V, sp.in_dtype, c) != nullptr;
}

Problem problemOf(const Spec &sp, int64_t tokens, int32_t batch) {
  Problem p;
  p.variant = sp.variant, p.K = sp.K, p.V = sp.V, p.H = sp.H, p.HV = sp.HV;
  p.in_dtype = sp.in_dtype, p.out_dtype = sp.out_dtype;
  p.seqs = batch;
  p.max_seqlen = tokens;
  if (sp.device == Device::CUDA) // the default rule reads the SM count
    cuda::usable(&p.sm_count);
  else // and the CPU rule the instruction set, as the runtime's
    cpu::isa::set_problem(&p);
  return p;
}

// Runs c on t through the C API; "" or the runtime's error.
std::string runOnce(const Spec &sp, Tensors &t, const Candidate &c) {
  deltac_fwd_params p = params_of(sp, t);
  p.threads = c.threads;
  deltac_options opt = deltac_default_options();
  opt.device = sp.device == Device::CPU ? DELTAC_DEVICE_CPU : DELTAC_DEVICE_CUDA;
  if (!c.is_default) {
    opt.config.family = family_info(c.config.family).name;
    opt.config.chunk = c.config.chunk, opt.config.tile_k = c.config.tile_k;
    opt.config.tile_v = c.config.tile_v, opt.config.warps = c.config.warps;
    opt.config.stages = c.config.stages, opt.config.split = c.config.split;
    opt.config.fuse = c.config.fuse, opt.config.scan = c.config.scan;
    if (sp.device == Device::CPU)
      opt.config.isa = cpu_isa_name(c.isa);
  }
  deltac_run_info info{};
  if (deltac_forward_info(&p, &opt, &info) != 0)
    return deltac_last_error();
  return "";
}

// Samples for a round of `reps` when one sample takes sample_us: cheap
// candidates get up to 5x more (short calls are the noisiest and cost
// little next to the long buckets).
int scaledReps(int reps, double sample_us) {
  const int k = sample_us > 0 ? int(5e4 / sample_us) : 5;
  return reps * std::max(1, std::min(5, k));
}

double median(std::vector<double> x) {
  if (x.empty())
    return 0;
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

// One bucket's measurement state: rotating input sets (together larger than
// L2, so no call finds its inputs cached from the previous one) and the
// number of calls per sample of each candidate.
class CpuBench : public Bench {
public:
  CpuBench(const Spec &sp, const Settings &s, int32_t B, int32_t T)
      : sp_(sp), s_(s) {
    sets_.push_back(make_tensors(sp, B, T, s.seed));
    const size_t one = std::max<size_t>(sets_[0].bytes(), 1);
    const size_t want = std::min<size_t>((2 * cpu::l2_cache_bytes() + one - 1) / one, 8);
    for (size_t i = 1; i < want; ++i)
      sets_.push_back(sets_[0]);
  }
  std::string warm(const Candidate &c, int32_t *calls, double *us) override {
    auto t0 = Clock::now();
    std::string err = runOnce(sp_, next(), c);
    if (!err.empty())
      return err;
    const double t = secondsSince(t0);
    if (us)
      *us = t * 1e6;
    *calls = std::max(1, std::min(1000, int(std::ceil(s_.min_sample_s /
                                                      std::max(t, 1e-7)))));
    return "";
  }

  double sample(const Candidate &c, int32_t calls) override {
    bool failed = false;
    auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i)
      failed |= !runOnce(sp_, next(), c).empty();
    const double us = secondsSince(t0) * 1e6 / calls;
    return failed ? INFINITY : us;
  }

private:
  Tensors &next() {
    Tensors &t = sets_[cursor_];
    cursor_ = (cursor_ + 1) % sets_.size();
    return t;
  }
  const Spec &sp_;
  const Settings &s_;
  std::vector<Tensors> sets_;
  size_t cursor_ = 0;
};

// The float64 reference of one small problem per bucket; checks candidates.
class CpuChecker : public Checker {
public:
  CpuChecker(const Spec &sp, const Settings &s, int64_t tokens)
      : sp_(sp), s_(s) {
    const int32_t B = tokens == 1 ? 4 : 2;
    const int32_t T = int32_t(std::min<int64_t>(tokens, 80));
    t_ = make_tensors(sp, B, T, s.seed + 7);
    deltac_fwd_params p = params_of(sp, t_);
    ref::forward(p, &o_, &ht_);
  }

  std::string check(const Candidate &c, double *eo, double *eh) override {
    std::fill(t_.o.begin(), t_.o.end(), 0.0f);
    std::fill(t_.ob.begin(), t_.ob.end(), uint16_t(0));
    std::fill(t_.ht.begin(), t_.ht.end(), 0.0f);
    std::string err = runOnce(sp_, t_, c);
    if (!err.empty())
      return "does not run: " + err;
    return judge(sp_, s_, c, &t_, o_, ht_, eo, eh);
  }

private:
  const Spec &sp_;
  const Settings &s_;
  Tensors t_;
  std::vector<double> o_, ht_;
};

// The CPU instances to time: s.isas, else every one this call may run
// (no wider than the active one) from avx2 up, or generic alone.
std::vector<CpuIsa> isaList(const Settings &s, const Problem &prob) {
  std::vector<CpuIsa> out;
  for (const std::string &n : s.isas) {
    CpuIsa i;
    if (cpu_isa_by_name(n, &i) && check_cpu_isa(Family::CpuRecurrent, i, prob).empty())
      out.push_back(i);
  }
  if (!s.isas.empty())
    return out;
  for (int i = static_cast<int>(prob.cpu_isa); i >= 1; --i)
    out.insert(out.begin(), static_cast<CpuIsa>(i));
  if (out.empty())
    out.push_back(CpuIsa::generic);
  return out;
}

std::vector<int32_t> threadList(const Settings &s) {
  if (!s.threads.empty())
    return s.threads;
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<int32_t> t;
  for (int n = 1; n < cores; n *= 2)
    t.push_back(n);
  t.push_back(cores);
  return t;
}

// Progress in weighted units (a bucket's unit weighs its tokens), so that
// the time left follows the work, not the count.
struct Meter {
  const std::function<void(const Progress &)> *fn;
  Progress p;
  double wDone = 0, wTotal = 0;
  Clock::time_point t0 = Clock::now();

  void step(int64_t n, double weight) {
    p.done += n;
    wDone += n * weight;
    p.elapsed_s = secondsSince(t0);
    p.left_s = wDone > 0 ? p.elapsed_s * (wTotal - wDone) / wDone : 0;
    if (p.left_s < 0)
      p.left_s = 0;
    if (*fn)
      (*fn)(p);
  }
};

// A bucket's measurement's weight for the time left: its tokens, a few per
// sequence for the state's load and store, and a fixed part for what every
// measurement costs whatever its length (more samples of short calls,
// calibration, thread wake-ups).
double bucketWeight(int64_t tokens, int32_t batch) {
  return double(batch) * double(tokens + 4) + 2000.0;
}

// Measurements of the halving search: units the plan counts for n.
int64_t halvingUnits(int64_t n) {
  int64_t u = n;
  while (n > 2) {
    n = (n + 1) / 2;
    u += n;
  }
  return u + 1; // + the A/B run against the default
}

// The searches. all[i].median_us is left at the last round's median.
void searchBucket(const Spec &sp, const Settings &s, Bench &bench,
                  BucketResult *b, Meter *m, double weight) {
  std::vector<Measurement> &all = b->all;
  std::vector<int32_t> calls(all.size(), 1);
  // A warm-up call of 20 ms or more counts as the first sample: what it
  // warms (thread team, touched outputs) is noise at that length, and the
  // long buckets dominate the tune time.
  std::vector<double> first(all.size(), 0.0), sampleUs(all.size(), 0.0);
  std::vector<int> alive;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].ok && !all[i].pruned)
      alive.push_back(int(i));
  // One round over candidates ids, `reps` samples each (up to 5x for cheap
  // ones), taken round-robin (a sample of each in turn), so that a change
  // of the machine's load during the round hits every candidate alike.
  auto measureAll = [&](const std::vector<int> &ids, int reps) {
    std::vector<std::vector<double>> x(all.size());
    std::vector<int> want(all.size(), 0);
    int most = 0;
    for (int i : ids) {
      want[i] = scaledReps(reps, sampleUs[i]);
      most = std::max(most, want[i]);
      if (first[i] > 0) {
        x[i].push_back(first[i]);
        first[i] = 0;
      }
    }
    for (int i : ids)
      if (int(x[i].size()) >= want[i])
        m->step(1, weight); // the warm-up sample was all it needed
    for (int r = 0; r < most; ++r)
      for (int i : ids) {
        if (int(x[i].size()) >= want[i])
          continue;
        x[i].push_back(bench.sample(all[i].cand, calls[i]));
        if (int(x[i].size()) == want[i])
          m->step(1, weight);
      }
    for (int i : ids) {
      all[i].median_us = median(x[i]);
      all[i].samples = want[i];
      all[i].rounds += 1;
    }
  };
  auto better = [&](int a, int c) { return all[a].median_us < all[c].median_us; };
  auto noteBest = [&] {
    int best = -1;
    for (int i : alive)
      if (all[i].rounds && (best < 0 || better(i, best)))
        best = i;
    if (best >= 0) {
      m->p.best = candidate_string(all[best].cand);
      m->p.best_us = all[best].median_us;
    }
  };
  // Warm-up and calibration, once per candidate.
  for (int i : alive) {
    double us = 0;
    std::string err = bench.warm(all[i].cand, &calls[i], &us);
    if (!err.empty())
      all[i].ok = false, all[i].why = "does not run: " + err;
    else if (us >= 2e4 && calls[i] == 1)
      first[i] = us;
    sampleUs[i] = us * calls[i];
  }
  alive.erase(std::remove_if(alive.begin(), alive.end(),
                             [&](int i) { return !all[i].ok; }),
              alive.end());
  if (s.search == Search::Exhaustive) {
    measureAll(alive, s.repeats);
    noteBest();
  } else {
    // Successive halving: every candidate cheaply, then the faster half
    // with twice the samples, until two are left; that last round takes
    // `repeats` samples and picks one.
    int rounds = 1;
    for (size_t n = alive.size(); n > 2; n = (n + 1) / 2)
      ++rounds;
    for (int r = 0; r < rounds; ++r) {
      const int reps = std::max(
          1, int(std::ceil(s.repeats / std::pow(2.0, rounds - 1 - r))));
      measureAll(alive, reps);
      noteBest();
      std::sort(alive.begin(), alive.end(), better);
      alive.resize((alive.size() + 1) / 2);
    }
  }
  int best = -1;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].ok && all[i].rounds &&
        (best < 0 || all[i].rounds > all[best].rounds ||
         (all[i].rounds == all[best].rounds && better(int(i), best))))
      best = int(i);
  b->winner = best;
}

// Interleaved A/B of the pick and the default: the pick stays only when it
// is faster by at least min_gain. Fills winner_us and default_us.
void guardDefault(const Settings &s, Bench &bench, BucketResult *b) {
  const int d = b->default_index, w = b->winner;
  if (w == d) { // the search's own measurement of the default stands
    b->default_us = b->winner_us = b->all[d].median_us;
    return;
  }
  std::vector<double> td, tw;
  int32_t cd = 1, cw = 1;
  double us = 0;
  bench.warm(b->all[d].cand, &cd, &us);
  bench.warm(b->all[w].cand, &cw);
  cd = cw = std::max(cd, cw);
  const int reps = scaledReps(std::max(3, s.repeats), us * cd);
  for (int r = 0; r < reps; ++r) {
    td.push_back(bench.sample(b->all[d].cand, cd));
    if (w != d)
      tw.push_back(bench.sample(b->all[w].cand, cw));
  }
  b->default_us = median(td);
  b->winner_us = w != d ? median(tw) : b->default_us;
  if (w != d && !(b->winner_us * (1 + s.min_gain) <= b->default_us)) {
    b->default_kept = true;
    b->winner = d;
    b->winner_us = b->default_us;
  }
}

bool fileExists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

} // namespace

std::string candidate_string(const Candidate &c) {
  const FamilyInfo &f = family_info(c.config.family);
  std::string s = f.name;
  for (int i = 0; i < kKnobCount; ++i)
    if (f.knobs & (1u << i))
      s += std::string(" ") + kKnobNames[i] + "=" + std::to_string(c.config.knob(i));
  if (f.device == Device::CPU) {
    s += std::string(" isa=") + cpu_isa_name(c.isa);
    s += c.threads ? " threads=" + std::to_string(c.threads)
                   : std::string(" threads=auto");
  }
  return s;
}

std::vector<KernelConfig> knob_product(const FamilyInfo &f) {
  std::vector<KernelConfig> configs(1);
  configs[0].family = f.family;
  for (int k = 0; k < kKnobCount; ++k) {
    if (!(f.knobs & (1u << k)))
      continue;
    std::vector<KernelConfig> next;
    for (const KernelConfig &c : configs)
      for (int j = 0; j < f.values[k].n; ++j) {
        KernelConfig x = c;
        x.knob(k) = f.values[k].v[j];
        next.push_back(x);
      }
    configs.swap(next);
  }
  return configs;
}

bool run_time_knobs_matter(const KernelConfig &c, const Problem &p) {
  if (c.family != Family::CudaChunked || c.chunk <= 0 || c.tile_v <= 0)
    return true;
  // Where the warp scan runs, scan 0 is it (with its split values; it reads
  // no tile_v, warps, stages or fuse: the default config's, fuse 0) and scan
  // 1 the block scan with its knobs; elsewhere scan 0 is the block scan (1
  // the same run).
  const int32_t bytes = deltac::detail::dtypeSize(p.in_dtype);
  // Scan 5 runs (unsplit, unfused) exactly where beta may exceed 1 and it
  // runs (16-bit delta / GDN), and nothing else does there (call_knobs).
  const bool precise = p.beta_two && deltac::cuda::chunked_precise_runs(p.variant, bytes);
  if (precise || c.scan == deltac::cuda::kChunkedScanPrecise)
    return precise && c.scan == deltac::cuda::kChunkedScanPrecise && c.split == 0 &&
           c.fuse == 0;
  // The TMA scan reads none of tile_v, warps, stages, split or fuse: one
  // candidate (the default config's) where it runs; elsewhere scan 3 runs
  // as scan 0.
  // The transposed TMA scan (scan 4) likewise (at K = 256 its key split).
  if (c.scan == 3 || c.scan == 4) {
    const KernelConfig d = default_config(Family::CudaChunked, p);
    return (c.scan == 3 ? deltac::cuda::chunked_tma_runs
                        : deltac::cuda::chunked_tmat_runs)(p.variant, p.K, p.V, bytes,
                                                           c.chunk) &&
           c.split == 0 && c.fuse == 0 && c.tile_v == d.tile_v && c.warps == d.warps &&
           c.stages == d.stages;
  }
  const bool warp = deltac::cuda::chunked_warp_runs(p.variant, p.K, p.V, bytes, c.chunk);
  if (!warp && c.scan == 1)
    return false;
  const bool warpScan = warp && c.scan == 0;
  if (warpScan) {
    const KernelConfig d = default_config(Family::CudaChunked, p);
    if (c.fuse != 0 || c.tile_v != d.tile_v || c.warps != d.warps || c.stages != d.stages)
      return false;
  }
  // The V tile the scan runs unsplit (the warp scan's narrowest where the
  // grid is short) and whether the rule (split 0) may split there.
  const int32_t runTile = warpScan ? deltac::cuda::kChunkedWarpBVs[1] : c.tile_v;
  const int64_t chunks = (p.max_seqlen + c.chunk - 1) / c.chunk;
  const int64_t minSplit =
      warpScan ? deltac::cuda::kChunkedMinSplitWarp : deltac::cuda::kChunkedMinSplitBlock;
  const bool ruleMaySplit =
      (chunks + minSplit - 1) / minSplit >= deltac::cuda::kChunkedSplitMinChunks &&
      !(p.sm_count > 0 &&
        !deltac::cuda::chunked_grid_short(p.seqs * p.HV * (p.V / runTile), p.sm_count));
  const int32_t noSplit = ruleMaySplit ? 1 : 0;
  if (c.fuse == 1 && (c.split != noSplit || chunks < 1))
    return false;
  // The fused launch runs only where the scan's grid is one wave
  // (chunked_fused_launch); elsewhere fuse = 1 runs as fuse = 0.
  if (c.fuse == 1 && p.sm_count > 0 && p.seqs * p.HV * (p.V / c.tile_v) > p.sm_count)
    return false;
  if (c.split == 0)
    return true;
  if (c.split == 1)
    return ruleMaySplit;
  auto len = [&](int64_t s) { return (chunks + s - 1) / s; };
  const int64_t L = len(c.split);
  return chunks >= 2 && (chunks + L - 1) / L >= 2 && L < len(c.split / 2) &&
         p.seqs * c.split <= 65535;
}

std::vector<Candidate> enumerate(const Spec &spec, const Settings &s,
                                 int64_t tokens, int32_t batch) {
  const Problem prob = problemOf(spec, tokens, batch);
  std::vector<Candidate> out;
  Family df;
  if (default_family(spec.device, Mode::Auto, prob, &df, nullptr)) {
    Candidate d;
    d.config = default_config(df, prob);
    if (spec.device == Device::CPU)
      d.isa = cpu_isa_for(df, prob);
    d.is_default = true;
    if (compiled(spec, d.config, prob))
      out.push_back(d);
  }
  const std::vector<int32_t> threads =
      spec.device == Device::CPU ? threadList(s) : std::vector<int32_t>{0};
  for (const FamilyInfo &f : kFamilies) {
    if (f.device != spec.device)
      continue;
    if (!s.families.empty() &&
        std::find(s.families.begin(), s.families.end(), f.name) == s.families.end())
      continue;
    const std::vector<CpuIsa> isas =
        spec.device == Device::CPU ? isaList(s, prob) : std::vector<CpuIsa>{CpuIsa::generic};
    for (const KernelConfig &c : knob_product(f)) {
      if (!check_config(c, prob).empty() || !run_time_knobs_matter(c, prob) ||
          !compiled(spec, c, prob))
        continue;
      for (CpuIsa isa : isas)
        for (int32_t t : threads) {
          // The default config on the rule's instance and all cores is what
          // the default candidate runs for any call above the kernels'
          // one-thread threshold (deltac/cpu/common.h, thread_count: 2^17
          // state updates): the same run, not another candidate.
          if (!out.empty() && out[0].config == c && out[0].isa == isa &&
              spec.device == Device::CPU &&
              t == int32_t(std::thread::hardware_concurrency()) &&
              !std::getenv("OMP_NUM_THREADS") &&
              batch * tokens * spec.HV * int64_t(spec.K) * spec.V >= (int64_t(1) << 17))
            continue;
          Candidate x;
          x.config = c;
          x.threads = t;
          x.isa = isa;
          out.push_back(x);
        }
    }
  }
  return out;
}

TuningRecord record_of(const Spec &spec, const Settings &s,
                       const BucketResult &b) {
  TuningRecord r;
  r.variant = spec.variant, r.K = spec.K, r.V = spec.V;
  r.in_dtype = spec.in_dtype;
  r.max_tokens = b.tokens == s.buckets.back() ? 0 : b.tokens;
  if (b.winner >= 0) {
    const Candidate &w = b.all[b.winner].cand;
    r.config = w.config;
    r.threads = w.threads;
    // The instance, unless the rule's own (the default candidate): a record
    // then follows the rule of the machine that reads it.
    if (spec.device == Device::CPU && !w.is_default)
      r.isa = cpu_isa_name(w.isa);
    r.time_us = b.winner_us;
  }
  r.env = current_env(spec.device);
  return r;
}

bool same_key(const TuningRecord &a, const TuningRecord &b) {
  const Device da = family_info(a.config.family).device;
  const Device db = family_info(b.config.family).device;
  return da == db && a.variant == b.variant && a.K == b.K && a.V == b.V &&
         a.in_dtype == b.in_dtype && a.max_tokens == b.max_tokens &&
         a.env.empty() == b.env.empty() &&
         env_mismatch(da, a.env, b.env).empty() &&
         env_mismatch(da, b.env, a.env).empty();
}

bool same_backward_key(const BackwardRecord &a, const BackwardRecord &b) {
  return a.variant == b.variant && a.K == b.K && a.V == b.V && a.in_dtype == b.in_dtype &&
         a.HV == b.HV && a.max_tokens == b.max_tokens && a.env.empty() == b.env.empty() &&
         env_mismatch(Device::CUDA, a.env, b.env).empty() &&
         env_mismatch(Device::CUDA, b.env, a.env).empty();
}

namespace {
// Adds r to out, or keeps the faster of r and the record of the same key
// already there (the later when neither has a time).
template <class R, class Same>
void mergeInto(std::vector<R> *out, const R &r, Same same, int *dropped) {
  auto it = std::find_if(out->begin(), out->end(), [&](const R &x) { return same(x, r); });
  if (it == out->end()) {
    out->push_back(r);
    return;
  }
  ++*dropped;
  const bool faster = r.time_us > 0 && (it->time_us == 0 || r.time_us < it->time_us);
  if (faster || (r.time_us == 0 && it->time_us == 0))
    *it = r;
}
} // namespace

TuningDB merge(const std::vector<TuningDB> &dbs, int *dropped) {
  TuningDB out;
  *dropped = 0;
  for (const TuningDB &db : dbs) {
    for (const TuningRecord &r : db.records)
      mergeInto(&out.records, r, same_key, dropped);
    for (const BackwardRecord &r : db.backward)
      mergeInto(&out.backward, r, same_backward_key, dropped);
  }
  return out;
}

BackwardRecord backward_record_of(const Spec &spec, const Settings &s,
                                  const BackwardBucket &b) {
  BackwardRecord r;
  r.variant = spec.variant, r.K = spec.K, r.V = spec.V;
  r.in_dtype = spec.in_dtype, r.HV = spec.HV;
  r.max_tokens = b.tokens == s.buckets.back() ? 0 : b.tokens;
  r.keep = b.keep;
  r.time_us = b.keep ? b.keep_us : b.recompute_us;
  r.other_us = b.keep ? b.recompute_us : b.keep_us;
  r.env = current_env(Device::CUDA);
  return r;
}

bool tune_backward(const Spec &spec, const Settings &s, const std::string &db_path,
                   std::vector<BackwardBucket> *results, std::string *error) {
  results->clear();
  if (spec.device != Device::CUDA) {
    *error = "--backward tunes the CUDA backward's saved-states option: use --target=cuda";
    return false;
  }
  if (!bwd_saves_states(spec.variant, spec.K, spec.V, spec.in_dtype)) {
    *error = std::string("--backward: ") + variant_name(spec.variant) + " K = " +
             std::to_string(spec.K) + ", V = " + std::to_string(spec.V) + ", " +
             dtype_name(spec.in_dtype) +
             " inputs: the catalogue offers saved states only for bf16 delta or gated, K = 64 "
             "or 128, V a multiple of 32 up to 256 (bwd_saves_states): nothing to tune";
    return false;
  }
  if (std::string why = check_problem(problemOf(spec, 1, 1)); !why.empty()) {
    *error = "spec: " + why;
    return false;
  }
  if (s.buckets.empty() || !std::is_sorted(s.buckets.begin(), s.buckets.end()) ||
      s.buckets.front() < 1) {
    *error = "buckets must be ascending token counts >= 1";
    return false;
  }
  if (s.workers != 1) {
    *error = "--backward runs in one process (no --workers)";
    return false;
  }
  int32_t sms = 0;
  if (std::string why = cuda::usable(&sms); !why.empty()) {
    *error = "target cuda: " + why;
    return false;
  }
  // The runtime's own choice must be the rule's: no database.
  deltac_load_tuning_db(nullptr);
  TuningDB db;
  if (!db_path.empty() && fileExists(db_path) && !load_tuning_db(db_path, &db, error)) {
    *error += " (not overwritten: move it away or fix it)";
    return false;
  }
  for (int64_t tokens : s.buckets) {
    BackwardBucket b;
    b.tokens = tokens, b.batch = s.batch;
    const auto t0 = Clock::now();
    const int64_t all = tokens * s.batch;
    b.saved_bytes = deltac_saved_states_size(spec.variant, all, s.batch, spec.HV, spec.K,
                                             spec.V, spec.in_dtype);
    b.no_option = b.saved_bytes == 0;
    const BackwardRecord key = backward_record_of(spec, s, b);
    b.skipped = !b.no_option &&
                std::any_of(db.backward.begin(), db.backward.end(),
                            [&](const BackwardRecord &r) { return same_backward_key(r, key); });
    if (b.no_option || b.skipped) {
      results->push_back(b);
      continue;
    }
    b.rule_keep = deltac_saved_states_pay(spec.variant, all, s.batch, spec.HV, spec.K, spec.V,
                                          spec.in_dtype) != 0;
    const int32_t checkT = int32_t(std::min<int64_t>(tokens, 256));
    b.why_keep = cuda_backward_check(spec, s, 2, checkT, true, &b.err_keep);
    b.why_recompute = cuda_backward_check(spec, s, 2, checkT, false, &b.err_recompute);
    if (!b.why_recompute.empty()) {
      *error = "bucket " + std::to_string(tokens) +
               ": the backward recomputing its states: " + b.why_recompute;
      return false;
    }
    std::string why;
    std::unique_ptr<BackwardBench> bench =
        cuda_backward_bench(spec, s, s.batch, int32_t(tokens), &why);
    if (!bench) {
      *error = "bucket " + std::to_string(tokens) + ": " + why;
      return false;
    }
    b.ws_keep = bench->workspace_bytes(true);
    b.ws_recompute = bench->workspace_bytes(false);
    const bool keepOk = b.why_keep.empty();
    int32_t ck = 1, cr = 1;
    double usk = 0, usr = 0;
    if (keepOk && !(why = bench->warm(true, &ck, &usk)).empty())
      b.why_keep = "does not run: " + why;
    if (!(why = bench->warm(false, &cr, &usr)).empty()) {
      *error = "bucket " + std::to_string(tokens) + ": " + why;
      return false;
    }
    const int32_t calls = std::max(ck, cr);
    const int reps = std::max(5, s.repeats);
    std::vector<double> tk, tr;
    for (int r = 0; r < reps; ++r) { // interleaved, each first in turn
      if (r % 2 == 0)
        tr.push_back(bench->sample(false, calls));
      if (b.why_keep.empty())
        tk.push_back(bench->sample(true, calls));
      if (r % 2 == 1)
        tr.push_back(bench->sample(false, calls));
    }
    b.recompute_us = median(tr);
    b.keep_us = tk.empty() ? 0 : median(tk);
    if (!(b.recompute_us < INFINITY)) {
      *error = "bucket " + std::to_string(tokens) + ": a call recomputing the states failed "
               "while timed";
      return false;
    }
    if (!(b.keep_us < INFINITY)) {
      b.why_keep = "a call keeping the states failed while timed";
      b.keep_us = 0;
    }
    // The rule's choice stays unless the other is clearly faster; a choice
    // whose check failed never runs.
    if (!b.why_keep.empty()) {
      b.keep = false;
    } else {
      const double ruleUs = b.rule_keep ? b.keep_us : b.recompute_us;
      const double otherUs = b.rule_keep ? b.recompute_us : b.keep_us;
      b.keep = otherUs * (1 + s.min_gain) < ruleUs ? !b.rule_keep : b.rule_keep;
    }
    b.tune_s = secondsSince(t0);
    results->push_back(b);
    if (!db_path.empty()) {
      db.backward.push_back(backward_record_of(spec, s, b));
      if (!save_tuning_db(db_path, db, error))
        return false;
    }
  }
  return true;
}

bool verify(const Spec &spec, const Settings &s, const std::string &db_path,
            std::vector<VerifyResult> *out, std::string *error) {
  out->clear();
  if (spec.device != Device::CPU) {
    *error = "--verify runs through the runtime's own choice, which ships only the "
             "default CUDA configs: CPU only (a tuned CUDA schedule is checked by the "
             "package `deltac generate --tuning-db` builds)";
    return false;
  }
  if (deltac_load_tuning_db(db_path.c_str()) != 0) {
    *error = deltac_last_error();
    return false;
  }
  Candidate runtimeChoice; // no options.config: what the runtime picks
  runtimeChoice.is_default = true;
  for (int64_t tokens : s.buckets) {
    VerifyResult v;
    v.tokens = tokens;
    v.batch = tokens == 1 ? s.decode_batch : s.batch;
    CpuBench bench(spec, s, v.batch, int32_t(tokens));
    {
      Tensors t = make_tensors(spec, v.batch, int32_t(std::min<int64_t>(tokens, 80)), 3);
      deltac_fwd_params p = params_of(spec, t);
      deltac_options opt = deltac_default_options();
      opt.device = DELTAC_DEVICE_CPU;
      deltac_run_info info{}, plain{};
      deltac_load_tuning_db(nullptr);
      const bool ok = deltac_forward_info(&p, &opt, &plain) == 0;
      deltac_load_tuning_db(db_path.c_str());
      if (!ok || deltac_forward_info(&p, &opt, &info) != 0) {
        *error = deltac_last_error();
        deltac_load_tuning_db(nullptr);
        return false;
      }
      v.tuned = info.tuned;
      v.same = std::string(info.family) == plain.family &&
               info.chunk == plain.chunk && info.tile_v == plain.tile_v &&
               info.warps == plain.warps && info.threads == plain.threads &&
               std::string(info.isa) == plain.isa;
      v.ran = std::string(info.family) + (info.chunk ? " chunk=" + std::to_string(info.chunk) : "") +
              (info.tile_v ? " tile_v=" + std::to_string(info.tile_v) : "") +
              (*info.isa ? std::string(" isa=") + info.isa : std::string()) +
              (info.threads ? " threads=" + std::to_string(info.threads) : " threads=auto");
      if (*info.note)
        v.ran += std::string(" (") + info.note + ")";
    }
    int32_t calls = 1;
    double us = 0;
    bench.warm(runtimeChoice, &calls, &us);
    std::vector<double> td, tt;
    const int reps = scaledReps(std::max(5, s.repeats), us * calls);
    for (int r = 0; r < reps; ++r) {
      deltac_load_tuning_db(nullptr);
      td.push_back(bench.sample(runtimeChoice, calls));
      deltac_load_tuning_db(db_path.c_str());
      tt.push_back(bench.sample(runtimeChoice, calls));
    }
    v.default_us = median(td);
    v.tuned_us = median(tt);
    out->push_back(v);
  }
  deltac_load_tuning_db(nullptr);
  return true;
}

bool tune(const Spec &spec, const Settings &s, const std::string &db_path,
          std::vector<BucketResult> *results, std::string *error,
          const std::function<void(const Progress &)> &progress) {
  results->clear();
  if (spec.device == Device::CUDA) {
    int32_t sms = 0;
    std::string why = cuda::usable(&sms);
    if (!why.empty()) {
      *error = "target cuda: " + why;
      return false;
    }
  }
  Problem base = problemOf(spec, 1, 1);
  std::string why = check_problem(base);
  if (!why.empty()) {
    *error = "spec: " + why;
    return false;
  }
  for (const std::string &name : s.families) {
    const FamilyInfo *f = family_by_name(name);
    if (!f || f->device != spec.device) {
      *error = "family '" + name + "': not a " + device_name(spec.device) +
               " family of the catalogue";
      return false;
    }
  }
  if (s.buckets.empty() || !std::is_sorted(s.buckets.begin(), s.buckets.end()) ||
      s.buckets.front() < 1) {
    *error = "buckets must be ascending token counts >= 1";
    return false;
  }
  // The default candidate must run the default rule: no database, whatever
  // DELTAC_TUNING_DB says (an explicit unload wins over the variable).
  deltac_load_tuning_db(nullptr);
  TuningDB db;
  if (!db_path.empty() && fileExists(db_path) &&
      !load_tuning_db(db_path, &db, error)) {
    *error += " (not overwritten: move it away or fix it)";
    return false;
  }

  Meter meter{&progress, {}};
  std::vector<std::vector<Candidate>> cands;
  if (s.workers < 1 || s.worker < 0 || s.worker >= s.workers) {
    *error = "worker " + std::to_string(s.worker) + " of " +
             std::to_string(s.workers) + ": expected 0 <= worker < workers";
    return false;
  }
  for (size_t bi = 0; bi < s.buckets.size(); ++bi) {
    const int64_t tokens = s.buckets[bi];
    const int32_t batch = tokens == 1 ? s.decode_batch : s.batch;
    BucketResult b;
    b.tokens = tokens, b.batch = batch;
    b.elsewhere = int32_t(bi % size_t(s.workers)) != s.worker;
    cands.push_back(b.elsewhere ? std::vector<Candidate>{}
                                : enumerate(spec, s, tokens, batch));
    TuningRecord key = record_of(spec, s, b);
    if (b.elsewhere) {
      b.skipped = true;
    } else if (!cands.back().empty()) {
      key.config = cands.back()[0].config;
      b.skipped = std::any_of(db.records.begin(), db.records.end(),
                              [&](const TuningRecord &r) { return same_key(r, key); });
    }
    if (!b.skipped) {
      const int64_t n = int64_t(cands.back().size());
      const double w = bucketWeight(tokens, batch);
      int64_t units = s.search == Search::Halving ? halvingUnits(n) : n + 1;
      if (s.compare_exhaustive)
        units += n;
      meter.p.total += units;
      meter.wTotal += units * w;
    }
    results->push_back(b);
  }

  std::map<std::string, double> prevRatio; // candidate -> time / best
  int64_t prevTokens = 0;
  for (size_t bi = 0; bi < s.buckets.size(); ++bi) {
    BucketResult &b = (*results)[bi];
    if (b.skipped)
      continue;
    if (cands[bi].empty() || !cands[bi][0].is_default) {
      *error = "bucket " + std::to_string(b.tokens) + ": no kernel of " +
               device_name(spec.device) + " runs this spec";
      if (spec.device == Device::CUDA)
        *error += std::string(" in this build (its CUDA tuner instances: \"") + cuda::specs() +
                  "\"; configure with -DDELTAC_TUNE_CUDA_SPECS=variant:K:V:dtype)";
      return false;
    }
    const auto t0 = Clock::now();
    const double w = bucketWeight(b.tokens, b.batch);
    const int64_t units0 = meter.p.done;
    meter.p.bucket = b.tokens;
    meter.p.best.clear();
    meter.p.best_us = 0;
    std::unique_ptr<Checker> checker;
    std::unique_ptr<Bench> bench;
    if (spec.device == Device::CPU) {
      checker = std::make_unique<CpuChecker>(spec, s, b.tokens);
      bench = std::make_unique<CpuBench>(spec, s, b.batch, int32_t(b.tokens));
    } else {
      checker = cuda_checker(spec, s, b.tokens);
      bench = cuda_bench(spec, s, b.batch, int32_t(b.tokens));
    }
    for (const Candidate &c : cands[bi]) {
      Measurement m;
      m.cand = c;
      m.why = checker->check(c, &m.err_o, &m.err_ht);
      m.ok = m.why.empty();
      if (!checker->resources(c, &m.regs, &m.spill))
        m.regs = m.spill = -1;
      if (m.ok && s.max_spill >= 0 && m.spill > s.max_spill && !c.is_default) {
        m.pruned = true;
        m.why = "pruned: spills " + std::to_string(m.spill) +
                " bytes per thread (the compiler's resource report; --max-spill=" +
                std::to_string(s.max_spill) + ")";
      }
      auto it = prevRatio.find(candidate_string(c));
      if (m.ok && s.prune > 0 && !c.is_default && it != prevRatio.end() &&
          it->second > s.prune) {
        char why[120];
        std::snprintf(why, sizeof why, "pruned: %.2fx the best in bucket %lld",
                      it->second, (long long)prevTokens);
        m.pruned = true;
        m.why = why;
      }
      if (c.is_default && !m.ok) {
        *error = "bucket " + std::to_string(b.tokens) + ": the default config " +
                 candidate_string(c) + ": " + m.why;
        return false;
      }
      b.all.push_back(m);
    }
    b.default_index = 0;
    searchBucket(spec, s, *bench, &b, &meter, w);
    if (b.winner < 0) {
      *error = "bucket " + std::to_string(b.tokens) + ": no candidate ran";
      return false;
    }
    guardDefault(s, *bench, &b);
    b.tune_s = secondsSince(t0);
    // What the next, longer bucket prunes by: only a bucket whose calls
    // take 20 ms or more, where thread start-up and cache effects no longer
    // decide the order (a loaded machine's OpenMP wake-up alone reaches
    // ~12 ms, docs/performance.md), predicts the longer ones.
    prevRatio.clear();
    double best = 0;
    for (const Measurement &m : b.all)
      if (m.ok && m.rounds && (best == 0 || m.median_us < best))
        best = m.median_us;
    if (b.tokens > 1 && best >= 2e4) {
      prevTokens = b.tokens;
      for (const Measurement &m : b.all)
        if (m.ok && m.rounds && best > 0)
          prevRatio[candidate_string(m.cand)] = m.median_us / best;
    }
    if (s.compare_exhaustive) {
      const auto t1 = Clock::now();
      BucketResult ex = b;
      for (Measurement &m : ex.all)
        m.rounds = 0, m.pruned = false;
      Settings es = s;
      es.search = Search::Exhaustive;
      const auto saved = meter.p;
      searchBucket(spec, es, *bench, &ex, &meter, w);
      meter.p.best = saved.best, meter.p.best_us = saved.best_us;
      for (size_t i = 0; i < b.all.size(); ++i)
        b.all[i].exhaustive_us = ex.all[i].ok ? ex.all[i].median_us : 0;
      b.exhaustive_winner = ex.winner;
      // The gap: the pick against the exhaustive best, interleaved (A/B)
      // so that a load change between the two searches does not count.
      if (ex.winner >= 0 && ex.winner != b.winner) {
        std::vector<double> tp, te;
        int32_t cp = 1, ce = 1;
        double us = 0;
        bench->warm(b.all[b.winner].cand, &cp, &us);
        bench->warm(b.all[ex.winner].cand, &ce);
        cp = ce = std::max(cp, ce);
        const int reps = scaledReps(std::max(5, s.repeats), us * cp);
        for (int r = 0; r < reps; ++r) {
          tp.push_back(bench->sample(b.all[b.winner].cand, cp));
          te.push_back(bench->sample(b.all[ex.winner].cand, ce));
        }
        b.gap = median(tp) / median(te) - 1;
      }
      b.exhaustive_s = secondsSince(t1);
    }
    // Catch the count up with the plan (failed candidates measure nothing).
    int64_t planned = s.search == Search::Halving
                          ? halvingUnits(int64_t(b.all.size()))
                          : int64_t(b.all.size()) + 1;
    if (s.compare_exhaustive)
      planned += int64_t(b.all.size());
    meter.step(std::max<int64_t>(0, units0 + planned - meter.p.done), w);

    if (!db_path.empty()) {
      db.records.push_back(record_of(spec, s, b));
      if (!save_tuning_db(db_path, db, error))
        return false;
    }
  }
  return true;
}

} // namespace deltac::tune
