// Adversarial tests for the bf16 GEMM (gemm_mixed.h) on every path this CPU can execute (the
// others are reported as skipped with the missing feature), against a double-precision loop
// over the bf16-rounded inputs (dtype.h's F32ToBf16): every transpose, F32 and BF16 operands
// and results, leading dimensions wider than the matrices, ragged m/n/k ending in partial
// micro-tiles, odd K (the pad of a bf16 pair), several K slices (the fp32 staging of a BF16
// C, over more than one row block), beta 0 over NaN, beta 1 and 0.5, K == 0, nothing written
// outside C, F32 inputs and BF16 results rounded to nearest even, and bit-identical results
// across repeats, thread counts, the serial entry point and a reused scratch. Each path's
// worst error is printed; the bounds hold it within 10x of what was measured. The narrow GEMM
// (gemm_narrow.h) has its own file, gemm_narrow_test.cc, over the same cases.
#include "engine/backend/cpu/gemm_mixed.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/backend/cpu/bf16_simd.h"
#include "engine/backend/cpu/convert.h"
#include "engine/backend/cpu/cpu_features.h"
#include "engine/backend/cpu/dropout_range.h"
#include "engine/dtype.h"
#include "gemm_test_cases.h"
#include "test_util.h"

// GCC 12 reports the deliberately undefined pass-through operand inside the unmasked AVX-512
// shift intrinsics as uninitialized (a false positive; as in vec_math.cc).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace air::engine {
namespace {

using namespace gemm_test;

Result RunGemm(GemmBf16Path path, ThreadPool* pool, GemmBf16Scratch& scratch, const Problem& p) {
  Result c = p.c;
  GemmBf16OnPath(path, pool, scratch, p.g.m, p.g.n, p.g.k, p.A(), p.B(), p.g.beta, c.View());
  return c;
}

// Shapes x transposes x betas, the operand dtypes rotating through all eight combinations.
std::vector<Case> Cases() {
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {1, 4100, 301},   // one row; two column blocks (the second 4 wide); odd K
      {37, 65, 513},    // odd K, ragged tiles; several fp32 slices
      {130, 47, 257},   // enough products to use the pool; odd K
      {9, 4129, 20},    // ragged micro-tiles in both directions across a block edge
      {300, 33, 64},    // many row tiles, one column tile
      {1030, 16, 517},  // at most 16 columns (avx512bf16's 16 x 16 tile), many row tiles
      {530, 600, 16},   // shallow (LoRA's rank-r update): C tiles as wide as C, many row tiles
      {45, 7, 4099},    // the same ragged, over several pair slices (a BF16 C staged)
      {20, 37, 4099}};  // several pair slices (a BF16 C staged), odd K
  std::vector<Case> cases;
  int combo = 0;
  ForTransposesAndBetas(shapes, [&](const Case& g) {
    const int c = combo++ % 8;
    cases.push_back({g.ta, g.tb, g.m, g.n, g.k, g.beta, (c & 1) != 0, (c & 2) != 0, (c & 4) != 0});
  });
  return cases;
}

// The problems of Cases() with their references, computed once for all paths.
struct Checked {
  Problem problem;
  Reference reference;
};
const std::vector<Checked>& CheckedCases() {
  static const std::vector<Checked>* cases = [] {
    auto* all = new std::vector<Checked>;
    uint64_t seed = 10;
    for (const Case& g : Cases()) {
      Problem p(g, seed += 3);
      Reference ref = Compute(p);
      all->push_back({std::move(p), std::move(ref)});
    }
    return all;
  }();
  return *cases;
}

class GemmBf16PathTest : public ::testing::TestWithParam<GemmBf16Path> {
 protected:
  void SetUp() override {
    std::string why;
    if (!GemmBf16PathRuns(GetParam(), &why)) {
      GTEST_SKIP() << "path " << GemmBf16PathName(GetParam()) << " not run on this CPU: " << why;
    }
  }
  GemmBf16Path path() const { return GetParam(); }
};

