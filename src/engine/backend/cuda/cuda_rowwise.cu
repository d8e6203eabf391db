// The CUDA backend's row-wise kernels and column sums (cuda_kernels.h): RMSNorm forward and
// backward, the bias gradient and the embedding gradient. Hand-written because each fuses a
// row reduction with the elementwise work around it, and because their sums over rows must be
// deterministic (a fixed order, no float atomics), which library reductions do not promise for
// these fused terms:
//   - RMSNorm: one block per row (grid-stride over rows), its threads over the columns; the
//     row's sum of squares (forward) and sum of w * dy * x (backward) are added in double,
//     each thread's share in column order and then BlockSum's fixed tree; rstd is the
//     reference's 1 / sqrt(sum / dim + eps) in double, rounded once to fp32.
//   - Column sums (RMSNorm's dw, the bias gradient): two passes. The rows are cut into row
//     blocks whose size depends on the row count alone; pass one gives each (row block,
//     column) its partial sum in double, rows in order; pass two adds a column's partials in
//     row-block order and adds the total, rounded once, into the F32 gradient.
//   - Embedding gradient: CUB's stable radix sort of (id, token) pairs puts the tokens of an id
//     next to each other in token order; one block per run of equal ids adds them into the
//     table row in that order, from the row's current value, as fp32 adds: the reference's
//     order and so its bits.
// Columns go in packs of 8 (cuda_loops.cuh) where the dimension and the pointers allow.
// Thread safety: launchers are stateless; calls on one stream are ordered by it.
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "engine/backend/cuda/cuda_common.cuh"
#include "engine/backend/cuda/cuda_loops.cuh"

namespace air::engine::cuda {
namespace {

constexpr int kRowThreads = 256;          // at most, in a block-per-row kernel
constexpr int64_t kMaxRowGrid = 1 << 20;  // blocks of a block-per-row kernel; grid-stride beyond

unsigned RowGrid(int64_t rows) {
  return static_cast<unsigned>(rows < kMaxRowGrid ? rows : kMaxRowGrid);
}

// ---- RMSNorm ----------------------------------------------------------------------------------

// y (rows, dim) = w * (x * rstd), rstd (rows) = 1 / sqrt(mean(x^2) + eps). y may alias x: a
// thread reads and writes the same columns of a row in both passes.
template <int N>
__global__ void RmsNormForwardKernel(In x, In w, int64_t rows, int64_t dim, float eps, Out y,
                                     float* rstd) {
  __shared__ double shared[32];
  const int64_t step = static_cast<int64_t>(blockDim.x) * N;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * dim;
    double sum_sq = 0.0;
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * N; c < dim; c += step) {
      float v[N];
      LoadN<N>(x, row + c, v);
      for (int k = 0; k < N; ++k) {
        const double d = v[k];
        sum_sq += d * d;  // exact in double
      }
    }
    sum_sq = BlockSum(sum_sq, shared);
    const float inv = static_cast<float>(1.0 / sqrt(sum_sq / static_cast<double>(dim) + eps));
    if (threadIdx.x == 0) rstd[r] = inv;
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * N; c < dim; c += step) {
      float v[N], wv[N];
      LoadN<N>(x, row + c, v);
      LoadN<N>(w, c, wv);
      for (int k = 0; k < N; ++k) v[k] = wv[k] * (v[k] * inv);  // the reference's order
      StoreN<N>(y, row + c, v);
    }
  }
}

