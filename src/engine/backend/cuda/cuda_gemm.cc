// cuBLASLt GEMMs (see cuda_gemm.h).
#include "engine/backend/cuda/cuda_gemm.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "engine/backend/cuda/cublaslt_api.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/gemm_layout.h"

#define AIR_CUBLAS_CHECK(call)                                                                 \
  do {                                                                                         \
    const cublasStatus_t air_cublas_status = (call);                                           \
    if (air_cublas_status != CUBLAS_STATUS_SUCCESS) {                                          \
      std::fprintf(stderr, "%s:%d: cuBLASLt call failed: %s: %s\n", __FILE__, __LINE__, #call, \
                   lt_->GetStatusString(air_cublas_status));                                   \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)

namespace air::engine::cuda {

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

cublasLtHandle_t Handle(void* handle) { return static_cast<cublasLtHandle_t>(handle); }

cudaDataType_t CudaType(DType dtype) { return dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F; }

// The largest power of two (at most 256) that divides the address: the alignment cuBLASLt's
// kernels may assume.
int AlignmentBytes(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  int alignment = 256;
  while (alignment > 1 && address % static_cast<uintptr_t>(alignment) != 0) alignment /= 2;
  return alignment;
}

// Elements a row-major (rows, cols) matrix with row stride ld spans.
int64_t Span(int64_t rows, int64_t cols, int64_t ld) {
  return rows > 0 && cols > 0 ? (rows - 1) * ld + cols : 0;
}

// Device scratch for one call, freed on the stream after the work queued with it.
class StreamScratch {
 public:
  StreamScratch(size_t bytes, cudaStream_t stream) : stream_(stream) {
    AIR_CUDA_CHECK(cudaMallocAsync(&ptr_, bytes, stream));
  }
  ~StreamScratch() { cudaFreeAsync(ptr_, stream_); }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace

// The descriptors and the chosen algorithm of one call shape.
struct GemmRunner::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  const CublasLtApi* lt = nullptr;  // whose Destroy functions release the descriptors
  bool supported = true;            // false: cuBLASLt has no algorithm; GemmFallback runs the shape

  ~Plan() {
    if (out != nullptr) lt->MatrixLayoutDestroy(out);
    if (second != nullptr) lt->MatrixLayoutDestroy(second);
    if (first != nullptr) lt->MatrixLayoutDestroy(first);
    if (op != nullptr) lt->MatmulDescDestroy(op);
  }
};

Result<std::unique_ptr<GemmRunner>> GemmRunner::Create(cudaStream_t stream) {
  AIR_ASSIGN_OR_RETURN(const CublasLtApi* lt, LoadCublasLt());
  return std::unique_ptr<GemmRunner>(new GemmRunner(lt, stream));
}

GemmRunner::GemmRunner(const CublasLtApi* lt, cudaStream_t stream) : lt_(lt), stream_(stream) {
  cublasLtHandle_t handle = nullptr;
  AIR_CUBLAS_CHECK(lt_->Create(&handle));
  handle_ = handle;
  workspace_bytes_ = kWorkspaceBytes;
  AIR_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

GemmRunner::~GemmRunner() {
  plans_.clear();
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) lt_->Destroy(Handle(handle_));
}

void GemmRunner::Run(const GemmCall& call) {
  if (call.m <= 0 || call.n <= 0) return;
  if (call.k <= 0) {
    ScaleMatrix(call.c, call.m, call.n, call.ldc, call.beta, stream_);
    return;
  }
  const bool bf16_product = call.a.dtype == DType::kBF16 || call.b.dtype == DType::kBF16;
  GemmCall planned = call;
  // A bf16 product rounds an F32 operand to bf16 first (ops.h), into scratch of its span.
  std::unique_ptr<StreamScratch> a_bf16, b_bf16, c_f32;
  if (bf16_product && call.a.dtype == DType::kF32) {
    const int64_t span =
        call.trans_a ? Span(call.k, call.m, call.lda) : Span(call.m, call.k, call.lda);
    a_bf16 = std::make_unique<StreamScratch>(static_cast<size_t>(span) * 2, stream_);
    Convert(call.a, Out{a_bf16->get(), DType::kBF16}, span, stream_);
    planned.a = In{a_bf16->get(), DType::kBF16};
  }
  if (bf16_product && call.b.dtype == DType::kF32) {
    const int64_t span =
        call.trans_b ? Span(call.n, call.k, call.ldb) : Span(call.k, call.n, call.ldb);
    b_bf16 = std::make_unique<StreamScratch>(static_cast<size_t>(span) * 2, stream_);
    Convert(call.b, Out{b_bf16->get(), DType::kBF16}, span, stream_);
    planned.b = In{b_bf16->get(), DType::kBF16};
  }
  // An fp32 product into a BF16 C: into fp32 scratch (C's old values when accumulating), then
  // rounded once into C.
  if (!bf16_product && call.c.dtype == DType::kBF16) {
    const int64_t span = Span(call.m, call.n, call.ldc);
    c_f32 = std::make_unique<StreamScratch>(static_cast<size_t>(span) * 4, stream_);
    const Out staged{c_f32->get(), DType::kF32};
    // Always staged: the write-back converts the whole span, so the elements between C's rows
    // must round-trip (bf16 -> f32 -> bf16 is exact); cuBLASLt ignores C when beta == 0.
    Convert(AsIn(call.c), staged, span, stream_);
    planned.c = staged;
    RunPlanned(planned);
    Convert(AsIn(staged), call.c, span, stream_);
    return;
  }
  RunPlanned(planned);
}

void GemmRunner::RunPlanned(const GemmCall& call) {
  const Plan* found = PlanFor(call);
  if (found == nullptr) return GemmFallback(call, stream_);
  const Plan& plan = *found;
  const float alpha = 1.0f, beta = call.beta;
  // C^T = op(B)^T op(A)^T in column-major terms: B's storage first, A's second.
  AIR_CUBLAS_CHECK(lt_->Matmul(Handle(handle_), plan.op, &alpha, call.b.ptr, plan.first, call.a.ptr,
                               plan.second, &beta, call.c.ptr, plan.out, call.c.ptr, plan.out,
                               &plan.algo, workspace_, workspace_bytes_, stream_));
}

const GemmRunner::Plan* GemmRunner::PlanFor(const GemmCall& call) {
  const int alignment = std::min(
      {AlignmentBytes(call.a.ptr), AlignmentBytes(call.b.ptr), AlignmentBytes(call.c.ptr)});
  const int dtypes = static_cast<int>(call.a.dtype) | static_cast<int>(call.b.dtype) << 4 |
                     static_cast<int>(call.c.dtype) << 8;
  const auto key = std::make_tuple(call.m, call.n, call.k, call.lda, call.ldb, call.ldc,
                                   int{call.trans_a}, int{call.trans_b}, dtypes, alignment);
  std::unique_ptr<Plan>& slot = plans_[key];
  if (slot != nullptr) return slot->supported ? slot.get() : nullptr;
  auto plan = std::make_unique<Plan>();
  plan->lt = lt_;
  const cudaDataType_t operand_type = CudaType(call.a.dtype), out_type = CudaType(call.c.dtype);
  // C^T = op(B)^T op(A)^T column-major: B's storage first, A's second (gemm_layout.h).
  const LtGemmLayouts layouts = ColumnMajorLayouts(call.trans_a, call.trans_b, call.m, call.n,
                                                   call.k, call.lda, call.ldb, call.ldc);
  if (!layouts.fits) {  // overlapping rows: no cuBLASLt layout; GemmFallback runs the shape
    plan->supported = false;
    slot = std::move(plan);
    return nullptr;
  }
  AIR_CUBLAS_CHECK(lt_->MatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t first_op = layouts.first.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t second_op = layouts.second.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  AIR_CUBLAS_CHECK(lt_->MatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &first_op,
                                               sizeof first_op));
  AIR_CUBLAS_CHECK(lt_->MatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &second_op,
                                               sizeof second_op));
  const auto create = [&](cublasLtMatrixLayout_t* layout, cudaDataType_t type, const LtMatrix& x) {
    AIR_CUBLAS_CHECK(lt_->MatrixLayoutCreate(layout, type, static_cast<uint64_t>(x.rows),
                                             static_cast<uint64_t>(x.cols), x.ld));
  };
  create(&plan->first, operand_type, layouts.first);
  create(&plan->second, operand_type, layouts.second);
  create(&plan->out, out_type, layouts.out);

  cublasLtMatmulPreference_t preference = nullptr;
  AIR_CUBLAS_CHECK(lt_->MatmulPreferenceCreate(&preference));
  AIR_CUBLAS_CHECK(lt_->MatmulPreferenceSetAttribute(preference,
                                                     CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &workspace_bytes_, sizeof workspace_bytes_));
  const uint32_t aligned = static_cast<uint32_t>(alignment);
  for (auto attribute :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    AIR_CUBLAS_CHECK(
        lt_->MatmulPreferenceSetAttribute(preference, attribute, &aligned, sizeof aligned));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  // No algorithm is usually CUBLAS_STATUS_NOT_SUPPORTED, not success with nothing found: both
  // name the call's shape.
  const cublasStatus_t status =
      lt_->MatmulAlgoGetHeuristic(Handle(handle_), plan->op, plan->first, plan->second, plan->out,
                                  plan->out, preference, 1, &result, &found);
  lt_->MatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    // No cuBLASLt algorithm for this shape: GemmFallback runs it (named once per shape).
    std::fprintf(stderr,
                 "note: cuBLASLt has no algorithm for a GEMM m=%lld n=%lld k=%lld (ta=%d tb=%d, "
                 "lda=%lld ldb=%lld ldc=%lld, dtypes a/b/c %d/%d/%d, alignment %d bytes: %s); "
                 "air's fallback GEMM runs it\n",
                 static_cast<long long>(call.m), static_cast<long long>(call.n),
                 static_cast<long long>(call.k), int{call.trans_a}, int{call.trans_b},
                 static_cast<long long>(call.lda), static_cast<long long>(call.ldb),
                 static_cast<long long>(call.ldc), static_cast<int>(call.a.dtype),
                 static_cast<int>(call.b.dtype), static_cast<int>(call.c.dtype), alignment,
                 lt_->GetStatusString(status));
    plan->supported = false;
    slot = std::move(plan);
    return nullptr;
  }
  plan->algo = result.algo;
  slot = std::move(plan);
  return slot.get();
}

}  // namespace air::engine::cuda