TEST_P(GemmBf16PathTest, MatchesDoubleReferenceOnBf16RoundedInputs) {
  ThreadPool pool(3);
  GemmBf16Scratch scratch;  // reused across every shape and dtype, deliberately
  double worst_f32 = 0.0, worst_bf16 = 0.0;
  for (const Checked& c : CheckedCases()) {
    const Problem& p = c.problem;
    const double worst =
        ExpectMatches(p, c.reference, RunGemm(path(), &pool, scratch, p), Describe(p.g));
    double& path_worst = p.g.c_bf16 ? worst_bf16 : worst_f32;
    path_worst = std::max(path_worst, worst);
  }
  std::printf("[ path %s ] worst error: F32 C %.3g (bound %.3g), BF16 C %.3g (bound %.3g)\n",
              GemmBf16PathName(path()), worst_f32, kF32Bound, worst_bf16, kBf16Bound);
}

TEST_P(GemmBf16PathTest, BitIdenticalAcrossRepeatsThreadCountsSerialAndReusedScratch) {
  ThreadPool one(1), three(3), sixteen(16);
  GemmBf16Scratch shared;
  uint64_t seed = 100;
  for (const Case& g : Cases()) {
    if (g.beta == 0.5f) continue;
    const Problem p(g, seed += 3);
    GemmBf16Scratch fresh;
    const Result first = RunGemm(path(), &three, fresh, p);
    EXPECT_TRUE(first.BitEqual(RunGemm(path(), &three, shared, p))) << "repeat " << Describe(g);
    // oneDNN splits its sums by the thread count (measured: 1, 3 and 16 threads give different
    // bits): the same bits for the same thread count only, which is what a run needs.
    if (path() == GemmBf16Path::kOneDnn) {
      ThreadPool other_three(3);
      EXPECT_TRUE(first.BitEqual(RunGemm(path(), &other_three, fresh, p))) << Describe(g);
      continue;
    }
    EXPECT_TRUE(first.BitEqual(RunGemm(path(), &sixteen, shared, p))) << "16 thr " << Describe(g);
    EXPECT_TRUE(first.BitEqual(RunGemm(path(), &one, shared, p))) << "1 thread " << Describe(g);
    EXPECT_TRUE(first.BitEqual(RunGemm(path(), nullptr, shared, p))) << "serial " << Describe(g);
  }
}

// More rows than one fp32 staging block holds (8 MiB: 512 rows of 4096 columns) over several K
// slices (of up to 2048 pairs on avx512bf16, 256 floats on the others): the BF16 C must be the
// F32 C's sums (the same additions in the same order) rounded once.
TEST_P(GemmBf16PathTest, StagedBf16ResultIsTheF32ResultRoundedOnce) {
  ThreadPool pool(2);
  GemmBf16Scratch scratch;
  const int64_t k = path() == GemmBf16Path::kAvx512Bf16 ? 2051 : 301;
  const Case g{false, true, 520, 4097, k, 0.0f, true, true, false};
  const Problem p(g, 7);
  const Result f32 = RunGemm(path(), &pool, scratch, p);
  Problem bf16_problem = p;
  bf16_problem.g.c_bf16 = true;
  bf16_problem.c = Result(bf16_problem.g, 9);
  const Result bf16 = RunGemm(path(), &pool, scratch, bf16_problem);
  int bad = 0;
  for (int64_t i = 0; i < g.m && bad < 5; ++i) {
    for (int64_t j = 0; j < g.n && bad < 5; ++j) {
      const size_t at = static_cast<size_t>(i * f32.ld + j);
      if (bf16.bits[at] != F32ToBf16(f32.f32[at])) {
        ++bad;
        ADD_FAILURE() << "C[" << i << "," << j << "]: bf16 " << bf16.bits[at] << ", f32 "
                      << f32.f32[at];
      }
    }
  }
}

