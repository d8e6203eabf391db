// bf16 <-> fp32 conversions for the bf16 GEMM's packing and stores, inline: the scalar ones
// are dtype.h's F32ToBf16 / Bf16ToF32 (round to nearest even; a NaN stays a NaN, made quiet;
// gemm_mixed_test checks they agree), the vector ones do the same on 16 lanes with AVX-512
// (callers compile them for AVX-512 CPUs only).
// Thread safety: pure functions.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace air::engine {

inline uint16_t RoundToBf16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float WidenBf16(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
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

}  // namespace air::engine