// dx (rows, dim) += rstd * w * dy - rstd^3 / dim * x * sum_c(w * dy * x). The sum in double;
// the per-element term in fp32 (as the CPU's fast path).
template <int N>
__global__ void RmsNormBackwardKernel(In x, In w, const float* rstd, In dy, int64_t rows,
                                      int64_t dim, Out dx) {
  __shared__ double shared[32];
  const int64_t step = static_cast<int64_t>(blockDim.x) * N;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * dim;
    double dot = 0.0;
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * N; c < dim; c += step) {
      float xv[N], wv[N], dv[N];
      LoadN<N>(x, row + c, xv);
      LoadN<N>(w, c, wv);
      LoadN<N>(dy, row + c, dv);
      for (int k = 0; k < N; ++k) dot += static_cast<double>(wv[k] * dv[k] * xv[k]);
    }
    dot = BlockSum(dot, shared);
    const float inv = rstd[r];
    const double inv_d = inv;
    const float coef = static_cast<float>(inv_d * inv_d * inv_d * dot / static_cast<double>(dim));
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * N; c < dim; c += step) {
      float xv[N], wv[N], dv[N], out[N];
      LoadN<N>(x, row + c, xv);
      LoadN<N>(w, c, wv);
      LoadN<N>(dy, row + c, dv);
      LoadN<N>(dx, row + c, out);
      for (int k = 0; k < N; ++k) out[k] += inv * wv[k] * dv[k] - coef * xv[k];
      StoreN<N>(dx, row + c, out);
    }
  }
}

// ---- column sums: out (cols, F32) += sum over rows of term(r, c) --------------------------------

// The row blocks: at least kMinRowsPerBlock rows each, at most kMaxRowBlocks of them; a function
// of the row count alone, so the sums' order is the same on every GPU.
constexpr int64_t kMinRowsPerBlock = 32, kMaxRowBlocks = 512;
struct RowBlocking {
  int64_t rows_per_block, blocks;
};
RowBlocking RowBlocksFor(int64_t rows) {
  const int64_t spread = (rows + kMaxRowBlocks - 1) / kMaxRowBlocks;
  const int64_t per = spread > kMinRowsPerBlock ? spread : kMinRowsPerBlock;
  return {per, (rows + per - 1) / per};
}

// dbias: the term is dy (rows, cols).
struct BiasTerm {
  In dy;
  int64_t cols;
  template <int N>
  __device__ void Get(int64_t r, int64_t c, float (&t)[N]) const {
    LoadN<N>(dy, r * cols + c, t);
  }
};

// RMSNorm's dw: the term is dy * x * rstd (rows, cols), in fp32 (as the CPU's fast path).
struct RmsNormDwTerm {
  In dy, x;
  const float* rstd;
  int64_t cols;
  template <int N>
  __device__ void Get(int64_t r, int64_t c, float (&t)[N]) const {
    float xv[N];
    LoadN<N>(dy, r * cols + c, t);
    LoadN<N>(x, r * cols + c, xv);
    const float inv = rstd[r];
    for (int k = 0; k < N; ++k) t[k] = t[k] * xv[k] * inv;
  }
};

// partial (blocks, cols) [b, c] = the sum over row block b (blockIdx.y) of term(r, c), rows in
// order, in double. Each thread owns N columns.
template <int N, typename Term>
__global__ void ColumnPartialSumsKernel(Term term, int64_t rows, int64_t cols,
                                        int64_t rows_per_block, double* partial) {
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
  if (c >= cols) return;
  const int64_t block = blockIdx.y;
  const int64_t begin = block * rows_per_block;
  const int64_t end = begin + rows_per_block < rows ? begin + rows_per_block : rows;
  double sum[N];
  for (int k = 0; k < N; ++k) sum[k] = 0.0;
#pragma unroll 4
  for (int64_t r = begin; r < end; ++r) {
    float t[N];
    term.template Get<N>(r, c, t);
    for (int k = 0; k < N; ++k) sum[k] += t[k];
  }
  for (int k = 0; k < N; ++k) partial[block * cols + c + k] = sum[k];
}

// out (cols) += the sum over b of partial (blocks, cols) [b, c], b in order, rounded once to
// fp32 and added (rounded once more for a BF16 out).
__global__ void AddColumnTotalsKernel(const double* partial, int64_t blocks, int64_t cols,
                                      Out out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols;
       c += stride) {
    double sum = 0.0;
    for (int64_t b = 0; b < blocks; ++b) sum += partial[b * cols + c];
    Accumulate(out, c, static_cast<float>(sum));
  }
}

