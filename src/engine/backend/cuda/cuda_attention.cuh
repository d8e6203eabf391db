// What the attention kernels share (cuda_attention_forward.cu, cuda_attention_backward.cu): the
// positional mask as key and query intervals, the tensor-core building blocks of the fast path
// (bf16 tiles in shared memory, ldmatrix fragments, mma.sync m16n8k16 with fp32 sums) and the
// dispatch rule between the two paths.
//
// Two paths compute ops.h's AttentionForward/AttentionBackward:
//   fast     flash-attention-2 tiles on tensor cores: q, k, v BF16, head_dim 16, 32, 64 or 128,
//            q, k, v (and the backward's dout) 16-byte aligned. Everything else of the op is
//            handled there too: GQA, segments, windows, q_offset, kv_capacity, sinks, any dtype
//            of out, dout, dq, dk, dv (an F32 dout is rounded to bf16 as a tensor-core operand,
//            ops.h's rule for a product with a BF16 partner).
//   generic  one warp per query row (per key row for dk, dv) with fp32 sums, every dtype and
//            head_dim: F32 data, mixed q/k/v dtypes, odd head sizes, misaligned views.
// FastPathFits decides; both paths follow the same rules, so the choice never changes what is
// computed, only the rounding (P and dS go through bf16 on tensor cores).
//
// Layouts: q, out, dout, dq (B, Tq, Hq, D); k, v, dk, dv (B, kv_rows, Hkv, D), the first kv_len
// rows keys; lse, delta (B, Hq, Tq) fp32; segments (B, Tq) and (B, kv_rows) int32 or both null.
// Thread safety: device functions over their arguments; the host helpers are pure.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "engine/backend/cuda/cuda_common.cuh"
#include "engine/backend/cuda/cuda_loops.cuh"

namespace air::engine::cuda::attention {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

// ---- the positional mask as intervals -------------------------------------------------------
// AttentionVisible (op_semantics.h) without segments, restated as intervals: key kj is visible
// to query qi iff kj <= q_abs and (no window or q_abs - kj < window), q_abs = q_offset + qi,
// i.e. kj in [q_abs - window + 1, q_abs]; the keys are [0, kv_len) and the queries [0, q_len).
// Segments are checked on top, element by element.

// The keys [*lo, *hi) query qi may see (empty for qi >= q_len). Both bounds are non-decreasing
// in qi, so the keys of queries [a, b] are [lo(a), hi(b)).
__host__ __device__ inline void VisibleKeys(const AttentionShape& s, int64_t qi, int64_t* lo,
                                            int64_t* hi) {
  const int64_t q_abs = s.q_offset + qi;
  *hi = qi < s.q_len ? (q_abs + 1 < s.kv_len ? q_abs + 1 : s.kv_len) : 0;
  *lo = s.sliding_window > 0 && q_abs - s.sliding_window + 1 > 0 ? q_abs - s.sliding_window + 1 : 0;
  if (*lo > *hi) *lo = *hi;
}
// The queries [*lo, *hi) that may see key kj (empty for kj >= kv_len): q_abs >= kj and, with a
// window, q_abs < kj + window. Both bounds are non-decreasing in kj.
__host__ __device__ inline void VisibleQueries(const AttentionShape& s, int64_t kj, int64_t* lo,
                                               int64_t* hi) {
  const int64_t first = kj - s.q_offset;
  *lo = first > 0 ? first : 0;
  *hi = s.q_len;
  if (s.sliding_window > 0 && first + s.sliding_window < *hi) *hi = first + s.sliding_window;
  if (kj >= s.kv_len || *hi < 0) *hi = 0;  // (a window can end before query 0)
  if (*lo > *hi) *lo = *hi;
}

// Whether every query of [q_first, q_last] sees every key of [k_first, k_last] (no segments,
// all of them real rows): then a tile needs no per-element mask.
__host__ __device__ inline bool TileFullyVisible(const AttentionShape& s, bool segmented,
                                                 int64_t q_first, int64_t q_last, int64_t k_first,
                                                 int64_t k_last) {
  if (segmented || q_last >= s.q_len || k_last >= s.kv_len) return false;
  if (k_last > s.q_offset + q_first) return false;  // causal, for the earliest query
  return s.sliding_window == 0 || s.q_offset + q_last - k_first < s.sliding_window;
}

// The columns [*lo, *hi) of a key tile starting at key j0 (kCols wide) that a row seeing the
// keys [row_lo, row_hi) sees, clipped to the tile.
template <int kCols>
__device__ __forceinline__ void TileColumns(int64_t row_lo, int64_t row_hi, int64_t j0, int* lo,
                                            int* hi) {
  const int64_t l = row_lo - j0, u = row_hi - j0;
  *lo = static_cast<int>(l < 0 ? 0 : (l > kCols ? kCols : l));
  *hi = static_cast<int>(u < 0 ? 0 : (u > kCols ? kCols : u));
}

// Element offset of row `row`, head `head` of a (B, rows, heads, D) tensor.
__host__ __device__ __forceinline__ int64_t RowOffset(int64_t b, int64_t row, int64_t rows,
                                                      int64_t heads, int64_t head, int64_t dim) {
  return ((b * rows + row) * heads + head) * dim;
}

// ---- the fast path's tiles ------------------------------------------------------------------
inline constexpr int kFastWarps = 4;
inline constexpr int kFastThreads = kFastWarps * 32;
inline constexpr int kWarpRows = 16;                       // the rows of one warp's mma tiles
inline constexpr int kBlockRows = kFastWarps * kWarpRows;  // 64: a block's query or key rows
inline constexpr int kPad = 8;  // bf16 after each shared row: 16 bytes, conflict-free ldmatrix

inline bool FastHeadDim(int64_t d) { return d == 16 || d == 32 || d == 64 || d == 128; }

// Whether the fast path takes a call (dout: the backward's, ptr null in the forward).
inline bool FastPathFits(const AttentionShape& s, In q, In k, In v, In dout) {
  return FastHeadDim(s.head_dim) && q.dtype == DType::kBF16 && k.dtype == DType::kBF16 &&
         v.dtype == DType::kBF16 && Aligned16({q.ptr, k.ptr, v.ptr, dout.ptr});
}

// Opts a kernel into more than 48 KiB of dynamic shared memory when it needs it.
template <typename Kernel>
void AllowSharedBytes(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024) {
    AIR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
  }
}

