// Packing F32/BF16 operands into the bf16 GEMM's pair panels (see gemm_mixed_pack.h).
#include "engine/backend/cpu/gemm_mixed_pack.h"

#include <immintrin.h>

// GCC 12 reports the deliberately undefined pass-through operand inside the unmasked AVX-512
// shift and convert intrinsics as uninitialized (a false positive; as in vec_math.cc).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>

#include "engine/backend/cpu/bf16_simd.h"

namespace air::engine {
namespace {

// Pair panel, any source, one element at a time.
void PackPairPanelScalar(const PanelSource& s, int64_t width, int64_t w0, int64_t p0, int64_t kc,
                         uint32_t* dst) {
  const int64_t lanes = std::min(width, s.lanes - w0), steps = (kc + 1) / 2;
  for (int64_t q = 0; q < steps; ++q) {
    uint32_t* row = dst + q * width;
    const int64_t p = p0 + 2 * q;
    const bool odd_tail = 2 * q + 1 >= kc;
    for (int64_t w = 0; w < lanes; ++w) {
      const uint32_t lo = Bf16At(s, w0 + w, p);
      const uint32_t hi = odd_tail ? 0u : Bf16At(s, w0 + w, p + 1);
      row[w] = lo | (hi << 16);
    }
    std::fill(row + lanes, row + width, 0u);
  }
}

// Eight bf16 from src: as they are, or rounded from eight floats.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m128i Load8(
    const uint16_t* src) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
}
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m128i Load8(
    const float* src) {
  const __m512 values = _mm512_castps256_ps512(_mm256_loadu_ps(src));
  return _mm256_castsi256_si128(_mm512_cvtepi32_epi16(RoundToBf16x16(values)));
}
// Sixteen bf16 from src, the same way.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m256i Load16(
    const uint16_t* src) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
}
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m256i Load16(
    const float* src) {
  return _mm512_cvtepi32_epi16(RoundToBf16x16(_mm512_loadu_ps(src)));
}

// Thirty-two bf16 from src, the same way.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512i Load32(
    const uint16_t* src) {
  return _mm512_loadu_si512(src);
}
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512i Load32(
    const float* src) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(Load16(src)), Load16(src + 16), 1);
}

// `count` (16 or 8) elements from src, element e of the stored matrix first, as ApplyDropoutMask
// writes them (its AVX-512 loop: masked product, then the rounding, here vcvtneps2bf16's: the
// same bits, RoundToBf16x16Native), as bf16 in 16-bit lanes.
template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"),
               always_inline)) inline __m256i
LoadDropped(const T* src, const PanelSource& s, int64_t e, __mmask16 count) {
  __m512 values;
  if constexpr (sizeof(T) == 2) {
    values = WidenBf16x16(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(count, src)));
  } else {
    values = _mm512_maskz_loadu_ps(count, src);
  }
  return DropToBf16x16(values, s.drop_bits, s.drop_bytes, e, count, s.drop_scale);
}

// Load8/16/32 of the source's elements from src (element e of the stored matrix), dropped or not.
template <bool kDropped, typename T>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"),
               always_inline)) inline __m128i
Get8(const T* src, const PanelSource& s, int64_t e) {
  if constexpr (kDropped) return _mm256_castsi256_si128(LoadDropped(src, s, e, 0xFF));
  return Load8(src);
}
template <bool kDropped, typename T>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"),
               always_inline)) inline __m256i
Get16(const T* src, const PanelSource& s, int64_t e) {
  if constexpr (kDropped) return LoadDropped(src, s, e, 0xFFFF);
  return Load16(src);
}
template <bool kDropped, typename T>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"),
               always_inline)) inline __m512i
Get32(const T* src, const PanelSource& s, int64_t e) {
  if constexpr (kDropped) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(LoadDropped(src, s, e, 0xFFFF)),
                              LoadDropped(src + 16, s, e + 16, 0xFFFF), 1);
  }
  return Load32(src);
}

