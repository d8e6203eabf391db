// The packed GEMMs' thread split (see gemm_blocking.h; the loop nest is the header's template).
#include "engine/backend/cpu/gemm_blocking.h"

#include <algorithm>

namespace air::engine {
namespace {

inline int64_t CeilDiv(int64_t x, int64_t by) { return (x + by - 1) / by; }

}  // namespace

void GemmForRange(ThreadPool* pool, int64_t count,
                  const std::function<void(int64_t, int64_t, int)>& body) {
  if (pool == nullptr) return body(0, count, 0);
  pool->ParallelForBalanced(count, 1, body);
}

// Serially, kGemmMC rows rounded up to whole micro-tiles (12-row tiles: 132, so that 256 rows
// take two row tiles, not three: each row tile streams the block's B panels once). On a pool,
// the row tile (that, or half or a quarter of kGemmMC, rounded up alike) that gives the busiest
// thread the fewest rows, the largest on a tie: e.g. 640 rows on 2 threads as 10 tiles of 64
// (5 each) rather than 5 of 128 (3 and 2).
int64_t GemmRowTile(const BlockedGemmShape& g, int threads) {
  int64_t mc = CeilDiv(kGemmMC, g.mr) * g.mr;
  if (threads == 0) return mc;
  const int64_t rows = std::min(g.m, g.row_block);
  const int64_t col_tiles = CeilDiv(std::min(g.n, kGemmNBlock), GemmColTile(g));
  int64_t best_rows = -1;
  for (int64_t tile = kGemmMC; tile >= kGemmMC / 4; tile /= 2) {
    const int64_t candidate = CeilDiv(tile, g.mr) * g.mr;
    const int64_t busiest = CeilDiv(CeilDiv(rows, candidate) * col_tiles, threads) * candidate;
    if (best_rows < 0 || busiest < best_rows) best_rows = busiest, mc = candidate;
  }
  return mc;
}

}  // namespace air::engine
