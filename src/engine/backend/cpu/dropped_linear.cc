// LoRA's A backward in one pass over x, its mask and dx (see dropped_linear.h).
#include "engine/backend/cpu/dropped_linear.h"

#include <immintrin.h>

// GCC 12 reports the undefined pass-through operand inside unmasked AVX-512 intrinsics as
// uninitialized (a false positive; vec_math.cc says the same).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>

#include "engine/backend/cpu/bf16_simd.h"

namespace air::engine {
namespace {

constexpr int64_t kLanes = 16;         // columns of x per vector
constexpr int64_t kUnitsPerPiece = 2;  // 64 columns: a balanced task's piece
constexpr int64_t kMaxSteps = kDroppedLinearMaxRank / 2;
constexpr int64_t kPrefetchRows = 16;  // how far ahead the strided rows are fetched

// Row t of dy rounded to bf16, in the low halves of 16 lanes (zeros past r; all zero past n).
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512i DyRow(
    const DroppedLinearGrads& g, int64_t t) {
  const __mmask16 lanes = TailMask(g.r);
  if (t >= g.n) return _mm512_setzero_si512();
  if (g.dy_bf16) {
    return _mm512_cvtepu16_epi32(
        _mm256_maskz_loadu_epi16(lanes, static_cast<const uint16_t*>(g.dy) + t * g.r));
  }
  return RoundToBf16x16(_mm512_maskz_loadu_ps(lanes, static_cast<const float*>(g.dy) + t * g.r));
}

// dy's values rounded to bf16 as the GEMM packs them, in the two layouts of its pairs:
//   along_n: word (q, j) = dy[2q][j] | dy[2q + 1][j] << 16, 16 words per q (the weight
//            gradient's A pairs along N; zero past r and past n)
//   along_r: word (t, s) = dy[t][2s] | dy[t][2s + 1] << 16, kMaxSteps words per row (the input
//            gradient's A pairs along r; zero past r)
__attribute__((target("avx512f,avx512bw,avx512vl"))) void PackDy(const DroppedLinearGrads& g,
                                                                 uint32_t* along_n,
                                                                 uint32_t* along_r) {
  for (int64_t t = 0; t < g.n; t += 2) {
    const __m512i even = DyRow(g, t), odd = DyRow(g, t + 1);
    _mm512_storeu_si512(along_n + t / 2 * kLanes,
                        _mm512_or_si512(even, _mm512_slli_epi32(odd, 16)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(along_r + t * kMaxSteps),
                        _mm512_cvtepi32_epi16(even));
    if (t + 1 < g.n) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(along_r + (t + 1) * kMaxSteps),
                          _mm512_cvtepi32_epi16(odd));
    }
  }
}

// 16 bf16 of a row (the lanes in `lanes`, zeros past them) as words' low halves.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512i LoadRow(
    const uint16_t* src, __mmask16 lanes) {
  return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(lanes, src));
}

// dx's 16 elements from flat element e += (kept ? v * scale : 0): GemmAddDropped's kept add
// (gemm_kernels.cc's StoreKeptAdd), into an F32 or a BF16 dx.
template <bool kDxBf16>
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void KeptAdd(
    const DroppedLinearGrads& g, int64_t e, __mmask16 lanes, __m512 v) {
  const __mmask16 keep = MaskBits16(g.bits, g.bytes, e) & lanes;
  const __m512 added = _mm512_maskz_mul_ps(keep, v, _mm512_set1_ps(g.scale));
  if constexpr (kDxBf16) {
    uint16_t* c16 = static_cast<uint16_t*>(g.dx) + e;
    const __m512 sum = _mm512_add_ps(
        WidenBf16x16(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(lanes, c16))), added);
    _mm256_mask_storeu_epi16(c16, lanes, _mm512_cvtepi32_epi16(RoundToBf16x16(sum)));
  } else {
    float* c = static_cast<float*>(g.dx) + e;
    _mm512_mask_storeu_ps(c, lanes, _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, c), added));
  }
}

// A unit of 32 columns of x (two 16-lane vectors, the GEMM tile's width): from column j0, the
// lanes of each vector within x's width (a vector past it has none).
struct Unit {
  int64_t j0;
  __mmask16 lanes[2];
};