// Lanes contiguous in the source (A stored (K, M), B stored (K, N)): per pair of steps, the
// two rows' lanes interleaved into words, 32 lanes at a time (each 8 of them lie in one panel,
// as width is a multiple of 8), then 8 at a time, and a ragged last group one lane at a time.
// In blocks of kBlock steps: the block's rows (each row read once and in full) stay in L1
// while each panel gets its kBlock steps as one contiguous run (the panels lie 4 KiB multiples
// apart: one step to each would thrash L1's sets).
template <bool kDropped, typename T>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"))) void
PackPairPanelsLanesContiguous(const PanelSource& s, int64_t width, int64_t w0, int64_t count,
                              int64_t p0, int64_t kc, uint32_t* dst) {
  constexpr int64_t kBlock = 8;
  const int64_t lanes = std::min(count, s.lanes - w0), steps = (kc + 1) / 2;
  const int64_t panels = (count + width - 1) / width, panel_words = steps * width;
  const int64_t wide_lanes = lanes / 32 * 32;  // in groups of 32
  const T* base = static_cast<const T*>(s.data) + p0 * s.ld + w0;
  const int64_t row_bytes = lanes * static_cast<int64_t>(sizeof(T));
  // unpacklo/hi interleave lanes 8j..8j+3 and 8j+4..8j+7 of each 128-bit chunk j: these put
  // the chunks back in lane order, lanes 0-15 and 16-31.
  const __m512i first_half = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i second_half = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  // Where lane l of step 0 goes.
  const auto word_of = [&](int64_t l) { return dst + (l / width) * panel_words + l % width; };
  for (int64_t qb = 0; qb < steps; qb += kBlock) {
    const int64_t q_end = std::min(steps, qb + kBlock);
    // The next block's rows are fetched while this one is packed (an LM head's weight is
    // larger than the caches: they would otherwise come from memory a row pair at a time).
    for (int64_t p = 2 * q_end; p < std::min(kc, 2 * (q_end + kBlock)); ++p) {
      const char* row = reinterpret_cast<const char*>(base + p * s.ld);
      for (int64_t byte = 0; byte < row_bytes; byte += 64) _mm_prefetch(row + byte, _MM_HINT_T0);
    }
    for (int64_t l = 0; l < wide_lanes; l += 32) {
      uint32_t* const runs[4] = {word_of(l), word_of(l + 8), word_of(l + 16), word_of(l + 24)};
      for (int64_t q = qb; q < q_end; ++q) {
        const T* row0 = base + 2 * q * s.ld + l;
        const int64_t e0 = (p0 + 2 * q) * s.ld + w0 + l;  // row0's element of the stored matrix
        const __m512i lo = Get32<kDropped>(row0, s, e0);
        const __m512i hi =
            2 * q + 1 >= kc ? _mm512_setzero_si512() : Get32<kDropped>(row0 + s.ld, s, e0 + s.ld);
        const __m512i low_words = _mm512_unpacklo_epi16(lo, hi);
        const __m512i high_words = _mm512_unpackhi_epi16(lo, hi);
        const __m512i lanes_0_15 = _mm512_permutex2var_epi64(low_words, first_half, high_words);
        const __m512i lanes_16_31 = _mm512_permutex2var_epi64(low_words, second_half, high_words);
        const int64_t at = q * width;
        if (width % 32 == 0) {  // the 32 lanes are one run of a panel
          _mm512_storeu_si512(runs[0] + at, lanes_0_15);
          _mm512_storeu_si512(runs[0] + at + 16, lanes_16_31);
        } else {  // 8 lanes to a run
          const __m256i words[4] = {
              _mm512_castsi512_si256(lanes_0_15), _mm512_extracti64x4_epi64(lanes_0_15, 1),
              _mm512_castsi512_si256(lanes_16_31), _mm512_extracti64x4_epi64(lanes_16_31, 1)};
          for (int run = 0; run < 4; ++run) {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(runs[run] + at), words[run]);
          }
        }
      }
    }
    for (int64_t panel = wide_lanes / width; panel < panels; ++panel) {
      const int64_t first = panel * width;  // the panel's first lane
      const int64_t valid = std::clamp<int64_t>(lanes - first, 0, width);
      const int64_t full = valid / 8 * 8;
      const int64_t done = std::clamp<int64_t>(wide_lanes - first, 0, width);  // by the above
      for (int64_t q = qb; q < q_end; ++q) {
        const T* row0 = base + 2 * q * s.ld + first;
        const T* row1 = row0 + s.ld;
        const bool odd_tail = 2 * q + 1 >= kc;
        uint32_t* out = dst + panel * panel_words + q * width;
        const int64_t e0 = (p0 + 2 * q) * s.ld + w0 + first;  // row0's element
        for (int64_t w = done; w < full; w += 8) {
          const __m128i lo = Get8<kDropped>(row0 + w, s, e0 + w);
          const __m128i hi =
              odd_tail ? _mm_setzero_si128() : Get8<kDropped>(row1 + w, s, e0 + s.ld + w);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + w), _mm_unpacklo_epi16(lo, hi));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + w + 4), _mm_unpackhi_epi16(lo, hi));
        }
        for (int64_t w = std::max(full, done); w < width; ++w) {
          uint32_t word = 0;
          if (w < valid) {
            const int64_t lane = w0 + first + w;
            const uint32_t hi = odd_tail ? 0u : Bf16At(s, lane, p0 + 2 * q + 1);
            word = Bf16At(s, lane, p0 + 2 * q) | (hi << 16);
          }
          out[w] = word;
        }
      }
    }
  }
}

