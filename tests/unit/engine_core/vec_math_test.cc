// Tests for the vectorized exponentials (vec_math.h) against std::exp: accuracy over the range
// softmax and SiLU use, the ends (-inf gives 0, overflow gives inf, NaN stays NaN), ragged
// lengths that end in a partial vector, and the in-place and sum-only forms.
#include "engine/backend/cpu/vec_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/backend/cpu/cpu_features.h"

namespace air::engine {
namespace {

float RelError(float got, float want) {
  if (want == 0.0f) return std::fabs(got);
  return std::fabs(got - want) / std::fabs(want);
}

TEST(VecMath, ExpMatchesStdExpAcrossTheRange) {
  std::vector<float> x;
  for (float v = -87.0f; v <= 88.0f; v += 0.0137f) x.push_back(v);
  std::vector<float> out(x.size());
  const double sum = ExpShifted(x.data(), 0.0f, 1.0f, static_cast<int64_t>(x.size()), out.data());
  double want_sum = 0.0;
  float worst = 0.0f;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = std::exp(x[i]);
    want_sum += want;
    worst = std::max(worst, RelError(out[i], want));
  }
  EXPECT_LT(worst, 4e-7f) << CpuKernelsName(SelectedCpuKernels());
  EXPECT_NEAR(sum / want_sum, 1.0, 1e-6);
}

TEST(VecMath, EndsAndSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {
      -inf, -1000.0f, -100.0f, 0.0f, 100.0f, inf, std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> out(x.size());
  ExpShifted(x.data(), 0.0f, 1.0f, static_cast<int64_t>(x.size()), out.data());
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_LT(RelError(out[2], std::exp(-100.0f)), 0.05f);  // a denormal: few bits left
  EXPECT_EQ(out[3], 1.0f);
  EXPECT_EQ(out[4], inf);
  EXPECT_EQ(out[5], inf);
  EXPECT_TRUE(std::isnan(out[6]));
}

TEST(VecMath, RaggedLengthsShiftScaleInPlaceAndSumOnly) {
  for (int64_t n : {1, 5, 15, 16, 17, 33, 100}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      x[static_cast<size_t>(i)] = 0.37f * static_cast<float>(i % 23) - 4.0f;
    std::vector<float> in_place = x;
    const double sum = ExpShifted(in_place.data(), 2.5f, 0.5f, n, in_place.data());
    const double sum_only = ExpShifted(x.data(), 2.5f, 0.5f, n, nullptr);
    double want_sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const float e = std::exp(x[static_cast<size_t>(i)] - 2.5f);
      want_sum += e;
      EXPECT_LT(RelError(in_place[static_cast<size_t>(i)], 0.5f * e), 4e-7f) << n << " " << i;
    }
    EXPECT_NEAR(sum / want_sum, 1.0, 1e-6) << n;
    EXPECT_EQ(sum, sum_only) << n;
  }
}

// ExpOfScaled(x, s, shift) is ExpShifted on the rounded products s * x, bit for bit, sums
// included: ragged lengths, in place, -inf entries (masked scores) giving 0.
TEST(VecMath, ExpOfScaledIsExpShiftedOfTheScaledValues) {
  const float scale = 0.125f * 1.0001f;  // not a power of two: the products round
  for (int64_t n : {1, 7, 16, 31, 64, 257}) {
    std::vector<float> raw(static_cast<size_t>(n)), scaled(raw.size());
    for (int64_t i = 0; i < n; ++i) {
      const size_t at = static_cast<size_t>(i);
      raw[at] = i % 11 == 3 ? -std::numeric_limits<float>::infinity()
                            : 1.7f * static_cast<float>(i % 29) - 20.0f;
      scaled[at] = scale * raw[at];
    }
    std::vector<float> want(raw.size()), got = raw;
    const double want_sum = ExpShifted(scaled.data(), 1.5f, 1.0f, n, want.data());
    const double got_sum = ExpOfScaled(got.data(), scale, 1.5f, n, got.data());
    EXPECT_EQ(got_sum, want_sum) << n;
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << n;
    EXPECT_EQ(ExpOfScaled(raw.data(), scale, 1.5f, n, nullptr), want_sum) << n;
  }
}

// MaxOf is the loop m = std::max(m, x[i]) bit for bit: every ragged length, -inf rows, a NaN
// inside (skipped) or as the start (kept), and signed zeros (the first one seen stays).
TEST(VecMath, MaxOfIsTheSequentialMax) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto sequential = [](const std::vector<float>& x, float start) {
    for (float v : x) start = std::max(start, v);
    return start;
  };
  auto same_bits = [](float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  for (int64_t n = 0; n <= 70; ++n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = std::sin(0.37f * i) * (i % 5);
    for (float start : {-inf, 0.25f, -0.0f}) {
      EXPECT_TRUE(same_bits(MaxOf(x.data(), n, start), sequential(x, start))) << n;
    }
    if (n > 3) {
      std::vector<float> with_nan = x;
      with_nan[static_cast<size_t>(n / 2)] = nan;
      EXPECT_TRUE(same_bits(MaxOf(with_nan.data(), n, -inf), sequential(with_nan, -inf))) << n;
      EXPECT_TRUE(std::isnan(MaxOf(x.data(), n, nan))) << n;
      std::vector<float> all_inf(static_cast<size_t>(n), -inf);
      EXPECT_EQ(MaxOf(all_inf.data(), n, -inf), -inf);
    }
  }
  std::vector<float> zeros = {0.0f, -0.0f, 0.0f};
  EXPECT_TRUE(same_bits(MaxOf(zeros.data(), 3, -0.0f), sequential(zeros, -0.0f)));
}

// SumOfProducts: float products summed in double, against a double sum of the same products in
// order (the two differ only by the order of double additions).
TEST(VecMath, SumOfProductsMatchesTheOrderedDoubleSum) {
  for (int64_t n : {0, 1, 7, 8, 15, 16, 17, 100, 512, 1000}) {
    std::vector<float> a(static_cast<size_t>(n)), b(a.size()), c(a.size());
    for (int64_t i = 0; i < n; ++i) {
      a[static_cast<size_t>(i)] = std::sin(0.1f * i);
      b[static_cast<size_t>(i)] = std::cos(0.3f * i) * 3.0f;
      c[static_cast<size_t>(i)] = 1.0f + 0.01f * i;
    }
    double want = 0.0, magnitude = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
      const float p = a[i] * b[i] * c[i];
      want += p;
      magnitude += std::fabs(p);
    }
    const double got = SumOfProducts(a.data(), b.data(), c.data(), n);
    EXPECT_LE(std::fabs(got - want), 1e-14 * (magnitude + 1.0)) << n;
  }
}

