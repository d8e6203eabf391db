// The cases, stored operands and double-precision reference shared by the CPU GEMM tests
// (gemm_mixed_test.cc: the bf16 GEMM on every path; gemm_narrow_test.cc: the narrow GEMM): a
// Case's shape, transposes, beta and dtypes; operands with padded leading dimensions and the
// bf16-rounded value the GEMM must see; C with NaN padding and its bit-exact comparison; the
// reference and the error metric with its bounds.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend/cpu/gemm_mixed.h"
#include "engine/dtype.h"
#include "test_util.h"

namespace air::engine::gemm_test {

using testing::RandomVector;

constexpr int64_t kPad = 3;                 // extra columns of every stored matrix
constexpr uint16_t kBf16Sentinel = 0x7fa5;  // a NaN's bits: C's padding, and C when beta == 0

// The worst errors measured (worst over paths, shapes and dtypes, with this file's data):
// F32 C 1.2e-7 relative to sum |a b| + |beta c|; BF16 C: within bf16's half ulp, 2^-8
// relative. The bounds: 10x the first; the second is the rounding's own bound plus slack.
constexpr double kF32Bound = 1.2e-6;
constexpr double kBf16Bound = 1.05 / 256;

struct Case {
  bool ta, tb;
  int64_t m, n, k;
  float beta;
  bool a_bf16, b_bf16, c_bf16;
};

inline std::string Describe(const Case& g) {
  return "ta=" + std::to_string(g.ta) + " tb=" + std::to_string(g.tb) +
         " m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
         " beta=" + std::to_string(g.beta) + " A " + (g.a_bf16 ? "BF16" : "F32") + " B " +
         (g.b_bf16 ? "BF16" : "F32") + " C " + (g.c_bf16 ? "BF16" : "F32");
}

// A stored matrix of F32 or BF16 elements with kPad extra columns, and the bf16-rounded value
// of each element as the GEMM must see it.
struct Stored {
  int64_t rows, cols, ld;
  bool bf16;
  std::vector<float> f32;
  std::vector<uint16_t> bits;
  std::vector<double> seen;

  Stored(int64_t r, int64_t c, bool is_bf16, uint64_t seed)
      : rows(r), cols(c), ld(c + kPad), bf16(is_bf16) {
    f32 = RandomVector(static_cast<size_t>(rows * ld), seed);
    bits.resize(f32.size());
    seen.resize(f32.size());
    for (size_t i = 0; i < f32.size(); ++i) {
      bits[i] = F32ToBf16(f32[i]);
      seen[i] = Bf16ToF32(bits[i]);
    }
  }
  const void* data() const { return bf16 ? static_cast<const void*>(bits.data()) : f32.data(); }
};

// C (with kPad columns): F32 or BF16; NaN where beta must be ignored and in the padding.
struct Result {
  int64_t ld;
  bool bf16;
  std::vector<float> f32;
  std::vector<uint16_t> bits;

  Result(const Case& g, uint64_t seed) : ld(g.n + kPad), bf16(g.c_bf16) {
    f32 = RandomVector(static_cast<size_t>(g.m * ld), seed);
    bits.resize(f32.size());
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < ld; ++j) {
        const size_t at = static_cast<size_t>(i * ld + j);
        if (j >= g.n || g.beta == 0.0f) f32[at] = NAN;
        bits[at] = j >= g.n || g.beta == 0.0f ? kBf16Sentinel : F32ToBf16(f32[at]);
      }
    }
  }
  double At(int64_t i, int64_t j) const {
    const size_t at = static_cast<size_t>(i * ld + j);
    return bf16 ? Bf16ToF32(bits[at]) : f32[at];
  }
  GemmResult View() { return {bf16 ? static_cast<void*>(bits.data()) : f32.data(), bf16, ld}; }
  bool BitEqual(const Result& other) const {
    return bf16 ? bits == other.bits
                : std::memcmp(f32.data(), other.f32.data(), f32.size() * sizeof(float)) == 0;
  }
};