// `packed`: cols % kPack == 0 and the term's pointers aligned.
template <typename Term>
void AddColumnSums(const Term& term, int64_t rows, int64_t cols, bool packed, Out out,
                   cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const RowBlocking blocking = RowBlocksFor(rows);
  double* partial = nullptr;
  AIR_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&partial),
                                 static_cast<size_t>(blocking.blocks * cols) * sizeof(double),
                                 stream));
  const int64_t units = packed ? cols / kPack : cols;
  const int threads = ThreadsFor(units, 128);
  const dim3 grid(BlocksFor(units, threads), static_cast<unsigned>(blocking.blocks));
  if (packed) {
    ColumnPartialSumsKernel<kPack>
        <<<grid, threads, 0, stream>>>(term, rows, cols, blocking.rows_per_block, partial);
  } else {
    ColumnPartialSumsKernel<1>
        <<<grid, threads, 0, stream>>>(term, rows, cols, blocking.rows_per_block, partial);
  }
  AIR_CUDA_CHECK_LAUNCH();
  AddColumnTotalsKernel<<<BlocksFor(cols, 256), 256, 0, stream>>>(partial, blocking.blocks, cols,
                                                                  out);
  AIR_CUDA_CHECK_LAUNCH();
  AIR_CUDA_CHECK(cudaFreeAsync(partial, stream));
}

// ---- embedding gradient -----------------------------------------------------------------------

__global__ void TokenIndicesKernel(int32_t* tokens, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    tokens[i] = static_cast<int32_t>(i);
  }
}

