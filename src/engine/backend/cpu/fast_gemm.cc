// Blocked, packed, multithreaded SGEMM (see fast_gemm.h): fp32 panels for gemm_blocking.h's
// loop nest and gemm_kernels.h's fp32 micro-kernels.
#include "engine/backend/cpu/fast_gemm.h"

#include <algorithm>
#include <cstring>

#include "engine/backend/cpu/cpu_features.h"
#include "engine/backend/cpu/gemm_blocking.h"
#include "engine/backend/cpu/gemm_kernels.h"

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

// Packs rows [i, i+mr) of op(A)[:, p0:p0+kc] into one panel: dst[p][r], zero-padded past m.
void PackAPanel(const GemmArgs& g, int64_t mr, int64_t i, int64_t p0, int64_t kc, float* dst) {
  const int64_t rows = std::min(mr, g.m - i);
  if (rows < mr) std::fill(dst, dst + kc * mr, 0.0f);
  if (g.trans_a) {  // op(A)[i + r][p] = a[p][i + r]: each p reads `rows` contiguous floats
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = g.a + (p0 + p) * g.lda + i;
      for (int64_t r = 0; r < rows; ++r) dst[p * mr + r] = src[r];
    }
  } else {  // each row is contiguous in A: read along it
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = g.a + (i + r) * g.lda + p0;
      for (int64_t p = 0; p < kc; ++p) dst[p * mr + r] = src[p];
    }
  }
}

// Packs columns [j, j+nr) of op(B)[p0:p0+kc, :] into one panel: dst[p][c], zero-padded past n.
void PackBPanel(const GemmArgs& g, int64_t nr, int64_t j, int64_t p0, int64_t kc, float* dst) {
  const int64_t cols = std::min(nr, g.n - j);
  if (!g.trans_b) {
    for (int64_t p = 0; p < kc; ++p) {
      float* d = dst + p * nr;
      std::memcpy(d, g.b + (p0 + p) * g.ldb + j, static_cast<size_t>(cols) * sizeof(float));
      std::fill(d + cols, d + nr, 0.0f);
    }
    return;
  }
  if (cols < nr) std::fill(dst, dst + kc * nr, 0.0f);
  // op(B)[p][j + c] = b[j + c][p]: read each column's run of p, in blocks that stay in L1.
  constexpr int64_t kBlock = 64;
  for (int64_t pb = 0; pb < kc; pb += kBlock) {
    const int64_t pe = std::min(kc, pb + kBlock);
    for (int64_t c = 0; c < cols; ++c) {
      const float* src = g.b + (j + c) * g.ldb + p0;
      for (int64_t p = pb; p < pe; ++p) dst[p * nr + c] = src[p];
    }
  }
}

// K == 0: C = beta * C.
void ScaleOnly(const GemmArgs& g) {
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      float& v = g.c[i * g.ldc + j];
      v = g.beta == 0.0f ? 0.0f : g.beta * v;
    }
  }
}

// FastGemm's plan: fp32 panels, C updated in place at every slice.
void RunFastGemm(ThreadPool* pool, GemmScratch& scratch, const GemmArgs& g) {
  if (g.m <= 0 || g.n <= 0) return;
  if (g.k <= 0) return ScaleOnly(g);
  const Fp32MicroKernel kernel = Fp32MicroKernelFor(SelectedCpuKernels());
  const BlockedGemmShape shape{g.m, g.n, g.k, kernel.mr, kernel.nr, kKC, 1, g.m};
  RunBlockedGemm<true>(
      shape, pool, scratch.packed_a, scratch.packed_b,
      [&](int64_t i, int64_t rows, int64_t p0, int64_t kc, float* dst) {
        for (int64_t r = 0; r < rows; r += kernel.mr) {
          PackAPanel(g, kernel.mr, i + r, p0, kc, dst + r * kc);
        }
      },
      [&](int64_t j, int64_t cols, int64_t p0, int64_t kc, float* dst) {
        for (int64_t c = 0; c < cols; c += kernel.nr) {
          PackBPanel(g, kernel.nr, j + c, p0, kc, dst + c * kc);
        }
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