struct Problem {
  Case g;
  Stored a, b;
  Result c;
  Problem(const Case& cs, uint64_t seed)
      : g(cs),
        a(cs.ta ? cs.k : cs.m, cs.ta ? cs.m : cs.k, cs.a_bf16, seed),
        b(cs.tb ? cs.n : cs.k, cs.tb ? cs.k : cs.n, cs.b_bf16, seed + 1),
        c(cs, seed + 2) {}
  GemmOperand A() const { return {a.data(), a.bf16, a.ld, g.ta}; }
  GemmOperand B() const { return {b.data(), b.bf16, b.ld, g.tb}; }
};

// The double-precision result of a problem (m x n) and the scale of each element's sum,
// sum |a b| + |beta c|.
struct Reference {
  std::vector<double> value, scale;
};

// `rounded`: the inputs as bf16 math sees them (else as stored: fp32 math on F32 operands).
inline Reference Compute(const Problem& p, bool rounded = true) {
  const Case& g = p.g;
  const std::vector<double> a_f32(p.a.f32.begin(), p.a.f32.end());
  const std::vector<double> b_f32(p.b.f32.begin(), p.b.f32.end());
  const std::vector<double>& a_seen = rounded ? p.a.seen : a_f32;
  const std::vector<double>& b_seen = rounded ? p.b.seen : b_f32;
  Reference ref;
  ref.value.resize(static_cast<size_t>(g.m * g.n));
  ref.scale.resize(ref.value.size());
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      double sum = 0.0, abs_sum = 0.0;
      for (int64_t q = 0; q < g.k; ++q) {
        const double av = g.ta ? a_seen[q * p.a.ld + i] : a_seen[i * p.a.ld + q];
        const double bv = g.tb ? b_seen[j * p.b.ld + q] : b_seen[q * p.b.ld + j];
        sum += av * bv;
        abs_sum += std::fabs(av * bv);
      }
      if (g.beta != 0.0f) {
        sum += g.beta * p.c.At(i, j);
        abs_sum += std::fabs(g.beta * p.c.At(i, j));
      }
      ref.value[static_cast<size_t>(i * g.n + j)] = sum;
      ref.scale[static_cast<size_t>(i * g.n + j)] = abs_sum;
    }
  }
  return ref;
}

// Checks got against the reference; returns the worst error (F32 or BF16 metric).
inline double ExpectMatches(const Problem& p, const Reference& ref, const Result& got,
                            const std::string& what) {
  const Case& g = p.g;
  double worst = 0.0;
  int bad = 0;
  for (int64_t i = 0; i < g.m && bad < 5; ++i) {
    for (int64_t j = 0; j < got.ld && bad < 5; ++j) {
      const size_t at = static_cast<size_t>(i * got.ld + j);
      if (j >= g.n) {  // padding: untouched
        const bool same = got.bf16 ? got.bits[at] == kBf16Sentinel : std::isnan(got.f32[at]);
        if (!same) ++bad;
        EXPECT_TRUE(same) << what << ": wrote padding at " << i << "," << j;
        continue;
      }
      const double want = ref.value[static_cast<size_t>(i * g.n + j)];
      const double scale = ref.scale[static_cast<size_t>(i * g.n + j)];
      const double v = got.At(i, j), diff = std::fabs(v - want);
      // F32 C: the fp32 sums' error relative to their scale. BF16 C: the final rounding's,
      // relative to the value (the fp32 error counts against 1e-4 of the scale near zero).
      const double error =
          got.bf16 ? diff / (std::fabs(want) + 1e-4 * scale + 1e-30) : diff / (scale + 1e-30);
      if (!(error <= (got.bf16 ? kBf16Bound : kF32Bound))) {
        ++bad;
        ADD_FAILURE() << what << ": C[" << i << "," << j << "] = " << v << ", want " << want
                      << " (error " << error << ")";
      }
      worst = std::max(worst, std::isnan(error) ? 1e30 : error);
    }
  }
  return worst;
}

// Calls add(case) for each shape x (trans_a, trans_b) x beta (0, 1, 0.5), F32 dtypes.
template <typename Add>
void ForTransposesAndBetas(const std::vector<std::tuple<int64_t, int64_t, int64_t>>& shapes,
                           Add add) {
  for (auto [m, n, k] : shapes) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        for (float beta : {0.0f, 1.0f, 0.5f})
          add(Case{ta != 0, tb != 0, m, n, k, beta, false, false, false});
      }
    }
  }
}

}  // namespace air::engine::gemm_test
