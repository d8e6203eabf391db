// bf16 <-> fp32 conversions and fp32 staging of data views (see convert.h).
#include "engine/ops/cpu/convert.h"

#include <immintrin.h>

// GCC 12 reports the deliberately undefined pass-through operand inside unmasked AVX-512
// intrinsics as uninitialized (a false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cstring>

#include "engine/check.h"
#include "engine/dtype.h"
#include "engine/ops/cpu/cpu_features.h"

namespace air::engine {
namespace {

// Full vectors only (AVX-512F: no 16-bit masked loads); the tails go through the scalar
// conversions, which give the same bits.
__attribute__((target("avx512f"))) int64_t WidenBf16Avx512(const uint16_t* src, float* dst,
                                                           int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m512i wide = _mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16);
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(wide));
  }
  return i;
}

// Round to nearest even in integer arithmetic (what F32ToBf16 does), NaN made quiet.
__attribute__((target("avx512f"))) int64_t RoundToBf16Avx512(const float* src, uint16_t* dst,
                                                             int64_t n) {
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i quiet = _mm512_set1_epi32(0x00400000);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(src + i));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, lsb)), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_srli_epi32(_mm512_or_si512(u, quiet), 16));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(r));
  }
  return i;
}

}  // namespace

void WidenBf16(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = UseAvx512() ? WidenBf16Avx512(src, dst, n) : 0;
  for (; i < n; ++i) dst[i] = Bf16ToF32(src[i]);
}

void RoundToBf16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = UseAvx512() ? RoundToBf16Avx512(src, dst, n) : 0;
  for (; i < n; ++i) dst[i] = F32ToBf16(src[i]);
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
