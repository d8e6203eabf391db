// The arithmetic of the CUDA GEMM (cuda_gemm.h) that needs no GPU, as pure host functions a CPU
// test checks (tests/unit/engine_core/cuda_gemm_layout_test.cc): how ops.h's row-major
// Gemm(trans_a, trans_b, m, n, k, lda, ldb, ldc) maps onto cuBLASLt's column-major product, and
// the fallback kernel's tiling within CUDA's grid limits.
//
// The mapping: row-major C (M, N) with row stride ldc is, read column-major, C^T (N, M) with
// leading dimension ldc, and C^T = op(B)^T op(A)^T. So cuBLASLt's first operand is B's storage
// and its second A's: B stored (K, N) row-major is column-major (N, K), used as it is (OP_N);
// stored (N, K) (trans_b) it is column-major (K, N), used transposed (OP_T). Likewise A.
// cuBLASLt (as BLAS) needs every leading dimension >= its matrix's column-major row count. A
// matrix of one column never reads its leading dimension, so ops.h allows any there (the
// reference ignores it): it is raised to the row count. Any other narrower stride (overlapping
// rows) has no cuBLASLt layout: `fits` is false and the fallback kernel runs the call.
// Plain structs, no CUDA headers; thread safety: pure functions.
#pragma once

#include <algorithm>
#include <cstdint>

namespace air::engine::cuda {

// One cuBLASLt matrix layout (column-major) and whether the product reads it transposed.
struct LtMatrix {
  bool transposed = false;
  int64_t rows = 0, cols = 0, ld = 0;
};

struct LtGemmLayouts {
  LtMatrix first;    // B's storage
  LtMatrix second;   // A's storage
  LtMatrix out;      // C's storage: (n, m), never transposed
  bool fits = true;  // false: a stride narrower than its column-major rows (fallback kernel)
};

// A column-major (rows, cols) matrix with leading dimension ld, ld raised for a single column.
inline LtMatrix ColumnMajor(bool transposed, int64_t rows, int64_t cols, int64_t ld, bool* fits) {
  const int64_t least = std::max<int64_t>(rows, 1);
  if (cols <= 1) {
    ld = std::max(ld, least);
  } else if (ld < least) {
    *fits = false;  // columns overlap (a stride of 0 repeats one): no cuBLASLt layout
  }
  return {transposed, rows, cols, ld};
}

inline LtGemmLayouts ColumnMajorLayouts(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                        int64_t lda, int64_t ldb, int64_t ldc) {
  LtGemmLayouts l;
  l.first =
      trans_b ? ColumnMajor(true, k, n, ldb, &l.fits) : ColumnMajor(false, n, k, ldb, &l.fits);
  l.second =
      trans_a ? ColumnMajor(true, m, k, lda, &l.fits) : ColumnMajor(false, k, m, lda, &l.fits);
  l.out = ColumnMajor(false, n, m, ldc, &l.fits);
  return l;
}

// The fallback GEMM's grid of 16 x 16 output tiles: x over the column tiles, y over the row
// tiles; y is capped at CUDA's 65535 (the kernel loops over the rest) and x at 2^31 - 1.
inline constexpr int kFallbackTile = 16;
inline constexpr int64_t kMaxGridY = 65535, kMaxGridX = 2147483647;
struct FallbackGrid {
  int64_t x = 0, y = 0;                  // blocks launched
  int64_t row_tiles = 0, col_tiles = 0;  // tiles to cover
};
inline FallbackGrid FallbackGemmGrid(int64_t m, int64_t n) {
  FallbackGrid g;
  g.row_tiles = (m + kFallbackTile - 1) / kFallbackTile;
  g.col_tiles = (n + kFallbackTile - 1) / kFallbackTile;
  g.x = std::min(g.col_tiles, kMaxGridX);
  g.y = std::min(g.row_tiles, kMaxGridY);
  return g;
}

}  // namespace air::engine::cuda
