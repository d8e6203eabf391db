// The CUDA GEMM's mapping of ops.h's row-major Gemm onto cuBLASLt's column-major product
// (backend/cuda/gemm_layout.h), checked without a GPU: the layouts it gives are run through a
// column-major GEMM written here the way cuBLASLt defines one (D = op(A) op(B) + beta C, element
// (r, c) of a layout at r + c * ld, BLAS's ld >= rows rule asserted), and the result compared
// with the reference's row-major GEMM on every transpose, padded and minimal strides, sizes of
// one and a stride a single row or column never reads. Layouts that cannot be expressed (rows
// that overlap) must be refused, never mapped to a different product. And the fallback kernel's
// grid stays within CUDA's limits for any size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/backend/cpu/reference_loops.h"
#include "engine/backend/cuda/gemm_layout.h"
#include "test_util.h"

namespace air::engine::cuda {
namespace {

using testing::RandomVector;

// Element (r, c) of op(x), x a column-major layout over `data`.
float At(const LtMatrix& x, const std::vector<float>& data, int64_t r, int64_t c) {
  return x.transposed ? data[static_cast<size_t>(c + r * x.ld)]
                      : data[static_cast<size_t>(r + c * x.ld)];
}

// cuBLASLt's column-major D = op(first) op(second) + beta C, D and C one layout (in place).
void ColumnMajorMatmul(const LtGemmLayouts& l, const std::vector<float>& first,
                       const std::vector<float>& second, float beta, std::vector<float>& c) {
  for (const LtMatrix* x : {&l.first, &l.second, &l.out}) {
    ASSERT_GE(x->ld, std::max<int64_t>(x->rows, 1)) << "cuBLASLt refuses ld < rows";
  }
  const int64_t rows = l.first.transposed ? l.first.cols : l.first.rows;
  const int64_t inner = l.first.transposed ? l.first.rows : l.first.cols;
  const int64_t cols = l.second.transposed ? l.second.rows : l.second.cols;
  ASSERT_EQ(inner, l.second.transposed ? l.second.cols : l.second.rows) << "inner sizes differ";
  ASSERT_EQ(rows, l.out.rows);
  ASSERT_EQ(cols, l.out.cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t col = 0; col < cols; ++col) {
      double sum = 0.0;
      for (int64_t p = 0; p < inner; ++p) {
        sum += static_cast<double>(At(l.first, first, r, p)) * At(l.second, second, p, col);
      }
      float& out = c[static_cast<size_t>(r + col * l.out.ld)];
      out = beta == 0.0f ? static_cast<float>(sum) : static_cast<float>(sum + beta * out);
    }
  }
}

struct Case {
  int64_t m, n, k, pad_a, pad_b, pad_c;  // each row stride: the minimal one plus its pad
};

TEST(CudaGemmLayout, TheColumnMajorProductIsTheRowMajorGemmOnEveryTransposeAndStride) {
  const Case cases[] = {{5, 7, 3, 0, 0, 0}, {5, 7, 3, 9, 11, 8},  {1, 6, 4, 0, 0, 0},
                        {6, 1, 4, 0, 0, 0}, {3, 4, 1, 0, 0, 0},   {1, 1, 1, 0, 0, 0},
                        {1, 1, 5, 0, 0, 0}, {8, 16, 32, 8, 8, 1}, {2, 3, 2, 3, 1, 2}};
  int checked = 0;
  for (const Case& g : cases) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        const int64_t lda = (ta ? g.m : g.k) + g.pad_a;
        const int64_t ldb = (tb ? g.k : g.n) + g.pad_b;
        const int64_t ldc = g.n + g.pad_c;
        const int64_t a_rows = ta ? g.k : g.m, b_rows = tb ? g.n : g.k;
        const auto a = RandomVector(static_cast<size_t>(a_rows * lda), 1);
        const auto b = RandomVector(static_cast<size_t>(b_rows * ldb), 2);
        const auto c0 = RandomVector(static_cast<size_t>(g.m * ldc), 3);
        for (const float beta : {0.0f, 1.0f, 0.5f}) {
          const LtGemmLayouts l = ColumnMajorLayouts(ta, tb, g.m, g.n, g.k, lda, ldb, ldc);
          ASSERT_TRUE(l.fits) << "m=" << g.m << " n=" << g.n << " k=" << g.k;
          std::vector<float> want = c0, got = c0;
          RefGemm(ta, tb, g.m, g.n, g.k, a.data(), lda, b.data(), ldb, beta, want.data(), ldc);
          // cuBLASLt's first operand is B's storage, its second A's.
          ColumnMajorMatmul(l, b, a, beta, got);
          for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i])))
                << "element " << i << " ta=" << ta << " tb=" << tb << " m=" << g.m << " n=" << g.n
                << " k=" << g.k << " lda=" << lda << " ldb=" << ldb << " ldc=" << ldc
                << " beta=" << beta;
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 9 * 4 * 3);
}

