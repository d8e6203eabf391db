// Blocked, packed, multithreaded SGEMM (see fast_gemm.h).
#include "engine/ops/cpu/fast_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace air::engine {

namespace {

constexpr int64_t kMR = 8;    // rows of the micro-tile
constexpr int64_t kNR = 32;   // columns of the micro-tile (two 16-float vectors)
constexpr int64_t kKC = 256;  // depth of a K slice
constexpr int64_t kMC = 128;  // rows of a C tile (multiple of kMR)
constexpr int64_t kNC = 256;  // columns of a C tile (multiple of kNR)

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

inline void StoreTile(const float* acc /* (MR, NR) */, const TileOut& out) {
  for (int64_t r = 0; r < out.mr; ++r) {
    float* crow = out.c + r * out.ldc;
    const float* arow = acc + r * kNR;
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

using MicroKernel = void (*)(int64_t, const float*, const float*, const TileOut&);

MicroKernel ChooseKernel() {
  return __builtin_cpu_supports("avx512f") ? MicroKernelAvx512 : MicroKernelGeneric;
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

// Packs op(A)[i0:i0+mc, p0:p0+kc] into panels of MR rows: dst[panel][p][r], zero-padded.
void PackA(const GemmArgs& g, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* dst) {
  for (int64_t ip = 0; ip < mc; ip += kMR) {
    const int64_t rows = std::min(kMR, mc - ip);
    for (int64_t p = 0; p < kc; ++p) {
      float* d = dst + (ip / kMR) * kc * kMR + p * kMR;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + ip + r, pp = p0 + p;
        d[r] = g.trans_a ? g.a[pp * g.lda + i] : g.a[i * g.lda + pp];
      }
      for (int64_t r = rows; r < kMR; ++r) d[r] = 0.0f;
    }
  }
}

// Packs op(B)[p0:p0+kc, j0:j0+nc] into panels of NR columns: dst[panel][p][j], zero-padded.
void PackB(const GemmArgs& g, int64_t j0, int64_t nc, int64_t p0, int64_t kc, float* dst) {
  for (int64_t jp = 0; jp < nc; jp += kNR) {
    const int64_t cols = std::min(kNR, nc - jp);
    float* panel = dst + (jp / kNR) * kc * kNR;
    if (!g.trans_b) {
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = g.b + (p0 + p) * g.ldb + j0 + jp;
        float* d = panel + p * kNR;
        std::memcpy(d, src, static_cast<size_t>(cols) * sizeof(float));
        for (int64_t j = cols; j < kNR; ++j) d[j] = 0.0f;
      }
    } else {
      for (int64_t j = 0; j < kNR; ++j) {
        if (j < cols) {
          const float* src = g.b + (j0 + jp + j) * g.ldb + p0;
          for (int64_t p = 0; p < kc; ++p) panel[p * kNR + j] = src[p];
        } else {
          for (int64_t p = 0; p < kc; ++p) panel[p * kNR + j] = 0.0f;
        }
      }
    }
  }
}

inline int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Computes the C tile [i0, i0+mc) x [j0, j0+nc) over all of K.
void ComputeTile(const GemmArgs& g, MicroKernel kernel, int64_t i0, int64_t mc, int64_t j0,
                 int64_t nc, std::vector<float>& buffer) {
  const size_t a_size = static_cast<size_t>(RoundUp(mc, kMR) * kKC);
  const size_t b_size = static_cast<size_t>(RoundUp(nc, kNR) * kKC);
  if (buffer.size() < a_size + b_size) buffer.resize(a_size + b_size);
  float* packed_a = buffer.data();
  float* packed_b = buffer.data() + a_size;
  for (int64_t p0 = 0; p0 < g.k; p0 += kKC) {
    const int64_t kc = std::min(kKC, g.k - p0);
    PackA(g, i0, mc, p0, kc, packed_a);
    PackB(g, j0, nc, p0, kc, packed_b);
    for (int64_t jp = 0; jp < nc; jp += kNR) {
      for (int64_t ip = 0; ip < mc; ip += kMR) {
        const TileOut out{g.c + (i0 + ip) * g.ldc + j0 + jp,
                          g.ldc,
                          std::min(kMR, mc - ip),
                          std::min(kNR, nc - jp),
                          g.beta,
                          p0 == 0};
        kernel(kc, packed_a + (ip / kMR) * kc * kMR, packed_b + (jp / kNR) * kc * kNR, out);
      }
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

bool FastGemmUsesAvx512() { return ChooseKernel() == MicroKernelAvx512; }

void FastGemmSerial(std::vector<float>& buffer, bool trans_a, bool trans_b, int64_t m, int64_t n,
                    int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                    float* c, int64_t ldc) {
  const GemmArgs g{trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc};
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return ScaleOnly(g);
  const MicroKernel kernel = ChooseKernel();
  for (int64_t j0 = 0; j0 < n; j0 += kNC) {
    for (int64_t i0 = 0; i0 < m; i0 += kMC) {
      ComputeTile(g, kernel, i0, std::min(kMC, m - i0), j0, std::min(kNC, n - j0), buffer);
    }
  }
}

void FastGemm(ThreadPool& pool, GemmScratch& scratch, bool trans_a, bool trans_b, int64_t m,
              int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
              float beta, float* c, int64_t ldc) {
  const GemmArgs g{trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc};
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return ScaleOnly(g);
  const MicroKernel kernel = ChooseKernel();
  const int threads = pool.num_threads();
  // Shrink the row tile when there are fewer tiles than threads (e.g. weight gradients with a
  // small output dimension), down to 4 micro-panels.
  const int64_t col_tiles = (n + kNC - 1) / kNC;
  int64_t mc = kMC;
  while (mc > 4 * kMR && ((m + mc - 1) / mc) * col_tiles < threads) mc /= 2;
  const int64_t row_tiles = (m + mc - 1) / mc;
  const int64_t tiles = row_tiles * col_tiles;
  if (static_cast<int64_t>(scratch.per_thread.size()) < threads) {
    scratch.per_thread.resize(static_cast<size_t>(threads));
  }
  // Tiny products are not worth waking the pool.
  const int64_t min_chunk = m * n * k < (1 << 18) ? tiles : 1;
  pool.ParallelFor(tiles, min_chunk, [&](int64_t begin, int64_t end, int thread) {
    auto& buffer = scratch.per_thread[static_cast<size_t>(thread)];
    for (int64_t t = begin; t < end; ++t) {
      const int64_t i0 = (t % row_tiles) * mc, j0 = (t / row_tiles) * kNC;
      ComputeTile(g, kernel, i0, std::min(mc, m - i0), j0, std::min(kNC, n - j0), buffer);
    }
  });
}

}  // namespace air::engine
