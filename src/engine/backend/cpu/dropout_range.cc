// Dropout's mask drawn 16 elements at a time (see dropout_range.h).
#include "engine/backend/cpu/dropout_range.h"

#include <immintrin.h>

// GCC 12 reports the undefined pass-through operand inside unmasked AVX-512 intrinsics as
// uninitialized (a false positive; vec_math.cc says the same).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cmath>

#include "engine/backend/cpu/bf16_simd.h"
#include "engine/backend/cpu/cpu_features.h"
#include "engine/ops/op_semantics.h"

namespace air::engine {
namespace {

// splitmix64's constants (op_semantics.h's DropoutUniform).
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kMix1 = 0xBF58476D1CE4E5B9ull;
constexpr uint64_t kMix2 = 0x94D049BB133111EBull;

// The 24-bit draw k = z >> 40 is kept when k * 2^-24 >= p, that is when k >= ceil(p * 2^24)
// (k and p * 2^24 are exact in float, so the comparison is the scalar one's).
uint64_t KeepThreshold(float p) {
  constexpr uint64_t kNever = uint64_t{1} << 24;  // above every draw
  if (std::isnan(p)) return kNever;               // u >= NaN is false: all dropped
  const float scaled = std::ceil(p * 16777216.0f);
  if (scaled <= 0.0f) return 0;  // p <= 0: all kept
  return scaled >= 16777216.0f ? kNever : static_cast<uint64_t>(scaled);
}

// The low 64 bits of a * c per lane (vpmullq).
__attribute__((target("avx512f,avx512dq"), always_inline)) inline __m512i MulLo64(__m512i a,
                                                                                  uint64_t c) {
  return _mm512_mullo_epi64(a, _mm512_set1_epi64(static_cast<int64_t>(c)));
}

// DropoutUniform's mix of 8 counters, the 24-bit draw compared with the threshold.
__attribute__((target("avx512f,avx512dq"), always_inline)) inline __mmask8 Keep8(
    __m512i z, __m512i threshold) {
  z = MulLo64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), kMix1);
  z = MulLo64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), kMix2);
  z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
  return _mm512_cmpge_epu64_mask(_mm512_srli_epi64(z, 40), threshold);
}

// The low 64 bits of a * c per lane from three 32 x 32 -> 64 products (AVX2 has no 64-bit
// multiply).
__attribute__((target("avx2"), always_inline)) inline __m256i MulLo64Avx2(__m256i a, uint64_t c) {
  const __m256i c_lo = _mm256_set1_epi64x(static_cast<int64_t>(c & 0xffffffffu));
  const __m256i c_hi = _mm256_set1_epi64x(static_cast<int64_t>(c >> 32));
  const __m256i cross =
      _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), c_lo), _mm256_mul_epu32(a, c_hi));
  return _mm256_add_epi64(_mm256_mul_epu32(a, c_lo), _mm256_slli_epi64(cross, 32));
}

// Keep8's 4-lane form: bit j set when lane j's draw is kept (threshold_minus_1 < draw: the draws
// and the threshold fit in 25 bits, so the signed compare is the unsigned one).
__attribute__((target("avx2"), always_inline)) inline int Keep4(__m256i z,
                                                                __m256i threshold_minus_1) {
  z = MulLo64Avx2(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), kMix1);
  z = MulLo64Avx2(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), kMix2);
  z = _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
  const __m256i keep = _mm256_cmpgt_epi64(_mm256_srli_epi64(z, 40), threshold_minus_1);
  return _mm256_movemask_pd(_mm256_castsi256_pd(keep));
}

// DropoutMaskRange's 16-wide loop: two bytes of bits per 16 elements.
__attribute__((target("avx512f,avx512dq"))) int64_t DropoutMaskAvx512(float p, uint64_t seed,
                                                                      uint64_t first, int64_t n,
                                                                      uint8_t* bits) {
  const __m512i threshold = _mm512_set1_epi64(static_cast<int64_t>(KeepThreshold(p)));
  const __m512i lanes = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  __m512i z =
      _mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(seed + (first + 1) * kGolden)),
                       MulLo64(lanes, kGolden));
  const __m512i step8 = _mm512_set1_epi64(static_cast<int64_t>(8 * kGolden));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i z_high = _mm512_add_epi64(z, step8);
    bits[i / 8] = static_cast<uint8_t>(Keep8(z, threshold));
    bits[i / 8 + 1] = static_cast<uint8_t>(Keep8(z_high, threshold));
    z = _mm512_add_epi64(z_high, step8);
  }
  return i;
}

// DropoutMaskRange's 8-wide loop for AVX2: a byte per 8 elements.
__attribute__((target("avx2"))) int64_t DropoutMaskAvx2(float p, uint64_t seed, uint64_t first,
                                                        int64_t n, uint8_t* bits) {
  const __m256i threshold_minus_1 = _mm256_set1_epi64x(static_cast<int64_t>(KeepThreshold(p)) - 1);
  __m256i z =
      _mm256_add_epi64(_mm256_set1_epi64x(static_cast<int64_t>(seed + (first + 1) * kGolden)),
                       MulLo64Avx2(_mm256_setr_epi64x(0, 1, 2, 3), kGolden));
  const __m256i step4 = _mm256_set1_epi64x(static_cast<int64_t>(4 * kGolden));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i z_high = _mm256_add_epi64(z, step4);
    bits[i / 8] =
        static_cast<uint8_t>(Keep4(z, threshold_minus_1) | (Keep4(z_high, threshold_minus_1) << 4));
    z = _mm256_add_epi64(z_high, step4);
  }
  return i;
}

