// The packed GEMMs' micro-kernels (see gemm_kernels.h).
#include "engine/backend/cpu/gemm_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "engine/backend/cpu/bf16_simd.h"

// GCC 12 reports the deliberately undefined pass-through operand inside the unmasked AVX-512
// shift and convert intrinsics as uninitialized (a false positive; as in vec_math.cc).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace air::engine {
namespace {

// The portable and bf16 kernels' micro-tile: 8 rows x 32 columns (two 16-float vectors).
constexpr int64_t kMR = 8;
constexpr int64_t kNR = 32;
// The AVX-512 fp32 kernel's: 12 x 32 (24 accumulators, two B vectors and a broadcast: 27 of
// 32 registers). On an Emerald Rapids core (two 512-bit FMA ports) the kernel alone, B panels
// streamed from L2, ran at 92% of the FMA peak as 12 x 32 and 81% as 8 x 32: each K step's two
// B loads and loop overhead then feed 24 FMAs instead of 16. Each element of C still sums its
// K steps in order, so the rows per tile change no bits.
constexpr int64_t kMR512 = 12;
static_assert(kMR512 * kNR <= kFp32MaxTileFloats && kMR * kNR <= kFp32MaxTileFloats);
// The AVX2 kernel's: 6 x 16 (12 ymm accumulators, two for B, one broadcast: 15 of 16
// registers; enough independent FMAs in flight to cover their latency on both FMA ports).
constexpr int64_t kMR2 = 6;
constexpr int64_t kNR2 = 16;
static_assert(kBf16KernelMR == kMR && kBf16KernelNR == kNR,
              "the bf16 kernel stores like the AVX-512 one");

// acc holds rows of `nr_stride` floats (the kernel's NR).
inline void StoreTile(const float* acc /* (MR, NR) */, const TileOut& out,
                      int64_t nr_stride = kNR) {
  for (int64_t r = 0; r < out.mr; ++r) {
    float* crow = out.c + r * out.ldc;
    const float* arow = acc + r * nr_stride;
    if (!out.first_slice) {
      for (int64_t j = 0; j < out.nr; ++j) crow[j] += arow[j];
    } else if (out.beta == 0.0f) {
      for (int64_t j = 0; j < out.nr; ++j) crow[j] = arow[j];
    } else {
      for (int64_t j = 0; j < out.nr; ++j) crow[j] = out.beta * crow[j] + arow[j];
    }
  }
}

// acc (MR, NR) = sum_p ap[p] (MR) outer bp[p] (NR): the portable micro-kernel.
void MicroKernelGeneric(int64_t kc, const float* ap, const float* bp, const TileOut& out) {
  alignas(64) float acc[kMR * kNR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* a = ap + p * kMR;
    const float* b = bp + p * kNR;
    for (int64_t r = 0; r < kMR; ++r) {
      const float ar = a[r];
      for (int64_t j = 0; j < kNR; ++j) acc[r * kNR + j] += ar * b[j];
    }
  }
  StoreTile(acc, out);
}

// Adds the accumulators of an 8 x 32 AVX-512 tile into C (TileOut's rule): vector stores
// for a full tile, else through StoreTile.
template <int kRows>
__attribute__((target("avx512f,fma"), always_inline)) inline void StoreAccAvx512(
    const __m512 (&acc)[kRows][2], const TileOut& out) {
  if (out.mr == kRows && out.nr == kNR) {
    const __m512 beta = _mm512_set1_ps(out.beta);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      float* crow = out.c + r * out.ldc;
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m512 v = acc[r][h];
        if (!out.first_slice) {
          v = _mm512_add_ps(v, _mm512_loadu_ps(crow + 16 * h));
        } else if (out.beta != 0.0f) {
          v = _mm512_fmadd_ps(beta, _mm512_loadu_ps(crow + 16 * h), v);
        }
        _mm512_storeu_ps(crow + 16 * h, v);
      }
    }
    return;
  }
  alignas(64) float tile[kRows * kNR];
  for (int r = 0; r < kRows; ++r) {
    _mm512_store_ps(tile + r * kNR, acc[r][0]);
    _mm512_store_ps(tile + r * kNR + 16, acc[r][1]);
  }
  StoreTile(tile, out);
}

