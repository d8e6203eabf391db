// gemm_mixed.h's GemmBf16ConcatK (Ops::GemmConcatK on the avx512bf16 path, LoRA's y = x W^T +
// u B^T in one pass over y): bit for bit the bf16 GEMM over the concatenated operands [A | A2]
// and [op(B); op(B2)] (an odd K padded with one zero step), every operand dtype, transpose of B,
// C dtype and beta, serially and on 3 threads.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cpu/gemm_mixed.h"
#include "engine/dtype.h"

namespace air::engine {
namespace {

// A stored matrix of `rows` x `cols` (row stride cols), BF16 bits or F32 values.
struct Matrix {
  int64_t rows = 0, cols = 0;
  bool bf16 = false;
  std::vector<uint16_t> bits;
  std::vector<float> f32;

  Matrix(int64_t r, int64_t c, bool is_bf16, std::mt19937& rng) : rows(r), cols(c), bf16(is_bf16) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (int64_t i = 0; i < r * c; ++i) {
      const float v = dist(rng);
      if (bf16) bits.push_back(F32ToBf16(v));
      f32.push_back(bf16 ? Bf16ToF32(bits.back()) : v);
    }
  }
  // Element (i, j) as the bf16 GEMM takes it (rounded to bf16).
  uint16_t Bf16At(int64_t i, int64_t j) const {
    return bf16 ? bits[static_cast<size_t>(i * cols + j)]
                : F32ToBf16(f32[static_cast<size_t>(i * cols + j)]);
  }
  const void* data() const { return bf16 ? static_cast<const void*>(bits.data()) : f32.data(); }
};

// [x | 0 (when x's columns are odd) | y]: rows side by side in bf16, the way the fused product
// pairs them.
std::vector<uint16_t> SideBySide(const Matrix& x, const Matrix& y, int64_t* cols) {
  const int64_t padded = (x.cols + 1) / 2 * 2;
  *cols = padded + y.cols;
  std::vector<uint16_t> out(static_cast<size_t>(x.rows * *cols), 0);
  for (int64_t i = 0; i < x.rows; ++i) {
    for (int64_t j = 0; j < x.cols; ++j) out[i * *cols + j] = x.Bf16At(i, j);
    for (int64_t j = 0; j < y.cols; ++j) out[i * *cols + padded + j] = y.Bf16At(i, j);
  }
  return out;
}

// The transpose of a stored matrix, as bf16 bits.
Matrix Transposed(const Matrix& x) {
  Matrix t = x;
  t.rows = x.cols;
  t.cols = x.rows;
  t.bf16 = true;
  t.bits.assign(static_cast<size_t>(x.rows * x.cols), 0);
  for (int64_t i = 0; i < x.rows; ++i) {
    for (int64_t j = 0; j < x.cols; ++j) t.bits[j * x.rows + i] = x.Bf16At(i, j);
  }
  return t;
}

TEST(GemmBf16ConcatK, IsTheGemmOverTheConcatenatedOperands) {
  const GemmBf16Path path = GemmBf16Path::kAvx512Bf16;
  std::string why;
  if (!GemmBf16PathRuns(path, &why)) GTEST_SKIP() << "avx512bf16 not run on this CPU: " << why;
  ThreadPool three(3);
  GemmBf16Scratch scratch;
  std::mt19937 rng(17);
  struct Shape {
    int64_t m, n, k, k2;
  };
  // LoRA's shapes (r 16 beside K 512), odd K and K2, ragged tiles, one row.
  for (const Shape& s : {Shape{70, 300, 512, 16}, Shape{33, 40, 17, 5}, Shape{1, 33, 9, 16},
                         Shape{130, 64, 1344, 16}}) {
    for (bool b_bf16 : {true, false}) {
      for (bool trans_b : {true, false}) {
        for (bool c_bf16 : {true, false}) {
          for (float beta : {0.0f, 1.0f}) {
            const Matrix a(s.m, s.k, true, rng), a2(s.m, s.k2, true, rng);
            // B stored (N, K) when transposed, else (K, N); B2 likewise, F32 (LoRA's B).
            const Matrix b =
                trans_b ? Matrix(s.n, s.k, b_bf16, rng) : Matrix(s.k, s.n, b_bf16, rng);
            const Matrix b2 =
                trans_b ? Matrix(s.n, s.k2, false, rng) : Matrix(s.k2, s.n, false, rng);
            const Matrix c0(s.m, s.n, c_bf16, rng);
            // The concatenation: A (M, K') and B^T (N, K') side by side.
            int64_t depth = 0;
            const std::vector<uint16_t> a_cat = SideBySide(a, a2, &depth);
            const std::vector<uint16_t> b_cat =
                trans_b ? SideBySide(b, b2, &depth)
                        : SideBySide(Transposed(b), Transposed(b2), &depth);
            const std::string what =
                "m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                " k=" + std::to_string(s.k) + " k2=" + std::to_string(s.k2) +
                " b_bf16=" + std::to_string(b_bf16) + " trans_b=" + std::to_string(trans_b) +
                " c_bf16=" + std::to_string(c_bf16) + " beta=" + std::to_string(beta);
            for (ThreadPool* pool : {&three, static_cast<ThreadPool*>(nullptr)}) {
              Matrix want = c0, got = c0;
              const auto result = [&](Matrix& c) {
                return GemmResult{c_bf16 ? static_cast<void*>(c.bits.data()) : c.f32.data(), c_bf16,
                                  s.n};
              };
              GemmBf16OnPath(path, pool, scratch, s.m, s.n, depth,
                             {a_cat.data(), true, depth, false}, {b_cat.data(), true, depth, true},
                             beta, result(want));
              const GemmOperand ga{a.data(), true, s.k, false}, ga2{a2.data(), true, s.k2, false};
              const GemmOperand gb{b.data(), b.bf16, trans_b ? s.k : s.n, trans_b};
              const GemmOperand gb2{b2.data(), false, trans_b ? s.k2 : s.n, trans_b};
              ASSERT_TRUE(GemmBf16ConcatKRuns(path, s.k, ga, s.k2, ga2, result(got))) << what;
              GemmBf16ConcatK(pool, scratch, s.m, s.n, s.k, ga, gb, s.k2, ga2, gb2, beta,
                              result(got));
              if (c_bf16) {
                EXPECT_EQ(got.bits, want.bits) << what << (pool ? " 3 threads" : " serial");
              } else {
                EXPECT_EQ(std::memcmp(got.f32.data(), want.f32.data(), got.f32.size() * 4), 0)
                    << what << (pool ? " 3 threads" : " serial");
              }
            }
          }
        }
      }
    }
  }
}

TEST(GemmBf16ConcatK, RunsOnlyWithBothAsInPlaceWithinOneSlice) {
  const GemmOperand bf16_a{nullptr, true, 8, false};
  const GemmResult c{nullptr, true, 8};
  const GemmBf16Path path = GemmBf16Path::kAvx512Bf16;
  EXPECT_TRUE(GemmBf16ConcatKRuns(path, 512, bf16_a, 16, bf16_a, c));
  EXPECT_FALSE(GemmBf16ConcatKRuns(GemmBf16Path::kAvx512, 512, bf16_a, 16, bf16_a, c));
  EXPECT_FALSE(GemmBf16ConcatKRuns(path, 512, {nullptr, false, 8, false}, 16, bf16_a, c));
  EXPECT_FALSE(GemmBf16ConcatKRuns(path, 512, bf16_a, 16, {nullptr, true, 8, true}, c));
  EXPECT_FALSE(GemmBf16ConcatKRuns(path, kGemmBf16PairSlice, bf16_a, 16, bf16_a, c));
  EXPECT_FALSE(GemmBf16ConcatKRuns(path, 512, bf16_a, 0, bf16_a, c));
}

}  // namespace
}  // namespace air::engine