TEST(VecMath, SwigluForwardAndBackwardMatchTheFormula) {
  const int64_t n = 1000 + 7;
  std::vector<float> gate(n), up(n), dout(n);
  for (int64_t i = 0; i < n; ++i) {
    gate[i] = 0.031f * static_cast<float>(i - n / 2);  // about -15.6 .. 15.6
    up[i] = std::sin(0.1f * static_cast<float>(i));
    dout[i] = std::cos(0.07f * static_cast<float>(i));
  }
  std::vector<float> out(n), dgate(n, 1.0f), dup(n, -1.0f);
  SwigluForwardRange(gate.data(), up.data(), n, out.data());
  SwigluBackwardRange(gate.data(), up.data(), dout.data(), n, dgate.data(), dup.data());
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i], s = 1.0 / (1.0 + std::exp(-g));
    const double want_out = g * s * up[i];
    const double want_dgate = 1.0 + dout[i] * up[i] * s * (1.0 + g * (1.0 - s));
    const double want_dup = -1.0 + dout[i] * g * s;
    EXPECT_NEAR(out[i], want_out, 2e-6 * (1.0 + std::fabs(want_out))) << i;
    EXPECT_NEAR(dgate[i], want_dgate, 2e-6 * (1.0 + std::fabs(want_dgate))) << i;
    EXPECT_NEAR(dup[i], want_dup, 2e-6 * (1.0 + std::fabs(want_dup))) << i;
  }
}

}  // namespace
}  // namespace air::engine

namespace air::engine {
namespace {

TEST(VecMath, RmsNormBackwardRowIsTheScalarLoopsBits) {
  for (int64_t n : {1, 15, 16, 17, 64, 100}) {
    std::vector<float> w(static_cast<size_t>(n)), dy(w.size()), x(w.size()), dx(w.size());
    for (int64_t i = 0; i < n; ++i) {
      const float f = static_cast<float>(i);
      w[static_cast<size_t>(i)] = 0.9f + 0.013f * f;
      dy[static_cast<size_t>(i)] = std::sin(0.7f * f) * 1e-3f;
      x[static_cast<size_t>(i)] = std::cos(1.3f * f) * 3.0f;
      dx[static_cast<size_t>(i)] = 0.25f * std::sin(f);
    }
    const float inv = 1.37f, coef = 0.0123f;
    std::vector<float> want_dx = dx, got_dx = dx, got_dx_only = dx;
    std::vector<double> want_dw(w.size(), 0.5), got_dw = want_dw;
    for (int64_t c = 0; c < n; ++c) {
      const size_t i = static_cast<size_t>(c);
      want_dx[i] += inv * w[i] * dy[i] - coef * x[i];
      want_dw[i] += dy[i] * x[i] * inv;
    }
    RmsNormBackwardRow(w.data(), dy.data(), x.data(), inv, coef, n, got_dx.data(), got_dw.data());
    RmsNormBackwardRow(w.data(), dy.data(), x.data(), inv, coef, n, got_dx_only.data(), nullptr);
    EXPECT_EQ(0, std::memcmp(want_dx.data(), got_dx.data(), want_dx.size() * sizeof(float))) << n;
    EXPECT_EQ(0, std::memcmp(want_dx.data(), got_dx_only.data(), want_dx.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(want_dw.data(), got_dw.data(), want_dw.size() * sizeof(double))) << n;
  }
}

}  // namespace
}  // namespace air::engine
