// The kernel catalogue: the one table of which kernels exist, which knobs
// each reads, when a configuration is legal, the default rule, and which
// instances the runtime ships precompiled. LLVM-free and header-only: the
// dialect's verifier, delta-select-schedule, the emitters, the runtime's
// dispatch, `deltac run`, the tuning database and the autotuner all read it.
// Adding a kernel family = its template + one entry here (docs/architecture.md).
#ifndef DELTAC_CATALOGUE_H
#define DELTAC_CATALOGUE_H

#include "deltac/check.h"
#include "deltac/cuda/chunked_rules.h"
#include "deltac/cuda/recurrent_rules.h"
#include "deltac/params.h"

#include <cstdint>
#include <string>

namespace deltac {

enum class Device : int32_t { CPU = 0, CUDA = 1 };

// What a caller asks for; the catalogue turns it into families.
enum class Mode : int32_t { Auto = 0, Chunked = 1, Recurrent = 2 };

enum class Family : int32_t {
  CpuRecurrent = 0, // token by token, state tiles of tile_v columns
  CpuDecode = 1,    // one token per sequence, two-pass tiled, in place
  CpuChunked = 2,   // chunked WY/UT form
  CudaRecurrent = 3, // token by token, state tile in registers
  CudaChunked = 4    // chunked WY/UT form on tensor cores (mma.sync)
};
constexpr int kFamilyCount = 5;

// Knobs: the fields of KernelConfig. A family reads a subset (FamilyInfo::
// knobs); every other field must be 0.
enum Knob : uint32_t {
  kKnobChunk = 1u << 0,
  kKnobTileK = 1u << 1,
  kKnobTileV = 1u << 2,
  kKnobWarps = 1u << 3,
  kKnobStages = 1u << 4,
  kKnobSplit = 1u << 5,
  kKnobFuse = 1u << 6,
  kKnobScan = 1u << 7,
};
constexpr int kKnobCount = 8;
// Position of knob k in kKnobNames, KernelConfig::knob and FamilyInfo::values.
constexpr int knob_index(Knob k) {
  int i = 0;
  while (i < kKnobCount && (1u << i) != uint32_t(k))
    ++i;
  return i;
}
static_assert(knob_index(kKnobTileV) == 2 &&
                  knob_index(kKnobScan) == kKnobCount - 1,
              "kKnobNames order");
constexpr const char *kKnobNames[kKnobCount] = {
    "chunk", "tile_k", "tile_v", "warps", "stages", "split", "fuse", "scan"};

struct KernelConfig {
  Family family = Family::CpuRecurrent;
  int32_t chunk = 0, tile_k = 0, tile_v = 0, warps = 0, stages = 0, split = 0,
          fuse = 0, scan = 0;

