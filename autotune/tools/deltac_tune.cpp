// deltac-tune: the autotuner's command (deltac/autotune.h, docs/autotune.md).
#include "deltac/autotune.h"
#include "deltac/runtime.h"
#include "deltac/tune_cuda.h"
#include "workers.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using namespace deltac;

const char *kUsage =
    "usage: deltac-tune --variant=delta|gated|kda --heads=H [--v-heads=HV]\n"
    "                   --key-dim=K --value-dim=V [--in-dtype=f32|bf16]\n"
    "                   [--out-dtype=f32|bf16] [--qk-l2norm] [--target=cpu|cuda]\n"
    "                   [-o DB.json] [--report=FILE.html|FILE.svg]\n"
    "                   [--buckets=1,64,1024,8192] [--decode-batch=8] [--batch=1]\n"
    "                   [--threads=1,2,..] [--isas=avx2,avx512]\n"
    "                   [--families=cpu_recurrent,..]\n"
    "                   [--repeats=7] [--min-sample-ms=0.5]\n"
    "                   [--search=halving|exhaustive] [--compare-exhaustive]\n"
    "                   [--min-gain=PERCENT (3)] [--max-spill=BYTES]\n"
    "                   [--fast] [--seed=N] [--quiet] [--workers=N|all]\n"
    "       deltac-tune --merge A.json B.json ... -o OUT.json\n"
    "       deltac-tune --verify=DB.json SPEC FLAGS [--buckets=..]\n"
    "       deltac-tune --backward --target=cuda SPEC FLAGS [-o DB.json]\n"
    "       deltac-tune --env [--target=cpu|cuda]\n"
    "\n"
    "Tunes one spec: every kernel config the catalogue allows on the target\n"
    "(every family and legal knob value; CPU: and thread counts), each checked\n"
    "against the float64 reference before it is timed, over sequence-length\n"
    "buckets; writes the winner of each bucket to DB.json (atomically, after\n"
    "each bucket; buckets already in DB.json for this machine are skipped, so\n"
    "a killed tune resumes). --fast: buckets 1,64,1024,8192 with 3 repeats and\n"
    "0.2 ms samples. --compare-exhaustive also times every candidate fully\n"
    "and reports how far the search's pick is from the exhaustive best.\n"
    "--verify times each bucket through the runtime's own choice with DB.json\n"
    "loaded and without it (the default rule), interleaved.\n"
    "--corrupt=CONFIG (testing) corrupts that candidate's output.\n"
    "--max-spill=BYTES (CUDA): candidates whose kernels spill more bytes per\n"
    "thread than that (the compiler's resource report) are not timed.\n"
    "--target=cuda tunes on the GPU present the instances this build compiled\n"
    "(CMake -DDELTAC_TUNE_CUDA_SPECS=variant:K:V:dtype;..., every legal config\n"
    "of each; o takes the input dtype unless --out-dtype says otherwise);\n"
    "the runtime ships only default CUDA configs,\n"
    "so a tuned one reaches a program through `deltac generate --tuning-db`.\n"
    "--backward (CUDA, bf16 delta or gated, K = 64 or 128) tunes the\n"
    "backward's saved-states option instead: per bucket of tokens per sequence\n"
    "(--batch sequences), forward + backward with the chunk states kept and\n"
    "recomputed, each checked against the float64 reference backward, timed\n"
    "interleaved; the pick goes to DB.json's \"backward\" records, which\n"
    "deltac_saved_states_pay (and deltac.ops) follow.\n"
    "--workers=N|all starts N tuning processes (all: one per visible GPU;\n"
    "worker i sees GPU i alone and tunes buckets i, i+N, ...; each writes\n"
    "DB.json.part<i>.json, merged into DB.json at the end or by the next run).\n"
    "On the CPU the workers share the cores and disturb each other's timings.\n";

[[noreturn]] void die(const std::string &msg) {
  std::fprintf(stderr, "deltac-tune: %s\n", msg.c_str());
  std::exit(1);
}