// The same with 24 AVX-512 accumulators (12 rows x 2 vectors of 16).
__attribute__((target("avx512f,fma"))) void MicroKernelAvx512(int64_t kc, const float* ap,
                                                              const float* bp, const TileOut& out) {
  __m512 acc[kMR512][2];
#pragma GCC unroll 16
  for (int r = 0; r < kMR512; ++r) {
    acc[r][0] = _mm512_setzero_ps();
    acc[r][1] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_loadu_ps(bp + p * kNR);
    const __m512 b1 = _mm512_loadu_ps(bp + p * kNR + 16);
    const float* a = ap + p * kMR512;
#pragma GCC unroll 16
    for (int r = 0; r < kMR512; ++r) {
      const __m512 ar = _mm512_set1_ps(a[r]);
      acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
    }
  }
  StoreAccAvx512(acc, out);
}

// Where the AVX2 kernel reads A's element (r, p): a packed panel ([p][r], 6 floats a step), or
// op(A) in place (Fp32Rows: six row pointers and one step offset, so each broadcast is one
// load with a base and an index register, as from the panel).
struct PanelA {
  const float* panel;
  __attribute__((always_inline)) const float* At(int r, int64_t p) const {
    return panel + p * kMR2 + r;
  }
};
struct InPlaceA {
  const float* row[kMR2];
  int64_t step_stride;
  __attribute__((always_inline)) const float* At(int r, int64_t p) const {
    return row[r] + p * step_stride;
  }
};

// AVX2 and FMA (16 ymm registers) on a 6 x 16 tile: 12 accumulators (6 rows x 2 vectors of 8),
// named one by one: as an array GCC keeps them in memory and stores all twelve every step.
template <typename A>
__attribute__((target("avx2,fma"), always_inline)) inline void MicroKernelAvx2For(
    int64_t kc, const A& a, const float* bp, const TileOut& out) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  // C's rows fetched while the sums run (they are read, or written, after the loop).
  for (int64_t r = 0; r < out.mr; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(out.c + r * out.ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(out.c + r * out.ldc + kNR2 - 1), _MM_HINT_T0);
  }
  const float* b = bp;
  // Two steps an iteration (unrolled): half the loop's own instructions per FMA. With C's
  // prefetch, +1% on the step's products (one Intel core, AVX2 kernels).
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p, b += kNR2) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 ar = _mm256_broadcast_ss(a.At(0, p));
    c00 = _mm256_fmadd_ps(ar, b0, c00);
    c01 = _mm256_fmadd_ps(ar, b1, c01);
    ar = _mm256_broadcast_ss(a.At(1, p));
    c10 = _mm256_fmadd_ps(ar, b0, c10);
    c11 = _mm256_fmadd_ps(ar, b1, c11);
    ar = _mm256_broadcast_ss(a.At(2, p));
    c20 = _mm256_fmadd_ps(ar, b0, c20);
    c21 = _mm256_fmadd_ps(ar, b1, c21);
    ar = _mm256_broadcast_ss(a.At(3, p));
    c30 = _mm256_fmadd_ps(ar, b0, c30);
    c31 = _mm256_fmadd_ps(ar, b1, c31);
    ar = _mm256_broadcast_ss(a.At(4, p));
    c40 = _mm256_fmadd_ps(ar, b0, c40);
    c41 = _mm256_fmadd_ps(ar, b1, c41);
    ar = _mm256_broadcast_ss(a.At(5, p));
    c50 = _mm256_fmadd_ps(ar, b0, c50);
    c51 = _mm256_fmadd_ps(ar, b1, c51);
  }
  alignas(64) float tile[kMR2 * kNR2];
  _mm256_store_ps(tile, c00);
  _mm256_store_ps(tile + 8, c01);
  _mm256_store_ps(tile + 16, c10);
  _mm256_store_ps(tile + 24, c11);
  _mm256_store_ps(tile + 32, c20);
  _mm256_store_ps(tile + 40, c21);
  _mm256_store_ps(tile + 48, c30);
  _mm256_store_ps(tile + 56, c31);
  _mm256_store_ps(tile + 64, c40);
  _mm256_store_ps(tile + 72, c41);
  _mm256_store_ps(tile + 80, c50);
  _mm256_store_ps(tile + 88, c51);
  if (out.mr == kMR2 && out.nr == kNR2) {
    const __m256 beta = _mm256_set1_ps(out.beta);
    for (int r = 0; r < kMR2; ++r) {
      float* crow = out.c + r * out.ldc;
      for (int h = 0; h < 2; ++h) {
        __m256 v = _mm256_load_ps(tile + r * kNR2 + 8 * h);
        if (!out.first_slice) {
          v = _mm256_add_ps(v, _mm256_loadu_ps(crow + 8 * h));
        } else if (out.beta != 0.0f) {
          v = _mm256_fmadd_ps(beta, _mm256_loadu_ps(crow + 8 * h), v);
        }
        _mm256_storeu_ps(crow + 8 * h, v);
      }
    }
    return;
  }
  StoreTile(tile, out, kNR2);
}