// F32 inputs are rounded to bf16 to nearest, ties to even, as F32ToBf16: halfway values and
// their neighbours (NaN-free), as A (C = A e0) and as B (C = e0' B), in both layouts of each,
// 16 deep so that the vector packings see them.
TEST_P(GemmBf16PathTest, RoundsF32InputsToNearestEven) {
  std::vector<float> values;
  for (float base : {1.0f, -3.0f, 1e-20f, 6e30f}) {
    uint32_t bits;
    std::memcpy(&bits, &base, sizeof bits);
    for (uint32_t low : {0x8000u, 0x18000u, 0x7fffu, 0x8001u, 0xffffu, 0x10000u}) {
      const uint32_t u = (bits & 0xffff0000u) + low;
      float f;
      std::memcpy(&f, &u, sizeof f);
      values.push_back(f);
    }
  }
  const int64_t m = static_cast<int64_t>(values.size()), k = 16;
  // x (m, k): every column the values, every row of x' the same: op(x)[i][p] = values[i].
  std::vector<float> x(static_cast<size_t>(m * k)), xt(x.size());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) x[i * k + p] = xt[p * m + i] = values[i];
  }
  std::vector<float> e0(k, 0.0f);
  e0[0] = 1.0f;
  GemmBf16Scratch scratch;
  for (bool trans : {false, true}) {
    const GemmOperand values_op{trans ? xt.data() : x.data(), false, trans ? m : k, trans};
    std::vector<float> c(static_cast<size_t>(m), NAN);
    GemmBf16OnPath(path(), nullptr, scratch, m, 1, k, values_op, {e0.data(), false, 1, false}, 0.0f,
                   {c.data(), false, 1});  // C (m, 1) = op(x) e0
    for (int64_t i = 0; i < m; ++i) {
      EXPECT_EQ(c[i], Bf16ToF32(F32ToBf16(values[i]))) << "A, trans " << trans << ": " << values[i];
    }
    // op(B) (k, m) = op(x)': B stored (k, m) is x', transposed (m, k) is x.
    const GemmOperand values_b{trans ? x.data() : xt.data(), false, trans ? k : m, trans};
    std::fill(c.begin(), c.end(), NAN);
    GemmBf16OnPath(path(), nullptr, scratch, 1, m, k, {e0.data(), false, k, false}, values_b, 0.0f,
                   {c.data(), false, m});  // C (1, m) = e0' op(B)
    for (int64_t i = 0; i < m; ++i) {
      EXPECT_EQ(c[i], Bf16ToF32(F32ToBf16(values[i]))) << "B, trans " << trans << ": " << values[i];
    }
  }
}

// A BF16 C is its fp32 sum rounded once, to nearest, ties to even, a NaN kept: sums x + y of
// bf16 values that are exact in fp32 but fall on, below and above bf16 halfway points (k == 2,
// B all ones: 16 equal columns, so that the vector stores see them), with beta 0 and with
// beta 1 over a C that adds nothing (C == 0).
TEST_P(GemmBf16PathTest, RoundsBf16ResultsToNearestEven) {
  const std::vector<std::pair<float, float>> sums = {
      {1.0f, 0x1p-8f},      {1.0f, 0x3p-9f},   {1.0f, 0x1p-9f},
      {0x1.02p0f, 0x1p-8f}, {-1.0f, -0x1p-8f}, {-0x1.02p0f, -0x1p-8f},
      {256.0f, 1.0f},       {257.0f, 0.5f},    {0x1.fep127f, 0x1p120f},
      {NAN, 1.0f},          {3.0f, -3.0f},     {1e-30f, 0x1p-108f}};
  const int64_t m = static_cast<int64_t>(sums.size()), n = 16;
  std::vector<uint16_t> a;
  for (auto [x, y] : sums) a.insert(a.end(), {F32ToBf16(x), F32ToBf16(y)});
  const std::vector<uint16_t> ones(2 * n, F32ToBf16(1.0f));
  GemmBf16Scratch scratch;
  for (float beta : {0.0f, 1.0f}) {
    std::vector<uint16_t> c(static_cast<size_t>(m * n), beta == 0.0f ? kBf16Sentinel : 0);
    GemmBf16OnPath(path(), nullptr, scratch, m, n, 2, {a.data(), true, 2, false},
                   {ones.data(), true, n, false}, beta, {c.data(), true, n});
    for (int64_t i = 0; i < m; ++i) {
      const float sum = Bf16ToF32(a[2 * i]) + Bf16ToF32(a[2 * i + 1]);
      for (int64_t j = 0; j < n; ++j) {
        EXPECT_EQ(c[i * n + j], F32ToBf16(sum)) << "beta " << beta << ", column " << j << ": "
                                                << sums[i].first << " + " << sums[i].second;
      }
    }
  }
}