int64_t toInt(const std::string &flag, const std::string &v, int64_t lo,
              int64_t hi) {
  char *end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno || x < lo || x > hi)
    die(flag + "=" + v + ": expected an integer in " + std::to_string(lo) +
        ".." + std::to_string(hi));
  return x;
}

std::vector<int64_t> intList(const std::string &flag, const std::string &v,
                             int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i <= v.size()) {
    size_t j = v.find(',', i);
    if (j == std::string::npos)
      j = v.size();
    out.push_back(toInt(flag, v.substr(i, j - i), lo, hi));
    i = j + 1;
  }
  return out;
}

int32_t dtypeOf(const std::string &flag, const std::string &v) {
  if (v == "f32")
    return DELTAC_F32;
  if (v == "bf16")
    return DELTAC_BF16;
  die(flag + "=" + v + ": expected f32 or bf16");
}

std::string clock(double s) {
  char b[32];
  const int t = int(s + 0.5);
  std::snprintf(b, sizeof b, "%d:%02d", t / 60, t % 60);
  return b;
}

void drawProgress(const tune::Progress &p) {
  const int width = 24;
  const double f = p.total ? double(p.done) / p.total : 1.0;
  const int fill = int(f * width + 0.5);
  char best[160] = "";
  if (!p.best.empty())
    std::snprintf(best, sizeof best, "  best %s %.1f us", p.best.c_str(), p.best_us);
  std::fprintf(stderr, "\r\033[K[%.*s%.*s] %lld/%lld  bucket %lld%s  %s left",
               fill, "########################", width - fill,
               "........................", (long long)p.done,
               (long long)p.total, (long long)p.bucket, best,
               clock(p.left_s).c_str());
  std::fflush(stderr);
}

int mergeMain(const std::vector<std::string> &inputs, const std::string &out) {
  if (inputs.empty() || out.empty())
    die("--merge needs input files and -o OUT.json");
  std::vector<TuningDB> dbs;
  for (const std::string &path : inputs) {
    TuningDB db;
    std::string err;
    if (!load_tuning_db(path, &db, &err))
      die(err);
    dbs.push_back(std::move(db));
  }
  int dropped = 0;
  TuningDB merged = tune::merge(dbs, &dropped);
  std::string err;
  if (!save_tuning_db(out, merged, &err))
    die(err);
  std::printf("deltac-tune: merged %zu files into %s: %zu records (%d "
              "duplicates of the same key dropped, the faster kept)\n",
              inputs.size(), out.c_str(), merged.records.size(), dropped);
  return 0;
}

std::string mib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f MiB", double(bytes) / (1 << 20));
  return b;
}

