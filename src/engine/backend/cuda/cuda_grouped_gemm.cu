// The grouped GEMM of the experts' projections on a GPU (cuda_kernels.h's GroupedGemm and
// GroupedGemmWeightGrad; ops.h states the op). Hand-written because nothing in this toolkit runs
// a grouped product whose group sizes live in device memory: cuBLASLt 13.1 (cublasLt.h) has
// strided and pointer-array batches of one shape only, and cuBLAS's cublasGemmGroupedBatchedEx
// takes each group's m, n and k in host arrays, so either would need the offsets on the host —
// the per-layer copy (a stream sync) this op exists to remove.
//
// Forward (y = x w_g per group): 64 x 64 output tiles, 128 threads. The launch is sized from
// what the host knows: N / 64 column tiles times ceil(M / 64) + G row-tile slots (the most row
// tiles G groups of M rows in all can need). Each block's first thread walks the device offsets
// to find which group and which 64 rows its slot is (a few hundred integer loads at most); a
// slot past the last tile returns at once. That arithmetic is grouped_tiles.h's, which a CPU
// test checks. Weight gradient (dw_g += x_g^T dy_g): one block per
// (64 x 64 tile of dw, group), its depth the group's row count read on the device.
//
// Precision as Gemm's (ops.h): with a BF16 operand both operands are rounded to bf16 in shared
// memory and multiplied on the tensor cores (wmma 16x16x16, fp32 accumulation); with both F32
// the product is fp32 on the CUDA cores (never TF32). The epilogue keeps Gemm's and AddBias's
// roundings (a BF16 y rounded after the product and again after the bias), and accumulating
// outputs are read, added in fp32 and rounded once. Deterministic: each output element is one
// thread's fixed-order sum; no atomics. The bias gradient sums a column over the group's rows in
// row order, in double.
// Thread safety: launchers are stateless; calls on one stream are ordered by it.
#include <cuda_bf16.h>
#include <mma.h>

#include <cstdint>

#include "engine/backend/cuda/cuda_common.cuh"
#include "engine/backend/cuda/grouped_tiles.h"