// LoRA's dropout inside the bf16 GEMM (FastOps::GemmDropped, GemmAddDropped): on the
// avx512bf16 path only (the others never get a mask), p 0.3, serially and on 3 threads.
class GemmBf16Dropped : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!GemmBf16PathRuns(path, &why)) GTEST_SKIP() << "avx512bf16 not run on this CPU: " << why;
  }
  const GemmBf16Path path = GemmBf16Path::kAvx512Bf16;
  ThreadPool three{3};
  GemmBf16Scratch scratch;
  const float p = 0.3f, scale = 1.0f / (1.0f - p);
};

// A dropped operand (GemmOperand::drop_bits): the product equals the one on the operand
// ApplyDropoutMask writes, bit for bit, whichever operand, transpose and dtype, the mask over
// the stored matrix's every element (its padding too).
TEST_F(GemmBf16Dropped, DroppedOperandIsTheProductOfTheMaskedOperand) {
  uint64_t seed = 500;
  for (const Case& g : Cases()) {
    if (g.beta == 0.5f) continue;
    for (bool drop_b : {false, true}) {
      Problem dropped(g, seed += 3);
      Stored& x = drop_b ? dropped.b : dropped.a;
      const int64_t n = x.rows * x.ld;
      std::vector<uint8_t> bits(static_cast<size_t>((n + 7) / 8));
      DropoutMaskRange(p, seed, 0, n, bits.data());
      // The operand ApplyDropoutMask writes, in the operand's dtype.
      Problem masked = dropped;
      Stored& y = drop_b ? masked.b : masked.a;
      if (x.bf16) {
        ApplyDropoutMaskRangeBf16(x.bits.data(), bits.data(), scale, n, y.bits.data());
      } else {
        ApplyDropoutMaskRange(x.f32.data(), bits.data(), scale, false, n, y.f32.data());
      }
      for (ThreadPool* pool : {&three, static_cast<ThreadPool*>(nullptr)}) {
        const Result want = RunGemm(path, pool, scratch, masked);
        GemmOperand a = dropped.A(), b = dropped.B();
        GemmOperand& d = drop_b ? b : a;
        d.drop_bits = bits.data();
        d.drop_bytes = static_cast<int64_t>(bits.size());
        d.drop_scale = scale;
        Result got = dropped.c;
        GemmBf16OnPath(path, pool, scratch, g.m, g.n, g.k, a, b, g.beta, got.View());
        EXPECT_TRUE(got.BitEqual(want)) << (drop_b ? "B" : "A") << " dropped, "
                                        << (pool ? "3 threads " : "serial ") << Describe(g);
      }
    }
  }
}

