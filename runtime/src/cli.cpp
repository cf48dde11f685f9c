// `deltac run`: reads the inputs of one forward call from .npy files, runs it
// through the C API in checking mode and writes o.npy and ht.npy (and
// chunk_states.npy on request). Everything
// is validated before anything is written. The parts: flags (cli_args.cpp),
// inputs (cli_inputs.cpp), outputs (cli_outputs.cpp); this file runs them.
#include "deltac/cli.h"

#include "cli_internal.h"
#include "deltac/convert.h"
#include "deltac/runtime.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <new>
#include <sys/stat.h>

namespace deltac {
namespace {

using cli::fail;

deltac_options runtimeOptions(const cli::Options &opt, bool cuda);

// The device chosen here, because o's dtype depends on it: CUDA kernels
// write o in their input type. Under auto: CUDA when the runtime would take
// the call there (its choice, asked without running: deltac_workspace_size;
// o is not touched, so q stands in for it).
bool onCuda(const cli::Options &opt, const deltac_fwd_params &p) {
  if (opt.device == "cuda")
    return true;
  if (opt.device != "auto" || !deltac_cuda_available())
    return false;
  deltac_fwd_params probe = p;
  probe.o = const_cast<void *>(p.q);
  probe.out_dtype = p.in_dtype;
  deltac_options o = runtimeOptions(opt, true);
  o.check_values = 0; // the choice only: the run checks the values
  float unused = 0.f;  // chunk states: CUDA takes them at instance dims only
  if (opt.chunkStates)
    o.chunk_states = &unused, o.chunk_states_count = INT64_MAX;
  size_t bytes = 0;
  return deltac_workspace_size(&probe, &o, &bytes) == 0;
}

deltac_options runtimeOptions(const cli::Options &opt, bool cuda) {
  deltac_options d = deltac_default_options();
  d.device = cuda ? DELTAC_DEVICE_CUDA : DELTAC_DEVICE_CPU;
  d.mode = opt.mode == "chunked"     ? DELTAC_MODE_CHUNKED
           : opt.mode == "recurrent" ? DELTAC_MODE_RECURRENT
                                     : DELTAC_MODE_AUTO;
  d.chunk = opt.chunk;
  d.check_values = 1; // the inputs were checked already; the runtime again
  d.allow_neg_eigval = opt.negEig ? 1 : 0;
  d.deterministic = opt.deterministic ? 1 : 0;
  return d;
}

void printStats(const cli::Options &opt, const deltac_fwd_params &p,
                const deltac_run_info &info, double secs) {
  std::string knobs;
  if (info.tile_v)
    knobs += " tile_v=" + std::to_string(info.tile_v);
  if (info.warps)
    knobs += " warps=" + std::to_string(info.warps);
  if (info.stages)
    knobs += " stages=" + std::to_string(info.stages);
  if (info.split)
    knobs += " split=" + std::to_string(info.split);
  if (info.fuse)
    knobs += " fuse=" + std::to_string(info.fuse);
  if (info.scan)
    knobs += " scan=" + std::to_string(info.scan);
  if (info.tuned && info.threads)
    knobs += " threads=" + std::to_string(info.threads);
  std::printf("deltac run: variant=%s device=%s mode=%s chunk=%d%s "
              "family=%s%s%s B=%d T=%d H=%d HV=%d K=%d V=%d N=%d dtype=%s "
              "time=%.3f ms tokens/s=%.4g%s%s\n",
              opt.variant.c_str(),
              info.device == DELTAC_DEVICE_CUDA ? "cuda" : "cpu",
              info.mode == DELTAC_MODE_CHUNKED ? "chunked" : "recurrent",
              info.chunk, info.specialized ? " (specialised K,V)" : "",
              info.family, knobs.c_str(), info.tuned ? " (tuning db)" : "",
              p.B, p.T, p.H, p.HV, p.K, p.V, p.N, opt.dtype.c_str(),
              secs * 1e3, secs > 0 ? double(p.B) * p.T / secs : 0.0,
              info.isa && *info.isa ? " isa=" : "", info.isa ? info.isa : "");
  std::fflush(stdout);
}

int run(const cli::Options &opt) {
  struct stat st;
  if (::stat(opt.inputs.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail(opt.inputs + ": input directory not found");
  cli::check_output_paths(opt);
  if (!opt.tuningDb.empty() && deltac_load_tuning_db(opt.tuningDb.c_str()))
    fail(std::string("--tuning-db: ") + deltac_last_error());

  cli::Inputs in;
  cli::load_inputs(opt, &in); // shapes and N checked before any allocation
  deltac_fwd_params &p = in.p;
  const bool cuda = onCuda(opt, p);
  const bool o16 = cuda && p.in_dtype == DELTAC_BF16;
  std::vector<float> o(std::size_t(p.B) * p.T * p.HV * p.V);
  std::vector<uint16_t> o16buf(o16 ? o.size() : 0);
  std::vector<float> ht(std::size_t(p.N) * p.HV * p.K * p.V);
  in.tensors.o = {o16 ? static_cast<void *>(o16buf.data()) : o.data(),
                  o16 ? ElemType::BF16 : ElemType::F32, o_shape(p), "o"};
  in.tensors.ht = {ht.data(), ElemType::F32, state_shape(p), "ht"};
  std::string err;
  if (!bind_outputs(in.tensors, &p, &err))
    fail(err);

  deltac_options dopt = runtimeOptions(opt, cuda);
  // --chunk-states: the count of this call's chunks (cu_seqlens on the
  // host), the buffer, and the options that take it.
  int64_t chunks = 0;
  std::vector<float> cs;
  if (opt.chunkStates) {
    if (deltac_chunk_states_count(&p, &dopt, &chunks) != 0)
      fail(std::string("--chunk-states: ") + deltac_last_error());
    cs.resize(std::size_t(chunks) * p.HV * p.K * p.V);
    dopt.chunk_states = cs.data();
    dopt.chunk_states_count = chunks;
  }
  deltac_run_info info{};
  auto t0 = std::chrono::steady_clock::now();
  if (deltac_forward_info(&p, &dopt, &info) != 0)
    fail(std::string("forward failed: ") + deltac_last_error());
  auto t1 = std::chrono::steady_clock::now();
  if (info.note && *info.note)
    std::fprintf(stderr, "deltac run: warning: %s\n", info.note);
  if (o16)
    for (std::size_t i = 0; i < o.size(); ++i)
      o[i] = bf16_to_f32(o16buf[i]);

  cli::write_outputs(opt, p, o, ht, cs, chunks);
  if (opt.stats)
    printStats(opt, p, info, std::chrono::duration<double>(t1 - t0).count());
  return 0;
}

} // namespace

int run_command(int argc, char **argv) {
  try {
    cli::Options opt = cli::parse_args(argc, argv);
    if (opt.help) {
      std::fputs(cli::kUsage, stdout);
      std::fflush(stdout);
      return 0;
    }
    return run(opt);
  } catch (const cli::Error &e) {
    std::fprintf(stderr, "deltac run: error: %s\n", e.what());
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "deltac run: error: out of memory\n");
  } catch (const std::exception &e) {
    std::fprintf(stderr, "deltac run: error: %s\n", e.what());
  }
  std::fflush(stderr);
  return 1;
}

} // namespace deltac
