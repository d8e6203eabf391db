// Blocked, packed, multithreaded SGEMM (see fast_gemm.h).
#include "engine/ops/cpu/fast_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "engine/ops/cpu/cpu_features.h"

namespace air::engine {

namespace {

// The AVX-512 and portable kernels' micro-tile: 8 rows x 32 columns (two 16-float vectors).
constexpr int64_t kMR = 8;
constexpr int64_t kNR = 32;
// The AVX2 kernel's: 6 x 16 (12 ymm accumulators, two for B, one broadcast: 15 of 16
// registers; enough independent FMAs in flight to cover their latency on both FMA ports).
constexpr int64_t kMR2 = 6;
constexpr int64_t kNR2 = 16;
constexpr int64_t kKC = 256;       // depth of a K slice
constexpr int64_t kMC = 128;       // rows of a C tile (rounded down to a multiple of MR)
constexpr int64_t kNC = 256;       // columns of a C tile (multiple of every NR)
constexpr int64_t kNBlock = 4096;  // columns of op(B) packed at once (multiple of kNC)

inline int64_t RoundUpTo(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Where the micro-kernel's result goes: C (mr x nr valid of MR x NR) with row stride ldc.
// first_slice: C = beta * C + acc (beta == 0: C = acc, ignoring what C held); else C += acc.
struct TileOut {
  float* c;
  int64_t ldc;
  int64_t mr;
  int64_t nr;
  float beta;
  bool first_slice;
};

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

// The same with 16 AVX-512 accumulators (8 rows x 2 vectors of 16).
__attribute__((target("avx512f,fma"))) void MicroKernelAvx512(int64_t kc, const float* ap,
                                                              const float* bp, const TileOut& out) {
  __m512 acc[kMR][2];
#pragma GCC unroll 8
  for (int r = 0; r < kMR; ++r) {
    acc[r][0] = _mm512_setzero_ps();
    acc[r][1] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_loadu_ps(bp + p * kNR);
    const __m512 b1 = _mm512_loadu_ps(bp + p * kNR + 16);
    const float* a = ap + p * kMR;
#pragma GCC unroll 8
    for (int r = 0; r < kMR; ++r) {
      const __m512 ar = _mm512_set1_ps(a[r]);
      acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
    }
  }
  if (out.mr == kMR && out.nr == kNR) {
    const __m512 beta = _mm512_set1_ps(out.beta);
#pragma GCC unroll 8
    for (int r = 0; r < kMR; ++r) {
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
  alignas(64) float tile[kMR * kNR];
  for (int r = 0; r < kMR; ++r) {
    _mm512_store_ps(tile + r * kNR, acc[r][0]);
    _mm512_store_ps(tile + r * kNR + 16, acc[r][1]);
  }
  StoreTile(tile, out);
}

// AVX2 and FMA (16 ymm registers) on a 6 x 16 tile: 12 accumulators (6 rows x 2 vectors of 8),
// named one by one: as an array GCC keeps them in memory and stores all twelve every step.
__attribute__((target("avx2,fma"))) void MicroKernelAvx2(int64_t kc, const float* ap,
                                                         const float* bp, const TileOut& out) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  const float* a = ap;
  const float* b = bp;
  for (int64_t p = 0; p < kc; ++p, a += kMR2, b += kNR2) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 ar = _mm256_broadcast_ss(a);
    c00 = _mm256_fmadd_ps(ar, b0, c00);
    c01 = _mm256_fmadd_ps(ar, b1, c01);
    ar = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(ar, b0, c10);
    c11 = _mm256_fmadd_ps(ar, b1, c11);
    ar = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(ar, b0, c20);
    c21 = _mm256_fmadd_ps(ar, b1, c21);
    ar = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(ar, b0, c30);
    c31 = _mm256_fmadd_ps(ar, b1, c31);
    ar = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(ar, b0, c40);
    c41 = _mm256_fmadd_ps(ar, b1, c41);
    ar = _mm256_broadcast_ss(a + 5);
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

using MicroKernelFn = void (*)(int64_t, const float*, const float*, const TileOut&);

// A micro-kernel with its tile: the packing lays panels out as it reads them.
struct MicroKernel {
  MicroKernelFn fn;
  int64_t mr;
  int64_t nr;
};

MicroKernel ChooseKernel() {
  if (UseAvx512()) return {MicroKernelAvx512, kMR, kNR};
  if (UseAvx2()) return {MicroKernelAvx2, kMR2, kNR2};
  return {MicroKernelGeneric, kMR, kNR};
}

struct GemmArgs {
  bool trans_a, trans_b;
  int64_t m, n, k;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  float beta;
  float* c;
  int64_t ldc;
};

inline int64_t CeilDiv(int64_t x, int64_t by) { return (x + by - 1) / by; }

// Packs rows [i, i+mr) of op(A)[:, p0:p0+kc] into one panel: dst[p][r], zero-padded past m.
void PackAPanel(const GemmArgs& g, int64_t mr, int64_t i, int64_t p0, int64_t kc, float* dst) {
  const int64_t rows = std::min(mr, g.m - i);
  if (rows < mr) std::fill(dst, dst + kc * mr, 0.0f);
  if (g.trans_a) {  // op(A)[i + r][p] = a[p][i + r]: each p reads `rows` contiguous floats
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = g.a + (p0 + p) * g.lda + i;
      for (int64_t r = 0; r < rows; ++r) dst[p * mr + r] = src[r];
    }
  } else {  // each row is contiguous in A: read along it
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = g.a + (i + r) * g.lda + p0;
      for (int64_t p = 0; p < kc; ++p) dst[p * mr + r] = src[p];
    }
  }
}

// Packs columns [j, j+nr) of op(B)[p0:p0+kc, :] into one panel: dst[p][c], zero-padded past n.
void PackBPanel(const GemmArgs& g, int64_t nr, int64_t j, int64_t p0, int64_t kc, float* dst) {
  const int64_t cols = std::min(nr, g.n - j);
  if (!g.trans_b) {
    for (int64_t p = 0; p < kc; ++p) {
      float* d = dst + p * nr;
      std::memcpy(d, g.b + (p0 + p) * g.ldb + j, static_cast<size_t>(cols) * sizeof(float));
      std::fill(d + cols, d + nr, 0.0f);
    }
    return;
  }
  if (cols < nr) std::fill(dst, dst + kc * nr, 0.0f);
  // op(B)[p][j + c] = b[j + c][p]: read each column's run of p, in blocks that stay in L1.
  constexpr int64_t kBlock = 64;
  for (int64_t pb = 0; pb < kc; pb += kBlock) {
    const int64_t pe = std::min(kc, pb + kBlock);
    for (int64_t c = 0; c < cols; ++c) {
      const float* src = g.b + (j + c) * g.ldb + p0;
      for (int64_t p = pb; p < pe; ++p) dst[p * nr + c] = src[p];
    }
  }
}

// Runs body(begin, end, thread) over [0, count): on the pool, or inline when pool is null.
using RangeBody = std::function<void(int64_t, int64_t, int)>;
void ForRange(ThreadPool* pool, int64_t count, const RangeBody& body) {
  if (pool == nullptr) return body(0, count, 0);
  pool->ParallelFor(count, 1, body);
}

// The Goto/BLIS loop nest. For each NC-wide block of columns and each KC-deep slice of K, op(B)
// is packed once into NR-column panels shared by all threads (it stays in L3); then the block's
// C tiles (mc x NC_TILE) are spread over the threads, each packing the mc rows of op(A) it
// needs into its own MR-row panels (they stay in its L2) — consecutive tiles of a thread share
// their rows, so each thread packs a row tile once. Each element of C sums its products over p
// in the same order whatever the tiling or thread count, so results are deterministic.
void BlockedGemm(const GemmArgs& g, const MicroKernel& kernel, ThreadPool* pool, int64_t mc,
                 GemmScratch& scratch) {
  const int64_t mr = kernel.mr, nr = kernel.nr;  // the kernel's tile
  const int threads = pool == nullptr ? 1 : pool->num_threads();
  const size_t a_size = static_cast<size_t>(RoundUpTo(mc, mr) * kKC);
  const size_t b_size = static_cast<size_t>(std::min(RoundUpTo(g.n, nr), kNBlock) * kKC);
  if (scratch.packed_b.size() < b_size) scratch.packed_b.resize(b_size);
  if (scratch.packed_a.size() < static_cast<size_t>(threads)) scratch.packed_a.resize(threads);
  for (auto& buffer : scratch.packed_a) {
    if (buffer.size() < a_size) buffer.resize(a_size);
  }
  float* packed_b = scratch.packed_b.data();
  const int64_t row_tiles = CeilDiv(g.m, mc);
  for (int64_t jc = 0; jc < g.n; jc += kNBlock) {
    const int64_t nc = std::min(kNBlock, g.n - jc);
    const int64_t b_panels = CeilDiv(nc, nr), col_tiles = CeilDiv(nc, kNC);
    for (int64_t p0 = 0; p0 < g.k; p0 += kKC) {
      const int64_t kc = std::min(kKC, g.k - p0);
      ForRange(pool, b_panels, [&](int64_t begin, int64_t end, int) {
        for (int64_t t = begin; t < end; ++t) {
          PackBPanel(g, nr, jc + t * nr, p0, kc, packed_b + t * kc * nr);
        }
      });
      ForRange(pool, row_tiles * col_tiles, [&](int64_t begin, int64_t end, int thread) {
        float* packed_a = scratch.packed_a[static_cast<size_t>(thread)].data();
        int64_t packed_rows = -1;  // the row tile packed_a holds
        for (int64_t t = begin; t < end; ++t) {
          const int64_t i0 = (t / col_tiles) * mc, j0 = (t % col_tiles) * kNC;
          const int64_t i_end = std::min(g.m, i0 + mc), j_end = std::min(nc, j0 + kNC);
          if (packed_rows != i0) {
            for (int64_t ip = i0; ip < i_end; ip += mr) {
              PackAPanel(g, mr, ip, p0, kc, packed_a + ((ip - i0) / mr) * kc * mr);
            }
            packed_rows = i0;
          }
          for (int64_t jp = j0; jp < j_end; jp += nr) {
            for (int64_t ip = i0; ip < i_end; ip += mr) {
              const TileOut out{g.c + ip * g.ldc + jc + jp, g.ldc,  std::min(mr, g.m - ip),
                                std::min(nr, nc - jp),      g.beta, p0 == 0};
              kernel.fn(kc, packed_a + ((ip - i0) / mr) * kc * mr, packed_b + (jp / nr) * kc * nr,
                        out);
            }
          }
        }
      });
    }
  }
}

// K == 0: C = beta * C.
void ScaleOnly(const GemmArgs& g) {
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      float& v = g.c[i * g.ldc + j];
      v = g.beta == 0.0f ? 0.0f : g.beta * v;
    }
  }
}

}  // namespace

