// The GEMM for products with a side of at most 16 (see gemm_narrow.h).
#include "engine/backend/cpu/gemm_narrow.h"

#include <immintrin.h>

// GCC 12 reports the undefined pass-through operand inside unmasked AVX-512 intrinsics as
// uninitialized (a false positive; vec_math.cc says the same).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <vector>

#include "engine/backend/cpu/bf16_simd.h"
#include "engine/backend/cpu/cpu_features.h"

namespace air::engine {
namespace {

constexpr int64_t kWidth = kNarrowGemmWidth;  // floats in a packed row of the narrow operand
constexpr int64_t kTile = 8;                  // rows of the streamed operand per tile
// Rows of C per block of the K <= 16 kernel: 8 independent accumulators, what Intel's two FMA
// ports (4 cycles each) need to stay busy; with 4 the kernel was latency-bound there, 80 GFLOP/s
// of the core's 176 on 1024 x 512 x 16 (92-95 with 8; Zen 4's one 512-bit FMA a cycle needs
// only 4). 16-row streamed tiles measured slower on N = 16 there (85 vs 97: 16 row streams at
// once), so those stay 8. The rows per block or tile change no bits.
constexpr int64_t kThinRows = 8;

// A stored matrix read as rows x cols: element (r, c) at index r * row_stride + c * col_stride
// of data, F32 or BF16. `round`: an F32 element is taken rounded to bf16 (NarrowGemmBf16).
// drop_bits: a dropped operand (NarrowGemmBf16's GemmOperand::drop_bits), element i of the
// stored matrix (origin + its index from data) taken as ApplyDropoutMask writes it,
// RoundToBf16(bit i ? x * drop_scale : 0).
struct Matrix {
  const void* data;
  bool bf16, round;
  int64_t row_stride, col_stride;
  const uint8_t* drop_bits = nullptr;
  int64_t drop_bytes = 0;
  float drop_scale = 1.0f;
  int64_t origin = 0;  // data's index in the stored matrix (the mask's)
  float At(int64_t r, int64_t c) const {
    const int64_t at = r * row_stride + c * col_stride;
    const float x = bf16 ? WidenBf16(static_cast<const uint16_t*>(data)[at])
                         : static_cast<const float*>(data)[at];
    if (drop_bits != nullptr) {
      const int64_t e = origin + at;
      return WidenBf16(RoundToBf16((drop_bits[e / 8] >> (e % 8)) & 1u ? x * drop_scale : 0.0f));
    }
    return round && !bf16 ? WidenBf16(RoundToBf16(x)) : x;
  }
  // fp32 values as stored: the tiles read them in place.
  bool Floats() const { return !bf16 && !round && drop_bits == nullptr; }
};

// op(A) (M, K) and op(B) (K, N) as Matrix.
Matrix OpA(const GemmOperand& a, bool round) {
  return {a.data,      a.bf16,       round,       a.trans ? 1 : a.ld, a.trans ? a.ld : 1,
          a.drop_bits, a.drop_bytes, a.drop_scale};
}
Matrix OpB(const GemmOperand& b, bool round) {
  return {b.data,      b.bf16,       round,       b.trans ? 1 : b.ld, b.trans ? b.ld : 1,
          b.drop_bits, b.drop_bytes, b.drop_scale};
}
Matrix Transposed(const Matrix& x) {
  Matrix t = x;
  std::swap(t.row_stride, t.col_stride);
  return t;
}

// The streamed operand's rows from r0 as the tile reads them: s[t * st + kk * sk].
struct Rows {
  const float* s;
  int64_t st, sk;
};

// 16 elements of m from flat index `at` (the lanes in mask) as the fp32 values the product
// takes: BF16 widened, F32 rounded to bf16 and widened.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512 Values16(
    const Matrix& m, int64_t at, __mmask16 mask) {
  __m512 v = m.bf16 ? LoadF32x16(static_cast<const uint16_t*>(m.data) + at, mask)
                    : LoadF32x16(static_cast<const float*>(m.data) + at, mask);
  if (m.drop_bits != nullptr) {  // ApplyDropoutMask's operations (dropout_range.cc)
    const __mmask16 keep = MaskBits16(m.drop_bits, m.drop_bytes, m.origin + at) & mask;
    v = _mm512_maskz_mul_ps(keep, v, _mm512_set1_ps(m.drop_scale));
  } else if (m.bf16) {
    return v;
  }
  return WidenBf16x16(RoundToBf16x16(v));
}

// out[t * 16 + j] = sum over kk < k of s(t, kk) * packed[kk * 16 + j], ascending kk, t < T.
template <int T>
__attribute__((target("avx512f,fma"))) void NarrowTile(const Rows& r, const float* packed,
                                                       int64_t k, float* out) {
  // The accumulators stay in registers only when the loops over t are unrolled.
  __m512 acc[T];
  const float* row[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm512_setzero_ps();
    row[t] = r.s + t * r.st;
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    const __m512 p = _mm512_loadu_ps(packed + kk * kWidth);
    const int64_t at = kk * r.sk;
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(row[t][at]), p, acc[t]);
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * kWidth, acc[t]);
}

