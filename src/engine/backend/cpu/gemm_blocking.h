// The Goto/BLIS loop nest of the packed CPU GEMMs (fast_gemm.h's fp32 one, gemm_mixed.h's
// bf16 one), apart from what they pack and multiply: for each block of up to kNBlock columns
// (and of up to `row_block` rows) and each KC-deep slice of K, op(B) is packed into NR-column
// panels once, by all threads together; then the block's MC x kNC tiles of C are spread over
// the thread pool (balanced: a thread done with its share takes tiles from another's end), each
// thread packing its rows of op(A) into MR-row panels, and the micro-kernel multiplies panel pairs
// into MR x NR tiles of C. Each element of C sums its slices in order of K whatever the tiling or
// thread count, so results are deterministic. Thread safety: one call per set of panel buffers at a
// time. A B that several products read (a language model head's row chunks) can be packed once
// (PackBlockedB) and handed to each product as its prepacked_b.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/backend/cpu/thread_pool.h"

namespace air::engine {

inline constexpr int64_t kGemmMC = 128;       // rows of a C tile (rounded up to MR)
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

// The shape of a blocked GEMM and its panels. Panels are arrays of Word (float, or uint32_t
// holding a pair of bf16 consecutive in K): a panel of width w (MR or NR) and depth kc holds
// ceil(kc / k_per_word) * w words.
struct BlockedGemmShape {
  int64_t m, n, k;
  int64_t mr, nr;      // the micro-kernel's tile
  int64_t kc;          // depth of a K slice (a multiple of k_per_word)
  int64_t k_per_word;  // 1, or 2 for bf16 pairs
  int64_t row_block;   // rows of C per pass over K: m, or fewer to bound a staging block
};

// The column tile: kGemmNC, or for a shallow product (K at most kGemmShallowK: LoRA's rank-r
// updates, r <= 16) the whole block of kGemmNBlock columns, whose B panels then take at most
// 256 KiB of L2 (4096 columns x 16 fp32). Such a product writes far more C than it computes,
// and a tile as wide as C's rows writes each row in one run, which the memory system takes
// faster than runs of kGemmNC columns a row apart.
inline constexpr int64_t kGemmShallowK = 16;
inline int64_t GemmColTile(const BlockedGemmShape& shape) {
  return shape.k <= kGemmShallowK ? kGemmNBlock : kGemmNC;
}

// The row tile for `threads` threads (see gemm_blocking.cc); 0 threads: the serial one.
int64_t GemmRowTile(const BlockedGemmShape& shape, int threads);

// Runs body(begin, end, thread) over [0, count): on the pool, balanced (body may run several
// times per thread, on pieces of one item), or inline when pool is null.
void GemmForRange(ThreadPool* pool, int64_t count,
                  const std::function<void(int64_t, int64_t, int)>& body);

// Packs columns [jc, jc + nc) of op(B)[p0 : p0 + kc, :] with pack_b into ceil(nc / nr)
// consecutive panels of panel_depth words per column at dst, each thread a share of them.
template <typename Word, typename PackB>
void PackBBlock(ThreadPool* pool, int64_t nr, int64_t jc, int64_t nc, int64_t p0, int64_t kc,
                int64_t panel_depth, const PackB& pack_b, Word* dst) {
  GemmForRange(pool, (nc + nr - 1) / nr, [&](int64_t begin, int64_t end, int) {
    const int64_t cols = std::min(end * nr, nc) - begin * nr;
    pack_b(jc + begin * nr, cols, p0, kc, dst + begin * panel_depth * nr);
  });
}

// Runs the GEMM (m, n, k > 0) with
//   pack_a(i, rows, p0, kc, Word* dst): packs rows [i, i + rows) of op(A)[:, p0 : p0 + kc]
//       into ceil(rows / mr) consecutive panels (zero past m); with kPackA false, op(A) is
//       read in place by the kernel and pack_a is never called (the kernel's a_panel is null);
//   pack_b(j, cols, p0, kc, Word* dst): packs columns [j, j + cols) of op(B)[p0 : p0 + kc, :]
//       into ceil(cols / nr) consecutive panels (zero past n): each thread's share of the
//       block at once;
//   kernel(const Word* a_panel, const Word* b_panel, const MicroTile& t): multiplies them into
//       the micro-tile t of C.
// on the pool when it has more than one thread and the product is worth waking it for, else
// serially on the calling thread (pool may be null). The buffers (per thread A panels, shared
// B panels) grow as needed and are kept for reuse. A template, so that each GEMM's packing
// and kernel calls inline into the loop.
template <bool kPackA, typename Word, typename PackA, typename PackB, typename Kernel>
void RunBlockedGemm(const BlockedGemmShape& g, ThreadPool* pool,
                    std::vector<std::vector<Word>>& packed_a_buffers, std::vector<Word>& packed_b,
                    const PackA& pack_a, const PackB& pack_b, const Kernel& kernel,
                    const Word* prepacked_b = nullptr) {
  const bool pooled =
      pool != nullptr && pool->num_threads() > 1 && g.m * g.n * g.k >= (int64_t{1} << 18);
  if (!pooled) pool = nullptr;  // tiny products are not worth waking the pool
  const int threads = pool == nullptr ? 1 : pool->num_threads();
  const int64_t mc = GemmRowTile(g, pool == nullptr ? 0 : threads);
  const int64_t mr = g.mr, nr = g.nr;
  const auto ceil_div = [](int64_t x, int64_t by) { return (x + by - 1) / by; };
  const int64_t depth_words = ceil_div(g.kc, g.k_per_word);  // of a full slice
  const size_t a_size = static_cast<size_t>(ceil_div(mc, mr) * mr * depth_words);
  const size_t b_size =
      static_cast<size_t>(std::min(ceil_div(g.n, nr) * nr, kGemmNBlock) * depth_words);
  if (packed_b.size() < b_size) packed_b.resize(b_size);
  if (kPackA) {
    if (packed_a_buffers.size() < static_cast<size_t>(threads)) packed_a_buffers.resize(threads);
    for (auto& buffer : packed_a_buffers) {
      if (buffer.size() < a_size) buffer.resize(a_size);
    }
  }
  Word* b_panels = packed_b.data();
  // The row tile (its first row) each thread's A panels hold in the current slice of K: the
  // tiles reach a thread in pieces (ThreadPool::ParallelForBalanced), a row tile's in a row.
  std::vector<int64_t> packed_rows(static_cast<size_t>(threads), -1);
  int64_t prepacked_at = 0;  // the column block's first word in prepacked_b
  for (int64_t jc = 0; jc < g.n; jc += kGemmNBlock) {
    const int64_t nc = std::min(kGemmNBlock, g.n - jc);
    const int64_t nc_tile = GemmColTile(g);
    const int64_t b_count = ceil_div(nc, nr), col_tiles = ceil_div(nc, nc_tile);
    int64_t slice_at = prepacked_at;  // the K slice's first word in prepacked_b
    for (int64_t ic = 0; ic < g.m; ic += g.row_block) {
      const int64_t m_end = std::min(g.m, ic + g.row_block);
      const int64_t row_tiles = ceil_div(m_end - ic, mc);
      slice_at = prepacked_at;
      for (int64_t p0 = 0; p0 < g.k; p0 += g.kc) {
        const int64_t kc = std::min(g.kc, g.k - p0);
        const int64_t panel_depth = ceil_div(kc, g.k_per_word);  // words per panel column
        if (prepacked_b != nullptr) {  // laid out by PackBlockedB: read in place
          b_panels = const_cast<Word*>(prepacked_b) + slice_at;
          slice_at += b_count * nr * panel_depth;
        } else {
          PackBBlock(pool, nr, jc, nc, p0, kc, panel_depth, pack_b, b_panels);
        }
        std::fill(packed_rows.begin(), packed_rows.end(), -1);  // a new slice of K
        GemmForRange(pool, row_tiles * col_tiles, [&](int64_t begin, int64_t end, int thread) {
          Word* packed_a = kPackA ? packed_a_buffers[static_cast<size_t>(thread)].data() : nullptr;
          int64_t& held = packed_rows[static_cast<size_t>(thread)];
          for (int64_t t = begin; t < end; ++t) {
            const int64_t i0 = ic + (t / col_tiles) * mc, j0 = (t % col_tiles) * nc_tile;
            const int64_t i_end = std::min(m_end, i0 + mc), j_end = std::min(nc, j0 + nc_tile);
            if (kPackA && held != i0) {
              pack_a(i0, i_end - i0, p0, kc, packed_a);
              held = i0;
            }
            // Each A panel (or A's rows read in place) stays in L1 while the tile's B panels
            // stream past it from L2.
            for (int64_t ip = i0; ip < i_end; ip += mr) {
              for (int64_t jp = j0; jp < j_end; jp += nr) {
                const MicroTile tile{
                    ip,      jc + jp,       std::min(mr, m_end - ip), std::min(nr, nc - jp), p0, kc,
                    p0 == 0, p0 + kc >= g.k};
                const Word* a_panel = kPackA ? packed_a + (ip - i0) * panel_depth : nullptr;
                kernel(a_panel, b_panels + (jp / nr) * panel_depth * nr, tile);
              }
            }
          }
        });
      }
    }
    prepacked_at = slice_at;
  }
}

// The words of op(B)'s panels in the order RunBlockedGemm visits them (each column block of
// kGemmNBlock, each K slice of g.kc): what PackBlockedB writes and prepacked_b holds.
inline int64_t BlockedBWords(const BlockedGemmShape& g) {
  int64_t words = 0;
  for (int64_t jc = 0; jc < g.n; jc += kGemmNBlock) {
    const int64_t panels = (std::min(kGemmNBlock, g.n - jc) + g.nr - 1) / g.nr;
    for (int64_t p0 = 0; p0 < g.k; p0 += g.kc) {
      words += panels * g.nr * ((std::min(g.kc, g.k - p0) + g.k_per_word - 1) / g.k_per_word);
    }
  }
  return words;
}

// Packs all of op(B) with pack_b (as RunBlockedGemm's) into dst (BlockedBWords(g) words), for
// the products that then read it as their prepacked_b: the same panels, packed once.
template <typename Word, typename PackB>
void PackBlockedB(const BlockedGemmShape& g, ThreadPool* pool, const PackB& pack_b, Word* dst) {
  for (int64_t jc = 0; jc < g.n; jc += kGemmNBlock) {
    const int64_t nc = std::min(kGemmNBlock, g.n - jc), panels = (nc + g.nr - 1) / g.nr;
    for (int64_t p0 = 0; p0 < g.k; p0 += g.kc) {
      const int64_t kc = std::min(g.kc, g.k - p0);
      const int64_t panel_depth = (kc + g.k_per_word - 1) / g.k_per_word;
      PackBBlock(pool, g.nr, jc, nc, p0, kc, panel_depth, pack_b, dst);
      dst += panels * g.nr * panel_depth;
    }
  }
}

}  // namespace air::engine