  int32_t knob(int i) const {
    const int32_t v[kKnobCount] = {chunk,  tile_k, tile_v, warps,
                                   stages, split,  fuse,   scan};
    return v[i];
  }
  int32_t &knob(int i) {
    int32_t *v[kKnobCount] = {&chunk,  &tile_k, &tile_v, &warps,
                              &stages, &split,  &fuse,   &scan};
    return *v[i];
  }
  bool operator==(const KernelConfig &o) const {
    for (int i = 0; i < kKnobCount; ++i)
      if (knob(i) != o.knob(i))
        return false;
    return family == o.family;
  }
};

// The legal values of one knob of one family (before problem-specific rules).
struct KnobValues {
  int32_t n;
  int32_t v[8];
  bool contains(int32_t x) const {
    for (int i = 0; i < n; ++i)
      if (v[i] == x)
        return true;
    return false;
  }
};

// The values of a kernel's own constexpr list (at most 8).
template <int N>
constexpr KnobValues values_of(const int (&list)[N]) {
  static_assert(N <= 8, "at most 8 values per knob");
  KnobValues k{N, {}};
  for (int i = 0; i < N; ++i)
    k.v[i] = list[i];
  return k;
}
// `first` (a value meaning "the kernel's rule", e.g. split 0), then list.
template <int N>
constexpr KnobValues values_of(int first, const int (&list)[N]) {
  static_assert(N <= 7, "at most 8 values per knob");
  KnobValues k{N + 1, {first}};
  for (int i = 0; i < N; ++i)
    k.v[i + 1] = list[i];
  return k;
}

struct FamilyInfo {
  Family family;
  const char *name;   // "cpu_recurrent": tuning DB, IR, manifest, messages
  Device device;
  Mode mode;          // Chunked or Recurrent: what the family computes as
  int32_t max_tokens; // longest sequence it takes (0 = any)
  uint32_t knobs;     // Knob bits it reads
  KnobValues values[kKnobCount]; // per knob, in kKnobNames order
  const char *header; // include that declares its entry
  const char *entry;  // C++ template it instantiates, knobs in kKnobNames
                      // order: CPU entry<Var, knobs..., KC, VC>(params),
                      // CUDA entry<Var, K, V, InT, knobs...>(params, stream)
};

constexpr FamilyInfo kFamilies[kFamilyCount] = {
    {Family::CpuRecurrent, "cpu_recurrent", Device::CPU, Mode::Recurrent, 0,
     kKnobTileV,
     {{0, {}}, {0, {}}, {2, {16, 32}}, {0, {}}, {0, {}}, {0, {}}, {0, {}},
      {0, {}}},
     "deltac/cpu/launch.h", "deltac::cpu::recurrent_tiled"},
    {Family::CpuDecode, "cpu_decode", Device::CPU, Mode::Recurrent, 1,
     kKnobTileV,
     {{0, {}}, {0, {}}, {4, {16, 32, 64, 128}}, {0, {}}, {0, {}}, {0, {}},
      {0, {}}, {0, {}}},
     "deltac/cpu/launch.h", "deltac::cpu::decode"},
    {Family::CpuChunked, "cpu_chunked", Device::CPU, Mode::Chunked, 0,
     kKnobChunk,
     {{3, {16, 32, 64}}, {0, {}}, {0, {}}, {0, {}}, {0, {}}, {0, {}}, {0, {}},
      {0, {}}},
     "deltac/cpu/launch.h", "deltac::cpu::chunked"},
    {Family::CudaRecurrent, "cuda_recurrent", Device::CUDA, Mode::Recurrent, 0,
     kKnobTileV | kKnobWarps,
     {{0, {}}, {0, {}}, {3, {16, 32, 64}}, {4, {1, 2, 4, 8}}, {0, {}}, {0, {}},
      {0, {}}, {0, {}}},
     "deltac/cuda/launch_recurrent.cuh", "deltac::cuda::recurrent_cfg"},
    {Family::CudaChunked, "cuda_chunked", Device::CUDA, Mode::Chunked, 0,
     kKnobChunk | kKnobTileV | kKnobWarps | kKnobStages | kKnobSplit |
         kKnobFuse | kKnobScan,
     // The kernel's own lists (chunked_rules.h), so they are written once.
     // split, fuse and scan are run-time values of the kernel
     // (chunked_stages): split 0 = the kernel's rule (chunked_default_split
     // on the device's multiprocessors), 1 = none, 2..16 segments per
     // sequence where the split can run (else none; both scans split;
     // the transposed TMA scan, GDN only, as warm-up segments);
     // fuse 1 = the intra-chunk work and the block scan in one launch where
     // that fits (no split, not varlen with several sequences), 0 = three
     // launches; scan 0 = the kernel's rule (chunked.cuh, chunked_run_plan:
     // the transposed TMA scan where it runs and its grid fills the GPU, the
     // TMA scan where it runs and one wave holds the grid, else the warp scan
     // where it runs: chunked_uses_warp_scan; it reads split, not tile_v,
     // warps, stages or fuse), 1 = the block scan, 3 = the TMA scan where it
     // runs (sm_90a; reads none of them), 4 = the transposed TMA scan
     // likewise, 5 = the block scan with two-term products (delta / GDN,
     // 16-bit inputs; elsewhere as 1; unsplit, unfused), which calls whose beta may
     // exceed 1 run whatever the config says (call_knobs). Deterministic
     // and routed (mixed batch) calls run split 1, fuse 0 whatever the
     // config says.
     {values_of(cuda::kChunkedChunks), {0, {}}, values_of(cuda::kChunkedBVs),
      values_of(cuda::kChunkedWarps), values_of(cuda::kChunkedStages),
      values_of(0, cuda::kChunkedSplits), {2, {0, 1}},
      values_of(cuda::kChunkedScans)},
     "deltac/cuda/launch_chunked.cuh", "deltac::cuda::chunked_cfg"},
};

inline const FamilyInfo &family_info(Family f) {
  return kFamilies[static_cast<int>(f)];
}

// nullptr when no family has that name.
inline const FamilyInfo *family_by_name(const std::string &name) {
  for (const FamilyInfo &f : kFamilies)
    if (name == f.name)
      return &f;
  return nullptr;
}

inline const char *device_name(Device d) {
  return d == Device::CPU ? "cpu" : "cuda";
}

// CPU instruction-set instances: the runtime compiles the CPU templates once
// per target (deltac/cpu/isa.h) and runs each CPU family with one of them.
// Not a knob of KernelConfig: generated code is compiled for one target and
// has no such choice; the runtime's choice is a field of a call and of a
// tuning record (as the thread count is). Lower-case: the names users write.
enum class CpuIsa : int32_t { generic = 0, avx2 = 1, avx512 = 2 };
constexpr int kCpuIsaCount = 3;
constexpr const char *kCpuIsaNames[kCpuIsaCount] = {"generic", "avx2",
                                                    "avx512"};
inline const char *cpu_isa_name(CpuIsa i) {
  return kCpuIsaNames[static_cast<int>(i)];
}
// false when name is none of kCpuIsaNames.
inline bool cpu_isa_by_name(const std::string &name, CpuIsa *out) {
  for (int i = 0; i < kCpuIsaCount; ++i)
    if (name == kCpuIsaNames[i]) {
      *out = static_cast<CpuIsa>(i);
      return true;
    }
  return false;
}

// The facts about a call that legality and the default rule depend on.
struct Problem {
  int32_t variant = DELTAC_VARIANT_GATED;
  int32_t K = 128, V = 128, H = 1, HV = 1;
  int32_t in_dtype = DELTAC_F32, out_dtype = DELTAC_F32;
  int32_t state_dtype = DELTAC_F32, state_layout = DELTAC_STATE_KV;
  int64_t seqs = 1;       // N
  int64_t max_seqlen = 1; // longest sequence (0 when unknown: no bound)
  int32_t sm_count = 0;   // CUDA multiprocessors (0 = unknown)
  // The widest CPU instance the call may run (deltac/cpu/isa.h: active(),
  // the CPU's best or DELTAC_CPU_ISA): the CPU rule is chosen by it
  // (kCpuRules). avx2 when unknown (the compiler's schedules).
  CpuIsa cpu_isa = CpuIsa::avx2;
  // The core runs 512-bit vectors as two 256-bit halves (AMD Zen 4): the
  // avx512 row is then kCpuRuleSplit512 (deltac/cpu/isa.h: split512()).
  bool cpu_split512 = false;
  // Decode fields of the call (params.h): a state pool (read_slots), the
  // state after every token (state_steps), accepted counts.
  bool pool = false, state_steps = false, accepted = false;
  // cu_seqlens given; the batch-invariant mode (deltac_options.deterministic,
  // set by the runtime).
  bool varlen = false, deterministic = false;
  // The call asks for chunk-end states (deltac_options.chunk_states).
  bool chunk_states = false;
  // Beta may exceed 1 (deltac_options.allow_neg_eigval; the dialect's
  // beta_range zero_two).
  bool beta_two = false;
};

// Whether every call of p runs cuda_recurrent's one-token kernels
// (recurrent_rules.h, recurrent_one_token): one token a sequence, no
// cu_seqlens, state_steps, accepted counts or batch-invariant mode.
inline bool one_token(const Problem &p) {
  return p.max_seqlen == 1 && !p.varlen && !p.state_steps && !p.accepted &&
         !p.deterministic;
}

// Longest sequence described by p (T, or the largest cu_seqlens gap). Reads
// cu_seqlens, so host pointers only; assumes N + 1 entries.
inline int64_t max_seqlen(const deltac_fwd_params &p) {
  if (!p.cu_seqlens)
    return p.T;
  int64_t best = 0;
  for (int32_t n = 0; n < p.N; ++n)
    if (p.cu_seqlens[n + 1] - p.cu_seqlens[n] > best)
      best = p.cu_seqlens[n + 1] - p.cu_seqlens[n];
  return best;
}

// max_len: the longest sequence when known (device cu_seqlens: pass T, an
// upper bound).
inline Problem problem_of(const deltac_fwd_params &p, int64_t max_len) {
  Problem q;
  q.variant = p.variant;
  q.K = p.K, q.V = p.V, q.H = p.H, q.HV = p.HV;
  q.in_dtype = p.in_dtype, q.out_dtype = p.out_dtype;
  q.state_dtype = p.state_dtype, q.state_layout = p.state_layout;
  q.seqs = p.N;
  q.max_seqlen = max_len;
  q.pool = p.read_slots != nullptr;
  q.state_steps = p.state_steps != nullptr;
  q.accepted = p.accepted != nullptr;
  q.varlen = p.cu_seqlens != nullptr;
  return q;
}

// ---------------------------------------------------------------------------
// Family-specific rules.

// CUDA recurrent kernel geometry and warps: deltac/cuda/recurrent_rules.h
// (cuda_recurrent_row_groups, cuda_recurrent_default_warps,
// cuda_recurrent_warps_ok).

namespace detail {
inline std::string num(int64_t x) { return std::to_string(x); }
} // namespace detail

// "" when the problem itself is in the supported space of any kernel.
inline std::string check_problem(const Problem &p) {
  using detail::num;
  if (p.variant < DELTAC_VARIANT_DELTA || p.variant > DELTAC_VARIANT_KDA)
    return "variant " + num(p.variant) + ": expected delta, gated or kda";
  for (auto [name, d] : {std::pair{"K", p.K}, std::pair{"V", p.V}})
    if (d < 16 || d > 256 || d % 16 != 0)
      return std::string(name) + " = " + num(d) +
             ": expected a multiple of 16 in 16..256";
  if (p.H < 1 || p.HV < 1 || p.HV % p.H != 0)
    return "heads " + num(p.H) + " / value heads " + num(p.HV) +
           ": value heads must be a positive multiple of heads";
  return "";
}

// "" when family f can run problem p at all (dtypes, layouts, lengths).
inline std::string check_family(Family f, const Problem &p) {
  using detail::num;
  const FamilyInfo &fi = family_info(f);
  std::string why = check_problem(p);
  if (!why.empty())
    return why;
  // Pools, bf16 and fp8 states, per-token states and accepted counts: the
  // recurrent families (cpu_decode, cpu_recurrent, cuda_recurrent) only.
  const bool chunked = fi.mode == Mode::Chunked;
  if (p.state_dtype != DELTAC_F32 &&
      (chunked || (p.state_dtype != DELTAC_BF16 &&
                   p.state_dtype != DELTAC_FP8_E4M3)))
    return std::string(fi.name) + ": the state must be f32" +
           (chunked ? "" : ", bf16 or fp8 e4m3");
  if (chunked && (p.pool || p.state_steps || p.accepted))
    return std::string(fi.name) + ": " +
           (p.pool ? "state pools (read_slots)"
                   : p.state_steps ? "state_steps" : "accepted counts") +
           " run on the recurrent families only";
  // Chunk-end states: the chunked families (the CPU runs its kernel chunk by
  // chunk, runtime/src/chunk_states.cpp; CUDA's block scan writes them).
  if (p.chunk_states && !chunked)
    return std::string(fi.name) +
           ": chunk-end states (chunk_states) are written by the chunked families only";
  if (p.state_layout != DELTAC_STATE_KV && p.state_layout != DELTAC_STATE_VK)
    return std::string(fi.name) + ": unknown state layout " +
           num(p.state_layout);
  if (fi.max_tokens && (p.max_seqlen == 0 || p.max_seqlen > fi.max_tokens))
    return std::string(fi.name) + ": takes sequences of at most " +
           num(fi.max_tokens) + " tokens, the longest has " +
           (p.max_seqlen ? num(p.max_seqlen) : std::string("an unknown count"));
  const bool in_ok = p.in_dtype == DELTAC_F32 || p.in_dtype == DELTAC_BF16;
  if (fi.device == Device::CPU) {
    if (!in_ok || (p.out_dtype != DELTAC_F32 && p.out_dtype != DELTAC_BF16))
      return std::string(fi.name) + ": q/k/v and o must be f32 or bf16";
    return "";
  }
  if (f == Family::CudaChunked) {
    if ((!in_ok && p.in_dtype != DELTAC_F16) || p.out_dtype != p.in_dtype)
      return std::string(fi.name) +
             ": q/k/v must be f32, bf16 or f16 and o the same dtype";
    if (cuda::chunked_default(p.variant, p.K, p.V,
                              detail::dtypeSize(p.in_dtype))
            .chunk == 0)
      return std::string(fi.name) + ": no legal config for K = " +
             num(p.K) + ", V = " + num(p.V) + " (V may be at most about 2K)";
    return "";
  }
  // CudaRecurrent
  if (!in_ok || p.out_dtype != p.in_dtype)
    return std::string(fi.name) +
           ": q/k/v must be f32 or bf16 and o the same dtype";
  return "";
}

// "" when config c is legal for problem p: the family fits, every knob it
// reads has a listed value, every other knob is 0, and the family's own
// rules hold.
inline std::string check_config(const KernelConfig &c, const Problem &p) {
  using detail::num;
  const FamilyInfo &fi = family_info(c.family);
  std::string why = check_family(c.family, p);
  if (!why.empty())
    return why;
  for (int i = 0; i < kKnobCount; ++i) {
    const bool reads = fi.knobs & (1u << i);
    const int32_t x = c.knob(i);
    if (!reads && x != 0)
      return std::string(fi.name) + " has no knob '" + kKnobNames[i] +
             "' (got " + num(x) + ", expected 0)";
    if (reads && !fi.values[i].contains(x)) {
      std::string list;
      for (int j = 0; j < fi.values[i].n; ++j)
        list += (j ? ", " : "") + num(fi.values[i].v[j]);
      return std::string(fi.name) + ": " + kKnobNames[i] + " = " + num(x) +
             ", expected one of " + list;
    }
  }
  if ((fi.knobs & kKnobTileV) && p.V % c.tile_v != 0)
    return std::string(fi.name) + ": tile_v = " + num(c.tile_v) +
           " must divide V = " + num(p.V);
  if (c.family == Family::CudaRecurrent && c.tile_v <= 32 &&
      !cuda_recurrent_warps_ok(p.K, c.tile_v, c.warps))
    return std::string(fi.name) + ": warps = " + num(c.warps) +
           " does not split K = " + num(p.K) + " with tile_v = " +
           num(c.tile_v) + " into whole row groups of at most 16 rows";
  if (c.family == Family::CudaRecurrent &&
      !cuda_recurrent_knobs_ok(p.K, c.tile_v, c.warps, detail::dtypeSize(p.state_dtype),
                               one_token(p)))
    return std::string(fi.name) + ": tile_v = " + num(c.tile_v) + ", warps = " +
           num(c.warps) + " has no kernel for K = " + num(p.K) + " with a " +
           detail::dtypeName(p.state_dtype) + " state" +
           (one_token(p) ? "" : " on calls of several tokens (or cu_seqlens, state_steps, "
                                "accepted, the batch-invariant mode)") +
           " (recurrent_rules.h, cuda_recurrent_knobs_ok)";
  if (c.family == Family::CudaChunked &&
      !cuda::chunked_legal(p.variant, p.K, p.V,
                           detail::dtypeSize(p.in_dtype), c.chunk, c.tile_v,
                           c.warps, c.stages))
    return std::string(fi.name) + ": chunk = " + num(c.chunk) +
           ", tile_v = " + num(c.tile_v) + ", warps = " + num(c.warps) +
           ", stages = " + num(c.stages) +
           " does not fit (warp tiling or shared memory, chunked_rules.h)";
  return "";
}

// ---------------------------------------------------------------------------
// Default rule.

// The CPU rule, one row per instruction set (Problem::cpu_isa, the widest
// the call may run), from measurements (docs/performance.md, "CPU
// AVX-512"). A tuning database overrides it per problem: deltac-tune
// searches every field (families, their knobs, the instance each runs).
struct CpuRule {
  // The instance cpu_recurrent, cpu_decode and cpu_chunked run (Family
  // order), never wider than the row's own instruction set.
  CpuIsa family_isa[3];
  // Mode::Auto: sequences longer than this run cpu_chunked (0: never, the
  // recurrence at every length).
  int64_t recurrent_max_tokens;
  int32_t chunk;            // cpu_chunked
  int32_t recurrent_tile_v; // 32 needs V % 32 == 0 and K <= 128, else 16
  int32_t decode_tile_v;    // the widest cpu_decode tile up to this dividing V
};
constexpr CpuRule kCpuRules[kCpuIsaCount] = {
    // generic, avx2: the recurrence measured faster than chunked at every
    // length on AVX2 (Zen 4).
    {{CpuIsa::generic, CpuIsa::generic, CpuIsa::generic}, 0, 32, 32, 32},
    {{CpuIsa::avx2, CpuIsa::avx2, CpuIsa::avx2}, 0, 32, 32, 32},
    // avx512: every family on the 512-bit instance: as fast or faster on an
    // Intel Xeon with AVX-512 (2026-12-01, interleaved). On Zen 4 the
    // recurrence measured faster on avx2 (its 512-bit FMAs are two 256-bit
    // halves): deltac-tune's isa dimension finds that per machine. Chunked
    // (C = 32) above 2048 tokens: 2 threads, gated, 16 heads, K = V = 128,
    // it tied the recurrence at 1024 tokens and was 1.12x / 1.19x faster at
    // 4096 / 8192 (docs/performance.md). Decode on whole rows of up to 128
    // columns (16 accumulator chains; a head's state read in address order):
    // 0.94x / 0.90x / 0.95x the 32-column tile's time at batch 1 / 8 / 64
    // (Zen 4, 2 threads, gated, 16 heads, K = V = 128; deltac-tune's tile_v
    // dimension picked 128 at batch 1 and 8 on a 2-core Intel Xeon too).
    {{CpuIsa::avx512, CpuIsa::avx512, CpuIsa::avx512}, 2048, 32, 32, 128},
};
// avx512 on a core with a 256-bit datapath (Zen 4; 2 threads, gated, 16
// heads, K = V = 128, interleaved, docs/performance.md "CPU AVX-512"): the
// recurrence on avx2 beat it on avx512 (49.5 / 58.2 ms at 4096 tokens, 106 /
// 121 at 8192) and chunked C = 32 on avx512 (53.3 / 115 ms) at both lengths;
// chunked (on request) and decode stay on avx512 (chunked 1.3x its avx2
// instance; decode a tie at 32 columns, and the 512-bit instance has the
// registers for the 128-column tile).
constexpr CpuRule kCpuRuleSplit512 = {
    {CpuIsa::avx2, CpuIsa::avx512, CpuIsa::avx512}, 0, 32, 32, 128};
inline const CpuRule &cpu_rule(CpuIsa widest, bool split512 = false) {
  if (split512 && widest == CpuIsa::avx512)
    return kCpuRuleSplit512;
  return kCpuRules[static_cast<int>(widest)];
}
// Chunked on request: the avx2 rule's chunk (the compiler's default).
constexpr int kCpuDefaultChunk = kCpuRules[1].chunk;

// The instance CPU family f runs for p under the rule.
inline CpuIsa cpu_isa_for(Family f, const Problem &p) {
  return cpu_rule(p.cpu_isa, p.cpu_split512).family_isa[static_cast<int>(f)];
}
// "" when instance i may run CPU family f for p: no wider than p.cpu_isa.
inline std::string check_cpu_isa(Family f, CpuIsa i, const Problem &p) {
  const FamilyInfo &fi = family_info(f);
  if (fi.device != Device::CPU)
    return std::string(fi.name) + " runs on CUDA: no CPU instruction set";
  if (static_cast<int>(i) < 0 || static_cast<int>(i) >= kCpuIsaCount)
    return std::string(fi.name) + ": unknown CPU instruction set " +
           std::to_string(static_cast<int>(i));
  if (static_cast<int>(i) > static_cast<int>(p.cpu_isa))
    return std::string(fi.name) + ": instruction set " + cpu_isa_name(i) +
           " is wider than this call may run (" + cpu_isa_name(p.cpu_isa) +
           ": the CPU's, or DELTAC_CPU_ISA)";
  return "";
}

// Default knob values of family f for p (legal when check_family holds).
inline KernelConfig default_config(Family f, const Problem &p) {
  KernelConfig c;
  c.family = f;
  switch (f) {
  case Family::CpuRecurrent: {
    const int32_t t = cpu_rule(p.cpu_isa, p.cpu_split512).recurrent_tile_v;
    c.tile_v = (t == 32 && p.V % 32 == 0 && p.K <= 128) ? 32 : 16;
    break;
  }
  case Family::CpuDecode: {
    const int32_t most = cpu_rule(p.cpu_isa, p.cpu_split512).decode_tile_v;
    const KnobValues &t = // ascending
        family_info(f).values[knob_index(kKnobTileV)];
    c.tile_v = t.v[0];
    for (int i = 0; i < t.n; ++i)
      if (t.v[i] <= most && p.V % t.v[i] == 0)
        c.tile_v = t.v[i];
    break;
  }
  case Family::CpuChunked:
    c.chunk = cpu_rule(p.cpu_isa, p.cpu_split512).chunk;
    break;
  case Family::CudaRecurrent:
    c.tile_v = cuda_recurrent_tile_for(p.V, detail::dtypeSize(p.state_dtype), one_token(p),
                                       p.seqs * p.HV * (p.V / cuda_recurrent_default_tile(p.V)));
    c.warps = cuda_recurrent_default_warps(p.K, c.tile_v);
    break;
  case Family::CudaChunked: {
    const cuda::ChunkedChoice d = cuda::chunked_default(
        p.variant, p.K, p.V, detail::dtypeSize(p.in_dtype));
    c.chunk = d.chunk, c.tile_v = d.bv, c.warps = d.warps, c.stages = d.stages;
    break;
  }
  }
  return c;
}

// The split, fuse and scan config c runs on p, whatever c says
// (cuda::chunked_knobs): cuda_chunked calls writing chunk-end states run
// the block scan unsplit; where beta may exceed 1 on 16-bit delta / GDN
// inputs, scan 5 (two-term products: the other scans' bf16 error grows with
// T there; cuda::chunked_precise_runs).
inline KernelConfig call_knobs(KernelConfig c, const Problem &p) {
  if (c.family != Family::CudaChunked)
    return c;
  const cuda::ChunkedKnobs kn =
      cuda::chunked_knobs(c.split, c.fuse, c.scan, p.chunk_states,
                          p.beta_two && cuda::chunked_precise_runs(
                                            p.variant, detail::dtypeSize(p.in_dtype)));
  c.split = kn.split, c.fuse = kn.fuse, c.scan = kn.scan;
  return c;
}

// Whether family f runs p on f32 copies of its 16-bit q, k, v (o converted
// back to the input dtype): kda with beta up to 2 on cuda_chunked, whose
// 16-bit products drift past 5e-3 over long sequences there
// (docs/performance.md, "kda with beta up to 2 on f32 copies"); the
// recurrent kernel computes in f32 from the 16-bit values and is exact
// already. The runtime copies around its call; generated code converts
// (delta.convert, the dialect's templateInType).
inline bool f32_copies(const Problem &p, Family f) {
  return f == Family::CudaChunked && p.variant == DELTAC_VARIANT_KDA && p.beta_two &&
         (p.in_dtype == DELTAC_BF16 || p.in_dtype == DELTAC_F16);
}

// Under Mode::Auto on CUDA, calls whose longest sequence has at most this
// many tokens run the recurrent kernel (decode, speculative verify), longer
// ones the chunked kernel. Not yet measured: the recurrence costs about one
// state pass per token, the chunked kernel three launches and a chunk of
// work; 16 is an estimate of the crossover for the autotuner to replace.
constexpr int64_t kCudaAutoRecurrentMaxTokens = 16;

// The families mode m runs on device d, most specific first, each with the
// longest sequence it is dispatched for under m (0 = any): the first entry
// whose bound holds the call and whose check_family passes takes it.
// Auto on the CPU: decode for one-token calls, the recurrence up to the
// CPU rule's recurrent_max_tokens (cpu_isa, split512: its row), then chunked, and the
// recurrence for what chunked cannot run. Auto on CUDA:
// the recurrence up to kCudaAutoRecurrentMaxTokens, then chunked, and the
// recurrence for what chunked cannot run.
struct FamilyList {
  int n = 0;
  Family f[4];
  int64_t max_tokens[4];
  void add(Family fam, int64_t bound) {
    f[n] = fam;
    max_tokens[n++] = bound;
  }
};
inline FamilyList families_for(Device d, Mode m,
                               CpuIsa cpu_isa = CpuIsa::avx2,
                               bool split512 = false) {
  FamilyList l;
  if (d == Device::CUDA) {
    if (m == Mode::Auto)
      l.add(Family::CudaRecurrent, kCudaAutoRecurrentMaxTokens);
    if (m != Mode::Recurrent)
      l.add(Family::CudaChunked, 0);
    if (m != Mode::Chunked)
      l.add(Family::CudaRecurrent, 0);
    return l;
  }
  if (m == Mode::Chunked) {
    l.add(Family::CpuChunked, 0);
    return l;
  }
  l.add(Family::CpuDecode, family_info(Family::CpuDecode).max_tokens);
  const int64_t r = cpu_rule(cpu_isa, split512).recurrent_max_tokens;
  if (m == Mode::Auto && r > 0) {
    l.add(Family::CpuRecurrent, r);
    l.add(Family::CpuChunked, 0);
  }
  l.add(Family::CpuRecurrent, 0);
  return l;
}

// The family the default rule runs p with; false with the first family's
// reason in *why when none of d's families under m can run it.
inline bool default_family(Device d, Mode m, const Problem &p, Family *out,
                           std::string *why) {
  FamilyList l = families_for(d, m, p.cpu_isa, p.cpu_split512);
  std::string first;
  for (int i = 0; i < l.n; ++i) {
    const int64_t b = l.max_tokens[i];
    if (b && (p.max_seqlen == 0 || p.max_seqlen > b))
      continue;
    std::string w = check_family(l.f[i], p);
    if (w.empty()) {
      *out = l.f[i];
      return true;
    }
    if (first.empty())
      first = w;
  }
  if (why)
    *why = first;
  return false;
}

// ---------------------------------------------------------------------------
// Precompiled instances (the runtime's; generated code instantiates any
// legal config). X(K, V) per list; K = V = 0 means dims read at run time.

// CPU: every family and knob value, for these dims.
#define DELTAC_CPU_DIMS(X) X(128, 128) X(64, 64) X(0, 0)
// CUDA recurrent: f32, bf16 and fp8 e4m3 states, tile_v 16, 32 and 64 (where it divides V),
// the default warps.
#define DELTAC_CUDA_RECURRENT_DIMS(X)                                          \
  X(64, 64) X(128, 128) X(256, 256) X(128, 256) X(256, 128)
// CUDA chunked: f32, bf16 and f16, the default config's chunk, tile_v,
// warps and stages with every split, fuse and scan (run-time values).
#define DELTAC_CUDA_CHUNKED_DIMS(X) X(64, 64) X(128, 128) X(256, 256) X(128, 256)

// Whether the runtime has c precompiled for p (c legal for p).
inline bool precompiled(const KernelConfig &c, const Problem &p) {
  if (family_info(c.family).device == Device::CPU)
    return true; // the dims-at-run-time instance takes any K, V
  bool dims = false;
#define DELTAC_X(k, v) dims = dims || (p.K == k && p.V == v);
  if (c.family == Family::CudaChunked) {
    DELTAC_CUDA_CHUNKED_DIMS(DELTAC_X)
    const KernelConfig d = default_config(Family::CudaChunked, p);
    return dims && c.chunk == d.chunk && c.tile_v == d.tile_v &&
           c.warps == d.warps && c.stages == d.stages;
  }
  DELTAC_CUDA_RECURRENT_DIMS(DELTAC_X)
#undef DELTAC_X
  return dims && c.warps == cuda_recurrent_default_warps(p.K, c.tile_v);
}

} // namespace deltac

#endif // DELTAC_CATALOGUE_H
