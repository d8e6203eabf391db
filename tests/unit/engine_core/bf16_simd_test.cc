// bf16_simd.h's conversions and mask reads: the scalar and 16-lane roundings and widenings, and
// convert.h's array forms on the selected kernel level (ctest runs this binary under
// AIR_CPU_KERNELS=avx2 and =generic too), give dtype.h's bits on ties, NaNs, infinities,
// subnormals and random bit patterns; MaskBits16 reads a packed mask's 16 bits at any offset;
// Transpose16x16 transposes.
#include "engine/backend/cpu/bf16_simd.h"

#include <gtest/gtest.h>
#include <immintrin.h>

// GCC 12 reports the deliberately undefined pass-through operand inside the unmasked AVX-512
// shift intrinsics as uninitialized (a false positive; as in vec_math.cc).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "engine/backend/cpu/convert.h"
#include "engine/backend/cpu/cpu_features.h"
#include "engine/dtype.h"

namespace air::engine {
namespace {

// fp32 bit patterns: ties, NaNs, infinities, subnormals, the largest finite, then `random` more.
std::vector<uint32_t> Fp32BitPatterns(uint64_t seed, int random) {
  std::vector<uint32_t> patterns = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                    0x7fc00000u, 0x7f800001u, 0xffbfffffu, 0x00008000u,
                                    0x00018000u, 0x7f7fffffu, 0x7f7f8000u, 0x3f808000u};
  std::mt19937_64 rng(seed);
  for (int i = 0; i < random; ++i) patterns.push_back(static_cast<uint32_t>(rng()));
  return patterns;
}

// convert.h's array conversions on the selected kernel level (ctest runs this binary under
// AIR_CPU_KERNELS=avx2 and =generic too) give dtype.h's bits, vector body and scalar tail.
TEST(Bf16Simd, ArrayConversionsMatchDtypeConversions) {
  const std::vector<uint32_t> patterns = Fp32BitPatterns(7, 4099);
  const int64_t n = static_cast<int64_t>(patterns.size());  // not a multiple of 8 or 16
  std::vector<float> values(patterns.size()), widened(patterns.size());
  std::memcpy(values.data(), patterns.data(), patterns.size() * sizeof(float));
  std::vector<uint16_t> rounded(patterns.size());
  RoundToBf16(values.data(), rounded.data(), n);
  WidenBf16(rounded.data(), widened.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(rounded[i], F32ToBf16(values[i])) << std::hex << patterns[i];
    const float want = Bf16ToF32(rounded[i]);
    ASSERT_EQ(std::memcmp(&widened[i], &want, sizeof want), 0) << std::hex << rounded[i];
  }
  std::printf("[ cpu ] array conversions checked on the %s kernels\n",
              CpuKernelsName(SelectedCpuKernels()));
}

__attribute__((target("avx512f"))) void RoundPatternsAvx512(const uint32_t* in, uint32_t* out) {
  const __m512 values = _mm512_castsi512_ps(_mm512_loadu_si512(in));
  _mm512_storeu_si512(out, RoundToBf16x16(values));
}

// bf16_simd.h's inline conversions are dtype.h's: ties, NaN, infinities, subnormals, and
// random bit patterns; the 16-lane one too where the CPU has AVX-512F.
TEST(Bf16Simd, RoundingMatchesDtypeConversions) {
  const std::vector<uint32_t> patterns = Fp32BitPatterns(5, 20000);
  for (uint32_t u : patterns) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    ASSERT_EQ(RoundToBf16(f), F32ToBf16(f)) << std::hex << u;
    const uint16_t b = static_cast<uint16_t>(u >> 16);
    const float wide = WidenBf16(b), want = Bf16ToF32(b);
    ASSERT_EQ(std::memcmp(&wide, &want, sizeof wide), 0) << std::hex << b;
  }
  if (DetectedCpuKernels() < CpuKernels::kAvx512) {
    std::printf("[ skipped ] RoundToBf16x16: this CPU has no AVX-512F\n");
    return;
  }
  for (size_t i = 0; i + 16 <= patterns.size(); i += 16) {
    alignas(64) uint32_t out[16];
    RoundPatternsAvx512(patterns.data() + i, out);
    for (int j = 0; j < 16; ++j) {
      float f;
      std::memcpy(&f, &patterns[i + j], sizeof f);
      ASSERT_EQ(out[j], F32ToBf16(f)) << std::hex << patterns[i + j];
    }
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) uint16_t MaskBitsAvx512(const uint8_t* bits,
                                                                             int64_t bytes,
                                                                             int64_t e) {
  return MaskBits16(bits, bytes, e);
}

// MaskBits16 gives bits [e, e + 16) of a packed mask at every offset, on a byte boundary and
// not, the bits past the mask's last byte as zeros (it reads none of them: the mask ends at the
// vector's end here, so a read past it would take bytes from outside the vector).
TEST(Bf16Simd, MaskBits16ReadsSixteenBitsAtAnyOffset) {
  if (DetectedCpuKernels() < CpuKernels::kAvx512) {
    std::printf("[ skipped ] MaskBits16: this CPU has no AVX-512F\n");
    return;
  }
  std::mt19937 rng(3);
  for (int64_t bytes : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{5}, int64_t{40}}) {
    std::vector<uint8_t> bits(static_cast<size_t>(bytes));
    for (uint8_t& b : bits) b = static_cast<uint8_t>(rng());
    for (int64_t e = 0; e < 8 * bytes; ++e) {
      uint16_t want = 0;
      for (int j = 0; j < 16 && e + j < 8 * bytes; ++j) {
        want |= static_cast<uint16_t>(
            ((bits[static_cast<size_t>((e + j) / 8)] >> ((e + j) % 8)) & 1u) << j);
      }
      ASSERT_EQ(MaskBitsAvx512(bits.data(), bytes, e), want) << "bytes " << bytes << " e " << e;
    }
  }
}

// Transpose16x16 on a 16 x 16 block in memory (rows in, columns out).
__attribute__((target("avx512f"))) void TransposeInMemory(const float* in, float* out) {
  __m512 r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(in + 16 * i);
  Transpose16x16(r);
  for (int j = 0; j < 16; ++j) _mm512_storeu_ps(out + 16 * j, r[j]);
}

// Transpose16x16 puts element (i, j) at (j, i) for every i and j.
TEST(Bf16Simd, Transpose16x16MovesEveryElementAcrossTheDiagonal) {
  if (DetectedCpuKernels() < CpuKernels::kAvx512) {
    std::printf("[ skipped ] Transpose16x16: this CPU has no AVX-512F\n");
    return;
  }
  std::vector<float> in(256), out(256);
  for (int e = 0; e < 256; ++e) in[static_cast<size_t>(e)] = static_cast<float>(e);
  TransposeInMemory(in.data(), out.data());
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      ASSERT_EQ(out[static_cast<size_t>(16 * j + i)], in[static_cast<size_t>(16 * i + j)])
          << "row " << i << " column " << j;
    }
  }
}

}  // namespace
}  // namespace air::engine
