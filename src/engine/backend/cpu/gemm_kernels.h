// The micro-kernels of the packed CPU GEMMs (gemm_blocking.h): each multiplies an A panel
// (MR rows) by a B panel (NR columns) over one K slice and adds the MR x NR product into C
// through a TileOut. fp32 panels (fast_gemm.h, and gemm_mixed.h's conversion paths) hold one
// value per K step: A as [p][r], B as [p][c]. bf16 pair panels (gemm_mixed.h's avx512bf16
// path) hold two K steps per 32-bit word, the even one in the low half: A as [q][r], B as
// [q][c] (VNNI layout), an odd K padded with zeros.
// Thread safety: pure functions of their arguments.
#pragma once

#include <cstdint>

#include "engine/backend/cpu/cpu_features.h"

namespace air::engine {

// Where a micro-kernel's result goes: C (mr x nr valid of MR x NR) with row stride ldc.
// first_slice: C = beta * C + acc (beta == 0: C = acc, ignoring what C held); else C += acc.
struct KeptAdd;
struct TileOut {
  float* c;
  int64_t ldc;
  int64_t mr;
  int64_t nr;
  float beta;
  bool first_slice;
  const KeptAdd* kept = nullptr;  // the bf16 kernels' masked accumulate (below); null: none
};

// C += (bit e of bits ? acc * scale : 0) for the tile's element (r, c), e = first + r * ldc + c
// (Ops::GemmAddDropped: ApplyDropoutMask accumulating the product into C, its AVX-512 loop's
// operations): the bf16 kernels' store over one K slice, instead of TileOut's, for an fp32 C
// at TileOut's c, or a BF16 C at the Bf16TileOut (widened, added, rounded once).
struct KeptAdd {
  const uint8_t* bits;
  int64_t bytes;  // of bits
  int64_t first;  // the tile's element (0, 0) in C's flat index
  float scale;
};

using Fp32MicroKernelFn = void (*)(int64_t kc, const float* a_panel, const float* b_panel,
                                   const TileOut& out);
// A micro-kernel with its tile: the packing lays panels out as it reads them.
struct Fp32MicroKernel {
  Fp32MicroKernelFn fn;
  int64_t mr;
  int64_t nr;
};

// The fp32 FMA kernel of a level: 12 x 32 with AVX-512 (avx512 and avx512bf16), 6 x 16 with
// AVX2 + FMA, 8 x 32 portable loops.
Fp32MicroKernel Fp32MicroKernelFor(CpuKernels level);
// Floats of the largest of those tiles (mr x nr): a local tile that any of them may fill.
inline constexpr int64_t kFp32MaxTileFloats = 12 * 32;

// The AVX2 kernel's 6 x 16 tile with op(A) read in place instead of from a packed panel
// (fast_gemm.cc: products of at most 16 columns, where packing A costs as much as the product,
// and A with K-contiguous rows): element (r, p) of the tile at data[r * row_stride + p *
// step_stride].
// Rows past `rows` (a ragged last tile) are never read: the kernel reads row 0 for them. The
// same sums in the same order as from a panel: the same bits.
inline constexpr int64_t kAvx2KernelMR = 6;
inline constexpr int64_t kAvx2KernelNR = 16;
struct Fp32Rows {
  const float* data;
  int64_t row_stride, step_stride;
  int64_t rows;
};
void MicroKernelAvx2Rows(int64_t kc, const Fp32Rows& a, const float* b_panel, const TileOut& out);

// Where the bf16 kernel rounds its result to when C is BF16 and the slice is K's last:
// C16 = bf16(acc + partial + beta * C16), partial the fp32 sums of the earlier slices at
// TileOut's c (none on the first slice), C16 read as fp32, beta from TileOut (0: C16 unread).
struct Bf16TileOut {
  uint16_t* c;
  int64_t ldc;
};

// Where the bf16 kernel reads op(A)'s pairs: the word of row r, step q at byte offset
// r * row_bytes + q * step_bytes from data. A pair panel: (4, 4 * MR); the rows of a BF16 A
// stored (M, K), K contiguous, from its column p0: (2 * lda, 4), read in place. Rows past
// `rows` (a ragged last tile) are never read: the kernel reads row 0 for them.
struct Bf16Rows {
  const void* data;
  int64_t row_bytes, step_bytes;
  int64_t rows;
};

// The vdpbf16ps kernel (AVX512-BF16 CPUs, with AVX512BW and VL): an 8 x 32 tile over kc K
// steps (a B pair panel of ceil(kc / 2) words per column). `round_to` null: the result goes
// to out as TileOut says; else to round_to as Bf16TileOut says.
inline constexpr int64_t kBf16KernelMR = 8;
inline constexpr int64_t kBf16KernelNR = 32;
void MicroKernelAvx512Bf16(int64_t kc, const Bf16Rows& a, const uint32_t* b_panel,
                           const TileOut& out, const Bf16TileOut* round_to);

// A second K segment of a product (gemm_mixed.h's GemmBf16ConcatK): kc more steps of A's pairs
// read from `rows`, against the B panel's words after the first segment's.
struct Bf16Segment {
  int64_t kc;
  Bf16Rows rows;
};
// The 8 x 32 kernel over a's kc steps and then second's, summed in one set of accumulators (so
// the result is rounded or stored once): the panel holds ceil(kc / 2) + ceil(second.kc / 2)
// words per column, the first segment's first. No KeptAdd store.
void MicroKernelAvx512Bf16TwoSegments(int64_t kc, const Bf16Rows& a, const Bf16Segment& second,
                                      const uint32_t* b_panel, const TileOut& out,
                                      const Bf16TileOut* round_to);

// The same kernel for products at most 16 columns wide (LoRA's rank-r products x A^T and dy B,
// N = r): a 16 x 16 tile, one vector of B pairs a step and 16 rows' broadcasts, where the 8 x 32
// tile would multiply 16 columns of zeros. Each element gets the same sums in the same order as
// in the 8 x 32 kernel: the same bits.
inline constexpr int64_t kBf16NarrowMR = 16;
inline constexpr int64_t kBf16NarrowNR = 16;
void MicroKernelAvx512Bf16Narrow(int64_t kc, const Bf16Rows& a, const uint32_t* b_panel,
                                 const TileOut& out, const Bf16TileOut* round_to);

}  // namespace air::engine