// f.template operator()<R>() for R = count, 1 <= count <= kMax (a runtime row count as the
// template argument the kernels' unrolled loops need).
template <int R, int kMax, typename F>
void WithRows(int64_t count, const F& f) {
  if constexpr (R < kMax) {
    if (count > R) return WithRows<R + 1, kMax>(count, f);
  }
  f.template operator()<R>();
}

void RunTile(int64_t rows, const Rows& r, const float* packed, int64_t k, float* out) {
  WithRows<1, kTile>(rows, [&]<int R>() { NarrowTile<R>(r, packed, k, out); });
}

// C (i, j) = value + beta * C (i, j) (beta 0: C ignored), rounded once for a BF16 C.
// With c.kept_bits: C (i, j) += (bit (i * ld + j) ? value * kept_scale : 0) instead (beta
// unread), ApplyDropoutMask's accumulate (fast_rowwise.cc: the same operations).
void Put(const GemmResult& c, int64_t i, int64_t j, float value, float beta) {
  const int64_t at = i * c.ld + j;
  if (c.kept_bits != nullptr) {
    const float kept = (c.kept_bits[at / 8] >> (at % 8)) & 1u ? value * c.kept_scale : 0.0f;
    if (c.bf16) {
      uint16_t& dst = static_cast<uint16_t*>(c.data)[at];
      dst = RoundToBf16(WidenBf16(dst) + kept);
    } else {
      float& dst = static_cast<float*>(c.data)[at];
      dst = dst + kept;
    }
    return;
  }
  if (c.bf16) {
    uint16_t& dst = static_cast<uint16_t*>(c.data)[at];
    if (beta != 0.0f) value += beta * WidenBf16(dst);
    dst = RoundToBf16(value);
    return;
  }
  float& dst = static_cast<float*>(c.data)[at];
  if (beta != 0.0f) value += beta * dst;
  dst = value;
}

// Put of `count` (<= 16) consecutive elements of C from `at`: the same bits as Put's; a BF16 C
// rounded by vcvtneps2bf16 when kNative (bf16_simd.h's StoreF32x16Native: only where
// NativeBf16Rounding; compiled with AVX512-BF16 and DQ for it, which no other line here uses).
template <bool kNative = false>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"), always_inline)) inline void
PutVector(const GemmResult& c, int64_t at, int64_t count, __m512 value, float beta) {
  const __mmask16 mask = TailMask(count);
  const __m512 b = _mm512_set1_ps(beta);
  if (c.kept_bits != nullptr) {  // C + kept product, in ApplyDropoutMask's order (as Put's)
    const __mmask16 keep = MaskBits16(c.kept_bits, c.kept_bytes, at) & mask;
    const __m512 kept = _mm512_maskz_mul_ps(keep, value, _mm512_set1_ps(c.kept_scale));
    beta = 0.0f;
    value = c.bf16
                ? _mm512_add_ps(LoadF32x16(static_cast<const uint16_t*>(c.data) + at, mask), kept)
                : _mm512_add_ps(LoadF32x16(static_cast<const float*>(c.data) + at, mask), kept);
  }
  if (c.bf16) {
    uint16_t* dst = static_cast<uint16_t*>(c.data) + at;
    if (beta != 0.0f) value = _mm512_add_ps(value, _mm512_mul_ps(b, LoadF32x16(dst, mask)));
    if constexpr (kNative) {
      return StoreF32x16Native(dst, mask, value);
    } else {
      return StoreF32x16(dst, mask, value);
    }
  }
  float* dst = static_cast<float*>(c.data) + at;
  if (beta != 0.0f) value = _mm512_add_ps(value, _mm512_mul_ps(b, LoadF32x16(dst, mask)));
  StoreF32x16(dst, mask, value);
}