TEST(CudaGemmLayout, AStrideASingleRowNeverReadsIsRaisedToWhatCublasLtAccepts) {
  // m = 1: A (1, K) and C (1, N) have one row; ops.h lets their strides be anything (here 0).
  const LtGemmLayouts l = ColumnMajorLayouts(false, false, 1, 6, 4, 0, 6, 0);
  ASSERT_TRUE(l.fits);
  EXPECT_EQ(l.second.ld, 4);  // A as column-major (K, 1)
  EXPECT_EQ(l.out.ld, 6);     // C as column-major (N, 1)
  std::vector<float> a = RandomVector(4, 1), b = RandomVector(24, 2), want(6), got(6);
  RefGemm(false, false, 1, 6, 4, a.data(), 0, b.data(), 6, 0.0f, want.data(), 0);
  ColumnMajorMatmul(l, b, a, 0.0f, got);
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(got[i], want[i], 1e-5f);
}

TEST(CudaGemmLayout, OverlappingRowsAreRefusedForTheFallbackNotMappedToAnotherProduct) {
  // B (K, N) with row stride 0: every row of B is its first row (the reference reads that);
  // no column-major layout says so, so the call must go to the fallback kernel.
  EXPECT_FALSE(ColumnMajorLayouts(false, false, 3, 1, 4, 4, 0, 1).fits);
  EXPECT_FALSE(ColumnMajorLayouts(false, false, 3, 5, 4, 4, 2, 5).fits);  // ldb < N
  EXPECT_FALSE(ColumnMajorLayouts(true, false, 3, 5, 4, 2, 5, 5).fits);   // lda < M
  EXPECT_FALSE(ColumnMajorLayouts(false, false, 3, 5, 4, 4, 5, 4).fits);  // ldc < N
  EXPECT_TRUE(ColumnMajorLayouts(false, false, 3, 5, 4, 4, 5, 5).fits);
}

TEST(CudaGemmLayout, TheFallbackGridStaysWithinCudasLimitsAndCoversEveryTile) {
  for (const auto& [m, n] : {std::pair<int64_t, int64_t>{1, 1},
                             {17, 33},
                             {16, 16},
                             {int64_t{2} << 20, 4096},
                             {int64_t{64} << 20, 128256}}) {
    const FallbackGrid g = FallbackGemmGrid(m, n);
    EXPECT_GE(g.x, 1);
    EXPECT_GE(g.y, 1);
    EXPECT_LE(g.y, 65535) << "gridDim.y past CUDA's limit for m=" << m;
    EXPECT_LE(g.x, 2147483647);
    EXPECT_GE(g.row_tiles * kFallbackTile, m);
    EXPECT_GE(g.col_tiles * kFallbackTile, n);
    EXPECT_LE(g.y, g.row_tiles);
    EXPECT_LE(g.x, g.col_tiles);
  }
}

}  // namespace
}  // namespace air::engine::cuda
