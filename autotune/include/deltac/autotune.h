// The autotuner: for one spec, every kernel config the catalogue allows on
// a device (every family, every legal knob value; the CPU also threads),
// each checked against the float64 reference before it is timed, timed over
// sequence-length buckets with a successive-halving search, the winner per
// bucket written to the tuning database (deltac/tuning_db.h) with the
// environment it holds for (deltac/env.h). LLVM-free: links deltac_runtime
// and runs every candidate through the C API (deltac_options.config).
// docs/autotune.md describes the method and its measured quality.
#ifndef DELTAC_AUTOTUNE_H
#define DELTAC_AUTOTUNE_H

#include "deltac/catalogue.h"
#include "deltac/env.h"
#include "deltac/tuning_db.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace deltac::tune {

// What is tuned: one layer's shape and dtypes on one device.
struct Spec {
  int32_t variant = DELTAC_VARIANT_GATED;
  int32_t H = 16, HV = 32, K = 128, V = 128;
  int32_t in_dtype = DELTAC_F32, out_dtype = DELTAC_F32;
  bool qk_l2norm = false;
  Device device = Device::CPU;
};

enum class Search { Halving, Exhaustive };

struct Settings {
  // Longest-sequence buckets (tokens, ascending). Each record holds for
  // sequences up to its bucket (the last: any length, max_tokens 0).
  std::vector<int64_t> buckets = {1, 64, 1024, 8192};
  int32_t decode_batch = 8; // sequences in a 1-token bucket
  int32_t batch = 1;        // sequences in every other bucket
  std::vector<int32_t> threads; // CPU thread counts; empty: 1, 2, 4.. cores
  // CPU instruction-set instances to time (kCpuIsaNames); empty: every one
  // this CPU runs from avx2 up (generic only where nothing else runs).
  std::vector<std::string> isas;
  // Families to search (catalogue names); empty: every family of the
  // device. The default config is a candidate whatever its family.
  std::vector<std::string> families;
  Search search = Search::Halving;
  int32_t repeats = 7;     // samples of a fully measured candidate
  double min_sample_s = 5e-4; // a sample repeats the call to last this long
  bool compare_exhaustive = false; // also run exhaustive, report the gap
  // The pick replaces the default only when the final interleaved A/B
  // finds it at least this much faster (a fraction): noise never swaps in a
  // config that is not clearly better.
  double min_gain = 0.03;
  // Pruning across buckets: in a bucket longer than the previous multi-token
  // one, a candidate measured there at more than this many times that
  // bucket's best is not measured again (0: no pruning). The default never
  // is pruned; --compare-exhaustive measures pruned candidates too.
  double prune = 2.0;
  // Static limit from the compiler's resource report (CUDA): a candidate
  // whose kernels spill more than this many bytes per thread to local memory
  // is not measured (-1: no limit). The default is never pruned.
  int32_t max_spill = -1;
  uint64_t seed = 1;
  // Several worker processes (one per GPU, deltac-tune --workers): this
  // process tunes bucket i when i % workers == worker; the others are left
  // to its siblings (BucketResult::elsewhere).
  int32_t worker = 0, workers = 1;
  // Testing: candidates whose config_string equals this get their output
  // corrupted before the reference check (a wrong answer must never win).
  std::string corrupt;
};

struct Candidate {
  KernelConfig config;
  int32_t threads = 0; // 0: the kernel's rule (all cores)
  // CPU: the instruction-set instance (the default candidate: the rule's,
  // cpu_isa_for).
  CpuIsa isa = CpuIsa::generic;
  bool is_default = false;
};

// "cpu_recurrent tile_v=32 isa=avx512 threads=2".
std::string candidate_string(const Candidate &c);

struct Measurement {
  Candidate cand;
  bool ok = false;        // ran and matched the reference
  bool pruned = false;    // not measured: slow in the previous bucket
  std::string why;        // when !ok: the error or the reference mismatch
  double err_o = 0, err_ht = 0; // relative RMS error against float64
  double median_us = 0;   // of the last round it took part in
  int32_t samples = 0;    // in that round
  int32_t rounds = 0;     // halving rounds it survived (1 = only the first)
  double exhaustive_us = 0; // compare_exhaustive: its exhaustive median
  // The compiler's resource report of its kernels (CUDA chunked; -1: none):
  // the most registers and local (spill) bytes per thread of any of them.
  int32_t regs = -1, spill = -1;
};

struct BucketResult {
  int64_t tokens = 0; // the bucket
  int32_t batch = 0;  // sequences measured
  bool skipped = false; // a record for it was already in the database
  bool elsewhere = false; // another worker process tunes it (Settings::workers)
  std::vector<Measurement> all;
  int winner = -1, default_index = -1; // into all
  double winner_us = 0, default_us = 0; // the final A/B run of the two
  bool default_kept = false; // the search's pick was not faster than default
  double tune_s = 0;         // wall time of this bucket's search
  // compare_exhaustive:
  int exhaustive_winner = -1;
  double exhaustive_s = 0; // wall time of the exhaustive search
  // The pick's time over the exhaustive best's - 1, from an interleaved
  // A/B of the two (0 when they are the same; < 0: the pick was faster).
  double gap = 0;
};

struct Progress {
  int64_t done = 0, total = 0; // candidate measurements
  int64_t bucket = 0;
  std::string best;     // best so far in this bucket
  double best_us = 0;
  double elapsed_s = 0, left_s = 0;
};