// Elements c0 .. c0 + count - 1 (count <= 16) of row r of m as the product takes them (BF16
// widened, a rounded F32 rounded), stored at dst[0 .. count): one vector where the row is
// contiguous, else one by one.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void RowValues(const Matrix& m, int64_t r,
                                                                    int64_t c0, int64_t count,
                                                                    float* dst) {
  if (m.col_stride != 1) {
    for (int64_t j = 0; j < count; ++j) dst[j] = m.At(r, c0 + j);
    return;
  }
  const __mmask16 mask = TailMask(count);
  const int64_t at = r * m.row_stride + c0;
  const __m512 v =
      m.Floats() ? LoadF32x16(static_cast<const float*>(m.data) + at, mask) : Values16(m, at, mask);
  _mm512_mask_storeu_ps(dst, mask, v);
}

// m's columns from c0 on, as a matrix of the same rows.
Matrix FromColumn(const Matrix& m, int64_t c0) {
  const int64_t at = c0 * m.col_stride;
  Matrix from = m;
  from.data = m.bf16 ? static_cast<const void*>(static_cast<const uint16_t*>(m.data) + at)
                     : static_cast<const void*>(static_cast<const float*>(m.data) + at);
  from.origin += at;
  return from;
}

// The streamed operand with its rows contiguous (element (r, kk) at r + kk * col_stride: a
// transposed operand, as dy^T in LoRA's dB = dy^T u and xd^T in dA = du^T xd, or a copy laid
// out so): 16 rows are one vector, multiplied by each of the packed operand's 16 columns in
// turn, out[j * 16 + t] (+)= sum over kk < steps of L (r0 + t, kk) P (kk, j) for t in `mask`
// (packed: P's row of the first step; `first`: out not read). The same products, summed in the
// same order, as NarrowTile's (the sums wait in out, as fp32, between slices of K); one load of
// L (and for BF16 one widening) per 16 FMAs, each with its P element broadcast from memory, and
// 16 independent accumulators. NarrowTile over a converted [kk][t] copy ran these products
// at 46-56 GFLOP/s on one Intel core (BF16 L).
template <bool kBf16, bool kRound, bool kDropped = false>
__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) void ColumnTile(const Matrix& l,
                                                                         int64_t r0, __mmask16 mask,
                                                                         const float* packed,
                                                                         int64_t steps, bool first,
                                                                         float* out) {
  __m512 acc[kWidth];
#pragma GCC unroll 16
  for (int j = 0; j < kWidth; ++j) {
    acc[j] = first ? _mm512_setzero_ps() : _mm512_load_ps(out + j * 16);
  }
  for (int64_t kk = 0; kk < steps; ++kk) {
    const int64_t at = r0 + kk * l.col_stride;
    _mm_prefetch(static_cast<const char*>(l.data) + (at + 16 * l.col_stride) * (kBf16 ? 2 : 4),
                 _MM_HINT_T0);
    __m512 v;
    if constexpr (kDropped) {
      v = Values16(l, at, mask);
    } else if constexpr (kBf16) {
      v = LoadF32x16(static_cast<const uint16_t*>(l.data) + at, mask);
    } else {
      v = LoadF32x16(static_cast<const float*>(l.data) + at, mask);
      if constexpr (kRound) v = WidenBf16x16(RoundToBf16x16(v));
    }
    const float* p = packed + kk * kWidth;
#pragma GCC unroll 16
    for (int j = 0; j < kWidth; ++j) acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), v, acc[j]);
  }
#pragma GCC unroll 16
  for (int j = 0; j < kWidth; ++j) _mm512_store_ps(out + j * 16, acc[j]);
}

// ColumnTile over rows r0 .. r0 + n_rows - 1 (at most kColumnPair * 16), 16 at a time, a slice
// of kColumnSlice steps of K at a time: both tiles read the slice's lines of L (a BF16 tile
// half of each) and P's slice from L1. out: n_rows' tiles of 16 x 16 floats.
constexpr int64_t kColumnPair = 2;
constexpr int64_t kColumnSlice = 256;
template <bool kBf16, bool kRound, bool kDropped = false>
void ColumnTiles(const Matrix& l, int64_t r0, int64_t n_rows, const float* packed, int64_t k,
                 float* out) {
  for (int64_t k0 = 0; k0 < k; k0 += kColumnSlice) {
    const int64_t steps = std::min(kColumnSlice, k - k0);
    for (int64_t t = 0; t * 16 < n_rows; ++t) {
      ColumnTile<kBf16, kRound, kDropped>(FromColumn(l, k0), r0 + t * 16, TailMask(n_rows - t * 16),
                                          packed + k0 * kWidth, steps, k0 == 0,
                                          out + t * kWidth * 16);
    }
  }
}

