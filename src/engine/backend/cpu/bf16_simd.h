// The bf16 GEMM's inline SIMD helpers. bf16 <-> fp32 conversions for its packing and stores:
// the scalar ones are op_semantics.h's RoundToBf16 / WidenBf16 (round to nearest even; a NaN
// stays a NaN, made quiet; every backend's), the vector ones do the same on 16 lanes
// (AVX-512) or 8 (AVX2); an 8 x 8 transpose of 32-bit words (AVX2); and the mask of a 16-lane
// loop's last, partial vector (the AVX-512 loops of vec_math, the optimizer and attention). The
// vector ones are
// compiled for their instruction sets only: callers run them on CPUs that have them.
// Thread safety: pure functions.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "engine/ops/op_semantics.h"  // RoundToBf16, WidenBf16: the scalar forms

namespace air::engine {

// The lanes of a 16-lane vector that `remaining` elements fill (all 16 past the end).
inline __mmask16 TailMask(int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xFFFF)
                         : static_cast<__mmask16>((1u << remaining) - 1u);
}

// RoundToBf16 of 16 floats, each result in the low 16 bits of its 32-bit lane.
__attribute__((target("avx512f"), always_inline)) inline __m512i RoundToBf16x16(__m512 values) {
  const __m512i u = _mm512_castps_si512(values);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_mask_mov_epi32(rounded, nan, quiet);
}

// 16 bf16 (one per 32-bit lane's low half, as RoundToBf16x16 leaves them) widened to fp32.
__attribute__((target("avx512f"), always_inline)) inline __m512 WidenBf16x16(__m512i lanes) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(lanes, 16));
}

// RoundToBf16 of 8 floats, each result in the low 16 bits of its 32-bit lane.
__attribute__((target("avx2"), always_inline)) inline __m256i RoundToBf16x8(__m256 values) {
  const __m256i u = _mm256_castps_si256(values);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

// 8 bf16 (one per 32-bit lane's low half, as RoundToBf16x8 leaves them) widened to fp32.
__attribute__((target("avx2"), always_inline)) inline __m256 WidenBf16x8(__m256i lanes) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(lanes, 16));
}

// Transposes 8 x 8 32-bit words: r[i] holds row i's words 0..7; out + j * stride (words)
// gets word j of rows 0..7.
template <typename Word>
__attribute__((target("avx2"), always_inline)) inline void Transpose8x8(const __m256i (&r)[8],
                                                                        Word* out, int64_t stride) {
  static_assert(sizeof(Word) == 4, "32-bit words");
  __m256i t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j * stride),
                        _mm256_permute2x128_si256(u[j], u[j + 4], 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (j + 4) * stride),
                        _mm256_permute2x128_si256(u[j], u[j + 4], 0x31));
  }
}

}  // namespace air::engine