// ApplyDropoutMaskRange 16 at a time: the two bytes are the lanes' AVX-512 mask.
__attribute__((target("avx512f"))) int64_t ApplyMaskAvx512(const float* x, const uint8_t* bits,
                                                           float scale, bool accumulate, int64_t n,
                                                           float* out) {
  const __m512 scale16 = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __mmask16 keep = static_cast<__mmask16>(bits[i / 8] | (bits[i / 8 + 1] << 8));
    __m512 v = _mm512_maskz_mul_ps(keep, _mm512_loadu_ps(x + i), scale16);
    if (accumulate) v = _mm512_add_ps(_mm512_loadu_ps(out + i), v);
    _mm512_storeu_ps(out + i, v);
  }
  return i;
}

// Lane j all ones where bit j of `byte` is set (AVX2 has no mask registers).
__attribute__((target("avx2"), always_inline)) inline __m256 KeepLanes8(uint8_t byte) {
  const __m256i bit_of_lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256i lanes = _mm256_and_si256(_mm256_set1_epi32(byte), bit_of_lane);
  return _mm256_castsi256_ps(_mm256_cmpeq_epi32(lanes, bit_of_lane));
}

// ApplyDropoutMaskRange 8 at a time with AVX2: the byte spread over the lanes.
__attribute__((target("avx2"))) int64_t ApplyMaskAvx2(const float* x, const uint8_t* bits,
                                                      float scale, bool accumulate, int64_t n,
                                                      float* out) {
  const __m256 scale8 = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 keep = KeepLanes8(bits[i / 8]);
    __m256 v = _mm256_and_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), scale8), keep);
    if (accumulate) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
    _mm256_storeu_ps(out + i, v);
  }
  return i;
}

// ApplyDropoutMaskRangeBf16 16 at a time: bf16 widened, scaled and rounded in registers.
__attribute__((target("avx512f"))) int64_t ApplyMaskBf16Avx512(const uint16_t* x,
                                                               const uint8_t* bits, float scale,
                                                               int64_t n, uint16_t* out) {
  const __m512 scale16 = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __mmask16 keep = static_cast<__mmask16>(bits[i / 8] | (bits[i / 8 + 1] << 8));
    const __m512i lanes =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    const __m512 v = _mm512_maskz_mul_ps(keep, WidenBf16x16(lanes), scale16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_cvtepi32_epi16(RoundToBf16x16(v)));
  }
  return i;
}

// The same 8 at a time with AVX2.
__attribute__((target("avx2"))) int64_t ApplyMaskBf16Avx2(const uint16_t* x, const uint8_t* bits,
                                                          float scale, int64_t n, uint16_t* out) {
  const __m256 scale8 = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 keep = KeepLanes8(bits[i / 8]);
    const __m256i in =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256 v = _mm256_and_ps(_mm256_mul_ps(WidenBf16x8(in), scale8), keep);
    const __m256i rounded = RoundToBf16x8(v);  // each below 0x10000: packs without saturating
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(out + i),
        _mm_packus_epi32(_mm256_castsi256_si128(rounded), _mm256_extracti128_si256(rounded, 1)));
  }
  return i;
}

}  // namespace

void ApplyDropoutMaskRangeBf16(const uint16_t* x, const uint8_t* bits, float scale, int64_t n,
                               uint16_t* out) {
  int64_t i = 0;
  if (UseAvx512()) {
    i = ApplyMaskBf16Avx512(x, bits, scale, n, out);
  } else if (UseAvx2()) {
    i = ApplyMaskBf16Avx2(x, bits, scale, n, out);
  }
  for (; i < n; ++i) {
    out[i] = RoundToBf16((bits[i / 8] >> (i % 8)) & 1u ? WidenBf16(x[i]) * scale : 0.0f);
  }
}

void DropoutMaskRange(float p, uint64_t seed, uint64_t first, int64_t n, uint8_t* bits) {
  static const bool dq = __builtin_cpu_supports("avx512dq");
  int64_t i = 0;
  if (UseAvx512() && dq) {
    i = DropoutMaskAvx512(p, seed, first, n, bits);
  } else if (UseAvx2()) {
    i = DropoutMaskAvx2(p, seed, first, n, bits);
  }
  for (; i < n; i += 8) {  // whole bytes from here: i is a multiple of 8
    uint8_t byte = 0;
    for (int64_t b = 0; b < 8 && i + b < n; ++b) {
      if (DropoutUniform(seed, first + static_cast<uint64_t>(i + b)) >= p) byte |= 1u << b;
    }
    bits[i / 8] = byte;
  }
}

void ApplyDropoutMaskRange(const float* x, const uint8_t* bits, float scale, bool accumulate,
                           int64_t n, float* out) {
  int64_t i = 0;
  if (UseAvx512()) {
    i = ApplyMaskAvx512(x, bits, scale, accumulate, n, out);
  } else if (UseAvx2()) {
    i = ApplyMaskAvx2(x, bits, scale, accumulate, n, out);
  }
  for (; i < n; ++i) {
    const float kept = (bits[i / 8] >> (i % 8)) & 1u ? x[i] * scale : 0.0f;
    out[i] = accumulate ? out[i] + kept : kept;
  }
}

void DropoutRange(const float* x, float p, float scale, uint64_t seed, uint64_t first, int64_t n,
                  float* out) {
  // The mask of a block as bits, then applied: one vector loop for both ops.
  constexpr int64_t kBlock = 1024;
  uint8_t bits[kBlock / 8];
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t count = std::min(kBlock, n - i);
    DropoutMaskRange(p, seed, first + static_cast<uint64_t>(i), count, bits);
    ApplyDropoutMaskRange(x + i, bits, scale, false, count, out + i);
  }
}

}  // namespace air::engine
