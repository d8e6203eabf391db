// Tests for the fast CPU path's dropout (dropout_range.h) against op_semantics.h's scalar draw:
// the same kept elements and values for drop probabilities at and around the 24-bit grid (0,
// the smallest positive, grid points and their neighbours, 1, NaN), ragged lengths ending in a
// partial vector, starts that are not a multiple of 16 and counters that wrap past 2^64, in place;
// and the mask as bits (DropoutMaskRange) applied again (ApplyDropoutMaskRange) giving the same
// values, written or accumulated.
// ctest runs this binary at every kernel level the CPU allows (AIR_CPU_KERNELS).
#include "engine/backend/cpu/dropout_range.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_features.h"
#include "engine/ops/op_semantics.h"

namespace air::engine {
namespace {

std::vector<float> Scalar(const std::vector<float>& x, float p, float scale, uint64_t seed,
                          uint64_t first) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    out[i] = DropoutUniform(seed, first + i) >= p ? x[i] * scale : 0.0f;
  }
  return out;
}

std::vector<float> Inputs(int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    x[static_cast<size_t>(i)] = 0.25f * static_cast<float>(i % 37) - 4.0f;
  return x;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(DropoutRange, SameMaskAndValuesAsTheScalarDraw) {
  std::printf("kernels: %s\n", CpuKernelsName(SelectedCpuKernels()));
  const float grid = 0x1.0p-24f;
  const float probabilities[] = {0.0f,
                                 -0.5f,
                                 std::numeric_limits<float>::denorm_min(),
                                 grid,
                                 std::nextafter(grid, 1.0f),
                                 0.05f,
                                 0.1f,
                                 0.5f,
                                 0.5f + grid,
                                 std::nextafter(0.5f + grid, 0.0f),
                                 1.0f - grid,
                                 1.0f,
                                 2.0f,
                                 std::nanf("")};
  const uint64_t seeds[] = {0, 1, 0xD1B54A32D192ED03ull, ~uint64_t{0}};
  const uint64_t firsts[] = {0, 3, 16, 1000003, ~uint64_t{0} - 20};  // the last wraps
  for (int64_t n : {0, 1, 15, 16, 17, 33, 1000}) {
    const std::vector<float> x = Inputs(n);
    for (float p : probabilities) {
      const float scale = p < 1.0f && p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
      for (uint64_t seed : seeds) {
        for (uint64_t first : firsts) {
          std::vector<float> got(x.size());
          DropoutRange(x.data(), p, scale, seed, first, n, got.data());
          ASSERT_TRUE(SameBits(got, Scalar(x, p, scale, seed, first)))
              << "n " << n << " p " << p << " seed " << seed << " first " << first;
        }
      }
    }
  }
}

TEST(DropoutRange, TheMaskAsBitsIsTheScalarDrawAndAppliesToTheSameValues) {
  std::printf("kernels: %s\n", CpuKernelsName(SelectedCpuKernels()));
  const uint64_t seeds[] = {0, 0xD1B54A32D192ED03ull, ~uint64_t{0}};
  const uint64_t firsts[] = {0, 8, 4096, ~uint64_t{0} - 23};  // multiples of 8; the last wraps
  for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 33, 1000}) {
    const std::vector<float> x = Inputs(n);
    for (float p : {0.0f, 0x1.0p-24f, 0.05f, 0.5f, 1.0f - 0x1.0p-24f, 1.0f, std::nanf("")}) {
      const float scale = p < 1.0f && p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
      for (uint64_t seed : seeds) {
        for (uint64_t first : firsts) {
          const std::string where = "n " + std::to_string(n) + " p " + std::to_string(p) +
                                    " seed " + std::to_string(seed) + " first " +
                                    std::to_string(first);
          // 0xA5 fill: every bit must be written, the last byte's bits past n cleared.
          std::vector<uint8_t> bits(static_cast<size_t>((n + 7) / 8), 0xA5);
          DropoutMaskRange(p, seed, first, n, bits.data());
          for (int64_t i = 0; i < 8 * static_cast<int64_t>(bits.size()); ++i) {
            const bool bit = (bits[static_cast<size_t>(i / 8)] >> (i % 8)) & 1u;
            const bool kept = i < n && DropoutUniform(seed, first + static_cast<uint64_t>(i)) >= p;
            ASSERT_EQ(bit, kept) << where << " element " << i;
          }
          const std::vector<float> want = Scalar(x, p, scale, seed, first);
          std::vector<float> got(x.size(), std::nanf(""));
          ApplyDropoutMaskRange(x.data(), bits.data(), scale, false, n, got.data());
          ASSERT_TRUE(SameBits(got, want)) << where;
          // Accumulated: out + the masked value (an fp32 sum per element), -0 + 0 included.
          std::vector<float> acc(x.size()), acc_want(x.size());
          for (int64_t i = 0; i < n; ++i) {
            const size_t at = static_cast<size_t>(i);
            acc[at] = i % 5 == 0 ? -0.0f : 0.125f * static_cast<float>(i % 11) - 0.5f;
            acc_want[at] = acc[at] + want[at];
          }
          ApplyDropoutMaskRange(x.data(), bits.data(), scale, true, n, acc.data());
          ASSERT_TRUE(SameBits(acc, acc_want)) << where;
          // bf16 in and out: the fp32 form between WidenBf16 and RoundToBf16 (a NaN input too).
          std::vector<uint16_t> x16(x.size()), got16(x.size()), want16(x.size());
          std::vector<float> widened(x.size());
          for (size_t i = 0; i < x.size(); ++i) {
            x16[i] = i % 29 == 28 ? uint16_t{0x7fc1} : RoundToBf16(x[i]);
            widened[i] = WidenBf16(x16[i]);
          }
          const std::vector<float> want_wide = Scalar(widened, p, scale, seed, first);
          for (size_t i = 0; i < x.size(); ++i) want16[i] = RoundToBf16(want_wide[i]);
          ApplyDropoutMaskRangeBf16(x16.data(), bits.data(), scale, n, got16.data());
          ASSERT_EQ(got16, want16) << where;
        }
      }
    }
  }
}

TEST(DropoutRange, InPlaceAndTheKeptFraction) {
  const int64_t n = 1 << 16;
  std::vector<float> x(static_cast<size_t>(n), 1.0f);
  DropoutRange(x.data(), 0.25f, 1.0f, 42, 7, n, x.data());
  int64_t kept = 0;
  for (float v : x) kept += v != 0.0f;
  EXPECT_TRUE(
      SameBits(x, Scalar(std::vector<float>(static_cast<size_t>(n), 1.0f), 0.25f, 1.0f, 42, 7)));
  // 3/4 kept; 6 standard deviations of a binomial(65536, 0.75) is about 665.
  EXPECT_NEAR(static_cast<double>(kept), 0.75 * static_cast<double>(n), 665.0);
}

}  // namespace
}  // namespace air::engine