// Rows [t, t + kRows) of dx in one unit (kRows x 2 accumulators: each element's sum is a chain of
// dependent vdpbf16ps; each broadcast of dy serves both vectors), each the product of its dy pairs
// along r and W's pairs, added through the mask. kSteps: the pairs along r (0: `steps`).
template <bool kDxBf16, int kSteps, int kRows>
__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl"), always_inline)) inline void DxRows(
    const DroppedLinearGrads& g, const uint32_t* along_r, const __m512bh (*w_pairs)[2],
    int64_t steps, int64_t t, const Unit& unit) {
  __m512 v[kRows][2];
#pragma GCC unroll 4
  for (int i = 0; i < kRows; ++i) v[i][0] = v[i][1] = _mm512_setzero_ps();
  const uint32_t* pairs = along_r + t * kMaxSteps;
  const int64_t count = kSteps > 0 ? kSteps : steps;
#pragma GCC unroll 8
  for (int64_t s = 0; s < count; ++s) {
#pragma GCC unroll 4
    for (int i = 0; i < kRows; ++i) {
      const __m512bh b = (__m512bh)_mm512_set1_epi32(static_cast<int>(pairs[i * kMaxSteps + s]));
      v[i][0] = _mm512_dpbf16_ps(v[i][0], b, w_pairs[s][0]);
      v[i][1] = _mm512_dpbf16_ps(v[i][1], b, w_pairs[s][1]);
    }
  }
  if (t + kRows + kPrefetchRows < g.n) {  // dx's rows ahead, both 64-byte lines of an F32 run
    const int64_t e = (t + kRows + kPrefetchRows) * g.in + unit.j0;
    const char* line = kDxBf16 ? reinterpret_cast<const char*>(static_cast<uint16_t*>(g.dx) + e)
                               : reinterpret_cast<const char*>(static_cast<float*>(g.dx) + e);
    for (int i = 0; i < kRows; ++i) {
      _mm_prefetch(line + i * g.in * (kDxBf16 ? 2 : 4), _MM_HINT_T0);
      if (!kDxBf16) _mm_prefetch(line + i * g.in * 4 + 64, _MM_HINT_T0);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < kRows; ++i) {
    const int64_t e = (t + i) * g.in + unit.j0;
    KeptAdd<kDxBf16>(g, e, unit.lanes[0], v[i][0]);
    if (unit.lanes[1] != 0) KeptAdd<kDxBf16>(g, e + kLanes, unit.lanes[1], v[i][1]);
  }
}

// Rows t and t + 1 (a zero pad past n) of x's 16 columns from j0 (`lanes` of them), dropped and
// paired along N: word c = drop(x)[t][j0 + c] | drop(x)[t + 1][j0 + c] << 16 (the GemmDropped B
// panel's).
__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl,avx512dq"),
               always_inline)) inline __m512i
DroppedPair(const DroppedLinearGrads& g, int64_t t, int64_t j0, __mmask16 lanes) {
  const int64_t e = t * g.in + j0;
  const __m512 even = WidenBf16x16(LoadRow(g.x + e, lanes));
  const __m256i even_dropped = DropToBf16x16(even, g.bits, g.bytes, e, lanes, g.scale);
  __m256i odd_dropped = _mm256_setzero_si256();
  if (t + 1 < g.n) {
    const __m512 odd = WidenBf16x16(LoadRow(g.x + e + g.in, lanes));
    odd_dropped = DropToBf16x16(odd, g.bits, g.bytes, e + g.in, lanes, g.scale);
  }
  return _mm512_or_si512(_mm512_cvtepu16_epi32(even_dropped),
                         _mm512_slli_epi32(_mm512_cvtepu16_epi32(odd_dropped), 16));
}