// K contiguous in the source (A stored (M, K), B stored (N, K)): a pair is one 32-bit word of
// lane w's run, so the panel is the (lanes x words) block transposed, 8 x 8 words at a time.
// A ragged last group of lanes, the words past a multiple of 8 and an odd kc's pad go one at
// a time.
template <bool kDropped, typename T>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"))) void
PackPairPanelKContiguous(const PanelSource& s, int64_t width, int64_t w0, int64_t p0, int64_t kc,
                         uint32_t* dst) {
  const int64_t lanes = std::min(width, s.lanes - w0), blocked_steps = kc / 16 * 8;
  const int64_t full_lanes = lanes / 8 * 8;
  const T* base = static_cast<const T*>(s.data) + w0 * s.ld + p0;
  for (int64_t wb = 0; wb < full_lanes; wb += 8) {
    const T* rows = base + wb * s.ld;
    // The next 8 lanes' runs (this panel's or the next one's), fetched while these are packed.
    const int64_t ahead = std::min<int64_t>(8, s.lanes - (w0 + wb + 8));
    for (int64_t qb = 0; qb < blocked_steps; qb += 8) {
      __m256i r[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        r[i] = Get16<kDropped>(rows + i * s.ld + 2 * qb, s, (w0 + wb + i) * s.ld + p0 + 2 * qb);
      }
      for (int64_t i = 0; i < ahead; ++i) {
        _mm_prefetch(reinterpret_cast<const char*>(rows + (8 + i) * s.ld + 2 * qb), _MM_HINT_T0);
      }
      Transpose8x8(r, dst + qb * width + wb, width);
    }
  }
  if (full_lanes < width) {  // the ragged lanes and the padding lanes, for the blocked steps
    for (int64_t q = 0; q < blocked_steps; ++q) {
      for (int64_t w = full_lanes; w < width; ++w) {
        uint32_t word = 0;
        if (w < lanes) {
          word = Bf16At(s, w0 + w, p0 + 2 * q) |
                 (static_cast<uint32_t>(Bf16At(s, w0 + w, p0 + 2 * q + 1)) << 16);
        }
        dst[q * width + w] = word;
      }
    }
  }
  if (blocked_steps * 2 < kc) {
    PackPairPanelScalar(s, width, w0, p0 + 2 * blocked_steps, kc - 2 * blocked_steps,
                        dst + blocked_steps * width);
  }
}

// A dropped A stored (M, K) (dropout masks here, none in the plain case: those rows are read in
// place): each row's kc steps through the mask into the panel's row r at dst + r * depth
// words, the words in step order (Bf16Rows{panel, 4 * depth, 4}: the in-place layout).
template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"))) void PackPairRowsDroppedOf(
    const PanelSource& s, int64_t width, int64_t w0, int64_t count, int64_t p0, int64_t kc,
    uint32_t* dst) {
  const int64_t depth = (kc + 1) / 2, lanes = std::min(count, s.lanes - w0);
  const int64_t panels = (count + width - 1) / width;
  std::fill(dst + lanes * depth, dst + panels * width * depth, 0u);  // the rows past M
  for (int64_t w = 0; w < lanes; ++w) {
    const T* src = static_cast<const T*>(s.data) + (w0 + w) * s.ld + p0;
    auto* out =
        reinterpret_cast<uint16_t*>(dst + (w / width) * width * depth + (w % width) * depth);
    const int64_t e = (w0 + w) * s.ld + p0;
    for (int64_t p = 0; p < kc; p += 16) {
      const __mmask16 count16 = TailMask(kc - p);
      _mm256_mask_storeu_epi16(out + p, count16, LoadDropped(src + p, s, e + p, count16));
    }
    if (kc % 2 != 0) out[kc] = 0;  // the pad step
  }
}

template <bool kDropped>
void PackPairPanelsOf(const PanelSource& s, int64_t width, int64_t w0, int64_t count, int64_t p0,
                      int64_t kc, uint32_t* dst) {
  if (!s.k_contiguous) {
    if (s.bf16) {
      return PackPairPanelsLanesContiguous<kDropped, uint16_t>(s, width, w0, count, p0, kc, dst);
    }
    return PackPairPanelsLanesContiguous<kDropped, float>(s, width, w0, count, p0, kc, dst);
  }
  const int64_t panel_words = (kc + 1) / 2 * width;
  for (int64_t w = 0; w < count; w += width) {
    uint32_t* panel = dst + w / width * panel_words;
    if (s.bf16) {
      PackPairPanelKContiguous<kDropped, uint16_t>(s, width, w0 + w, p0, kc, panel);
    } else {
      PackPairPanelKContiguous<kDropped, float>(s, width, w0 + w, p0, kc, panel);
    }
  }
}

}  // namespace

void PackPairRowsDropped(const PanelSource& s, int64_t width, int64_t w0, int64_t count, int64_t p0,
                         int64_t kc, uint32_t* dst) {
  if (s.bf16) return PackPairRowsDroppedOf<uint16_t>(s, width, w0, count, p0, kc, dst);
  PackPairRowsDroppedOf<float>(s, width, w0, count, p0, kc, dst);
}

void PackPairPanels(const PanelSource& s, int64_t width, int64_t w0, int64_t count, int64_t p0,
                    int64_t kc, uint32_t* dst) {
  if (s.drop_bits != nullptr) return PackPairPanelsOf<true>(s, width, w0, count, p0, kc, dst);
  PackPairPanelsOf<false>(s, width, w0, count, p0, kc, dst);
}

}  // namespace air::engine
