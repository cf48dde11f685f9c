// deltac::nn on CUDA: device memory, input checks, the cuBLAS GEMM and the
// delta-rule call through deltac_forward (device pointers).
#include "nn_cuda.h"

#include "deltac/runtime.h"

#include <climits>
#include <cstring>

namespace deltac {
namespace nn {
namespace cudanet {

void check(cudaError_t e, const char *layer, const std::string &what) {
  if (e == cudaSuccess) return;
  cudaGetLastError(); // clear a non-sticky error
  throw Error(std::string(layer) + ": " + what + " failed: " + cudaGetErrorName(e) + " (" +
              cudaGetErrorString(e) + ")");
}

DeviceMem::~DeviceMem() {
  if (p) cudaFree(p);
}

void DeviceMem::reserve(size_t n, const char *layer, const char *what) {
  if (n <= bytes) return;
  if (p) {
    // Work enqueued earlier may still read the old block.
    check(cudaDeviceSynchronize(), layer, std::string("growing ") + what);
    cudaFree(p);
    p = nullptr;
    bytes = 0;
  }
  check(cudaMalloc(&p, n), layer, "cudaMalloc of " + std::to_string(n) + " bytes (" + what + ")");
  bytes = n;
}

namespace {
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40); // quiet NaN
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
} // namespace

void upload(DeviceMem *m, const std::vector<float> &v, bool bf16, const char *layer,
            const char *what) {
  if (!bf16) {
    m->reserve(v.size() * 4, layer, what);
    check(cudaMemcpy(m->p, v.data(), v.size() * 4, cudaMemcpyHostToDevice), layer,
          std::string("uploading ") + what);
    return;
  }
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = to_bf16(v[i]);
  m->reserve(h.size() * 2, layer, what);
  check(cudaMemcpy(m->p, h.data(), h.size() * 2, cudaMemcpyHostToDevice), layer,
        std::string("uploading ") + what);
}

void upload_bytes(DeviceMem *m, const void *p, size_t bytes, const char *layer,
                  const char *what) {
  m->reserve(bytes, layer, what);
  check(cudaMemcpy(m->p, p, bytes, cudaMemcpyHostToDevice), layer,
        std::string("uploading ") + what);
}

DeviceGuard::DeviceGuard(int device, const char *layer) {
  check(cudaGetDevice(&previous), layer, "cudaGetDevice");
  if (previous != device) check(cudaSetDevice(device), layer, "cudaSetDevice");
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous && previous >= 0)
    cudaSetDevice(previous);
}

int layer_device(const char *layer) {
  if (!deltac_cuda_available())
    throw Error(std::string(layer) +
                ": no usable CUDA device (no GPU or driver, or this build holds no code for it)");
  int d = 0;
  check(cudaGetDevice(&d), layer, "cudaGetDevice");
  return d;
}

void check_options(const CudaOptions &opt, const char *layer) {
  if (opt.dtype != ElemType::F32 && opt.dtype != ElemType::BF16)
    throw Error(std::string(layer) + ": CudaOptions::dtype = " + elem_name(opt.dtype) +
                ": expected float32 or bfloat16");
}

void check_tensor(const DeviceTensor &t, const char *name, const char *layer, int64_t hidden,
                  ElemType dtype, int device, const DeviceTensor *like) {
  const std::string L = std::string(layer) + ": " + name;
  const auto &s = t.shape;
  if (like) {
    if (s != like->shape)
      throw Error(L + " has shape " + shape_string(s) + ": expected " + shape_string(like->shape) +
                  " (x's shape)");
  } else if (s.size() != 3 || s[2] != hidden || s[0] <= 0 || s[1] <= 0) {
    throw Error(L + " has shape " + shape_string(s) + ": expected (batch, seq, " +
                std::to_string(hidden) + ")");
  }
  if (s[0] > INT_MAX / s[1])
    throw Error(L + " has shape " + shape_string(s) + ": more than 2^31 - 1 tokens");
  if (t.dtype != dtype)
    throw Error(L + " is " + elem_name(t.dtype) + ": expected " + elem_name(dtype) +
                " (the layer's CudaOptions::dtype)");
  if (!t.data) throw Error(L + ".data is null: expected CUDA device memory");
  cudaPointerAttributes a;
  const cudaError_t e = cudaPointerGetAttributes(&a, t.data);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error(L + ".data is not a CUDA pointer (" + cudaGetErrorName(e) +
                "): expected CUDA device memory");
  }
  if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
    throw Error(L + ".data is host memory: expected CUDA device memory");
  if (a.type == cudaMemoryTypeDevice && a.device != device)
    throw Error(L + ".data is memory of CUDA device " + std::to_string(a.device) +
                ": the layer's weights are on device " + std::to_string(device));
}

namespace {
void blas_check(cublasStatus_t st, const char *layer, const char *what) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  throw Error(std::string(layer) + ": cuBLAS " + what + " failed: " + cublasGetStatusName(st) +
              " (" + cublasGetStatusString(st) + ")");
}
int as_int(int64_t v, const char *layer, const char *what) {
  if (v < 0 || v > INT_MAX)
    throw Error(std::string(layer) + ": GEMM " + what + " = " + std::to_string(v) +
                " does not fit cuBLAS's int");
  return int(v);
}
} // namespace