// acc (8 of dy's columns from j, x 32 of x's) += the pairs' products: `pairs` pairs of x
// (x_pairs: 2 vectors of 16 words each) against dy's (dy_pairs: 16 words each, from column j),
// in order (the GEMM's AccumulatePairs on an 8 x 32 tile: one broadcast for two vdpbf16ps).
__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl"), always_inline)) inline void
AccumulateRowPairs(int64_t pairs, const uint32_t* x_pairs, const uint32_t* dy_pairs,
                   __m512 (&acc)[8][2]) {
  for (int64_t q = 0; q < pairs; ++q, x_pairs += 2 * kLanes, dy_pairs += kLanes) {
    const __m512bh x0 = (__m512bh)_mm512_load_si512(x_pairs);
    const __m512bh x1 = (__m512bh)_mm512_load_si512(x_pairs + kLanes);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m512bh b = (__m512bh)_mm512_set1_epi32(static_cast<int>(dy_pairs[j]));
      acc[j][0] = _mm512_dpbf16_ps(acc[j][0], b, x0);
      acc[j][1] = _mm512_dpbf16_ps(acc[j][1], b, x1);
    }
  }
}

// Units [u0, u1) of both gradients (at most kUnitsPerPiece), in blocks of kRowBlock rows: per
// unit, the block's rows of x dropped and paired, their products, then the block's rows of dx (the
// weight gradient's sums wait in `partial` between blocks, added in the same order; the strided
// rows of x, the mask and dx are prefetched kPrefetchRows ahead: they come cold from the
// forward). Measured in blocks of 16, 64 and 256 rows, in pieces of 2 units and in one static
// range per thread: 256 in pieces, the fastest. kDx: 0 none, 1 F32, 2 BF16; kSteps: 8 (rank 15
// or 16) or 0 (the rank's pairs at run time).
template <int kDx, int kSteps>
__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl,avx512dq"))) void Units(
    const DroppedLinearGrads& g, const uint32_t* along_n, const uint32_t* along_r, int64_t u0,
    int64_t u1) {
  constexpr int64_t kRowBlock = 256;  // even (no pair straddles two blocks); its x pairs: 16 KiB
  const int64_t steps = (g.r + 1) / 2, depth = GemmSliceDepth(g.n, kGemmBf16PairSlice, 2);
  const int64_t count = u1 - u0, halves = g.r > 8 ? 2 : 1;  // dy's columns in groups of 8
  Unit units[kUnitsPerPiece];
  // W's pairs along r per unit (the GemmAddDropped B panel's words).
  __m512bh w_pairs[kUnitsPerPiece][kMaxSteps][2];
  for (int64_t ui = 0; ui < count; ++ui) {
    Unit& unit = units[ui];
    unit.j0 = (u0 + ui) * 2 * kLanes;
    for (int v = 0; v < 2; ++v) {
      const int64_t left = g.in - unit.j0 - v * kLanes;
      unit.lanes[v] = left > 0 ? TailMask(left) : 0;
      for (int64_t s = 0; kDx != 0 && s < steps; ++s) {
        const uint16_t* w = g.w + 2 * s * g.in + unit.j0 + v * kLanes;
        const __m512i even = LoadRow(w, unit.lanes[v]);
        const __m512i odd =
            2 * s + 1 < g.r ? LoadRow(w + g.in, unit.lanes[v]) : _mm512_setzero_si512();
        w_pairs[ui][s][v] = (__m512bh)_mm512_or_si512(even, _mm512_slli_epi32(odd, 16));
      }
    }
  }
  alignas(64) float partial[kUnitsPerPiece][2][8][2][kLanes];
  for (int64_t t0 = 0; t0 < g.n; t0 += depth) {
    const int64_t t1 = std::min(g.n, t0 + depth);
    for (int64_t tb = t0; tb < t1; tb += kRowBlock) {
      const int64_t te = std::min(t1, tb + kRowBlock), pairs = (te - tb + 1) / 2;
      for (int64_t ui = 0; ui < count; ++ui) {
        const Unit& unit = units[ui];
        // The block's rows of x dropped and paired first (16 KiB), then multiplied: the
        // product's loop keeps its accumulators in registers (measured: twice as fast as
        // dropping each pair inside it, where they spilled).
        alignas(64) uint32_t x_pairs[kRowBlock / 2][2][kLanes];
        for (int64_t q = 0; q < pairs; ++q) {
          const int64_t ahead = tb + 2 * q + kPrefetchRows;
          if (ahead + 1 < g.n) {  // x's and the mask's rows ahead: the strided runs come cold
            _mm_prefetch(reinterpret_cast<const char*>(g.x + ahead * g.in + unit.j0), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(g.x + (ahead + 1) * g.in + unit.j0),
                         _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(g.bits + (ahead * g.in + unit.j0) / 8),
                         _MM_HINT_T0);
          }
          for (int v = 0; v < 2; ++v) {
            _mm512_store_si512(x_pairs[q][v],
                               DroppedPair(g, tb + 2 * q, unit.j0 + v * kLanes, unit.lanes[v]));
          }
        }
        const bool last = te == t1, write = t0 == 0 && g.beta == 0.0f;
        for (int64_t h = 0; h < halves; ++h) {
          __m512 acc[8][2];
          float(&kept)[8][2][kLanes] = partial[ui][h];
#pragma GCC unroll 8
          for (int j = 0; j < 8; ++j) {
            for (int v = 0; v < 2; ++v) {
              acc[j][v] = tb == t0 ? _mm512_setzero_ps() : _mm512_load_ps(kept[j][v]);
            }
          }
          AccumulateRowPairs(pairs, x_pairs[0][0], along_n + tb / 2 * kLanes + 8 * h, acc);
          if (!last) {
#pragma GCC unroll 8
            for (int j = 0; j < 8; ++j) {
              for (int v = 0; v < 2; ++v) _mm512_store_ps(kept[j][v], acc[j][v]);
            }
            continue;
          }
          // The slice's sums into w_grad: the GEMM's first slice with beta 0 writes, every
          // other adds (beta 1's C + acc).
          for (int64_t j = 8 * h; j < std::min<int64_t>(g.r, 8 * h + 8); ++j) {
            for (int v = 0; v < 2; ++v) {
              if (unit.lanes[v] == 0) continue;
              float* out = g.w_grad + j * g.in + unit.j0 + v * kLanes;
              const __m512 sum = acc[j - 8 * h][v];
              _mm512_mask_storeu_ps(
                  out, unit.lanes[v],
                  write ? sum : _mm512_add_ps(_mm512_maskz_loadu_ps(unit.lanes[v], out), sum));
            }
          }
        }
        if constexpr (kDx != 0) {  // the block's rows of dx, while its mask bits are in L1
          int64_t t = tb;
          for (; t + 4 <= te; t += 4) {
            DxRows<kDx == 2, kSteps, 4>(g, along_r, w_pairs[ui], steps, t, unit);
          }
          for (; t < te; ++t) DxRows<kDx == 2, kSteps, 1>(g, along_r, w_pairs[ui], steps, t, unit);
        }
      }
    }
  }
}

}  // namespace

