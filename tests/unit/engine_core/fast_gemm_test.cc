// Adversarial tests for FastGemm / FastGemmSerial (fast_gemm.h) against a double-precision
// loop: every transpose, leading dimensions wider than the matrices, ragged m/n/k that end in
// partial micro-tiles, several K slices and column blocks, beta 0 over NaN and beta != 0,
// nothing written outside C, and bit-identical results across repeats, thread counts, the
// serial entry point and a scratch reused over different shapes.
#include "engine/backend/cpu/fast_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "test_util.h"

namespace air::engine {
namespace {

using testing::RandomVector;

struct Case {
  bool ta, tb;
  int64_t m, n, k;
  float beta;
};

struct Operands {
  int64_t lda, ldb, ldc;
  std::vector<float> a, b, c;
};

constexpr int64_t kPad = 3;

Operands MakeOperands(const Case& g, uint64_t seed) {
  Operands o;
  const int64_t a_rows = g.ta ? g.k : g.m, a_cols = g.ta ? g.m : g.k;
  const int64_t b_rows = g.tb ? g.n : g.k, b_cols = g.tb ? g.k : g.n;
  o.lda = a_cols + kPad;
  o.ldb = b_cols + kPad;
  o.ldc = g.n + kPad;
  o.a = RandomVector(static_cast<size_t>(a_rows * o.lda), seed);
  o.b = RandomVector(static_cast<size_t>(b_rows * o.ldb), seed + 1);
  o.c = RandomVector(static_cast<size_t>(g.m * o.ldc), seed + 2);
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < o.ldc; ++j) {
      // NaN where beta must be ignored and in the padding that must not be touched.
      if (j >= g.n || g.beta == 0.0f) o.c[static_cast<size_t>(i * o.ldc + j)] = NAN;
    }
  }
  return o;
}

std::vector<double> Reference(const Case& g, const Operands& o) {
  std::vector<double> want(static_cast<size_t>(g.m * g.n));
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      double s = 0.0;
      for (int64_t p = 0; p < g.k; ++p) {
        const float av = g.ta ? o.a[p * o.lda + i] : o.a[i * o.lda + p];
        const float bv = g.tb ? o.b[j * o.ldb + p] : o.b[p * o.ldb + j];
        s += static_cast<double>(av) * bv;
      }
      if (g.beta != 0.0f) s += static_cast<double>(g.beta) * o.c[i * o.ldc + j];
      want[static_cast<size_t>(i * g.n + j)] = s;
    }
  }
  return want;
}

void ExpectMatches(const Case& g, const Operands& o, const std::vector<float>& got,
                   const std::string& what) {
  const std::vector<double> want = Reference(g, o);
  const double tol = 1e-5 * std::sqrt(static_cast<double>(g.k) + 1.0) * 4.0;
  int bad = 0;
  for (int64_t i = 0; i < g.m && bad < 5; ++i) {
    for (int64_t j = 0; j < o.ldc && bad < 5; ++j) {
      const float v = got[static_cast<size_t>(i * o.ldc + j)];
      if (j >= g.n) {
        if (!std::isnan(v)) ++bad;
        EXPECT_TRUE(std::isnan(v)) << what << ": wrote padding at " << i << "," << j;
        continue;
      }
      const double w = want[static_cast<size_t>(i * g.n + j)];
      if (!(std::fabs(v - w) <= tol * (1.0 + std::fabs(w)))) {
        ++bad;
        ADD_FAILURE() << what << ": C[" << i << "," << j << "] = " << v << ", want " << w;
      }
    }
  }
}

std::string Describe(const Case& g) {
  return "ta=" + std::to_string(g.ta) + " tb=" + std::to_string(g.tb) +
         " m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
         " beta=" + std::to_string(g.beta);
}