// A shared tile of kRows rows of D bf16, each row D + kPad long.
template <int D>
inline constexpr int kTileStride = D + kPad;
template <int D, int kRows>
inline constexpr size_t kTileBytes = size_t{kRows} * kTileStride<D> * sizeof(uint16_t);

// tile (kRows, D) <- rows [0, kRows) of one head of a (.., rows, heads, D) tensor: row r at
// element first + r * stride; rows r >= valid are zeros (never garbage: a masked score times a
// NaN value would still be NaN). F32 sources are rounded to bf16 (nearest even). 16-byte
// accesses: src's pointer aligned, D a multiple of 8.
template <int D, int kRows>
__device__ __forceinline__ void LoadTile(uint16_t* tile, In src, int64_t first, int64_t stride,
                                         int64_t valid) {
  constexpr int kChunks = D / 8;
  for (int c = threadIdx.x; c < kRows * kChunks; c += blockDim.x) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    uint4 bits = make_uint4(0u, 0u, 0u, 0u);
    if (r < valid) {
      const int64_t at = first + r * stride + col;
      if (src.dtype == DType::kBF16) {
        bits = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(src.ptr) + at);
      } else {
        const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(src.ptr) + at);
        const float4 lo = p[0], hi = p[1];
        bits = make_uint4(PackBf16Pair(lo.x, lo.y), PackBf16Pair(lo.z, lo.w),
                          PackBf16Pair(hi.x, hi.y), PackBf16Pair(hi.z, hi.w));
      }
    }
    *reinterpret_cast<uint4*>(tile + r * kTileStride<D> + col) = bits;
  }
}