void FastGemmSerial(GemmScratch& scratch, bool trans_a, bool trans_b, int64_t m, int64_t n,
                    int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                    float* c, int64_t ldc) {
  const GemmArgs g{trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc};
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return ScaleOnly(g);
  const MicroKernel kernel = ChooseKernel();
  BlockedGemm(g, kernel, nullptr, kMC / kernel.mr * kernel.mr, scratch);
}

void FastGemm(ThreadPool& pool, GemmScratch& scratch, bool trans_a, bool trans_b, int64_t m,
              int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
              float beta, float* c, int64_t ldc) {
  const GemmArgs g{trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc};
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return ScaleOnly(g);
  const MicroKernel kernel = ChooseKernel();
  // Tiny products are not worth waking the pool.
  if (m * n * k < (1 << 18)) {
    return BlockedGemm(g, kernel, nullptr, kMC / kernel.mr * kernel.mr, scratch);
  }
  // The row tile (128, 64 or 32 rows) that gives the busiest thread the fewest rows, the
  // largest on a tie: e.g. 640 rows on 2 threads as 10 tiles of 64 (5 each) rather than 5 of
  // 128 (3 and 2).
  const int threads = pool.num_threads();
  const int64_t col_tiles = CeilDiv(std::min(n, kNBlock), kNC);
  int64_t mc = kMC / kernel.mr * kernel.mr, best_rows = -1;
  for (int64_t tile = kMC; tile >= 4 * kMR; tile /= 2) {
    const int64_t candidate = tile / kernel.mr * kernel.mr;  // whole micro-tiles
    const int64_t rows = CeilDiv(CeilDiv(m, candidate) * col_tiles, threads) * candidate;
    if (best_rows < 0 || rows < best_rows) best_rows = rows, mc = candidate;
  }
  BlockedGemm(g, kernel, &pool, mc, scratch);
}

}  // namespace air::engine