int backwardMain(const tune::Spec &spec, const tune::Settings &s, const std::string &out,
                 const std::string &report, const std::string &workers) {
  if (!report.empty() || !workers.empty())
    die("--backward takes neither --report nor --workers");
  std::vector<tune::BackwardBucket> results;
  std::string err;
  const bool ok = tune::tune_backward(spec, s, out, &results, &err);
  for (const tune::BackwardBucket &b : results) {
    std::printf("backward bucket %6lld x %d: ", (long long)b.tokens, b.batch);
    if (b.no_option) {
      std::printf("the recurrent sweep runs there (no saved states to choose)\n");
      continue;
    }
    if (b.skipped) {
      std::printf("already in %s, skipped\n", out.c_str());
      continue;
    }
    std::printf("recompute %.1f us (grad err %.2g), keep ", b.recompute_us, b.err_recompute);
    if (b.why_keep.empty())
      std::printf("%.1f us (grad err %.2g)", b.keep_us, b.err_keep);
    else
      std::printf("refused: %s", b.why_keep.c_str());
    const double ruleUs = b.rule_keep ? b.keep_us : b.recompute_us;
    const double pickUs = b.keep ? b.keep_us : b.recompute_us;
    std::printf("; rule %s, pick %s", b.rule_keep ? "keep" : "recompute",
                b.keep ? "keep" : "recompute");
    const double otherUs = b.keep ? b.recompute_us : b.keep_us;
    if (b.keep != b.rule_keep && ruleUs > 0 && pickUs > 0)
      std::printf(" (%.3fx faster than the rule's)", ruleUs / pickUs);
    else if (otherUs > 0 && pickUs > 0)
      std::printf(" (the other %.3fx its time)", otherUs / pickUs);
    std::printf("; saved states %s, backward workspace %s keeping / %s recomputing; %.1f s\n",
                mib(b.saved_bytes).c_str(), mib(b.ws_keep).c_str(), mib(b.ws_recompute).c_str(),
                b.tune_s);
  }
  if (!ok)
    die(err);
  // What the runtime now answers with the database loaded (its env must
  // match this machine and build).
  if (!out.empty() && deltac_load_tuning_db(out.c_str()) == 0) {
    for (const tune::BackwardBucket &b : results)
      if (!b.no_option)
        std::printf("backward bucket %6lld x %d: deltac_saved_states_pay with %s: %s\n",
                    (long long)b.tokens, b.batch, out.c_str(),
                    deltac_saved_states_pay(spec.variant, b.tokens * b.batch, b.batch, spec.HV,
                                            spec.K, spec.V, spec.in_dtype)
                        ? "keep"
                        : "recompute");
    deltac_load_tuning_db(nullptr);
  }
  std::printf("deltac-tune: backward tuned%s%s\n", out.empty() ? "" : ", database ",
              out.c_str());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  tune::Spec spec;
  tune::Settings s;
  std::string out, report, target = "cpu", verifyDb;
  bool merge = false, quiet = false, env = false, haveVariant = false;
  bool haveHeads = false, haveK = false, haveV = false, haveHV = false;
  bool fast = false, haveOut = false, backward = false;
  std::string workers;
  std::vector<std::string> positional, passthrough;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a != "-o" && a.rfind("--report=", 0) != 0 && a.rfind("--workers=", 0) != 0 &&
        a.rfind("--worker=", 0) != 0)
      passthrough.push_back(a);
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "-o") {
      if (i + 1 >= argc)
        die("-o needs a file");
      out = argv[++i];
      continue;
    }
    if (a.rfind("--", 0) != 0) {
      positional.push_back(a);
      continue;
    }
    const size_t eq = a.find('=');
    const std::string key = a.substr(0, eq);
    const std::string val = eq == std::string::npos ? "" : a.substr(eq + 1);
    auto needValue = [&] {
      if (eq == std::string::npos || val.empty())
        die(key + " needs a value (" + key + "=...)");
    };
    if (key == "--merge") merge = true;
    else if (key == "--env") env = true;
    else if (key == "--quiet") quiet = true;
    else if (key == "--qk-l2norm") spec.qk_l2norm = true;
    else if (key == "--compare-exhaustive") s.compare_exhaustive = true;
    else if (key == "--fast") fast = true;
    else if (key == "--backward") backward = true;
    else {
      needValue();
      if (key == "--variant") {
        haveVariant = true;
        if (val == "delta") spec.variant = DELTAC_VARIANT_DELTA;
        else if (val == "gated") spec.variant = DELTAC_VARIANT_GATED;
        else if (val == "kda") spec.variant = DELTAC_VARIANT_KDA;
        else die("--variant=" + val + ": expected delta, gated or kda");
      } else if (key == "--heads") {
        haveHeads = true;
        spec.H = int32_t(toInt(key, val, 1, 4096));
      } else if (key == "--v-heads") {
        haveHV = true;
        spec.HV = int32_t(toInt(key, val, 1, 4096));
      } else if (key == "--key-dim") {
        haveK = true;
        spec.K = int32_t(toInt(key, val, 1, 4096));
      } else if (key == "--value-dim") {
        haveV = true;
        spec.V = int32_t(toInt(key, val, 1, 4096));
      } else if (key == "--in-dtype") spec.in_dtype = dtypeOf(key, val);
      else if (key == "--out-dtype") spec.out_dtype = dtypeOf(key, val), haveOut = true;
      else if (key == "--target") target = val;
      else if (key == "--report") report = val;
      else if (key == "--buckets") s.buckets = intList(key, val, 1, 1 << 20);
      else if (key == "--decode-batch") s.decode_batch = int32_t(toInt(key, val, 1, 4096));
      else if (key == "--batch") s.batch = int32_t(toInt(key, val, 1, 4096));
      else if (key == "--threads") {
        for (int64_t t : intList(key, val, 1, 1024))
          s.threads.push_back(int32_t(t));
      } else if (key == "--isas") {
        size_t i = 0;
        while (i <= val.size()) {
          size_t j = val.find(',', i);
          if (j == std::string::npos)
            j = val.size();
          const std::string n = val.substr(i, j - i);
          CpuIsa x;
          if (!cpu_isa_by_name(n, &x))
            die("--isas=" + val + ": '" + n + "': expected generic, avx2 or avx512");
          s.isas.push_back(n);
          i = j + 1;
        }
      } else if (key == "--families") {
        size_t i = 0;
        while (i <= val.size()) {
          size_t j = val.find(',', i);
          if (j == std::string::npos)
            j = val.size();
          s.families.push_back(val.substr(i, j - i));
          i = j + 1;
        }
      } else if (key == "--repeats") s.repeats = int32_t(toInt(key, val, 1, 1000));
      else if (key == "--min-sample-ms")
        s.min_sample_s = double(toInt(key, val, 0, 10000)) * 1e-3;
      else if (key == "--search") {
        if (val == "halving") s.search = tune::Search::Halving;
        else if (val == "exhaustive") s.search = tune::Search::Exhaustive;
        else die("--search=" + val + ": expected halving or exhaustive");
      } else if (key == "--seed") s.seed = uint64_t(toInt(key, val, 0, INT64_MAX));
      else if (key == "--corrupt") s.corrupt = val;
      else if (key == "--verify") verifyDb = val;
      else if (key == "--workers") workers = val;
      else if (key == "--worker") {
        const size_t slash = val.find('/');
        if (slash == std::string::npos)
          die("--worker=" + val + ": expected i/n");
        s.workers = int32_t(toInt(key, val.substr(slash + 1), 1, 1024));
        s.worker = int32_t(toInt(key, val.substr(0, slash), 0, s.workers - 1));
      }
      else if (key == "--min-gain") s.min_gain = double(toInt(key, val, 0, 100)) / 100;
      else if (key == "--max-spill") s.max_spill = int32_t(toInt(key, val, 0, 1 << 20));
      else die("unknown flag " + key + " (--help lists them)");
    }
  }
  if (target != "cpu" && target != "cuda")
    die("--target=" + target + ": expected cpu or cuda");
  spec.device = target == "cuda" ? Device::CUDA : Device::CPU;
  if (spec.device == Device::CUDA && !haveOut)
    spec.out_dtype = spec.in_dtype; // the CUDA families write o in the input dtype
  if (env) {
    std::printf("%s\n", deltac_environment(spec.device == Device::CUDA
                                               ? DELTAC_DEVICE_CUDA
                                               : DELTAC_DEVICE_CPU));
    return 0;
  }
  if (merge)
    return mergeMain(positional, out);
  if (!positional.empty())
    die("unexpected argument '" + positional[0] + "' (--help)");
  if (!haveVariant || !haveHeads || !haveK || !haveV)
    die("--variant, --heads, --key-dim and --value-dim are required (--help)");
  if (!haveHV)
    spec.HV = spec.H;
  if (fast) {
    s.repeats = 3;
    s.min_sample_s = 2e-4;
  }

  if (!verifyDb.empty()) {
    std::vector<tune::VerifyResult> v;
    std::string err;
    if (!tune::verify(spec, s, verifyDb, &v, &err))
      die(err);
    int slower = 0, differ = 0;
    for (const tune::VerifyResult &r : v) {
      std::printf("bucket %6lld x %d: default rule %.1f us, with %s %.1f us "
                  "(%.2fx)%s: %s%s\n",
                  (long long)r.tokens, r.batch, r.default_us, verifyDb.c_str(),
                  r.tuned_us, r.default_us / r.tuned_us,
                  r.tuned ? "" : " [no record used]", r.ran.c_str(),
                  r.same ? " [the default's own config: same run]" : "");
      differ += !r.same;
      slower += !r.same && r.tuned_us > r.default_us;
    }
    std::printf("deltac-tune: verify: %d buckets run another config than the "
                "default rule, %d of them slower\n", differ, slower);
    return 0;
  }
  if (backward)
    return backwardMain(spec, s, out, report, workers);
  if (!workers.empty()) {
    tune::WorkerJob job;
    job.cuda = spec.device == Device::CUDA;
    if (workers == "all") {
      if (!job.cuda)
        die("--workers=all counts GPUs: use it with --target=cuda (or give a number)");
      job.workers = tune::cuda::device_count();
      if (job.workers == 0)
        die("--workers=all: no CUDA device is visible");
    } else {
      job.workers = int(toInt("--workers", workers, 1, 1024));
    }
    if (job.cuda && job.workers > tune::cuda::device_count())
      die("--workers=" + std::to_string(job.workers) + ": only " +
          std::to_string(tune::cuda::device_count()) + " CUDA devices are visible");
    if (out.empty())
      die("--workers needs -o DB.json (the workers' parts merge into it)");
    if (job.workers > 1) {
      job.out = out, job.report = report, job.args = passthrough;
      return tune::run_workers("/proc/self/exe", job);
    }
  }
  const bool bar = !quiet && isatty(2);
  std::vector<tune::BucketResult> results;
  std::string err;
  const bool ok = tune::tune(
      spec, s, out, &results, &err,
      bar ? std::function<void(const tune::Progress &)>(drawProgress)
          : std::function<void(const tune::Progress &)>());
  if (bar)
    std::fprintf(stderr, "\r\033[K");
  if (!report.empty()) {
    std::string rerr;
    if (!tune::write_report(report, spec, results, &rerr))
      die(rerr);
  }
  if (!ok)
    die(err);
  double total = 0, exhaustive = 0;
  for (const tune::BucketResult &b : results) {
    if (b.elsewhere)
      continue;
    if (b.skipped) {
      if (s.workers > 1)
        std::printf("[worker %d] ", s.worker);
      std::printf("bucket %6lld: already in %s, skipped\n", (long long)b.tokens,
                  out.c_str());
      continue;
    }
    total += b.tune_s;
    exhaustive += b.exhaustive_s;
    int bad = 0, pruned = 0;
    for (const tune::Measurement &m : b.all)
      bad += !m.ok, pruned += m.pruned;
    if (s.workers > 1)
      std::printf("[worker %d] ", s.worker);
    std::printf("bucket %6lld x %d: %zu candidates (%d wrong or failed, %d pruned), "
                "default %.1f us, pick %s %.1f us (%.2fx)%s, %.1f s",
                (long long)b.tokens, b.batch, b.all.size(), bad, pruned, b.default_us,
                tune::candidate_string(b.all[b.winner].cand).c_str(),
                b.winner_us, b.default_us / b.winner_us,
                b.default_kept ? " [default kept]" : "", b.tune_s);
    if (b.exhaustive_winner >= 0)
      std::printf("; exhaustive best %s, pick %+.1f%% against it (A/B), "
                  "exhaustive %.1f s",
                  tune::candidate_string(b.all[b.exhaustive_winner].cand).c_str(),
                  100 * b.gap, b.exhaustive_s);
    std::printf("\n");
  }
  std::printf("deltac-tune: tuned in %.1f s", total);
  if (s.compare_exhaustive)
    std::printf(" (exhaustive search for comparison: %.1f s more)", exhaustive);
  std::printf("%s%s\n", out.empty() ? "" : ", database ", out.c_str());
  return 0;
}
