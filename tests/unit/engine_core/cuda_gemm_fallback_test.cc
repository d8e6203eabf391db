// The CUDA backend's fallback GEMM (backend/cuda/cuda_gemm.h: the shapes cuBLASLt has no
// algorithm for) against the CPU reference, on every transpose, odd strides and each dtype
// pattern — the harness reaches it only where cuBLASLt refuses a shape, which depends on the
// library's version. Runs where a GPU is usable; elsewhere it says so and why.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/backend/registry.h"
#include "op_test_util.h"
#include "test_util.h"

#if AIR_HAVE_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_gemm.h"
#endif

namespace air::engine {
namespace {

using testing::DeviceArrays;
using testing::RandomVector;
using testing::RoundedTo;
using testing::ScaledMaxDiff;

TEST(CudaGemmFallback, MatchesTheReferenceOnEveryTransposeStrideAndDtype) {
#if AIR_HAVE_CUDA
  const Result<int> gpus = VisibleGpuCount();
  if (!gpus.ok()) GTEST_SKIP() << "not run here, no GPU: " << gpus.status().message();
  auto made = CreateBackend(ForDevice(Device{DeviceType::kCuda, 0}));
  ASSERT_TRUE(made.ok()) << made.status().message();
  auto* gpu = dynamic_cast<cuda::CudaBackend*>(made->get());
  ASSERT_NE(gpu, nullptr);
  const auto ref = testing::MakeBackend("reference");
  double worst = 0.0;
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (auto [m, n, k] :
         {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {17, 33, 9}, {40, 7, 65}}) {
      for (int ta = 0; ta < 2; ++ta) {
        for (int tb = 0; tb < 2; ++tb) {
          const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 1;
          const auto a = RoundedTo(RandomVector(static_cast<size_t>((ta ? k : m) * lda), 1), dtype);
          const auto b = RoundedTo(RandomVector(static_cast<size_t>((tb ? n : k) * ldb), 2), dtype);
          const auto c0 = RoundedTo(RandomVector(static_cast<size_t>(m * ldc), 3), dtype);
          DeviceArrays g(*gpu), r(*ref);
          const View ga = g.Data(a, dtype), gb = g.Data(b, dtype), gc = g.Data(c0, dtype);
          cuda::GemmFallback({.trans_a = ta != 0,
                              .trans_b = tb != 0,
                              .m = m,
                              .n = n,
                              .k = k,
                              .a = {ga.raw(), dtype},
                              .b = {gb.raw(), dtype},
                              .lda = lda,
                              .ldb = ldb,
                              .beta = 1.0f,
                              .c = {gc.raw(), dtype},
                              .ldc = ldc},
                             gpu->stream());
          const View rc = r.F32(c0);
          ref->Gemm(ta, tb, m, n, k, r.F32(a), lda, r.F32(b), ldb, 1.0f, rc, ldc);
          const double error = ScaledMaxDiff(g.Get(gc), RoundedTo(r.Get(rc), dtype)) /
                               std::sqrt(static_cast<double>(k));
          worst = std::max(worst, error);
          EXPECT_LE(error, dtype == DType::kF32 ? 6e-7 : 2e-3)
              << DTypeName(dtype) << " m=" << m << " n=" << n << " k=" << k << " ta=" << ta
              << " tb=" << tb;
        }
      }
    }
  }
  std::printf("[cuda] fallback GEMM worst error per sqrt(k): %.3g\n", worst);
#else
  GTEST_SKIP() << "not run: this build has no CUDA backend (AIR_CUDA found no nvcc)";
#endif
}

}  // namespace
}  // namespace air::engine
