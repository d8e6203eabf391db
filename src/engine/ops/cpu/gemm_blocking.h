// The Goto/BLIS loop nest of the packed CPU GEMMs (fast_gemm.h's fp32 one, gemm_mixed.h's
// bf16 one), apart from what they pack and multiply: for each block of up to kNBlock columns
// (and of up to `row_block` rows) and each KC-deep slice of K, op(B) is packed into NR-column
// panels once, by all threads together; then the block's MC x kNC tiles of C are spread over
// the thread pool, each thread packing its rows of op(A) into MR-row panels, and the
// micro-kernel multiplies panel pairs into MR x NR tiles of C. Each element of C sums its
// slices in order of K whatever the tiling or thread count, so results are deterministic.
// Thread safety: one call per set of panel buffers at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/ops/cpu/thread_pool.h"

namespace air::engine {

inline constexpr int64_t kGemmMC = 128;       // rows of a C tile (rounded down to MR)
inline constexpr int64_t kGemmNC = 256;       // columns of a C tile (multiple of every NR)
inline constexpr int64_t kGemmNBlock = 4096;  // columns of op(B) packed at once (of kGemmNC)

// One micro-kernel call: the tile of C at (i, j), mr x nr of it valid, over the K slice
// [p0, p0 + kc), the first and/or last slice of K.
struct MicroTile {
  int64_t i, j;
  int64_t mr, nr;
  int64_t p0, kc;
  bool first_slice, last_slice;
};

// What a GEMM packs and multiplies. Panels are arrays of Word (float, or uint32_t holding a
// pair of bf16 consecutive in K): a panel of width w (MR or NR) and depth kc holds
// ceil(kc / k_per_word) * w words.
template <typename Word>
struct BlockedGemmPlan {
  int64_t m, n, k;
  int64_t mr, nr;      // the micro-kernel's tile
  int64_t kc;          // depth of a K slice (a multiple of k_per_word)
  int64_t k_per_word;  // 1, or 2 for bf16 pairs
  int64_t row_block;   // rows of C per pass over K: m, or fewer to bound a staging block
  // Packs rows [i, i + rows) of op(A)[:, p0 : p0 + kc] into ceil(rows / mr) consecutive
  // panels (zero past m).
  std::function<void(int64_t i, int64_t rows, int64_t p0, int64_t kc, Word* dst)> pack_a;
  // Packs columns [j, j + nr) of op(B)[p0 : p0 + kc, :] into one panel (zero past n).
  std::function<void(int64_t j, int64_t p0, int64_t kc, Word* dst)> pack_b;
  // Multiplies an A and a B panel into the micro-tile t of C.
  std::function<void(const Word* a_panel, const Word* b_panel, const MicroTile& t)> kernel;
};

// Runs the plan (m, n, k > 0): on the pool when it has more than one thread and the product
// is worth waking it for, else serially on the calling thread (pool may be null). The
// buffers (per thread A panels, shared B panels) grow as needed and are kept for reuse.
template <typename Word>
void RunBlockedGemm(const BlockedGemmPlan<Word>& plan, ThreadPool* pool,
                    std::vector<std::vector<Word>>& packed_a, std::vector<Word>& packed_b);

extern template void RunBlockedGemm<float>(const BlockedGemmPlan<float>&, ThreadPool*,
                                           std::vector<std::vector<float>>&, std::vector<float>&);
extern template void RunBlockedGemm<uint32_t>(const BlockedGemmPlan<uint32_t>&, ThreadPool*,
                                              std::vector<std::vector<uint32_t>>&,
                                              std::vector<uint32_t>&);

}  // namespace air::engine
