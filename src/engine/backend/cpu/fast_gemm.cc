// Blocked, packed, multithreaded SGEMM (see fast_gemm.h): fp32 panels for gemm_blocking.h's
// loop nest and gemm_kernels.h's fp32 micro-kernels.
#include "engine/backend/cpu/fast_gemm.h"

#include <algorithm>
#include <cstring>

#include "engine/backend/cpu/cpu_features.h"
#include "engine/backend/cpu/gemm_blocking.h"
#include "engine/backend/cpu/gemm_kernels.h"
#include "engine/backend/cpu/gemm_mixed_pack.h"

namespace air::engine {

namespace {

constexpr int64_t kKC = 256;  // depth of a K slice

struct GemmArgs {
  bool trans_a, trans_b;
  int64_t m, n, k;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  float beta;
  float* c;
  int64_t ldc;
};

// K == 0: C = beta * C.
void ScaleOnly(const GemmArgs& g) {
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      float& v = g.c[i * g.ldc + j];
      v = g.beta == 0.0f ? 0.0f : g.beta * v;
    }
  }
}

// On AVX2 kernels op(A) is read in place (MicroKernelAvx2Rows), only op(B) packed, in a product
// of at most one column panel (N <= 16: LoRA's x A^T, dy B, dy^T u; each element of A meets one
// tile, so its panels cost as much as the product: 38-48 -> 62-81 GFLOP/s on one Intel core; a
// CPU with AVX-512 takes such products to gemm_narrow.h) and where A's rows are K-contiguous
// (X W^T, dY W: a tile's six rows, 6 KiB a K slice, stay in L1 across the column panels; +0.5-2.5%
// against packing them). A transposed A with more columns keeps its panels: its rows are lda
// apart, few L1 sets, evicted between column panels. `a` holds element (i, p) at
// a[i * row_stride + p * step_stride].
struct InPlaceOperand {
  const float* a;
  int64_t row_stride, step_stride;
};
void RunWithAInPlace(ThreadPool* pool, GemmScratch& scratch, int64_t m, int64_t n, int64_t k,
                     const InPlaceOperand& a, const PanelSource& b_src, float beta, float* c,
                     int64_t ldc) {
  const BlockedGemmShape shape{m, n, k, kAvx2KernelMR, kAvx2KernelNR, kKC, 1, m};
  RunBlockedGemm<false>(
      shape, pool, scratch.packed_a, scratch.packed_b,
      [](int64_t, int64_t, int64_t, int64_t, float*) {},
      [&](int64_t j, int64_t cols, int64_t p0, int64_t kc, float* dst) {
        PackFloatPanelsAvx2(b_src, kAvx2KernelNR, j, cols, p0, kc, dst);
      },
      [&](const float*, const float* bp, const MicroTile& t) {
        MicroKernelAvx2Rows(
            t.kc,
            {a.a + t.i * a.row_stride + t.p0 * a.step_stride, a.row_stride, a.step_stride, t.mr},
            bp, {c + t.i * ldc + t.j, ldc, t.mr, t.nr, beta, t.first_slice});
      });
}

// M <= 16 on AVX2 kernels (LoRA's du^T x, u^T x): C^T = op(B)^T op(A)^T, N <= 16, through
// RunWithAInPlace on C^T in scratch (C transposed in, and back: M x N floats, against the
// product's M x N x K multiply-adds). The same tile sums in the same order, beta applied at
// the first slice as before: the same bits as C's own blocked product.
void RunTransposed(ThreadPool* pool, GemmScratch& scratch, const GemmArgs& g,
                   const PanelSource& a_src) {
  std::vector<float>& ct = scratch.c_transposed;
  ct.resize(static_cast<size_t>(g.n * g.m));
  if (g.beta != 0.0f) {
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) ct[j * g.m + i] = g.c[i * g.ldc + j];
    }
  }
  const InPlaceOperand bt{g.b, g.trans_b ? g.ldb : 1, g.trans_b ? 1 : g.ldb};
  RunWithAInPlace(pool, scratch, g.n, g.m, g.k, bt, a_src, g.beta, ct.data(), g.m);
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) g.c[i * g.ldc + j] = ct[j * g.m + i];
  }
}

// FastGemm's plan: fp32 panels, C updated in place at every slice.
void RunFastGemm(ThreadPool* pool, GemmScratch& scratch, const GemmArgs& g) {
  if (g.m <= 0 || g.n <= 0) return;
  if (g.k <= 0) return ScaleOnly(g);
  const Fp32MicroKernel kernel = Fp32MicroKernelFor(SelectedCpuKernels());
  const BlockedGemmShape shape{g.m, g.n, g.k, kernel.mr, kernel.nr, kKC, 1, g.m};
  // The bf16 GEMM's float panels (gemm_mixed_pack.h), the values as they are.
  const auto pack = UseAvx2() ? PackFloatPanelsAvx2 : PackFloatPanels;
  PanelSource a_src{g.a, false, g.lda, !g.trans_a, g.m};
  PanelSource b_src{g.b, false, g.ldb, g.trans_b, g.n};
  a_src.f32_exact = b_src.f32_exact = true;
  if (SelectedCpuKernels() == CpuKernels::kAvx2 && (g.n <= kAvx2KernelNR || !g.trans_a)) {
    const InPlaceOperand a{g.a, g.trans_a ? 1 : g.lda, g.trans_a ? g.lda : 1};
    return RunWithAInPlace(pool, scratch, g.m, g.n, g.k, a, b_src, g.beta, g.c, g.ldc);
  }
  if (SelectedCpuKernels() == CpuKernels::kAvx2 && g.m <= kAvx2KernelNR) {
    return RunTransposed(pool, scratch, g, a_src);
  }
  RunBlockedGemm<true>(
      shape, pool, scratch.packed_a, scratch.packed_b,
      [&](int64_t i, int64_t rows, int64_t p0, int64_t kc, float* dst) {
        pack(a_src, kernel.mr, i, rows, p0, kc, dst);
      },
      [&](int64_t j, int64_t cols, int64_t p0, int64_t kc, float* dst) {
        pack(b_src, kernel.nr, j, cols, p0, kc, dst);
      },
      [&](const float* ap, const float* bp, const MicroTile& t) {
        kernel.fn(t.kc, ap, bp,
                  {g.c + t.i * g.ldc + t.j, g.ldc, t.mr, t.nr, g.beta, t.first_slice});
      });
}

}  // namespace

void FastGemmSerial(GemmScratch& scratch, bool trans_a, bool trans_b, int64_t m, int64_t n,
                    int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                    float* c, int64_t ldc) {
  RunFastGemm(nullptr, scratch, {trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc});
}

void FastGemm(ThreadPool& pool, GemmScratch& scratch, bool trans_a, bool trans_b, int64_t m,
              int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
              float beta, float* c, int64_t ldc) {
  RunFastGemm(&pool, scratch, {trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc});
}

}  // namespace air::engine
