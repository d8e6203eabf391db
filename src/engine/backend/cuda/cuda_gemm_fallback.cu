// The GEMM for the shapes cuBLASLt refuses (cuda_gemm.h falls back to it when its heuristic finds
// no algorithm: an odd leading dimension of a bf16 matrix, a pointer aligned to 2 bytes): ops.h's
// Gemm in plain CUDA, 16 x 16 output tiles through shared memory, one thread per output element
// summing its k products in order in fp32. Hand-written because it must accept what the library
// does not; it is correct for any transposes, strides and dtypes, and slow, which is acceptable:
// the model's own GEMMs all go to cuBLASLt. A bf16 product rounds both operands to bf16 first
// (ops.h's rule), as the library path does.
#include "engine/backend/cuda/cuda_common.cuh"
#include "engine/backend/cuda/cuda_gemm.h"
#include "engine/backend/cuda/gemm_layout.h"

namespace air::engine::cuda {
namespace {

constexpr int kTile = kFallbackTile;

__device__ __forceinline__ float Operand(In x, int64_t i, bool round_to_bf16) {
  const float v = Load(x, i);
  return round_to_bf16 ? WidenBf16(RoundToBf16(v)) : v;
}

// C (m, n) = op(A) op(B) + beta C, tile (row tile, col tile) by block (blockIdx.y, blockIdx.x)
// and every (gridDim.y, gridDim.x) further (FallbackGemmGrid caps the grid at CUDA's limits).
__global__ void GemmTileKernel(GemmCall g, bool bf16_product, int64_t row_tiles,
                               int64_t col_tiles) {
  __shared__ float a_tile[kTile][kTile + 1];
  __shared__ float b_tile[kTile][kTile + 1];
  for (int64_t tile_r = blockIdx.y; tile_r < row_tiles; tile_r += gridDim.y) {
    for (int64_t tile_c = blockIdx.x; tile_c < col_tiles; tile_c += gridDim.x) {
      const int64_t row = tile_r * kTile + threadIdx.y;
      const int64_t col = tile_c * kTile + threadIdx.x;
      float sum = 0.0f;
      for (int64_t k0 = 0; k0 < g.k; k0 += kTile) {
        // a_tile[y][x] = op(A)[row, k0 + x]; b_tile[y][x] = op(B)[k0 + y, col].
        const int64_t ak = k0 + threadIdx.x, bk = k0 + threadIdx.y;
        a_tile[threadIdx.y][threadIdx.x] =
            row < g.m && ak < g.k
                ? Operand(g.a, g.trans_a ? ak * g.lda + row : row * g.lda + ak, bf16_product)
                : 0.0f;
        b_tile[threadIdx.y][threadIdx.x] =
            bk < g.k && col < g.n
                ? Operand(g.b, g.trans_b ? col * g.ldb + bk : bk * g.ldb + col, bf16_product)
                : 0.0f;
        __syncthreads();
        for (int p = 0; p < kTile; ++p) sum += a_tile[threadIdx.y][p] * b_tile[p][threadIdx.x];
        __syncthreads();
      }
      if (row < g.m && col < g.n) {
        const int64_t at = row * g.ldc + col;
        Store(g.c, at, g.beta == 0.0f ? sum : sum + g.beta * Load(g.c, at));
      }
    }
  }
}

}  // namespace

void GemmFallback(const GemmCall& call, cudaStream_t stream) {
  if (call.m <= 0 || call.n <= 0) return;
  const bool bf16_product = call.a.dtype == DType::kBF16 || call.b.dtype == DType::kBF16;
  const FallbackGrid tiles = FallbackGemmGrid(call.m, call.n);
  const dim3 grid(static_cast<unsigned>(tiles.x), static_cast<unsigned>(tiles.y));
  GemmTileKernel<<<grid, dim3(kTile, kTile), 0, stream>>>(call, bf16_product, tiles.row_tiles,
                                                          tiles.col_tiles);
  AIR_CUDA_CHECK_LAUNCH();
}

}  // namespace air::engine::cuda
