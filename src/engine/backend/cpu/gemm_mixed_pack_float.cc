// Float panels for the bf16 GEMM's conversion paths (see gemm_mixed_pack.h): F32 or BF16
// operands rounded to bf16 and widened back to fp32 for the fp32 micro-kernels; portable
// loops for the generic path, AVX2 for the avx2 and avx512 ones. fast_gemm's fp32 GEMM packs
// its F32 operands here too, as they are (PanelSource::f32_exact).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "engine/backend/cpu/gemm_mixed_pack.h"

namespace air::engine {
namespace {

// An F32 source packed as it is (PanelSource::f32_exact): a type of its own for the templates,
// read through float pointers.
struct F32Exact {
  float bits;
};
static_assert(sizeof(F32Exact) == sizeof(float));

// A source element as the fp32 value of its bf16 (an F32Exact one: as it is).
inline float Bf16Value(const uint16_t* at) { return WidenBf16(*at); }
inline float Bf16Value(const float* at) { return WidenBf16(RoundToBf16(*at)); }
inline float Bf16Value(const F32Exact* at) {
  float value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

// One panel from elements of type T, K contiguous or not, portable loops.
template <typename T, bool kKContiguous>
void PackFloatPanel(const PanelSource& s, int64_t width, int64_t w0, int64_t p0, int64_t kc,
                    float* dst) {
  const int64_t lanes = std::min(width, s.lanes - w0);
  if (lanes < width) std::fill(dst, dst + kc * width, 0.0f);
  const T* src = static_cast<const T*>(s.data);
  if (!kKContiguous) {  // each step reads `lanes` contiguous values
    for (int64_t p = 0; p < kc; ++p) {
      const T* row = src + (p0 + p) * s.ld + w0;
      float* out = dst + p * width;
      for (int64_t w = 0; w < lanes; ++w) out[w] = Bf16Value(row + w);
    }
    return;
  }
  // Each lane's run of K is contiguous: read it in blocks that stay in L1.
  constexpr int64_t kBlock = 64;
  for (int64_t pb = 0; pb < kc; pb += kBlock) {
    const int64_t pe = std::min(kc, pb + kBlock);
    for (int64_t w = 0; w < lanes; ++w) {
      const T* run = src + (w0 + w) * s.ld + p0;
      for (int64_t p = pb; p < pe; ++p) dst[p * width + w] = Bf16Value(run + p);
    }
  }
}

// Eight consecutive source elements as the fp32 values of their bf16.
__attribute__((target("avx2"), always_inline)) inline __m256 Load8Values(const uint16_t* src) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  return WidenBf16x8(_mm256_cvtepu16_epi32(bits));
}
__attribute__((target("avx2"), always_inline)) inline __m256 Load8Values(const float* src) {
  return WidenBf16x8(RoundToBf16x8(_mm256_loadu_ps(src)));
}
__attribute__((target("avx2"), always_inline)) inline __m256 Load8Values(const F32Exact* src) {
  return _mm256_loadu_ps(reinterpret_cast<const float*>(src));
}

// The first `valid` (0 to 8) of eight consecutive source elements as Load8Values takes them,
// the rest zero, nothing past them read: a masked load (an F32 source), or through a zeroed
// copy (BF16).
__attribute__((target("avx2"), always_inline)) inline __m256 LoadPartial8Values(const uint16_t* src,
                                                                                int64_t valid,
                                                                                __m256i) {
  alignas(16) uint16_t copy[8] = {};
  std::memcpy(copy, src, static_cast<size_t>(valid) * sizeof(uint16_t));
  return Load8Values(copy);
}
__attribute__((target("avx2"), always_inline)) inline __m256 LoadPartial8Values(const float* src,
                                                                                int64_t,
                                                                                __m256i mask) {
  return WidenBf16x8(RoundToBf16x8(_mm256_maskload_ps(src, mask)));
}
__attribute__((target("avx2"), always_inline)) inline __m256 LoadPartial8Values(const F32Exact* src,
                                                                                int64_t,
                                                                                __m256i mask) {
  return _mm256_maskload_ps(reinterpret_cast<const float*>(src), mask);
}

// Lanes 0 .. count - 1 of an AVX2 mask.
__attribute__((target("avx2"), always_inline)) inline __m256i FirstLanes8(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Lanes contiguous: `count` lanes (panels of `width` from w0) a step at a time, the step's
// source row read once, left to right, into every panel: 8 lanes at a time, a ragged group (the
// AVX2 kernel's 6-row A panels, the AVX-512 one's 12-row ones, a panel past the operand's edge)
// by a whole vector stored where its extra lanes are the next step's (a masked store was the
// pack's hot spot on Intel, and AMD microcodes it), masked at the panel's last step. Panel by
// panel, element by element in the ragged group, the 6-row panels of a transposed A (a weight
// gradient's dY^T, rows 2 KiB apart: a few L1 sets) took 72% of a 512 x 16 x 1024 product on
// one Intel core; now 23 -> 38 GFLOP/s (AVX2 kernels), weight gradients 1344 x 512 x 1024
// +2-4% (AVX2 and AVX-512), the same bits.
template <typename T>
__attribute__((target("avx2"))) void PackFloatPanelsAvx2LanesContiguous(const PanelSource& s,
                                                                        int64_t width, int64_t w0,
                                                                        int64_t count, int64_t p0,
                                                                        int64_t kc, float* dst) {
  const int64_t panels = (count + width - 1) / width;
  const int64_t full_vectors = width / 8 * 8;  // lanes by whole vectors in a full panel
  const int64_t group = width - full_vectors;  // the ragged group's lanes (0 to 7)
  const __m256i group_mask = FirstLanes8(group);
  const T* src = static_cast<const T*>(s.data);
  // The source row's lanes from the panel's first on.
  const auto lanes_after = [&](int64_t panel) { return s.lanes - w0 - panel * width; };
  // Panels in groups of about 64 lanes (4 of 16, 10 of 6), step by step within a group: each
  // step reads a group's lanes as whole cache lines and writes at most 10 panels, whose
  // streams stay in L1 (step by step over every panel, 32 panels of 16 lanes 16 KiB apart
  // evicted each other: 0.85x).
  const int64_t group_panels = std::max<int64_t>(1, 64 / width);
  for (int64_t g0 = 0; g0 < panels; g0 += group_panels)
    for (int64_t p = 0; p < kc; ++p) {
      const T* row = src + (p0 + p) * s.ld + w0;
      for (int64_t panel = g0; panel < std::min(panels, g0 + group_panels); ++panel) {
        const T* in = row + panel * width;
        float* out = dst + (panel * kc + p) * width;
        const int64_t lanes = std::min(width, lanes_after(panel));
        if (lanes < width) {  // past the operand's edge: 8 lanes at a time, masked
          for (int64_t w = 0; w < width; w += 8) {
            const int64_t valid = std::clamp<int64_t>(lanes - w, 0, 8);
            const __m256 v = valid > 0 ? LoadPartial8Values(in + w, valid, FirstLanes8(valid))
                                       : _mm256_setzero_ps();
            _mm256_maskstore_ps(out + w, FirstLanes8(width - w), v);
          }
          continue;
        }
        for (int64_t w = 0; w < full_vectors; w += 8)
          _mm256_storeu_ps(out + w, Load8Values(in + w));
        if (group == 0) continue;
        // A whole vector's load where the source row has the 8 lanes, masked at its end.
        const __m256 v = lanes_after(panel) >= full_vectors + 8
                             ? Load8Values(in + full_vectors)
                             : LoadPartial8Values(in + full_vectors, group, group_mask);
        if (p + 1 < kc) {  // its 8 - group extra lanes are the next step's, written after this
          _mm256_storeu_ps(out + full_vectors, v);
        } else {
          _mm256_maskstore_ps(out + full_vectors, group_mask, v);
        }
      }
    }
}

// K contiguous: groups of 8 lanes by 8 steps transposed (a group narrower than 8, as the AVX2
// kernel's 6-row A panels, through a masked store); the steps past a multiple of 8 one at a
// time.
template <typename T>
__attribute__((target("avx2"))) void PackFloatPanelAvx2KContiguous(const PanelSource& s,
                                                                   int64_t width, int64_t w0,
                                                                   int64_t p0, int64_t kc,
                                                                   float* dst) {
  const int64_t lanes = std::min(width, s.lanes - w0), blocked = kc / 8 * 8;
  const T* src = static_cast<const T*>(s.data) + w0 * s.ld + p0;
  for (int64_t wb = 0; wb < width; wb += 8) {
    const int64_t group = std::min<int64_t>(8, width - wb);
    const int64_t valid = std::clamp<int64_t>(lanes - wb, 0, group);
    const __m256i mask = FirstLanes8(group);
    for (int64_t pb = 0; pb < blocked; pb += 8) {
      __m256i r[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        r[i] = i < valid ? _mm256_castps_si256(Load8Values(src + (wb + i) * s.ld + pb))
                         : _mm256_setzero_si256();
      }
      if (group == 8) {
        Transpose8x8(r, dst + pb * width + wb, width);
        continue;
      }
      alignas(32) float block[64];
      Transpose8x8(r, block, 8);
      // A whole vector where the panel is this one group (its extra lanes are the next step's,
      // written after this; with two groups they would be the first group's, written before)
      // but at the panel's last step; else masked.
      for (int j = 0; j < 8; ++j) {
        float* out = dst + (pb + j) * width + wb;
        if (width < 8 && pb + j + 1 < kc) {
          _mm256_storeu_ps(out, _mm256_load_ps(block + 8 * j));
        } else {
          _mm256_maskstore_ps(out, mask, _mm256_load_ps(block + 8 * j));
        }
      }
    }
    for (int64_t p = blocked; p < kc; ++p) {
      for (int64_t w = 0; w < group; ++w) {
        dst[p * width + wb + w] = w < valid ? Bf16Value(src + (wb + w) * s.ld + p) : 0.0f;
      }
    }
  }
}

template <typename T, bool kKContiguous, bool kAvx2>
void PackFloatPanelsOf(const PanelSource& s, int64_t width, int64_t w0, int64_t count, int64_t p0,
                       int64_t kc, float* dst) {
  if (kAvx2 && !kKContiguous) {
    return PackFloatPanelsAvx2LanesContiguous<T>(s, width, w0, count, p0, kc, dst);
  }
  for (int64_t w = 0; w < count; w += width) {
    float* panel = dst + w * kc;
    if (!kAvx2) {
      PackFloatPanel<T, kKContiguous>(s, width, w0 + w, p0, kc, panel);
    } else {
      PackFloatPanelAvx2KContiguous<T>(s, width, w0 + w, p0, kc, panel);
    }
  }
}

template <bool kAvx2>
void PackFloatPanelsFor(const PanelSource& s, int64_t width, int64_t w0, int64_t count, int64_t p0,
                        int64_t kc, float* dst) {
  if (s.k_contiguous) {
    if (s.bf16) return PackFloatPanelsOf<uint16_t, true, kAvx2>(s, width, w0, count, p0, kc, dst);
    if (s.f32_exact) {
      return PackFloatPanelsOf<F32Exact, true, kAvx2>(s, width, w0, count, p0, kc, dst);
    }
    return PackFloatPanelsOf<float, true, kAvx2>(s, width, w0, count, p0, kc, dst);
  }
  if (s.bf16) return PackFloatPanelsOf<uint16_t, false, kAvx2>(s, width, w0, count, p0, kc, dst);
  if (s.f32_exact) {
    return PackFloatPanelsOf<F32Exact, false, kAvx2>(s, width, w0, count, p0, kc, dst);
  }
  PackFloatPanelsOf<float, false, kAvx2>(s, width, w0, count, p0, kc, dst);
}

}  // namespace

void PackFloatPanels(const PanelSource& s, int64_t width, int64_t w0, int64_t count, int64_t p0,
                     int64_t kc, float* dst) {
  PackFloatPanelsFor<false>(s, width, w0, count, p0, kc, dst);
}

void PackFloatPanelsAvx2(const PanelSource& s, int64_t width, int64_t w0, int64_t count, int64_t p0,
                         int64_t kc, float* dst) {
  PackFloatPanelsFor<true>(s, width, w0, count, p0, kc, dst);
}

}  // namespace air::engine
