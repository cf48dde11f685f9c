//===- EmitCuda.cpp - CUDA C++ for the CUDA kernel templates --------------===//
//
// <layer>_cuda.cu: like the CPU source, but pointers are device pointers:
// cu_seqlens is copied to the host only when a dispatch needs it, the
// pre/post-processing stages are small element-wise kernels on the stream,
// and the fused loop instantiates the catalogue family's entry:
// deltac::cuda::recurrent_cfg<Var, K, V, InT, TileV, Warps> (cuda_recurrent)
// or deltac::cuda::chunked_cfg<Var, K, V, InT, Chunk, BV, Warps, Stages, Split,
// Fuse, Scan>
// (cuda_chunked).
//
//===----------------------------------------------------------------------===//

#include "EmitInternal.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::delta;

namespace deltac {
namespace {

const char kConvertHelpers[] = R"(inline __device__ float toF32(float x) { return x; }
inline __device__ float toF32(__nv_bfloat16 x) { return __bfloat162float(x); }
inline __device__ float toF32(__half x) { return __half2float(x); }
template <class T> __device__ T fromF32(float x);
template <> inline __device__ float fromF32<float>(float x) { return x; }
template <> inline __device__ __nv_bfloat16 fromF32<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}
template <> inline __device__ __half fromF32<__half>(float x) {
  return __float2half(x);
}

template <class From, class To>
__global__ void convertKernel(To *out, const From *in, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = fromF32<To>(toF32(in[i]));
}

)";

// Device copies of deltac::beta_sigmoid and deltac::gate_from_logits
// (templates/include/deltac/preprocess.h): keep the formulas identical.
const char kBetaHelpers[] = R"(__global__ void betaSigmoidKernel(float *out, const float *logits, size_t n,
                                  float range) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = range / (1.0f + expf(-logits[i]));
}

)";

const char kGateHelpers[] = R"(// g = -exp(A_log[h]) * softplus(a + dt_bias[h * width + c]), as
// deltac::gate_from_logits in deltac/preprocess.h.
__global__ void gateKernel(float *g, const float *a, const float *A_log,
                           const float *dt_bias, size_t n, int hv, int width) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t h = (i / width) % hv, c = i % width;
    const float x = a[i] + dt_bias[h * width + c];
    const float sp = x > 20.0f ? x : log1pf(expf(x));
    g[i] = -expf(A_log[h]) * sp;
  }
}

)";

const char kBufferHelpers[] = R"(unsigned gridFor(size_t n) {
  return unsigned(std::min<size_t>((n + 255) / 256, 4096));
}

// A temporary device buffer, freed on the stream.
struct DeviceBuffer {
  void *ptr = nullptr;
  cudaStream_t stream = nullptr;
  ~DeviceBuffer() {
    if (ptr)
      cudaFreeAsync(ptr, stream);
  }
};

cudaError_t allocate(DeviceBuffer &b, size_t bytes, cudaStream_t s) {
  b.stream = s;
  return cudaMallocAsync(&b.ptr, bytes, s);
}

)";

const char *cudaType(DType d) {
  switch (d) {
  case DType::f32:
    return "float";
  case DType::bf16:
    return "__nv_bfloat16";
  case DType::f16:
    return "__half";
  }
  return "?";
}

void emitCheck(raw_ostream &os, StringRef what) {
  os << "  if ((e = cudaGetLastError()) != cudaSuccess)\n"
     << "    return fail(err, err_len, std::string(\"" << what
     << ": \") + cudaGetErrorString(e));\n";
}

void emitAlloc(raw_ostream &os, StringRef buf, StringRef bytes,
               bool declare = true) {
  if (declare)
    os << "  DeviceBuffer " << buf << ";\n";
  os << "  if ((e = allocate(" << buf << ", " << bytes
     << ", stream)) != cudaSuccess)\n"
     << "    return fail(err, err_len, std::string(\"cudaMallocAsync: \") + "
        "cudaGetErrorString(e));\n";
}

void emitConvert(raw_ostream &os, StringRef dst, StringRef src, DType from,
                 DType to, StringRef n) {
  os << "  deltac_gen::convertKernel<" << cudaType(from) << ", " << cudaType(to)
     << "><<<gridFor(" << n << "), 256, 0, stream>>>(static_cast<"
     << cudaType(to) << " *>(" << dst << "), static_cast<const "
     << cudaType(from) << " *>(" << src << "), " << n << ");\n";
}

} // namespace

std::string cudaKernelComment(LayerOp, const KernelPlan &k) {
  return ("// delta.kernel @" + k.op.getSymName() + ": " + k.family->name +
          " (schedule: " + k.sched.getSource() + ").")
      .str();
}

