// The bf16 GEMM's inline SIMD helpers. bf16 <-> fp32 conversions for its packing and stores:
// the scalar ones are op_semantics.h's RoundToBf16 / WidenBf16 (round to nearest even; a NaN
// stays a NaN, made quiet; every backend's), the vector ones do the same on 16 lanes
// (AVX-512) or 8 (AVX2); an 8 x 8 transpose of 32-bit words (AVX2); and the mask of a 16-lane
// loop's last, partial vector (the AVX-512 loops of vec_math, the optimizer and attention). The
// vector ones are compiled for their instruction sets only: callers run them on CPUs that have
// them. LoadF32x16 / StoreF32x16 (AVX-512 F, BW, VL; StoreF32x16Native with BF16) convert 16
// elements of an F32 or BF16 array in registers, for the kernels that take each array in either
// dtype (mixed_rowwise.h): the bits of widening into fp32 scratch, computing and rounding back,
// without the scratch's passes over memory.
// Thread safety: pure functions.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "engine/backend/cpu/cpu_features.h"
#include "engine/ops/op_semantics.h"  // RoundToBf16, WidenBf16: the scalar forms

namespace air::engine {

// The lanes of a 16-lane vector that `remaining` elements fill (all 16 past the end).
inline __mmask16 TailMask(int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xFFFF)
                         : static_cast<__mmask16>((1u << remaining) - 1u);
}

// Bits [e, e + 16) of a packed mask (bit i % 8 of bits[i / 8]: Ops::DropoutMask's) as a lane
// mask, reading no byte at or past bits[bytes].
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __mmask16 MaskBits16(
    const uint8_t* bits, int64_t bytes, int64_t e) {
  const int64_t byte = e / 8;
  if (e % 8 == 0 && byte + 2 <= bytes) {  // on a byte: two bytes (the common case)
    uint16_t word;
    std::memcpy(&word, bits + byte, sizeof word);
    return static_cast<__mmask16>(word);
  }
  const int64_t count = bytes - byte < 3 ? bytes - byte : 3;  // 16 bits at any shift
  const __m128i word =
      _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << count) - 1u), bits + byte);
  return static_cast<__mmask16>(static_cast<uint32_t>(_mm_cvtsi128_si32(word)) >> (e % 8));
}

// RoundToBf16 of 16 floats, each result in the low 16 bits of its 32-bit lane.
__attribute__((target("avx512f"), always_inline)) inline __m512i RoundToBf16x16(__m512 values) {
  const __m512i u = _mm512_castps_si512(values);
  const __m512i high = _mm512_srli_epi32(u, 16);
  const __m512i lsb = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  // A NaN (unordered with itself) keeps its high half, made quiet: 7 operations in all.
  const __mmask16 nan = _mm512_cmp_ps_mask(values, values, _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(rounded, nan, high, _mm512_set1_epi32(0x40));
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

// An array of F32 or BF16 elements (a data view's memory: mixed_rowwise.h's MixedAt).
struct Bf16OrF32 {
  void* data;
  bool bf16;
};

// 16 elements at src as fp32, the lanes outside `mask` (a TailMask: the first lanes) zero and
// not read; src holds F32 or (uint16_t) BF16 elements. A BF16 load widens with one vpermw,
// which puts each element in the high half of its 32-bit lane (AVX512BW).
__attribute__((target("avx512f"), always_inline)) inline __m512 LoadF32x16(const float* src,
                                                                           __mmask16 mask) {
  return mask == 0xFFFF ? _mm512_loadu_ps(src) : _mm512_maskz_loadu_ps(mask, src);
}
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512 LoadF32x16(
    const uint16_t* src, __mmask16 mask) {
  const __m256i bits = mask == 0xFFFF ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src))
                                      : _mm256_maskz_loadu_epi16(mask, src);
  const __m512i to_high_halves =
      _mm512_set_epi16(15, 0, 14, 0, 13, 0, 12, 0, 11, 0, 10, 0, 9, 0, 8, 0, 7, 0, 6, 0, 5, 0, 4, 0,
                       3, 0, 2, 0, 1, 0, 0, 0);
  return _mm512_castsi512_ps(
      _mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, to_high_halves, _mm512_castsi256_si512(bits)));
}

// The lanes of v within `mask` (a TailMask) stored at dst, rounded by RoundToBf16x16 when dst
// is BF16.
__attribute__((target("avx512f"), always_inline)) inline void StoreF32x16(float* dst,
                                                                          __mmask16 mask,
                                                                          __m512 v) {
  if (mask == 0xFFFF) {
    _mm512_storeu_ps(dst, v);
  } else {
    _mm512_mask_storeu_ps(dst, mask, v);
  }
}
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void StoreF32x16(
    uint16_t* dst, __mmask16 mask, __m512 v) {
  const __m256i packed = _mm512_cvtepi32_epi16(RoundToBf16x16(v));
  if (mask == 0xFFFF) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), packed);
  } else {
    _mm256_mask_storeu_epi16(dst, mask, packed);
  }
}

// Whether RoundToBf16x16Native runs: at the avx512bf16 kernel level (with AVX512DQ's vfpclassps,
// which every CPU with AVX512-BF16 has).
inline bool NativeBf16Rounding() {
  static const bool dq = __builtin_cpu_supports("avx512dq");
  return dq && SelectedCpuKernels() >= CpuKernels::kAvx512Bf16;
}

// RoundToBf16x16's bits, packed in 16-bit lanes, by AVX512-BF16's vcvtneps2bf16 (one
// instruction for the seven and the pack): it rounds to nearest even and quiets a NaN as
// RoundToBf16 does, but flushes denormal inputs to zero, so a vector holding one (rare) takes
// the integer rounding.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"),
               always_inline)) inline __m256i
RoundToBf16x16Native(__m512 values) {
  if (__builtin_expect(_mm512_fpclass_ps_mask(values, 0x20) != 0, 0)) {  // 0x20: denormal
    return _mm512_cvtepi32_epi16(RoundToBf16x16(values));
  }
  return (__m256i)_mm512_cvtneps_pbh(values);
}

// StoreF32x16 into BF16 with RoundToBf16x16Native (the same bits).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"), always_inline)) inline void
StoreF32x16Native(uint16_t* dst, __mmask16 mask, __m512 v) {
  const __m256i packed = RoundToBf16x16Native(v);
  if (mask == 0xFFFF) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), packed);
  } else {
    _mm256_mask_storeu_epi16(dst, mask, packed);
  }
}

// ApplyDropoutMask's values of 16 elements, element e of the mask first (bit e + i of bits,
// bytes long, for lane i), as bf16 in 16-bit lanes: bit set and in `lanes` ? v * scale : 0,
// rounded by RoundToBf16x16Native (its AVX-512 loop's operations: the same bits).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"),
               always_inline)) inline __m256i
DropToBf16x16(__m512 values, const uint8_t* bits, int64_t bytes, int64_t e, __mmask16 lanes,
              float scale) {
  const __mmask16 keep = MaskBits16(bits, bytes, e) & lanes;
  return RoundToBf16x16Native(_mm512_maskz_mul_ps(keep, values, _mm512_set1_ps(scale)));
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

// Transposes 16 x 16 floats in place: r[i] holds row i; afterwards r[j] holds column j (unpacks,
// then in-lane and cross-lane shuffles: 64 shuffles in all).
__attribute__((target("avx512f"), always_inline)) inline void Transpose16x16(__m512 (&r)[16]) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    t[j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
    t[4 + j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);
    t[8 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    t[12 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
  }
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
  }
}

}  // namespace air::engine