void RunColumnTiles(const Matrix& l, int64_t r0, int64_t n_rows, const float* packed, int64_t k,
                    float* out) {
  if (l.drop_bits != nullptr) {
    if (l.bf16) return ColumnTiles<true, false, true>(l, r0, n_rows, packed, k, out);
    return ColumnTiles<false, true, true>(l, r0, n_rows, packed, k, out);
  }
  if (l.bf16) return ColumnTiles<true, false>(l, r0, n_rows, packed, k, out);
  if (l.round) return ColumnTiles<false, true>(l, r0, n_rows, packed, k, out);
  ColumnTiles<false, false>(l, r0, n_rows, packed, k, out);
}

// Rows r0 .. r0 + n_rows - 1 (at most 16) of a streamed operand with K contiguous, steps
// k0 .. k0 + steps - 1, as the fp32 values the product takes laid out [kk][16] at dst (rows
// past n_rows zero): ColumnTile's rows-contiguous layout, by a 16 x 16 transpose (64 shuffles)
// a block of 16 steps.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void TransposedRows(const Matrix& l,
                                                                         int64_t r0, int64_t n_rows,
                                                                         int64_t k0, int64_t steps,
                                                                         float* dst) {
  for (int64_t kb = 0; kb < steps; kb += 16) {
    const int64_t count = std::min<int64_t>(16, steps - kb);
    const __mmask16 mask = TailMask(count);
    __m512 r[16];
#pragma GCC unroll 16
    for (int t = 0; t < 16; ++t) {
      const int64_t at = (r0 + t) * l.row_stride + k0 + kb;
      if (t >= n_rows) {
        r[t] = _mm512_setzero_ps();
      } else if (l.Floats()) {
        r[t] = LoadF32x16(static_cast<const float*>(l.data) + at, mask);
      } else {
        r[t] = Values16(l, at, mask);
      }
    }
    Transpose16x16(r);
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      if (j < count) _mm512_storeu_ps(dst + (kb + j) * 16, r[j]);
    }
  }
}

// The narrow operand P (k x width, width <= 16) as the tiles read it: k rows of 16 floats, zero
// past width; transposed 16 steps at a time where its columns are contiguous (A^T in LoRA's
// x A^T), else a row at a time.
void PackNarrow(const Matrix& p, int64_t width, int64_t k, std::vector<float>& packed) {
  packed.assign(static_cast<size_t>(k * kWidth), 0.0f);
  if (p.row_stride == 1 && p.col_stride != 1) {
    return TransposedRows(Transposed(p), 0, width, 0, k, packed.data());
  }
  for (int64_t kk = 0; kk < k; ++kk) RowValues(p, kk, 0, width, packed.data() + kk * kWidth);
}

// A streamed operand with K contiguous (x in LoRA's x A^T, dy in dy B), rows r0 ..
// r0 + n_rows - 1 (at most 16): slices of kColumnSlice steps transposed into `slice` (a
// kColumnSlice x 16 buffer, L1-sized with P's slice) for ColumnTile. NarrowTile reading 8 such
// rows (BF16 ones converted first) ran these products at 68-84 GFLOP/s on one Intel core.
void TransposedTile(const Matrix& l, int64_t r0, int64_t n_rows, const float* packed, int64_t k,
                    float* slice, float* out) {
  const Matrix copy{slice, false, false, 1, 16};
  for (int64_t k0 = 0; k0 < k; k0 += kColumnSlice) {
    const int64_t steps = std::min(kColumnSlice, k - k0);
    TransposedRows(l, r0, n_rows, k0, steps, slice);
    ColumnTile<false, false>(copy, 0, TailMask(16), packed + k0 * kWidth, steps, k0 == 0, out);
  }
}

// ColumnTile's out (C^T's rows r0 .. r0 + n_rows - 1, j < width) put into C: C (j, r0 + t)
// when transposed_c (a row of C a vector), else C (r0 + t, j) (transposed back first).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"))) void PutColumnTile(
    const GemmResult& c, int64_t r0, int64_t n_rows, int64_t width, const float* out, float beta,
    bool transposed_c) {
  if (transposed_c) {
    for (int64_t j = 0; j < width; ++j) {
      PutVector(c, j * c.ld + r0, n_rows, _mm512_load_ps(out + j * 16), beta);
    }
    return;
  }
  __m512 r[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) r[j] = _mm512_load_ps(out + j * 16);
  Transpose16x16(r);
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) {
    if (t < n_rows) PutVector(c, (r0 + t) * c.ld, width, r[t], beta);
  }
}