std::vector<float> RunPooled(ThreadPool& pool, GemmScratch& scratch, const Case& g,
                             const Operands& o) {
  std::vector<float> c = o.c;
  FastGemm(pool, scratch, g.ta, g.tb, g.m, g.n, g.k, o.a.data(), o.lda, o.b.data(), o.ldb, g.beta,
           c.data(), o.ldc);
  return c;
}

bool BitEqual(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {1, 4100, 300},  // one row, two column blocks (the second 4 wide), two K slices
      {37, 65, 513},   // three K slices, the last one deep
      {130, 47, 257},  // a K slice of depth 1; enough products to use the pool
      {9, 4129, 20},   // ragged micro-tiles in both directions across a block edge
      {300, 33, 64},   // many row tiles, one column tile
      // At most 16 columns (one AVX2 column panel: A read in place there), three K slices,
      // a ragged last row tile; and a narrow one with 5 rows, 5 columns.
      {100, 16, 600},
      {5, 5, 40}};
  for (auto [m, n, k] : shapes) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        for (float beta : {0.0f, 1.0f, 0.5f}) cases.push_back({ta != 0, tb != 0, m, n, k, beta});
      }
    }
  }
  return cases;
}

TEST(FastGemm, MatchesDoubleReferenceOnEveryEdge) {
  ThreadPool pool(5);
  GemmScratch scratch;  // reused across every shape, deliberately
  uint64_t seed = 10;
  for (const Case& g : Cases()) {
    const Operands o = MakeOperands(g, seed += 3);
    ExpectMatches(g, o, RunPooled(pool, scratch, g, o), "pooled " + Describe(g));
  }
}

TEST(FastGemm, BitIdenticalAcrossRepeatsThreadCountsSerialAndReusedScratch) {
  ThreadPool one(1), three(3), sixteen(16);
  GemmScratch shared;
  uint64_t seed = 100;
  for (const Case& g : Cases()) {
    if (g.beta == 0.5f) continue;
    const Operands o = MakeOperands(g, seed += 3);
    GemmScratch fresh;
    const std::vector<float> first = RunPooled(three, fresh, g, o);
    EXPECT_TRUE(BitEqual(first, RunPooled(three, shared, g, o))) << "repeat " << Describe(g);
    EXPECT_TRUE(BitEqual(first, RunPooled(sixteen, shared, g, o))) << "16 thr " << Describe(g);
    EXPECT_TRUE(BitEqual(first, RunPooled(one, shared, g, o))) << "1 thread " << Describe(g);
    std::vector<float> serial = o.c;
    FastGemmSerial(shared, g.ta, g.tb, g.m, g.n, g.k, o.a.data(), o.lda, o.b.data(), o.ldb, g.beta,
                   serial.data(), o.ldc);
    EXPECT_TRUE(BitEqual(first, serial)) << "serial " << Describe(g);
  }
}

TEST(FastGemm, SerialCallsInsidePoolTasksWithTheirOwnScratch) {
  ThreadPool pool(4);
  std::vector<GemmScratch> scratch(4);
  const Case g{false, true, 40, 70, 300, 1.0f};
  std::vector<Operands> ops;
  for (int t = 0; t < 8; ++t) ops.push_back(MakeOperands(g, 500 + 7 * t));
  std::vector<std::vector<float>> got(8);
  pool.ParallelFor(8, 1, [&](int64_t begin, int64_t end, int thread) {
    for (int64_t t = begin; t < end; ++t) {
      const Operands& o = ops[static_cast<size_t>(t)];
      std::vector<float> c = o.c;
      FastGemmSerial(scratch[static_cast<size_t>(thread)], g.ta, g.tb, g.m, g.n, g.k, o.a.data(),
                     o.lda, o.b.data(), o.ldb, g.beta, c.data(), o.ldc);
      got[static_cast<size_t>(t)] = std::move(c);
    }
  });
  for (int t = 0; t < 8; ++t) ExpectMatches(g, ops[t], got[t], "task " + std::to_string(t));
}

}  // namespace
}  // namespace air::engine
