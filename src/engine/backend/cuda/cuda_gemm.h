// GemmRunner: ops.h's Gemm on a GPU through cuBLASLt (NVIDIA's maintained GEMM library: tensor
// core kernels tuned per architecture, which no hand-written kernel here would beat).
//
// Row-major C (M, N) = op(A) (M, K) @ op(B) (K, N) + beta C runs as the column-major product
// C^T = op(B)^T op(A)^T: B's storage is cuBLASLt's first operand, A's the second, and the sizes
// swap. Precision as ops.h states: both operands F32 give an fp32 GEMM (CUBLAS_COMPUTE_32F, no
// TF32); a BF16 operand makes the product bf16 — the F32 operand is rounded to bf16 into
// scratch first — with fp32 accumulation (tensor cores), into an F32 or BF16 C. An F32 x F32
// product into a BF16 C runs into fp32 scratch, then converts. beta is any float; beta == 0
// never reads C (NaN there is ignored); K == 0 scales C by beta.
//
// Each distinct call shape (sizes, strides, transposes, dtypes, pointer alignments) gets its
// cuBLASLt descriptors and heuristic choice once, cached, so a training step's GEMMs pay no
// heuristic query after the first step. The workspace (32 MiB) is allocated once. A shape
// cuBLASLt has no algorithm for (a bf16 matrix with an odd leading dimension, say) runs on
// GemmFallback, with a note on stderr the first time.
// Thread safety: owned by one CudaBackend; calls do not overlap (ops.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "base/status.h"
#include "engine/backend/cuda/cuda_kernels.h"

namespace air::engine::cuda {

// One row-major GEMM as ops.h states it, with device pointers.
struct GemmCall {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  In a, b;
  int64_t lda = 0, ldb = 0;
  float beta = 0.0f;
  Out c;
  int64_t ldc = 0;
};

// ops.h's Gemm for any shape, strides and dtypes, without cuBLASLt (cuda_gemm_fallback.cu): for
// the calls cuBLASLt has no algorithm for; slow, exact in its order (k in order, fp32 sums).
void GemmFallback(const GemmCall& call, cudaStream_t stream);

struct CublasLtApi;  // cublaslt_api.h

class GemmRunner {
 public:
  // For the GPU that is current on the calling thread; its work goes to `stream`. Loads
  // cuBLASLt on first use: FailedPrecondition when it cannot be loaded.
  static Result<std::unique_ptr<GemmRunner>> Create(cudaStream_t stream);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  void Run(const GemmCall& call);

 private:
  struct Plan;
  // A cuBLASLt product of operands already in the GEMM's dtypes (F32 x F32 or BF16 x BF16).
  void RunPlanned(const GemmCall& call);
  // The cached plan of the call's shape; null when cuBLASLt has no algorithm for it.
  const Plan* PlanFor(const GemmCall& call);

  GemmRunner(const CublasLtApi* lt, cudaStream_t stream);

  const CublasLtApi* lt_;
  cudaStream_t stream_;
  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int>,
           std::unique_ptr<Plan>>
      plans_;
};

}  // namespace air::engine::cuda