// A kept-mask add (GemmResult::kept_bits, LoRA's input gradient): C gets what ApplyDropoutMask
// accumulates of the product (the product into an fp32 t with beta 0, then C + (bit ? t *
// scale : 0) element by element, a BF16 C widened and rounded once), bit for bit, the mask over
// C's flat elements (its padding too, never written), every transpose, operand and C dtype.
TEST_F(GemmBf16Dropped, KeptAddIsApplyDropoutMaskAccumulatingTheProduct) {
  uint64_t seed = 700;
  for (const Case& g : Cases()) {
    if (g.beta != 1.0f || g.k > kGemmBf16PairSlice) continue;
    const Problem problem(g, seed += 3);
    const int64_t n = g.m * problem.c.ld;
    std::vector<uint8_t> bits(static_cast<size_t>((n + 7) / 8));
    DropoutMaskRange(p, seed, 0, n, bits.data());
    for (ThreadPool* pool : {&three, static_cast<ThreadPool*>(nullptr)}) {
      Case product_case = g;  // the product in fp32, beta 0
      product_case.beta = 0.0f;
      product_case.c_bf16 = false;
      const Result t = RunGemm(path, pool, scratch, Problem(product_case, seed));
      Result want = problem.c;
      for (int64_t i = 0; i < g.m; ++i) {
        for (int64_t j = 0; j < g.n; ++j) {
          const auto e = static_cast<size_t>(i * problem.c.ld + j);
          const bool keep = (bits[e / 8] >> (e % 8)) & 1u;
          const float added = keep ? t.f32[e] * scale : 0.0f;
          if (g.c_bf16) {  // a BF16 C: widened, added, rounded once
            want.bits[e] = F32ToBf16(Bf16ToF32(want.bits[e]) + added);
          } else {
            want.f32[e] += added;
          }
        }
      }
      Result got = problem.c;
      GemmResult c = got.View();
      c.kept_bits = bits.data();
      c.kept_bytes = static_cast<int64_t>(bits.size());
      c.kept_scale = scale;
      GemmBf16OnPath(path, pool, scratch, g.m, g.n, g.k, problem.A(), problem.B(), 1.0f, c);
      EXPECT_TRUE(got.BitEqual(want)) << (pool ? "3 threads " : "serial ") << Describe(g);
    }
  }
}

TEST_P(GemmBf16PathTest, KZeroScalesCAndMZeroWritesNothing) {
  GemmBf16Scratch scratch;
  const float a = 1.0f;
  std::vector<float> c32 = {2.0f, NAN};
  std::vector<uint16_t> c16 = {F32ToBf16(3.0f), kBf16Sentinel};
  GemmBf16OnPath(path(), nullptr, scratch, 1, 1, 0, {&a, false, 1, false}, {&a, false, 1, false},
                 0.5f, {c32.data(), false, 2});
  GemmBf16OnPath(path(), nullptr, scratch, 1, 1, 0, {&a, false, 1, false}, {&a, false, 1, false},
                 0.5f, {c16.data(), true, 2});
  EXPECT_EQ(c32[0], 1.0f);
  EXPECT_EQ(Bf16ToF32(c16[0]), 1.5f);
  c32[0] = NAN;
  GemmBf16OnPath(path(), nullptr, scratch, 1, 1, 0, {&a, false, 1, false}, {&a, false, 1, false},
                 0.0f, {c32.data(), false, 2});
  EXPECT_EQ(c32[0], 0.0f);  // beta 0 ignores the NaN
  GemmBf16OnPath(path(), nullptr, scratch, 0, 1, 5, {&a, false, 1, false}, {&a, false, 1, false},
                 0.0f, {c32.data(), false, 2});
  EXPECT_EQ(c32[0], 0.0f);
  EXPECT_TRUE(std::isnan(c32[1]));
  EXPECT_EQ(c16[1], kBf16Sentinel);
}

INSTANTIATE_TEST_SUITE_P(Paths, GemmBf16PathTest,
                         ::testing::Values(GemmBf16Path::kGeneric, GemmBf16Path::kAvx2,
                                           GemmBf16Path::kAvx512, GemmBf16Path::kAvx512Bf16,
                                           GemmBf16Path::kOneDnn),
                         [](const ::testing::TestParamInfo<GemmBf16Path>& info) {
                           return std::string(GemmBf16PathName(info.param));
                         });