namespace air::engine::cuda {
namespace {

constexpr int kBM = kGroupedTileRows, kBN = kGroupedTileCols, kBK = 32, kThreads = 128;
constexpr int kLdA = kBK + 8;  // bf16 elements per shared row (a multiple of 8, as wmma needs)
constexpr int kLdB = kBN + 8;
constexpr int kLdC = kBN + 4;  // floats (a multiple of 4)
// wmma's load/store need a 256-bit aligned pointer and ldm a multiple of 8 (16-bit) or 4 (float)
// elements: every fragment starts 16 rows or 16 columns (or kk in {0, 16}) into a tile.
static_assert(kLdA % 8 == 0 && kLdB % 8 == 0 && kLdC % 4 == 0);
static_assert((16 * kLdA * 2) % 32 == 0 && (16 * kLdB * 2) % 32 == 0 && (16 * kLdC * 4) % 32 == 0);
// TileProduct's thread layouts: 2 x 2 warps of 32 x 32, or 8 x 16 threads of 8 x 4 outputs.
static_assert(kBK % 16 == 0 && kBM == 64 && kBN == 64 && kThreads == 128);

// Shared memory of one tile: the operand tiles (bf16 for the tensor cores, or fp32) and the
// fp32 result tile the epilogue reads.
struct TileShared {
  union {
    struct {
      __align__(32) uint16_t a[kBM * kLdA];
      __align__(32) uint16_t b[kBK * kLdB];
    } h;
    struct {
      float a[kBM * (kBK + 1)];
      float b[kBK * kBN];
    } f;
  };
  __align__(32) float c[kBM * kLdC];
};
static_assert(alignof(TileShared) >= 32);
static_assert(sizeof(TileShared) + 3 * sizeof(int64_t) <= 48 * 1024);  // static shared memory

// s.c (kBM, kBN) = the sum over d < depth of A(i, d) B(d, j), with `load_a(i, d)` and
// `load_b(d, j)` returning 0 outside the operands. kADepthFastest / kBColFastest say which index
// is contiguous in memory, so consecutive threads read consecutive addresses. kBf16 rounds both
// operands to bf16 and multiplies on the tensor cores; else an fp32 product on the CUDA cores.
template <bool kBf16, bool kADepthFastest, bool kBColFastest, typename LoadA, typename LoadB>
__device__ void TileProduct(int64_t depth, LoadA load_a, LoadB load_b, TileShared& s) {
  const int tid = threadIdx.x;
  using namespace nvcuda;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  float sums[8][4] = {};
  const int warp = tid / 32, warp_row = (warp / 2) * 32, warp_col = (warp % 2) * 32;
  const int ty = tid / 16, tx = tid % 16;  // the CUDA-core path: rows ty*8.., columns tx + 16c
  if constexpr (kBf16) {
    for (auto& row : acc) {
      for (auto& f : row) wmma::fill_fragment(f, 0.0f);
    }
  }
  for (int64_t d0 = 0; d0 < depth; d0 += kBK) {
    __syncthreads();  // the previous slice's reads are done
    for (int idx = tid; idx < kBM * kBK; idx += kThreads) {
      const int i = kADepthFastest ? idx / kBK : idx % kBM;
      const int d = kADepthFastest ? idx % kBK : idx / kBM;
      const float v = load_a(i, d0 + d);
      if constexpr (kBf16) {
        s.h.a[i * kLdA + d] = RoundToBf16(v);
      } else {
        s.f.a[i * (kBK + 1) + d] = v;
      }
    }
    for (int idx = tid; idx < kBK * kBN; idx += kThreads) {
      const int d = kBColFastest ? idx / kBN : idx % kBK;
      const int j = kBColFastest ? idx % kBN : idx / kBK;
      const float v = load_b(d0 + d, j);
      if constexpr (kBf16) {
        s.h.b[d * kLdB + j] = RoundToBf16(v);
      } else {
        s.f.b[d * kBN + j] = v;
      }
    }
    __syncthreads();
    if constexpr (kBf16) {
      const auto* a = reinterpret_cast<const __nv_bfloat16*>(s.h.a);
      const auto* b = reinterpret_cast<const __nv_bfloat16*>(s.h.b);
      for (int kk = 0; kk < kBK; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[2];
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb[2];
        for (int i = 0; i < 2; ++i) {
          wmma::load_matrix_sync(fa[i], a + (warp_row + 16 * i) * kLdA + kk, kLdA);
          wmma::load_matrix_sync(fb[i], b + kk * kLdB + warp_col + 16 * i, kLdB);
        }
        for (int i = 0; i < 2; ++i) {
          for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
      }
    } else {
      for (int d = 0; d < kBK; ++d) {
        float av[8], bv[4];
        for (int r = 0; r < 8; ++r) av[r] = s.f.a[(ty * 8 + r) * (kBK + 1) + d];
        for (int c = 0; c < 4; ++c) bv[c] = s.f.b[d * kBN + tx + 16 * c];
        for (int r = 0; r < 8; ++r) {
          for (int c = 0; c < 4; ++c) sums[r][c] += av[r] * bv[c];
        }
      }
    }
  }
  if constexpr (kBf16) {
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        wmma::store_matrix_sync(s.c + (warp_row + 16 * i) * kLdC + warp_col + 16 * j, acc[i][j],
                                kLdC, wmma::mem_row_major);
      }
    }
  } else {
    for (int r = 0; r < 8; ++r) {
      for (int c = 0; c < 4; ++c) s.c[(ty * 8 + r) * kLdC + tx + 16 * c] = sums[r][c];
    }
  }
  __syncthreads();
}

struct ForwardArgs {
  int64_t rows, n, k, groups, slots;
  In x, w, bias;
  const int32_t* offsets;
  float beta;
  Out y;
};

template <bool kBf16, bool kTransW>
__global__ void __launch_bounds__(kThreads) GroupedGemmForwardKernel(ForwardArgs a) {
  __shared__ TileShared s;
  __shared__ int64_t tile[3];  // group, first row, end row
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  for (int64_t slot = blockIdx.y; slot < a.slots; slot += gridDim.y) {
    if (threadIdx.x == 0) {
      const GroupedRowTile t = FindGroupedRowTile(a.offsets, a.groups, a.rows, slot);
      tile[0] = t.group;
      tile[1] = t.begin;
      tile[2] = t.end;
    }
    __syncthreads();
    const int64_t g = tile[0], row0 = tile[1], row_end = tile[2];
    if (g < 0) return;  // past the last tile (every later slot is too)
    const int64_t k = a.k, n = a.n;
    const In x = a.x, w = a.w;
    const int64_t w0 = g * k * n;
    auto load_a = [&](int i, int64_t d) -> float {
      return row0 + i < row_end && d < k ? Load(x, (row0 + i) * k + d) : 0.0f;
    };
    auto load_b = [&](int64_t d, int j) -> float {
      if (d >= k || n0 + j >= n) return 0.0f;
      return Load(w, kTransW ? w0 + (n0 + j) * k + d : w0 + d * n + n0 + j);
    };
    TileProduct<kBf16, true, !kTransW>(k, load_a, load_b, s);
    // Gemm's epilogue (+ beta y, rounded into y), then AddBias's (+ bias, rounded again).
    const bool bf16_y = a.y.dtype == DType::kBF16;
    for (int idx = threadIdx.x; idx < kBM * kBN; idx += kThreads) {
      const int i = idx / kBN, j = idx % kBN;
      if (row0 + i >= row_end || n0 + j >= n) continue;
      const int64_t at = (row0 + i) * n + n0 + j;
      float v = s.c[i * kLdC + j];
      if (a.beta != 0.0f) v += a.beta * Load(a.y, at);
      if (a.bias.ptr != nullptr) {
        if (bf16_y) v = WidenBf16(RoundToBf16(v));
        v += Load(a.bias, g * n + n0 + j);
      }
      Store(a.y, at, v);
    }
    __syncthreads();  // tile[] and s are reused by the next slot
  }
}

struct WeightGradArgs {
  int64_t rows, k, n;
  In x, dy;
  const int32_t* offsets;
  Out dw;
};

// dw_g (k, n) tile (blockIdx.y, blockIdx.x) += x_g^T dy_g; group blockIdx.z.
template <bool kBf16>
__global__ void __launch_bounds__(kThreads) GroupedGemmWeightGradKernel(WeightGradArgs a) {
  __shared__ TileShared s;
  const int64_t g = blockIdx.z, k0 = static_cast<int64_t>(blockIdx.y) * kBM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const GroupRows range = GroupRowRange(a.offsets, g, a.rows);
  const int64_t begin = range.begin, end = range.end;
  if (end == begin) return;  // adds nothing
  const int64_t k = a.k, n = a.n;
  const In x = a.x, dy = a.dy;
  auto load_a = [&](int i, int64_t d) -> float {  // x_g^T (k, m): x[begin + d, k0 + i]
    return k0 + i < k && begin + d < end ? Load(x, (begin + d) * k + k0 + i) : 0.0f;
  };
  auto load_b = [&](int64_t d, int j) -> float {  // dy_g (m, n)
    return begin + d < end && n0 + j < n ? Load(dy, (begin + d) * n + n0 + j) : 0.0f;
  };
  TileProduct<kBf16, false, true>(end - begin, load_a, load_b, s);
  for (int idx = threadIdx.x; idx < kBM * kBN; idx += kThreads) {
    const int i = idx / kBN, j = idx % kBN;
    if (k0 + i >= k || n0 + j >= n) continue;
    Accumulate(a.dw, g * k * n + (k0 + i) * n + n0 + j, s.c[i * kLdC + j]);
  }
}

// dbias (groups, n) [g, j] += the sum of dy over g's rows in row order (double), one thread per
// column.
__global__ void GroupedBiasGradKernel(In dy, int64_t rows, int64_t n, const int32_t* offsets,
                                      Out dbias) {
  const int64_t g = blockIdx.y;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n) return;
  const GroupRows range = GroupRowRange(offsets, g, rows);
  if (range.end == range.begin) return;
  double sum = 0.0;
  for (int64_t r = range.begin; r < range.end; ++r) sum += Load(dy, r * n + j);
  Accumulate(dbias, g * n + j, static_cast<float>(sum));
}