// sorted_ids, sorted_tokens (n): the (id, token) pairs sorted by id, tokens ascending within an
// id. The block at position k (blockIdx.x, grid-stride) that starts a run of equal ids adds the
// run's dout rows into dtable (V, dim) [id] in token order; blockIdx.y splits the columns.
template <int N>
__global__ void EmbeddingRunsKernel(const int32_t* sorted_ids, const int32_t* sorted_tokens,
                                    int64_t n, In dout, int64_t dim, int32_t skip_id, Out dtable) {
  const int64_t first = (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * N;
  const int64_t stride = static_cast<int64_t>(gridDim.y) * blockDim.x * N;
  for (int64_t k = blockIdx.x; k < n; k += gridDim.x) {
    const int32_t id = sorted_ids[k];
    if (id == skip_id || (k > 0 && sorted_ids[k - 1] == id)) continue;  // not a run's start
    const int64_t row = static_cast<int64_t>(id) * dim;
    for (int64_t c = first; c < dim; c += stride) {
      float sum[N];
      LoadN<N>(dtable, row + c, sum);
      for (int64_t j = k; j < n && sorted_ids[j] == id; ++j) {
        float d[N];
        LoadN<N>(dout, static_cast<int64_t>(sorted_tokens[j]) * dim + c, d);
        for (int i = 0; i < N; ++i) sum[i] += d[i];
      }
      StoreN<N>(dtable, row + c, sum);
    }
  }
}

constexpr size_t RoundUp256(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

void RmsNormForward(In x, In w, int64_t rows, int64_t dim, float eps, Out y, float* rstd,
                    cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return;
  const bool packed = dim % kPack == 0 && Aligned16({x.ptr, w.ptr, y.ptr});
  const int threads = ThreadsFor(packed ? dim / kPack : dim, kRowThreads);
  if (packed) {
    RmsNormForwardKernel<kPack>
        <<<RowGrid(rows), threads, 0, stream>>>(x, w, rows, dim, eps, y, rstd);
  } else {
    RmsNormForwardKernel<1><<<RowGrid(rows), threads, 0, stream>>>(x, w, rows, dim, eps, y, rstd);
  }
  AIR_CUDA_CHECK_LAUNCH();
}

void RmsNormBackward(In x, In w, const float* rstd, In dy, int64_t rows, int64_t dim, Out dx,
                     Out dw, cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return;
  const bool packed = dim % kPack == 0 && Aligned16({x.ptr, w.ptr, dy.ptr, dx.ptr});
  const int threads = ThreadsFor(packed ? dim / kPack : dim, kRowThreads);
  if (packed) {
    RmsNormBackwardKernel<kPack>
        <<<RowGrid(rows), threads, 0, stream>>>(x, w, rstd, dy, rows, dim, dx);
  } else {
    RmsNormBackwardKernel<1><<<RowGrid(rows), threads, 0, stream>>>(x, w, rstd, dy, rows, dim, dx);
  }
  AIR_CUDA_CHECK_LAUNCH();
  if (dw.ptr != nullptr) {
    AddColumnSums(RmsNormDwTerm{dy, x, rstd, dim}, rows, dim, packed, dw, stream);
  }
}

void BiasBackward(In dy, int64_t rows, int64_t cols, Out dbias, cudaStream_t stream) {
  const bool packed = cols % kPack == 0 && Aligned16({dy.ptr});
  AddColumnSums(BiasTerm{dy, cols}, rows, cols, packed, dbias, stream);
}

void EmbeddingBackward(const int32_t* ids, int64_t n, In dout, int64_t dim, int32_t skip_id,
                       Out dtable, cudaStream_t stream) {
  if (n <= 0 || dim <= 0) return;
  // Scratch: the sorted ids, the token indices before and after the sort, CUB's temporary space.
  // Token indices are int32 (a batch's tokens: n < 2^31), and so are CUB's offsets.
  const int32_t items = static_cast<int32_t>(n);
  size_t sort_bytes = 0;
  AIR_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, ids, static_cast<int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), items, 0, 32, stream));
  const size_t array_bytes = RoundUp256(static_cast<size_t>(n) * sizeof(int32_t));
  char* scratch = nullptr;
  AIR_CUDA_CHECK(
      cudaMallocAsync(reinterpret_cast<void**>(&scratch), 3 * array_bytes + sort_bytes, stream));
  int32_t* sorted_ids = reinterpret_cast<int32_t*>(scratch);
  int32_t* tokens = reinterpret_cast<int32_t*>(scratch + array_bytes);
  int32_t* sorted_tokens = reinterpret_cast<int32_t*>(scratch + 2 * array_bytes);
  void* sort_space = scratch + 3 * array_bytes;

  TokenIndicesKernel<<<BlocksFor(n, 256, 4096), 256, 0, stream>>>(tokens, n);
  AIR_CUDA_CHECK_LAUNCH();
  // Radix sort is stable: the tokens of one id stay in ascending order.
  AIR_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_space, sort_bytes, ids, sorted_ids, tokens,
                                                 sorted_tokens, items, 0, 32, stream));
  const bool packed = dim % kPack == 0 && Aligned16({dout.ptr, dtable.ptr});
  const int64_t units = packed ? dim / kPack : dim;
  const int threads = ThreadsFor(units, 128);
  const dim3 grid(static_cast<unsigned>(n < kMaxRowGrid ? n : kMaxRowGrid),
                  BlocksFor(units, threads, 65535));
  if (packed) {
    EmbeddingRunsKernel<kPack>
        <<<grid, threads, 0, stream>>>(sorted_ids, sorted_tokens, n, dout, dim, skip_id, dtable);
  } else {
    EmbeddingRunsKernel<1>
        <<<grid, threads, 0, stream>>>(sorted_ids, sorted_tokens, n, dout, dim, skip_id, dtable);
  }
  AIR_CUDA_CHECK_LAUNCH();
  AIR_CUDA_CHECK(cudaFreeAsync(scratch, stream));
}

}  // namespace air::engine::cuda