// ---- warp-level tensor-core products --------------------------------------------------------
// mma.sync m16n8k16 (row.col, bf16 in, fp32 sums). With g = lane / 4 and t = lane % 4, the C
// fragment c[4] of a 16x8 tile holds (row g, cols 2t, 2t+1) in c[0], c[1] and (row g + 8, the
// same cols) in c[2], c[3]; A (16x16) holds (g, 2t..) (g+8, 2t..) (g, 8+2t..) (g+8, 8+2t..) in
// a[0..3], two bf16 per register, the lower column in the lower half; B (16x8, k by n) holds
// (k 2t.., n g) and (k 8+2t.., n g) in b[0], b[1].

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// Four 8x8 bf16 matrices: lanes 8m..8m+7 give the row addresses of matrix m; register m gets
// (row g, cols 2t, 2t+1) of matrix m.
__device__ __forceinline__ void LoadMatrices(uint32_t (&r)[4], const uint16_t* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SharedAddress(row))
               : "memory");
}
// The same, transposed: register m gets (rows 2t, 2t+1; col g) of matrix m.
__device__ __forceinline__ void LoadMatricesTransposed(uint32_t (&r)[4], const uint16_t* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SharedAddress(row))
               : "memory");
}
// c (16x8) += a (16x16) b (16x8).
__device__ __forceinline__ void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Two fp32 rounded to bf16 (nearest even) in one register, lo in the lower half.
__device__ __forceinline__ uint32_t PackOperand(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  uint32_t bits;
  memcpy(&bits, &pair, sizeof bits);
  return bits;
}

// acc (16 x 8 kTiles) = A (rows a_row0.., the warp's 16) . B (rows 0 .. 8 kTiles)^T, both
// shared tiles of D columns: the dot products of rows over D (S = Q K^T and its kin).
template <int D, int kTiles>
__device__ __forceinline__ void WarpRowDots(float (&acc)[kTiles][4], const uint16_t* a, int a_row0,
                                            const uint16_t* b) {
  static_assert(kTiles % 2 == 0 && D % 16 == 0, "whole 16x16 steps");
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int n = 0; n < kTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
  for (int k0 = 0; k0 < D; k0 += 16) {
    // Matrices: rows 0-7 / 8-15 of A at cols k0 / k0 + 8, in the order a[0..3] wants.
    uint32_t af[4];
    LoadMatrices(af, a + (a_row0 + (lane & 15)) * kTileStride<D> + k0 + (lane >> 4) * 8);
#pragma unroll
    for (int n = 0; n < kTiles; n += 2) {
      // B = rows n*8.. of b as (k = col, n = row): matrices (rows +0-7, k0) (rows +0-7, k0+8)
      // (rows +8-15, k0) (rows +8-15, k0+8) = b0, b1 of tile n, then of tile n + 1.
      uint32_t bf[4];
      LoadMatrices(bf, b + (n * 8 + (lane & 7) + ((lane >> 4) << 3)) * kTileStride<D> + k0 +
                           ((lane >> 3) & 1) * 8);
      Mma(acc[n], af, bf[0], bf[1]);
      Mma(acc[n + 1], af, bf[2], bf[3]);
    }
  }
}

// acc (16 x D) += P (16 x 8 kTiles: C fragments in fp32, rounded to bf16 here) . B, B the rows
// 0 .. 8 kTiles of a shared tile of D columns (O += P V and its kin).
template <int D, int kTiles>
__device__ __forceinline__ void WarpProductAdd(float (&acc)[D / 8][4], const float (&p)[kTiles][4],
                                               const uint16_t* b) {
  static_assert(kTiles % 2 == 0 && D % 16 == 0, "whole 16x16 steps");
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int kk = 0; kk < kTiles; kk += 2) {
    // The C fragments of cols kk*8.. and kk*8+8.. are the A fragment of that 16-wide k step.
    const uint32_t af[4] = {PackOperand(p[kk][0], p[kk][1]), PackOperand(p[kk][2], p[kk][3]),
                            PackOperand(p[kk + 1][0], p[kk + 1][1]),
                            PackOperand(p[kk + 1][2], p[kk + 1][3])};
#pragma unroll
    for (int n0 = 0; n0 < D; n0 += 16) {
      // B (k = row, n = col) transposed from rows kk*8..: matrices (rows +0-7, n0) (rows +8-15,
      // n0) (rows +0-7, n0+8) (rows +8-15, n0+8) = b0, b1 of col tile n0, then of n0 + 8.
      uint32_t bf[4];
      LoadMatricesTransposed(
          bf, b + (kk * 8 + (lane & 7) + ((lane >> 3) & 1) * 8) * kTileStride<D> + n0 +
                  (lane >> 4) * 8);
      Mma(acc[n0 / 8], af, bf[0], bf[1]);
      Mma(acc[n0 / 8 + 1], af, bf[2], bf[3]);
    }
  }
}

}  // namespace air::engine::cuda::attention