// NarrowTile's out (rows r0 .. r0 + n_rows - 1 of L's product, j < width) put into C: C (r0 +
// t, j) a row a vector, or C (j, r0 + t) when transposed_c.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"))) void PutRows(
    const GemmResult& c, int64_t r0, int64_t n_rows, int64_t width, const float* out, float beta,
    bool transposed_c) {
  for (int64_t t = 0; t < n_rows; ++t) {
    if (!transposed_c) {
      PutVector(c, (r0 + t) * c.ld, width, _mm512_loadu_ps(out + t * kWidth), beta);
      continue;
    }
    for (int64_t j = 0; j < width; ++j) Put(c, j, r0 + t, out[t * kWidth + j], beta);
  }
}

// N <= 16 (transposed_c false: L = op(A), P = op(B)) or M <= 16 (true: L = op(B)^T,
// P = op(A)^T, C written transposed): the streamed L (rows x K) against the packed P (K x width).
void StreamedProduct(ThreadPool& pool, NarrowGemmScratch& scratch, const Matrix& l, int64_t rows,
                     const Matrix& p, int64_t width, int64_t k, float beta, const GemmResult& c,
                     bool transposed_c) {
  PackNarrow(p, width, k, scratch.packed);
  if (l.row_stride == 1 && l.col_stride != 1) {  // rows contiguous: ColumnTiles
    constexpr int64_t kRows = kColumnPair * 16;
    pool.ParallelForBalanced((rows + kRows - 1) / kRows, 1, [&](int64_t begin, int64_t end, int) {
      alignas(64) float out[kColumnPair * kWidth * 16];
      for (int64_t pair = begin; pair < end; ++pair) {
        const int64_t r0 = pair * kRows, n_rows = std::min(kRows, rows - r0);
        RunColumnTiles(l, r0, n_rows, scratch.packed.data(), k, out);
        for (int64_t t = 0; t * 16 < n_rows; ++t) {
          PutColumnTile(c, r0 + t * 16, std::min<int64_t>(16, n_rows - t * 16), width,
                        out + t * kWidth * 16, beta, transposed_c);
        }
      }
    });
    return;
  }
  // One of a stored operand's strides is 1: the rows contiguous (above), or K (here).
  if (!l.Floats()) {  // K contiguous, BF16 or rounded: TransposedTile
    scratch.rows.resize(static_cast<size_t>(pool.num_threads()));
    pool.ParallelForBalanced((rows + 15) / 16, 1, [&](int64_t begin, int64_t end, int thread) {
      std::vector<float>& slice = scratch.rows[static_cast<size_t>(thread)];
      if (slice.size() < static_cast<size_t>(kColumnSlice * 16)) slice.resize(kColumnSlice * 16);
      alignas(64) float out[kWidth * 16];
      for (int64_t tile = begin; tile < end; ++tile) {
        const int64_t r0 = tile * 16, n_rows = std::min<int64_t>(16, rows - r0);
        TransposedTile(l, r0, n_rows, scratch.packed.data(), k, slice.data(), out);
        PutColumnTile(c, r0, n_rows, width, out, beta, transposed_c);
      }
    });
    return;
  }
  // fp32 values with K contiguous: NarrowTile reads them in place, 8 rows at a time.
  const int64_t tiles = (rows + kTile - 1) / kTile;
  pool.ParallelForBalanced(tiles, 1, [&](int64_t begin, int64_t end, int) {
    alignas(64) float out[kTile * kWidth];
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t r0 = tile * kTile, n_rows = std::min(kTile, rows - r0);
      const Rows streamed{static_cast<const float*>(l.data) + r0 * l.row_stride, l.row_stride,
                          l.col_stride};
      RunTile(n_rows, streamed, scratch.packed.data(), k, out);
      PutRows(c, r0, n_rows, width, out, beta, transposed_c);
    }
  });
}