__attribute__((target("avx2,fma"))) void MicroKernelAvx2(int64_t kc, const float* ap,
                                                         const float* bp, const TileOut& out) {
  MicroKernelAvx2For(kc, PanelA{ap}, bp, out);
}

}  // namespace

Fp32MicroKernel Fp32MicroKernelFor(CpuKernels level) {
  if (level >= CpuKernels::kAvx512) return {MicroKernelAvx512, kMR512, kNR};
  if (level >= CpuKernels::kAvx2) return {MicroKernelAvx2, kMR2, kNR2};
  return {MicroKernelGeneric, kMR, kNR};
}

__attribute__((target("avx2,fma"))) void MicroKernelAvx2Rows(int64_t kc, const Fp32Rows& a,
                                                             const float* b_panel,
                                                             const TileOut& out) {
  static_assert(kAvx2KernelMR == kMR2 && kAvx2KernelNR == kNR2);
  InPlaceA in_place{{}, a.step_stride};
  for (int r = 0; r < kMR2; ++r) in_place.row[r] = a.data + (r < a.rows ? r : 0) * a.row_stride;
  MicroKernelAvx2For(kc, in_place, b_panel, out);
}

// The bf16 kernel's rounding store (Bf16TileOut): masked 16-column vectors, full or partial.
__attribute__((target("avx512f,avx512bw,avx512vl,fma"), always_inline)) inline void
StoreAccBf16Avx512(const __m512 (&acc)[kMR][2], const TileOut& out, const Bf16TileOut& dst) {
  // The tile's fields in locals: the stores through c16 may alias anything, and would make the
  // compiler read them from memory again at every vector (measured: a third of a K = 16 call).
  const int64_t rows = out.mr, ldc = out.ldc, ld16 = dst.ldc;
  const float* partial = out.first_slice ? nullptr : out.c;
  const bool add_c16 = out.beta != 0.0f;
  const __m512 beta = _mm512_set1_ps(out.beta);
  const __mmask16 masks[2] = {
      static_cast<__mmask16>((1u << std::clamp<int64_t>(out.nr, 0, 16)) - 1u),
      static_cast<__mmask16>((1u << std::clamp<int64_t>(out.nr - 16, 0, 16)) - 1u)};
  uint16_t* c16_row = dst.c;
  for (int r = 0; r < rows; ++r, c16_row += ld16) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __mmask16 mask = masks[h];
      uint16_t* c16 = c16_row + 16 * h;
      __m512 v = acc[r][h];
      if (partial != nullptr) {
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, partial + r * ldc + 16 * h));
      }
      if (add_c16) {
        const __m256i old = _mm256_maskz_loadu_epi16(mask, c16);
        v = _mm512_fmadd_ps(beta, WidenBf16x16(_mm512_cvtepu16_epi32(old)), v);
      }
      _mm256_mask_storeu_epi16(c16, mask, _mm512_cvtepi32_epi16(RoundToBf16x16(v)));
    }
  }
}