unsigned Tiles(int64_t n, int tile) { return static_cast<unsigned>((n + tile - 1) / tile); }

}  // namespace

void GroupedGemm(bool trans_w, int64_t rows, int64_t n, int64_t k, In x, In w, In bias,
                 const int32_t* offsets, int64_t groups, float beta, Out y, cudaStream_t stream) {
  if (rows <= 0 || n <= 0 || groups <= 0) return;
  const GroupedForwardGrid sizes = GroupedGemmForwardGrid(rows, n, groups);
  ForwardArgs args{rows, n, k, groups, sizes.slots, x, w, bias, offsets, beta, y};
  const dim3 grid(static_cast<unsigned>(sizes.x), static_cast<unsigned>(sizes.y));
  const bool bf16 = x.dtype == DType::kBF16 || w.dtype == DType::kBF16;
  if (bf16 && trans_w) {
    GroupedGemmForwardKernel<true, true><<<grid, kThreads, 0, stream>>>(args);
  } else if (bf16) {
    GroupedGemmForwardKernel<true, false><<<grid, kThreads, 0, stream>>>(args);
  } else if (trans_w) {
    GroupedGemmForwardKernel<false, true><<<grid, kThreads, 0, stream>>>(args);
  } else {
    GroupedGemmForwardKernel<false, false><<<grid, kThreads, 0, stream>>>(args);
  }
  AIR_CUDA_CHECK_LAUNCH();
}

void GroupedGemmWeightGrad(int64_t rows, int64_t k, int64_t n, In x, In dy, const int32_t* offsets,
                           int64_t groups, Out dw, Out dbias, cudaStream_t stream) {
  if (rows <= 0 || n <= 0 || groups <= 0) return;
  if (dw.ptr != nullptr && k > 0) {
    const WeightGradArgs args{rows, k, n, x, dy, offsets, dw};
    const dim3 grid(Tiles(n, kBN), Tiles(k, kBM), static_cast<unsigned>(groups));
    if (x.dtype == DType::kBF16 || dy.dtype == DType::kBF16) {
      GroupedGemmWeightGradKernel<true><<<grid, kThreads, 0, stream>>>(args);
    } else {
      GroupedGemmWeightGradKernel<false><<<grid, kThreads, 0, stream>>>(args);
    }
    AIR_CUDA_CHECK_LAUNCH();
  }
  if (dbias.ptr != nullptr) {
    constexpr int kColumns = 128;
    GroupedBiasGradKernel<<<dim3(Tiles(n, kColumns), static_cast<unsigned>(groups)), kColumns, 0,
                            stream>>>(dy, rows, n, offsets, dbias);
    AIR_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace air::engine::cuda