Blas::Blas(const char *layer, bool tf32)
    : layer_(layer), compute_(tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F) {
  blas_check(cublasCreate(&h_), layer, "cublasCreate");
  // cuBLAS's own workspace (32 MiB, NVIDIA's advice for Hopper), so that no
  // GEMM allocates and the calls can be captured in a graph.
  ws_.reserve(32u << 20, layer, "cuBLAS workspace");
}

Blas::~Blas() {
  if (h_) cublasDestroy(h_);
}

void Blas::set_stream(cudaStream_t s) {
  blas_check(cublasSetStream(h_, s), layer_, "cublasSetStream");
  // cublasSetStream resets the workspace to cuBLAS's pool: set ours again.
  blas_check(cublasSetWorkspace(h_, ws_.p, ws_.bytes), layer_, "cublasSetWorkspace");
}

void Blas::gemm(const void *x, const void *w, void *y, int64_t rows, int64_t n, int64_t k,
                int64_t ldy, bool bf16_in, bool f32_out, int batch, int64_t w_stride,
                int64_t y_stride, int64_t ldx) {
  const cudaDataType in = bf16_in ? CUDA_R_16BF : CUDA_R_32F;
  const cudaDataType out = f32_out ? CUDA_R_32F : in;
  const cublasComputeType_t ct = bf16_in ? CUBLAS_COMPUTE_32F : compute_;
  const float one = 1.0f, zero = 0.0f;
  const int m = as_int(n, layer_, "n"), nn = as_int(rows, layer_, "rows"),
            kk = as_int(k, layer_, "k"), ld = as_int(ldy, layer_, "ldy"),
            lx = as_int(ldx ? ldx : k, layer_, "ldx");
  // Row-major y = x W^T is column-major y^T = W x^T: "TN" with W [k, n]
  // column-major transposed.
  if (batch == 1) {
    blas_check(cublasGemmEx(h_, CUBLAS_OP_T, CUBLAS_OP_N, m, nn, kk, &one, w, in, kk, x, in, lx,
                            &zero, y, out, ld, ct, CUBLAS_GEMM_DEFAULT),
               layer_, "GEMM");
    return;
  }
  blas_check(cublasGemmStridedBatchedEx(h_, CUBLAS_OP_T, CUBLAS_OP_N, m, nn, kk, &one, w, in, kk,
                                        w_stride, x, in, lx, 0, &zero, y, out, ld, y_stride,
                                        batch, ct, CUBLAS_GEMM_DEFAULT),
             layer_, "batched GEMM");
}

void run_rule(const RuleCall &c, cudaStream_t s, DeviceMem *ws, const char *layer) {
  ForwardTensors t;
  t.variant = c.variant;
  const ElemType in = c.bf16 ? ElemType::BF16 : ElemType::F32;
  auto arg = [](const void *p, ElemType dt, std::vector<int64_t> shape) {
    TensorArg a;
    a.data = p;
    a.dtype = dt;
    a.shape = std::move(shape);
    return a;
  };
  t.q = arg(c.q, in, {c.B, c.T, c.H, c.K});
  t.k = arg(c.k, in, {c.B, c.T, c.H, c.K});
  t.v = arg(c.v, in, {c.B, c.T, c.HV, c.V});
  t.beta = arg(c.beta, ElemType::F32, {c.B, c.T, c.HV});
  if (c.g && c.variant == DELTAC_VARIANT_KDA) t.g = arg(c.g, ElemType::F32, {c.B, c.T, c.HV, c.K});
  else if (c.g) t.g = arg(c.g, ElemType::F32, {c.B, c.T, c.HV});
  if (c.state && c.read_state) t.h0 = arg(c.state, ElemType::F32, {c.B, c.HV, c.K, c.V});
  t.o = arg(c.o, in, {c.B, c.T, c.HV, c.V});
  if (c.state) t.ht = arg(c.state, ElemType::F32, {c.B, c.HV, c.K, c.V});
  t.qk_l2norm = 1;
  deltac_fwd_params p;
  std::string err;
  if (!bind_params(t, &p, &err)) throw Error(std::string(layer) + ": delta-rule kernel: " + err);
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  opt.mode = DELTAC_MODE_AUTO;
  opt.device_pointers = 1;
  opt.cuda_stream = s;
  opt.allow_neg_eigval = c.beta_two ? 1 : 0;
  size_t bytes = 0;
  if (deltac_workspace_size(&p, &opt, &bytes) != 0)
    throw Error(std::string(layer) + ": delta-rule kernel: " + deltac_last_error());
  if (bytes) {
    ws->reserve(bytes, layer, "delta-rule workspace");
    opt.workspace = ws->p;
    opt.workspace_bytes = ws->bytes;
  }
  if (deltac_forward(&p, &opt) != 0)
    throw Error(std::string(layer) + ": delta-rule kernel: " + deltac_last_error());
}

} // namespace cudanet
} // namespace nn
} // namespace deltac