// Rows i0 .. i0 + R - 1 of C for K <= 16: C (i, :) = sum over kk of a[r * 16 + kk] P (kk, :)
// + beta C (i, :), 32 columns at a time (two P vectors loaded once for the R rows: 10 loads a
// 16 FMAs with R = 8, where 16 columns at a time took 9 loads a 8 and ran load-bound).
template <int R, bool kNative>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma"))) void ThinRows(
    const float* a, const float* packed, int64_t n, int64_t k, float beta, const GemmResult& c,
    int64_t i0) {
  for (int64_t j0 = 0; j0 < n; j0 += 32) {
    const int64_t count0 = std::min<int64_t>(16, n - j0);
    const int64_t count1 = std::clamp<int64_t>(n - j0 - 16, 0, 16);
    const __mmask16 mask0 = TailMask(count0), mask1 = TailMask(count1);
    __m512 acc[R][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t kk = 0; kk < k; ++kk) {
      const float* row = packed + kk * n + j0;
      const __m512 p0 = _mm512_maskz_loadu_ps(mask0, row);
      const __m512 p1 = _mm512_maskz_loadu_ps(mask1, row + 16);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 x = _mm512_set1_ps(a[r * kWidth + kk]);
        acc[r][0] = _mm512_fmadd_ps(x, p0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(x, p1, acc[r][1]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      PutVector<kNative>(c, (i0 + r) * c.ld + j0, count0, acc[r][0], beta);
      if (count1 > 0) PutVector<kNative>(c, (i0 + r) * c.ld + j0 + 16, count1, acc[r][1], beta);
    }
  }
}

void ThinProduct(ThreadPool& pool, NarrowGemmScratch& scratch, int64_t m, int64_t n, int64_t k,
                 const Matrix& a, const Matrix& b, float beta, const GemmResult& c) {
  scratch.packed.resize(static_cast<size_t>(k * n));
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int64_t j = 0; j < n; j += 16) {
      RowValues(b, kk, j, std::min<int64_t>(16, n - j), scratch.packed.data() + kk * n + j);
    }
  }
  const bool native = c.bf16 && NativeBf16Rounding();
  const int64_t blocks = (m + kThinRows - 1) / kThinRows;
  const int64_t grain = std::max<int64_t>(1, 1024 / std::max<int64_t>(1, n));
  pool.ParallelForBalanced(blocks, grain, [&](int64_t begin, int64_t end, int) {
    float rows[kThinRows * kWidth];
    for (int64_t block = begin; block < end; ++block) {
      const int64_t i0 = block * kThinRows, count = std::min(kThinRows, m - i0);
      for (int64_t r = 0; r < count; ++r) RowValues(a, i0 + r, 0, k, rows + r * kWidth);
      const float* p = scratch.packed.data();
      WithRows<1, kThinRows>(count, [&]<int R>() {
        if (native) return ThinRows<R, true>(rows, p, n, k, beta, c, i0);
        ThinRows<R, false>(rows, p, n, k, beta, c, i0);
      });
    }
  });
}

}  // namespace

bool NarrowGemmApplies(int64_t m, int64_t n, int64_t k) {
  if (m <= 0 || n <= 0 || k <= 0 || !UseAvx512()) return false;
  return n <= kWidth || m <= kWidth || k <= kWidth;
}

namespace {

void Run(ThreadPool& pool, NarrowGemmScratch& scratch, int64_t m, int64_t n, int64_t k,
         const Matrix& op_a, const Matrix& op_b, float beta, const GemmResult& c) {
  if (n <= kWidth) {
    StreamedProduct(pool, scratch, op_a, m, op_b, n, k, beta, c, false);
  } else if (m <= kWidth) {
    StreamedProduct(pool, scratch, Transposed(op_b), n, Transposed(op_a), m, k, beta, c, true);
  } else {
    ThinProduct(pool, scratch, m, n, k, op_a, op_b, beta, c);
  }
}

}  // namespace

void NarrowGemm(ThreadPool& pool, NarrowGemmScratch& scratch, bool trans_a, bool trans_b, int64_t m,
                int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                float beta, const GemmResult& c) {
  Run(pool, scratch, m, n, k, OpA({a, false, lda, trans_a}, false),
      OpB({b, false, ldb, trans_b}, false), beta, c);
}

void NarrowGemmBf16(ThreadPool& pool, NarrowGemmScratch& scratch, int64_t m, int64_t n, int64_t k,
                    const GemmOperand& a, const GemmOperand& b, float beta, const GemmResult& c) {
  Run(pool, scratch, m, n, k, OpA(a, true), OpB(b, true), beta, c);
}

}  // namespace air::engine