std::string cudaPreText(LayerOp layer, const KernelPlan &k) {
  std::string s;
  llvm::raw_string_ostream os(s);
  // e: the status of the element-wise pre/post kernels, when there are any.
  if (!k.pre.empty() || !k.post.empty() || k.betaSigmoid || k.gate)
    os << "  cudaError_t e = cudaSuccess;\n";
  emitSizes(os);
  for (ConvertOp c : k.pre) {
    StringRef t = c.getTensor();
    std::string buf = (t + "_buf").str();
    std::string n = countOf(t);
    os << "  // delta.convert \"" << t << "\" " << stringifyDType(c.getFrom())
       << " to " << stringifyDType(c.getTo()) << "\n";
    if (t == "h0")
      os << "  DeviceBuffer " << buf << ";\n  if (p.h0) {\n";
    emitAlloc(os, buf, n + " * sizeof(" + cudaType(c.getTo()) + ")",
              t != "h0");
    emitConvert(os, buf + ".ptr", "p." + t.str(), c.getFrom(), c.getTo(), n);
    emitCheck(os, ("convert " + t).str());
    os << "  p." << t << " = " << buf << ".ptr;\n";
    if (t == "h0")
      os << "  }\n  p.state_dtype = DELTAC_F32;\n";
    if (t == "v")
      os << "  p.in_dtype = " << dtypeEnum(c.getTo()) << ";\n";
  }
  for (ConvertOp c : k.post) {
    StringRef t = c.getTensor();
    std::string buf = (t + "_buf").str();
    os << "  // delta.convert \"" << t << "\" " << stringifyDType(c.getFrom())
       << " to " << stringifyDType(c.getTo()) << " (after the call)\n"
       << "  void *" << t << "_out = p." << t << ";\n";
    emitAlloc(os, buf,
              std::string(countOf(t)) + " * sizeof(" + cudaType(c.getFrom()) +
                  ")");
    os << "  p." << t << " = " << buf << ".ptr;\n";
    if (t == "ht")
      os << "  p.state_dtype = DELTAC_F32;\n";
    else
      os << "  p.out_dtype = " << dtypeEnum(c.getFrom()) << ";\n";
  }
  if (k.betaSigmoid) {
    bool two = k.betaSigmoid.getRange() == BetaRange::zero_two;
    os << "  // delta.beta_sigmoid: params.beta holds logits\n";
    emitAlloc(os, "beta_buf", "nBeta * sizeof(float)");
    os << "  betaSigmoidKernel<<<gridFor(nBeta), 256, 0, stream>>>("
          "static_cast<float *>(beta_buf.ptr), p.beta, nBeta, "
       << (two ? "2.0f" : "1.0f") << ");\n";
    emitCheck(os, "beta_sigmoid");
    os << "  p.beta = static_cast<const float *>(beta_buf.ptr);\n";
  }
  if (k.gate) {
    int64_t w = k.gate.getWidth();
    os << "  // delta.gate width " << w << ": params.g holds a\n"
       << "  const size_t nG = nBeta * " << w << ";\n";
    emitAlloc(os, "g_buf", "nG * sizeof(float)");
    os << "  gateKernel<<<gridFor(nG), 256, 0, stream>>>(static_cast<float "
          "*>(g_buf.ptr), p.g, A_log, dt_bias, nG, p.HV, "
       << w << ");\n";
    emitCheck(os, "gate");
    os << "  p.g = static_cast<const float *>(g_buf.ptr);\n";
  }
  os << "  // delta.fused over " << (k.chunked ? "chunks" : "tokens");
  if (k.l2norm)
    os << " (qk_l2norm fused: p.qk_l2norm = 1)";
  os << "\n";
  return s;
}

std::string cudaPostText(LayerOp, const KernelPlan &k) {
  std::string s;
  llvm::raw_string_ostream os(s);
  for (ConvertOp c : k.post) {
    StringRef t = c.getTensor();
    os << "  // delta.convert \"" << t << "\" " << stringifyDType(c.getFrom())
       << " to " << stringifyDType(c.getTo()) << "\n";
    emitConvert(os, t.str() + "_out", "p." + t.str(), c.getFrom(), c.getTo(),
                countOf(t));
    emitCheck(os, ("convert " + t).str());
  }
  return s;
}

const char *cudaTypeName(DType d) { return cudaType(d); }

/// Helpers: device conversions (outside the anonymous namespace), then,
/// inside it after the prelude, beta/gate kernels and buffers.
std::string cudaOuterHelpers(ArrayRef<KernelPlan> plans) {
  bool cvt = llvm::any_of(plans, [](const KernelPlan &k) {
    return !k.pre.empty() || !k.post.empty();
  });
  return cvt ? std::string("namespace deltac_gen {\n\n") + kConvertHelpers +
                   "} // namespace deltac_gen\n"
             : std::string();
}

std::string cudaInnerHelpers(ArrayRef<KernelPlan> plans) {
  bool cvt = false, beta = false, gate = false;
  for (const KernelPlan &k : plans) {
    cvt |= !k.pre.empty() || !k.post.empty();
    beta |= bool(k.betaSigmoid);
    gate |= bool(k.gate);
  }
  std::string s;
  if (beta)
    s += kBetaHelpers;
  if (gate)
    s += kGateHelpers;
  if (cvt || beta || gate)
    s += kBufferHelpers;
  return s;
}

} // namespace deltac