// The C rows a bf16 kernel's store reads (partial sums, or beta * C), fetched while the tile
// computes: `lines` 64-byte lines of each fp32 row, one of each BF16 row.
inline void PrefetchTileC(int64_t rows, int lines, const TileOut& out,
                          const Bf16TileOut* round_to) {
  const bool reads_f32 = !out.first_slice || (round_to == nullptr && out.beta != 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    if (reads_f32) {
      for (int line = 0; line < lines; ++line) {
        _mm_prefetch(reinterpret_cast<const char*>(out.c + r * out.ldc + 16 * line), _MM_HINT_T0);
      }
    }
    if (round_to != nullptr && out.beta != 0.0f) {
      _mm_prefetch(reinterpret_cast<const char*>(round_to->c + r * round_to->ldc), _MM_HINT_T0);
    }
  }
}

// The KeptAdd store of a bf16 kernel's tile (TileOut::kept): into out.c, or, with round_to,
// into its BF16 C (widened, added, rounded once: ApplyDropoutMask's accumulate into bf16).
template <int kRows, int kVectors>
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void StoreKeptAdd(
    const __m512 (&acc)[kRows][kVectors], const TileOut& out, const Bf16TileOut* round_to) {
  const KeptAdd& kept = *out.kept;
  const __m512 scale = _mm512_set1_ps(kept.scale);
  const int64_t ldc = round_to != nullptr ? round_to->ldc : out.ldc;
  for (int r = 0; r < out.mr; ++r) {
    for (int h = 0; h < kVectors; ++h) {
      const __mmask16 lanes = TailMask(std::max<int64_t>(0, out.nr - 16 * h));
      if (lanes == 0) continue;
      const int64_t at = r * ldc + 16 * h;
      const __mmask16 keep = MaskBits16(kept.bits, kept.bytes, kept.first + at) & lanes;
      const __m512 added = _mm512_maskz_mul_ps(keep, acc[r][h], scale);
      if (round_to != nullptr) {
        uint16_t* c16 = round_to->c + at;
        const __m256i old = _mm256_maskz_loadu_epi16(lanes, c16);
        const __m512 v = _mm512_add_ps(WidenBf16x16(_mm512_cvtepu16_epi32(old)), added);
        _mm256_mask_storeu_epi16(c16, lanes, _mm512_cvtepi32_epi16(RoundToBf16x16(v)));
        continue;
      }
      float* c = out.c + at;
      _mm512_mask_storeu_ps(c, lanes, _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, c), added));
    }
  }
}

// acc (kRows, 16 * kVectors) = sum_q A pairs (kRows rows) . bp[q] (16 * kVectors pairs), kc K
// steps (fresh: from zeros; else added to what acc holds): per step the vectors of B pairs and
// each row's A pair broadcast; vdpbf16ps adds both products of a pair into its fp32 lane, so
// every element gets its sums in K order whatever the tile. The pad step of an odd kc reads only
// the low half of each row's word; rows past a.rows read row 0 (never stored).
template <int kRows, int kVectors>
__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl"), always_inline)) inline void
AccumulatePairs(int64_t kc, const Bf16Rows& a, const uint32_t* b_panel,
                __m512 (&acc)[kRows][kVectors], bool fresh = true) {
  const char* row[kRows];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
    if (fresh) {
      for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_setzero_ps();
    }
    row[r] = static_cast<const char*>(a.data) + (r < a.rows ? r : 0) * a.row_bytes;
  }
  const int64_t full_steps = kc / 2;
  const uint32_t* b = b_panel;
  int64_t offset = 0;
  for (int64_t q = 0; q < full_steps; ++q, b += 16 * kVectors, offset += a.step_bytes) {
    __m512bh bv[kVectors];
    for (int v = 0; v < kVectors; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      int32_t pair;
      std::memcpy(&pair, row[r] + offset, sizeof pair);
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(pair);
      for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], ar, bv[v]);
    }
  }
  if (kc % 2 == 0) return;
  __m512bh bv[kVectors];  // the pad step: each row's low half alone
  for (int v = 0; v < kVectors; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + 16 * v);
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
    uint16_t low;
    std::memcpy(&low, row[r] + offset, sizeof low);
    const __m512bh ar = (__m512bh)_mm512_set1_epi32(low);
    for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], ar, bv[v]);
  }
}

