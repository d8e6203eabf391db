// The narrow GEMM (gemm_narrow.h: a side of at most 16, LoRA's rank-r products) against a
// double-precision loop: its fp32 form on F32 operands as they are, its bf16 form on every dtype
// pattern rounded to bf16, every transpose and beta, ragged tiles, an F32 and a BF16 C, the same
// bits on 1, 3 and 16 threads (the cases and reference of gemm_test_cases.h).
#include "engine/backend/cpu/gemm_narrow.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/backend/cpu/cpu_features.h"
#include "gemm_test_cases.h"

namespace air::engine {
namespace {

using namespace gemm_test;

// Shapes with a side of at most 16 (LoRA's rank-16 products and their edges) x transposes x
// betas x an F32 and a BF16 C; F32 operands.
std::vector<Case> NarrowCases() {
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {1000, 16, 300},  // N = 16: the down product x A^T over 1000 tokens (125 tiles of 8)
      {77, 5, 64},      // N < 16, a ragged last tile
      {16, 600, 1000},  // M = 16: the adapter gradient du^T x
      {3, 257, 33},     // M < 16, odd everything
      {1000, 520, 16},  // K = 16: the up product u B^T (strips of 64, a ragged last one)
      {77, 1000, 1},    // K = 1
      {16, 16, 16},     // all three narrow
      {9, 20, 7}};
  std::vector<Case> cases;
  ForTransposesAndBetas(shapes, [&](const Case& g) {
    for (bool c_bf16 : {false, true}) {
      cases.push_back({g.ta, g.tb, g.m, g.n, g.k, g.beta, false, false, c_bf16});
    }
  });
  return cases;
}

// The fp32 form (F32 operands as they are), or with `bf16` the bf16 form (any dtypes, rounded).
Result RunNarrow(ThreadPool& pool, NarrowGemmScratch& scratch, const Problem& p,
                 bool bf16 = false) {
  Result c = p.c;
  if (bf16) {
    NarrowGemmBf16(pool, scratch, p.g.m, p.g.n, p.g.k, p.A(), p.B(), p.g.beta, c.View());
  } else {
    NarrowGemm(pool, scratch, p.g.ta, p.g.tb, p.g.m, p.g.n, p.g.k, p.a.f32.data(), p.a.ld,
               p.b.f32.data(), p.b.ld, p.g.beta, c.View());
  }
  return c;
}

TEST(NarrowGemm, MatchesDoubleReferenceAndIsBitIdenticalAcrossThreadCounts) {
  if (!NarrowGemmApplies(16, 16, 16)) {
    GTEST_SKIP() << "the narrow GEMM runs with AVX-512 kernels only; kernels here: "
                 << CpuKernelsName(SelectedCpuKernels());
  }
  ThreadPool one(1), three(3), sixteen(16);
  NarrowGemmScratch scratch;  // reused across every shape and dtype, deliberately
  double worst[2] = {};       // [BF16 C]
  uint64_t seed = 500;
  for (const Case& g : NarrowCases()) {
    const Problem p(g, seed += 3);
    const std::string what = Describe(g);
    const Result got = RunNarrow(three, scratch, p);
    worst[g.c_bf16] = std::max(worst[g.c_bf16], ExpectMatches(p, Compute(p, false), got, what));
    EXPECT_TRUE(got.BitEqual(RunNarrow(one, scratch, p))) << "1 thread " << what;
    EXPECT_TRUE(got.BitEqual(RunNarrow(sixteen, scratch, p))) << "16 threads " << what;
  }
  std::printf("[ narrow ] worst error: F32 C %.3g (bound %.3g), BF16 C %.3g (bound %.3g)\n",
              worst[0], kF32Bound, worst[1], kBf16Bound);
}

// The bf16 form (the avx512 conversion path's narrow products): every dtype pattern of A and B,
// each element taken as bf16 (the F32 ones rounded), against the double reference on the rounded
// inputs (an F32 operand not rounded would miss it by ~1e-3, past the F32 bound); the same bits
// on 1, 3 and 16 threads.
TEST(NarrowGemm, Bf16FormMatchesTheReferenceOnBf16RoundedInputsForEveryDtype) {
  if (!NarrowGemmApplies(16, 16, 16)) {
    GTEST_SKIP() << "the narrow GEMM runs with AVX-512 kernels only; kernels here: "
                 << CpuKernelsName(SelectedCpuKernels());
  }
  ThreadPool one(1), three(3), sixteen(16);
  NarrowGemmScratch scratch;
  double worst[2] = {};
  uint64_t seed = 900;
  int checked = 0;
  for (Case g : NarrowCases()) {
    for (const auto& [a_bf16, b_bf16] :
         {std::pair{true, true}, {true, false}, {false, true}, {false, false}}) {
      g.a_bf16 = a_bf16;
      g.b_bf16 = b_bf16;
      const Problem p(g, seed += 3);
      const std::string what = Describe(g);
      const Result got = RunNarrow(three, scratch, p, true);
      worst[g.c_bf16] = std::max(worst[g.c_bf16], ExpectMatches(p, Compute(p, true), got, what));
      EXPECT_TRUE(got.BitEqual(RunNarrow(one, scratch, p, true))) << "1 thread " << what;
      EXPECT_TRUE(got.BitEqual(RunNarrow(sixteen, scratch, p, true))) << "16 threads " << what;
      ++checked;
    }
  }
  std::printf(
      "[ narrow bf16 ] %d products, worst error: F32 C %.3g (bound %.3g), BF16 C %.3g "
      "(bound %.3g)\n",
      checked, worst[0], kF32Bound, worst[1], kBf16Bound);
}

TEST(NarrowGemm, AppliesToASideOfAtMost16WithAvx512KernelsOnly) {
  const bool avx512 = UseAvx512();
  EXPECT_EQ(NarrowGemmApplies(1024, 16, 512), avx512);
  EXPECT_EQ(NarrowGemmApplies(16, 512, 1024), avx512);
  EXPECT_EQ(NarrowGemmApplies(1024, 512, 16), avx512);
  EXPECT_FALSE(NarrowGemmApplies(1024, 17, 17));
  EXPECT_FALSE(NarrowGemmApplies(17, 512, 1024));
  EXPECT_FALSE(NarrowGemmApplies(16, 16, 0));  // K == 0 scales C: FastOps's other paths
  EXPECT_FALSE(NarrowGemmApplies(0, 16, 16));
}

}  // namespace
}  // namespace air::engine