// avx512bf16's 16 x 16 tile for products of at most 16 columns gives each element the sums of the
// 8 x 32 tile in the same order: the first n columns of a 48-column product, bit for bit (every
// transpose, F32 and BF16 A and C, beta 0 and 1, ragged rows, one and several pair slices).
TEST(GemmBf16, TheNarrowTileGivesTheWideTilesBits) {
  std::string why;
  if (!GemmBf16PathRuns(GemmBf16Path::kAvx512Bf16, &why)) {
    GTEST_SKIP() << "path avx512bf16 not run on this CPU: " << why;
  }
  ThreadPool pool(3);
  GemmBf16Scratch scratch;
  constexpr int64_t kWide = 48;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto values = [&](int64_t count) {
    std::vector<float> v(static_cast<size_t>(count));
    for (float& x : v) x = WidenBf16(RoundToBf16(u(rng)));  // exact in bf16
    return v;
  };
  auto bf16_of = [](const std::vector<float>& v) {
    std::vector<uint16_t> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = RoundToBf16(v[i]);
    return out;
  };
  for (auto [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1, 1}, {45, 7, 33}, {1030, 16, 517}, {45, 16, 4099}}) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        for (int a_bf16 = 0; a_bf16 < 2; ++a_bf16) {
          for (int c_bf16 = 0; c_bf16 < 2; ++c_bf16) {
            for (float beta : {0.0f, 1.0f}) {
              const std::vector<float> a = values(m * k), b = values(k * kWide);
              const std::vector<float> c0 = values(m * kWide);
              const std::vector<uint16_t> a16 = bf16_of(a), b16 = bf16_of(b);
              const GemmOperand ga{a_bf16 ? static_cast<const void*>(a16.data()) : a.data(),
                                   a_bf16 != 0, ta ? m : k, ta != 0};
              // op(B)'s first n columns: the same memory, the same ld.
              const GemmOperand gb{b16.data(), true, tb ? k : kWide, tb != 0};
              std::vector<float> wide = c0, narrow(static_cast<size_t>(m * n));
              for (int64_t i = 0; i < m; ++i) {
                for (int64_t j = 0; j < n; ++j) narrow[i * n + j] = c0[i * kWide + j];
              }
              std::vector<uint16_t> wide16 = bf16_of(wide), narrow16 = bf16_of(narrow);
              const GemmResult cw{c_bf16 ? static_cast<void*>(wide16.data()) : wide.data(),
                                  c_bf16 != 0, kWide};
              const GemmResult cn{c_bf16 ? static_cast<void*>(narrow16.data()) : narrow.data(),
                                  c_bf16 != 0, n};
              GemmBf16OnPath(GemmBf16Path::kAvx512Bf16, &pool, scratch, m, kWide, k, ga, gb, beta,
                             cw);
              GemmBf16OnPath(GemmBf16Path::kAvx512Bf16, &pool, scratch, m, n, k, ga, gb, beta, cn);
              for (int64_t i = 0; i < m; ++i) {
                for (int64_t j = 0; j < n; ++j) {
                  const size_t w = static_cast<size_t>(i * kWide + j),
                               x = static_cast<size_t>(i * n + j);
                  const bool same = c_bf16 ? wide16[w] == narrow16[x]
                                           : std::memcmp(&wide[w], &narrow[x], sizeof(float)) == 0;
                  ASSERT_TRUE(same) << "m " << m << " n " << n << " k " << k << " ta " << ta
                                    << " tb " << tb << " a_bf16 " << a_bf16 << " c_bf16 " << c_bf16
                                    << " beta " << beta << " at " << i << "," << j;
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(GemmBf16, TheSelectedPathIsTheSelectedKernelLevelAndRuns) {
  EXPECT_STREQ(GemmBf16PathName(SelectedGemmBf16Path()), CpuKernelsName(SelectedCpuKernels()));
  std::string why;
  EXPECT_TRUE(GemmBf16PathRuns(SelectedGemmBf16Path(), &why)) << why;
  std::printf("[ cpu ] detected %s, selected %s\n", CpuKernelsName(DetectedCpuKernels()),
              CpuKernelsName(SelectedCpuKernels()));
}

}  // namespace
}  // namespace air::engine
