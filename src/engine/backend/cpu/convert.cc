// bf16 <-> fp32 conversions and fp32 staging of data views (see convert.h).
#include "engine/backend/cpu/convert.h"

#include <immintrin.h>

// GCC 12 reports the deliberately undefined pass-through operand inside unmasked AVX-512
// intrinsics as uninitialized (a false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cstring>

#include "engine/backend/cpu/bf16_simd.h"
#include "engine/backend/cpu/cpu_features.h"
#include "engine/check.h"
#include "engine/dtype.h"

namespace air::engine {
namespace {

// Full vectors only; the tails go through the scalar conversions, which give the same bits
// (bf16_simd.h's, checked against dtype.h's by Bf16Simd.RoundingMatchesDtypeConversions).
__attribute__((target("avx512f"))) int64_t WidenBf16Avx512(const uint16_t* src, float* dst,
                                                           int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_ps(dst + i, WidenBf16x16(_mm512_cvtepu16_epi32(bits)));
  }
  return i;
}

__attribute__((target("avx2"))) int64_t WidenBf16Avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, WidenBf16x8(_mm256_cvtepu16_epi32(bits)));
  }
  return i;
}

__attribute__((target("avx512f"))) int64_t RoundToBf16Avx512(const float* src, uint16_t* dst,
                                                             int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i r = RoundToBf16x16(_mm512_loadu_ps(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(r));
  }
  return i;
}

// vcvtneps2bf16 (bf16_simd.h's RoundToBf16x16Native: the same bits, a third of the time).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"))) int64_t
RoundToBf16Avx512Bf16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        RoundToBf16x16Native(_mm512_loadu_ps(src + i)));
  }
  return i;
}

__attribute__((target("avx2"))) int64_t RoundToBf16Avx2(const float* src, uint16_t* dst,
                                                        int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i r = RoundToBf16x8(_mm256_loadu_ps(src + i));  // each below 0x10000
    const __m128i packed =
        _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), packed);
  }
  return i;
}

}  // namespace

void WidenBf16(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = UseAvx512() ? WidenBf16Avx512(src, dst, n)
              : UseAvx2() ? WidenBf16Avx2(src, dst, n)
                          : 0;
  for (; i < n; ++i) dst[i] = WidenBf16(src[i]);
}

void RoundToBf16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = NativeBf16Rounding() ? RoundToBf16Avx512Bf16(src, dst, n)
              : UseAvx512()        ? RoundToBf16Avx512(src, dst, n)
              : UseAvx2()          ? RoundToBf16Avx2(src, dst, n)
                                   : 0;
  for (; i < n; ++i) dst[i] = RoundToBf16(src[i]);
}

void LoadF32(const View& v, int64_t offset, int64_t n, float* dst) {
  AIR_ENGINE_CHECK(offset >= 0 && offset + n <= v.numel(), "LoadF32 outside the view");
  switch (v.dtype()) {
    case DType::kF32:
      std::memcpy(dst, v.f32() + offset, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kBF16:
      WidenBf16(v.bf16() + offset, dst, n);
      return;
    default:
      AIR_ENGINE_CHECK(false, "LoadF32 of a view that is not F32 or BF16");
  }
}

void AccumulateF32(const float* src, const View& v, int64_t offset, int64_t n) {
  if (v.dtype() == DType::kF32) {
    float* dst = v.f32() + offset;
    for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
    return;
  }
  std::vector<float> sum(static_cast<size_t>(n));
  LoadF32(v, offset, n, sum.data());
  for (int64_t i = 0; i < n; ++i) sum[static_cast<size_t>(i)] += src[i];
  StoreF32(sum.data(), v, offset, n);
}

void StoreF32(const float* src, const View& v, int64_t offset, int64_t n) {
  AIR_ENGINE_CHECK(offset >= 0 && offset + n <= v.numel(), "StoreF32 outside the view");
  switch (v.dtype()) {
    case DType::kF32:
      if (v.f32() + offset != src) {
        std::memmove(v.f32() + offset, src, static_cast<size_t>(n) * sizeof(float));
      }
      return;
    case DType::kBF16:
      RoundToBf16(src, v.bf16() + offset, n);
      return;
    default:
      AIR_ENGINE_CHECK(false, "StoreF32 into a view that is not F32 or BF16");
  }
}

F32Input::F32Input(const View& v) {
  if (v.empty()) return;
  if (v.dtype() == DType::kF32) {
    ptr_ = v.f32();
    return;
  }
  copy_.resize(static_cast<size_t>(v.numel()));
  LoadF32(v, 0, v.numel(), copy_.data());
  ptr_ = copy_.data();
}

F32Output::F32Output(const View& v, bool load) : view_(v) {
  if (v.empty()) return;
  if (v.dtype() == DType::kF32) {
    ptr_ = v.f32();
    return;
  }
  copy_.assign(static_cast<size_t>(v.numel()), 0.0f);
  if (load) LoadF32(v, 0, v.numel(), copy_.data());
  ptr_ = copy_.data();
}

void F32Output::Store() {
  if (!copy_.empty()) StoreF32(copy_.data(), view_, 0, view_.numel());
}

}  // namespace air::engine