// The 8 x 32 tile: AccumulatePairs, then the fp32 or rounding store.
__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl,fma"))) void MicroKernelAvx512Bf16(
    int64_t kc, const Bf16Rows& a, const uint32_t* b_panel, const TileOut& out,
    const Bf16TileOut* round_to) {
  __m512 acc[kMR][2];
  PrefetchTileC(a.rows, 2, out, round_to);
  AccumulatePairs<kMR, 2>(kc, a, b_panel, acc);
  if (out.kept != nullptr) return StoreKeptAdd(acc, out, round_to);
  if (round_to != nullptr) return StoreAccBf16Avx512(acc, out, *round_to);
  StoreAccAvx512(acc, out);
}

// The 8 x 32 tile over two K segments in one set of accumulators: `a`'s kc steps against the
// panel's first ceil(kc / 2) words, then `second`'s rows against the words after them.
__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl,fma"))) void
MicroKernelAvx512Bf16TwoSegments(int64_t kc, const Bf16Rows& a, const Bf16Segment& second,
                                 const uint32_t* b_panel, const TileOut& out,
                                 const Bf16TileOut* round_to) {
  __m512 acc[kMR][2];
  PrefetchTileC(a.rows, 2, out, round_to);
  AccumulatePairs<kMR, 2>(kc, a, b_panel, acc);
  AccumulatePairs<kMR, 2>(second.kc, second.rows, b_panel + (kc + 1) / 2 * kBf16KernelNR, acc,
                          false);
  if (round_to != nullptr) return StoreAccBf16Avx512(acc, out, *round_to);
  StoreAccAvx512(acc, out);
}

// acc (16, 16) = sum_q A pairs (16 rows) . bp[q] (16 pairs); the store as the 8 x 32 kernel's,
// one masked vector per row.
__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl,fma"))) void
MicroKernelAvx512Bf16Narrow(int64_t kc, const Bf16Rows& a, const uint32_t* b_panel,
                            const TileOut& out, const Bf16TileOut* round_to) {
  constexpr int kRows = static_cast<int>(kBf16NarrowMR);
  __m512 acc[kRows][1];
  PrefetchTileC(a.rows, 1, out, round_to);
  AccumulatePairs<kRows, 1>(kc, a, b_panel, acc);
  if (out.kept != nullptr) return StoreKeptAdd(acc, out, round_to);
  const __mmask16 mask = static_cast<__mmask16>((1u << out.nr) - 1u);
  const __m512 beta = _mm512_set1_ps(out.beta);
  for (int r = 0; r < out.mr; ++r) {
    __m512 v = acc[r][0];
    if (!out.first_slice) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, out.c + r * out.ldc));
    if (round_to != nullptr) {  // StoreAccBf16Avx512's order
      uint16_t* c16 = round_to->c + r * round_to->ldc;
      if (out.beta != 0.0f) {
        const __m256i old = _mm256_maskz_loadu_epi16(mask, c16);
        v = _mm512_fmadd_ps(beta, WidenBf16x16(_mm512_cvtepu16_epi32(old)), v);
      }
      _mm256_mask_storeu_epi16(c16, mask, _mm512_cvtepi32_epi16(RoundToBf16x16(v)));
      continue;
    }
    float* c = out.c + r * out.ldc;  // StoreTile's order: beta * C rounded, then added
    if (out.first_slice && out.beta != 0.0f) {
      v = _mm512_add_ps(_mm512_mul_ps(beta, _mm512_maskz_loadu_ps(mask, c)), v);
    }
    _mm512_mask_storeu_ps(c, mask, v);
  }
}

}  // namespace air::engine
