// The products of FastOps attention's tiles (fast_attention.cc) on the avx512bf16 and avx512
// paths: the bf16 GEMM of gemm_mixed.h (the path's panels and micro-kernel), but skipping the
// micro-tiles that the causal and window limits leave all zero. In a tile of queries against
// keys, row i of the product only reaches the keys (its columns, or its K steps) j with
// i + band.lo <= j <= i + band.hi; GemmBf16OnPath would compute the whole rectangle, a quarter
// of it past the diagonal on a training shape (half of a causal tile's). Here each micro-tile of
// rows takes only its band's column tiles, or its band's K steps (rounded out to whole bf16
// pairs on avx512bf16): what is skipped is a sum of exact zeros (the masked P or dS entries).
// On avx512bf16 each computed element gets the GEMM's bits (K in one slice there too); on avx512
// each sums its K steps in order in one slice (the GEMM's slices of 256 steps add their partial
// sums: the bits differ from it where K is deeper). The caller states the band; outside it, C is:
//   columns (band on N): zeros when beta is 0 (a masked score's slot, never a stale value);
//                        else unchanged;
//   K steps (band on K): every element of C is computed (beta * C alone where no step is left).
// A and B are bf16 or F32 (F32 rounded to bf16 when packed); on avx512bf16 A is read in place
// when it is a BF16 (M, K) matrix, else packed; B is packed whole (K in one slice), each call.
// On avx512 both are packed whole into fp32 panels (PackFloatPanelsAvx2), its 12 x 32 kernel:
// the whole-rectangle GEMM ran attention at 53-58 GFLOP/s of useful products on one Intel core.
// Thread safety: one call per scratch at a time (a pool task's own).
#pragma once

#include <cstdint>
#include <limits>

#include "engine/backend/cpu/gemm_mixed.h"

namespace air::engine {

// Row i of C reaches index j (a column, or a K step) only for i + lo <= j <= i + hi.
struct AttentionBand {
  static constexpr int64_t kOpen = std::numeric_limits<int64_t>::max() / 4;
  int64_t lo = -kOpen;
  int64_t hi = kOpen;
  bool on_columns = true;  // false: on K steps
};

// The rows of each A pair panel (the micro-kernel's), for AttentionGemmBf16PackedA's callers.
inline constexpr int64_t kAttentionPanelRows = 8;

// Whether the products run here for a caller on `path` (FastOps::native_bf16_path): it is
// avx512bf16 or avx512 (and this CPU runs it).
bool AttentionGemmRuns(GemmBf16Path path);

// C (m, n) = op(A) @ op(B) + beta * C within `band` (see above) on `path` (AttentionGemmRuns);
// m, n, k > 0.
void AttentionGemmBf16(GemmBf16Path path, GemmBf16Scratch& scratch, int64_t m, int64_t n, int64_t k,
                       const GemmOperand& a, const GemmOperand& b, float beta, const GemmResult& c,
                       const AttentionBand& band);

// The same on avx512bf16 with op(A) already in pair panels (ceil(m / 8) panels of ceil(k / 2) x 8
// words, as PackPairPanels lays out an A of width 8; attention_tile.h writes dS^T and P^T so):
// every word the band reaches must be valid, the others are never read.
void AttentionGemmBf16PackedA(GemmBf16Scratch& scratch, int64_t m, int64_t n, int64_t k,
                              const uint32_t* a_panels, const GemmOperand& b, float beta,
                              const GemmResult& c, const AttentionBand& band);

}  // namespace air::engine
