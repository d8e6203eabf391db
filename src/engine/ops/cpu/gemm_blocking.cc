// The packed GEMMs' loop nest and its split over threads (see gemm_blocking.h).
#include "engine/ops/cpu/gemm_blocking.h"

#include <algorithm>

namespace air::engine {
namespace {

inline int64_t CeilDiv(int64_t x, int64_t by) { return (x + by - 1) / by; }
inline int64_t RoundUpTo(int64_t x, int64_t to) { return CeilDiv(x, to) * to; }

// Runs body(begin, end, thread) over [0, count): on the pool, or inline when pool is null.
using RangeBody = std::function<void(int64_t, int64_t, int)>;
void ForRange(ThreadPool* pool, int64_t count, const RangeBody& body) {
  if (pool == nullptr) return body(0, count, 0);
  pool->ParallelFor(count, 1, body);
}

// The row tile (kGemmMC, half or a quarter of it, whole micro-tiles) that gives the busiest
// thread the fewest rows, the largest on a tie: e.g. 640 rows on 2 threads as 10 tiles of 64
// (5 each) rather than 5 of 128 (3 and 2).
int64_t BalancedRowTile(int64_t rows, int64_t cols, int64_t mr, int threads) {
  const int64_t col_tiles = CeilDiv(std::min(cols, kGemmNBlock), kGemmNC);
  int64_t mc = kGemmMC / mr * mr, best_rows = -1;
  for (int64_t tile = kGemmMC; tile >= kGemmMC / 4; tile /= 2) {
    const int64_t candidate = tile / mr * mr;
    const int64_t busiest = CeilDiv(CeilDiv(rows, candidate) * col_tiles, threads) * candidate;
    if (best_rows < 0 || busiest < best_rows) best_rows = busiest, mc = candidate;
  }
  return mc;
}

template <typename Word>
void RunBlocks(const BlockedGemmPlan<Word>& g, ThreadPool* pool, int64_t mc,
               std::vector<std::vector<Word>>& packed_a_buffers, std::vector<Word>& packed_b) {
  const int64_t mr = g.mr, nr = g.nr;
  const int64_t depth_words = CeilDiv(g.kc, g.k_per_word);  // of a full slice
  const int threads = pool == nullptr ? 1 : pool->num_threads();
  const size_t a_size = static_cast<size_t>(RoundUpTo(mc, mr) * depth_words);
  const size_t b_size =
      static_cast<size_t>(std::min(RoundUpTo(g.n, nr), kGemmNBlock) * depth_words);
  if (packed_b.size() < b_size) packed_b.resize(b_size);
  if (packed_a_buffers.size() < static_cast<size_t>(threads)) packed_a_buffers.resize(threads);
  for (auto& buffer : packed_a_buffers) {
    if (buffer.size() < a_size) buffer.resize(a_size);
  }
  Word* b_panels_data = packed_b.data();
  for (int64_t jc = 0; jc < g.n; jc += kGemmNBlock) {
    const int64_t nc = std::min(kGemmNBlock, g.n - jc);
    const int64_t b_panels = CeilDiv(nc, nr), col_tiles = CeilDiv(nc, kGemmNC);
    for (int64_t ic = 0; ic < g.m; ic += g.row_block) {
      const int64_t m_end = std::min(g.m, ic + g.row_block);
      const int64_t row_tiles = CeilDiv(m_end - ic, mc);
      for (int64_t p0 = 0; p0 < g.k; p0 += g.kc) {
        const int64_t kc = std::min(g.kc, g.k - p0);
        const int64_t panel_depth = CeilDiv(kc, g.k_per_word);  // words per panel column
        ForRange(pool, b_panels, [&](int64_t begin, int64_t end, int) {
          for (int64_t t = begin; t < end; ++t) {
            g.pack_b(jc + t * nr, p0, kc, b_panels_data + t * panel_depth * nr);
          }
        });
        ForRange(pool, row_tiles * col_tiles, [&](int64_t begin, int64_t end, int thread) {
          Word* packed_a = packed_a_buffers[static_cast<size_t>(thread)].data();
          int64_t packed_rows = -1;  // the row tile packed_a holds
          for (int64_t t = begin; t < end; ++t) {
            const int64_t i0 = ic + (t / col_tiles) * mc, j0 = (t % col_tiles) * kGemmNC;
            const int64_t i_end = std::min(m_end, i0 + mc), j_end = std::min(nc, j0 + kGemmNC);
            if (packed_rows != i0) {
              g.pack_a(i0, i_end - i0, p0, kc, packed_a);
              packed_rows = i0;
            }
            for (int64_t jp = j0; jp < j_end; jp += nr) {
              for (int64_t ip = i0; ip < i_end; ip += mr) {
                const MicroTile tile{
                    ip,      jc + jp,       std::min(mr, m_end - ip), std::min(nr, nc - jp), p0, kc,
                    p0 == 0, p0 + kc >= g.k};
                g.kernel(packed_a + ((ip - i0) / mr) * panel_depth * mr,
                         b_panels_data + (jp / nr) * panel_depth * nr, tile);
              }
            }
          }
        });
      }
    }
  }
}

}  // namespace

template <typename Word>
void RunBlockedGemm(const BlockedGemmPlan<Word>& plan, ThreadPool* pool,
                    std::vector<std::vector<Word>>& packed_a, std::vector<Word>& packed_b) {
  const int64_t serial_mc = kGemmMC / plan.mr * plan.mr;
  // Tiny products are not worth waking the pool.
  if (pool == nullptr || pool->num_threads() == 1 || plan.m * plan.n * plan.k < (1 << 18)) {
    return RunBlocks(plan, nullptr, serial_mc, packed_a, packed_b);
  }
  const int64_t mc =
      BalancedRowTile(std::min(plan.m, plan.row_block), plan.n, plan.mr, pool->num_threads());
  RunBlocks(plan, pool, mc, packed_a, packed_b);
}

template void RunBlockedGemm<float>(const BlockedGemmPlan<float>&, ThreadPool*,
                                    std::vector<std::vector<float>>&, std::vector<float>&);
template void RunBlockedGemm<uint32_t>(const BlockedGemmPlan<uint32_t>&, ThreadPool*,
                                       std::vector<std::vector<uint32_t>>&, std::vector<uint32_t>&);

}  // namespace air::engine