// Every combination of the listed values of the knobs family f reads
// (before any legality rule).
std::vector<KernelConfig> knob_product(const FamilyInfo &f);

// Whether c's run-time knobs (cuda_chunked's split, fuse and scan; true for
// every other config) change what runs for p (batch calls, no cu_seqlens):
// where the warp scan runs (chunked_warp_runs), scan 0 only with fuse 0
// and the default config's tile_v, warps, stages (the warp scan reads none
// of them) and the split values below (at its narrowest V tile, 32), and
// scan 1 (the block scan) with the rest below;
// elsewhere scan 0 only (scan 1 runs the same); scan 3 (the TMA scan) once,
// with split 0, fuse 0 and the default tile_v, warps, stages, where it runs
// (chunked_tma_runs), never elsewhere (it runs as scan 0 there);
// a split S > 1 runs segments of L = ceil(chunks / S) chunks and is kept
// when it gives at least 2 segments, a shorter L than every smaller split
// and a grid the kernel takes (seqs x S <= 65535); split 1 only where the
// kernel's rule (split 0) may split (chunked_default_split: >= 4 segments
// of >= kChunkedSplitMinChunks chunks, the scan's grid at tile_v short of
// 7/8 of p.sm_count); fuse 1 only with the split value that runs no split
// (the fused launch runs only then).
bool run_time_knobs_matter(const KernelConfig &c, const Problem &p);

// The candidates of spec on its device for a problem of `tokens`-long
// sequences: every family, every combination of listed knob values that
// check_config accepts (and run_time_knobs_matter), times the
// instruction-set instances and thread counts (CPU); the default config
// (threads 0) first.
std::vector<Candidate> enumerate(const Spec &spec, const Settings &s,
                                 int64_t tokens, int32_t batch);

// Tunes spec. With db_path non-empty, loads that database first (if it
// exists), skips buckets it already holds for this spec and machine, and
// saves it atomically after each finished bucket. Returns false with *error
// on failure (what finished is saved).
bool tune(const Spec &spec, const Settings &s, const std::string &db_path,
          std::vector<BucketResult> *results, std::string *error,
          const std::function<void(const Progress &)> &progress = {});

// An end-to-end check of a database through the runtime's own choice (no
// options.config): per bucket, the call's time with the database loaded
// (deltac_load_tuning_db) and without (the default rule), interleaved.
struct VerifyResult {
  int64_t tokens = 0;
  int32_t batch = 0;
  std::string ran;      // what ran with the database ("family knobs threads")
  bool tuned = false;   // deltac_run_info.tuned with the database
  bool same = false;    // it runs the default's family, knobs and threads
  double default_us = 0, tuned_us = 0;
};
bool verify(const Spec &spec, const Settings &s, const std::string &db_path,
            std::vector<VerifyResult> *out, std::string *error);

// The records tune() writes for a finished bucket (the winner, with env).
TuningRecord record_of(const Spec &spec, const Settings &s,
                       const BucketResult &b);

// Whether a and b are records of the same key: device, variant, K, V,
// in_dtype, bucket and identity env (deltac/env.h).
bool same_key(const TuningRecord &a, const TuningRecord &b);

// Merges databases: every record (backward records too), and of records
// with the same key the faster (the later when neither has a time).
// *dropped counts the rest.
TuningDB merge(const std::vector<TuningDB> &dbs, int *dropped);

// ---------------------------------------------------------------------------
// The backward's saved-states option (deltac-tune --backward; CUDA, where
// the catalogue offers it: bwd_saves_states). Per bucket of tokens per
// sequence where the chunked backward runs (deltac_saved_states_size > 0;
// Settings::batch sequences), forward + backward through the runtime's C API
// with the chunk states kept and recomputed, each first checked against the
// float64 reference backward on a small problem (2 sequences of up to 256
// tokens), then timed interleaved (Settings::repeats samples each, at least
// 5). The pick replaces the runtime's own choice (deltac_saved_states_pay
// with no database) only when at least Settings::min_gain faster; a choice
// that gave a wrong answer never wins. Records: TuningDB::backward.
struct BackwardBucket {
  int64_t tokens = 0;     // tokens per sequence
  int32_t batch = 0;      // sequences measured
  bool no_option = false; // the recurrent sweep runs there: nothing to choose
  bool skipped = false;   // a record for it was already in the database
  bool rule_keep = false; // the runtime's choice without a record
  bool keep = false;      // the pick
  std::string why_keep, why_recompute; // a failed check ("" = passed)
  double err_keep = 0, err_recompute = 0; // worst gradient rel. RMS vs float64
  double keep_us = 0, recompute_us = 0;   // forward + backward medians
  uint64_t saved_bytes = 0;               // the saved-states buffer
  uint64_t ws_keep = 0, ws_recompute = 0; // the backward's workspace
  double tune_s = 0;
};
bool tune_backward(const Spec &spec, const Settings &s, const std::string &db_path,
                   std::vector<BackwardBucket> *results, std::string *error);
BackwardRecord backward_record_of(const Spec &spec, const Settings &s,
                                  const BackwardBucket &b);
// Whether a and b are backward records of the same key: variant, K, V,
// in_dtype, value heads, bucket and identity env.
bool same_backward_key(const BackwardRecord &a, const BackwardRecord &b);

// HTML (path ending .html) or SVG: time per candidate per bucket.
bool write_report(const std::string &path, const Spec &spec,
                  const std::vector<BucketResult> &results, std::string *error);

} // namespace deltac::tune

#endif // DELTAC_AUTOTUNE_H
