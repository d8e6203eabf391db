// Dropout's mask drawn 16 elements at a time (see dropout_range.h).
#include "engine/backend/cpu/dropout_range.h"

#include <immintrin.h>

// GCC 12 reports the undefined pass-through operand inside unmasked AVX-512 intrinsics as
// uninitialized (a false positive; vec_math.cc says the same).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cmath>

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

// The 16-wide loop; returns how many elements it did (a multiple of 16).
__attribute__((target("avx512f,avx512dq"))) int64_t DropoutAvx512(const float* x, float p,
                                                                  float scale, uint64_t seed,
                                                                  uint64_t first, int64_t n,
                                                                  float* out) {
  const __m512i threshold = _mm512_set1_epi64(static_cast<int64_t>(KeepThreshold(p)));
  const __m512 scale16 = _mm512_set1_ps(scale);
  // Lane j of the counter vector holds seed + (first + i + j + 1) * golden (mod 2^64).
  const __m512i lanes = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  __m512i z =
      _mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(seed + (first + 1) * kGolden)),
                       MulLo64(lanes, kGolden));
  const __m512i step8 = _mm512_set1_epi64(static_cast<int64_t>(8 * kGolden));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i z_high = _mm512_add_epi64(z, step8);
    const __mmask16 keep =
        static_cast<__mmask16>(static_cast<unsigned>(Keep8(z, threshold)) |
                               (static_cast<unsigned>(Keep8(z_high, threshold)) << 8));
    _mm512_storeu_ps(out + i, _mm512_maskz_mul_ps(keep, _mm512_loadu_ps(x + i), scale16));
    z = _mm512_add_epi64(z_high, step8);
  }
  return i;
}

}  // namespace

void DropoutRange(const float* x, float p, float scale, uint64_t seed, uint64_t first, int64_t n,
                  float* out) {
  // Every AVX-512 CPU but the Xeon Phi has AVX512DQ's vpmullq.
  static const bool dq = __builtin_cpu_supports("avx512dq");
  int64_t i = UseAvx512() && dq ? DropoutAvx512(x, p, scale, seed, first, n, out) : 0;
  for (; i < n; ++i) {
    out[i] = DropoutUniform(seed, first + static_cast<uint64_t>(i)) >= p ? x[i] * scale : 0.0f;
  }
}

}  // namespace air::engine