bool DroppedLinearBackwardRuns(GemmBf16Path path, int64_t n, int64_t r, int64_t in, bool x_bf16,
                               bool w_bf16, bool w_grad_f32, bool has_dx) {
  return path == GemmBf16Path::kAvx512Bf16 && n > 0 && in > 0 && r >= 1 &&
         r <= kDroppedLinearMaxRank && x_bf16 && w_grad_f32 && (!has_dx || w_bf16);
}

void FusedDroppedLinearBackward(ThreadPool& pool, DroppedLinearScratch& scratch,
                                const DroppedLinearGrads& g) {
  const size_t along_n_words = static_cast<size_t>((g.n + 1) / 2 * kLanes);
  const size_t words = along_n_words + static_cast<size_t>(g.n * kMaxSteps);
  if (scratch.dy_pairs.size() < words) scratch.dy_pairs.resize(words);
  uint32_t* along_n = scratch.dy_pairs.data();
  uint32_t* along_r = along_n + along_n_words;
  PackDy(g, along_n, along_r);
  const int64_t units = (g.in + 2 * kLanes - 1) / (2 * kLanes);
  const bool full = (g.r + 1) / 2 == kMaxSteps;
  const auto run = g.dx == nullptr ? Units<0, 0>
                   : g.dx_bf16     ? (full ? Units<2, kMaxSteps> : Units<2, 0>)
                                   : (full ? Units<1, kMaxSteps> : Units<1, 0>);
  pool.ParallelForBalanced(
      (units + kUnitsPerPiece - 1) / kUnitsPerPiece, 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t piece = begin; piece < end; ++piece) {  // Units takes one piece at a time
          run(g, along_n, along_r, piece * kUnitsPerPiece,
              std::min(units, (piece + 1) * kUnitsPerPiece));
        }
      });
}

}  // namespace air::engine
