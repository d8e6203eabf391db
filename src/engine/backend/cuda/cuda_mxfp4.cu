// MXFP4 dequantisation on a GPU (cuda_kernels.h's DequantizeMxfp4; ops.h states the op): GPT-OSS's
// 4-bit expert weights are uploaded as they are stored (a quarter of bf16's bytes) and expanded in
// device memory. One thread per output element of out (E, C, R), R fastest so the writes are
// coalesced; each reads its byte and its group's scale and applies op_semantics.h's Mxfp4Value,
// the rule the CPU decoder (mxfp4_decode.h) uses, so the values are the same bits (exact in F32
// and BF16). It runs once per expert weight at load time, so its strided reads are not tuned.
// Thread safety: stateless; calls on one stream are ordered by it.
#include <cstdint>

#include "engine/backend/cuda/cuda_common.cuh"
#include "engine/backend/cuda/grouped_tiles.h"

namespace air::engine::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void DequantizeMxfp4Kernel(int64_t experts, int64_t rows, int64_t groups,
                                      const uint8_t* blocks, const uint8_t* scales, Out out) {
  const int64_t total = experts * groups * 32 * rows;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    // out[e][c][r]: value c of stored row r of expert e.
    const Mxfp4Source src = Mxfp4SourceOf(i, rows, groups);
    const uint8_t byte = blocks[src.byte];
    const auto nibble = static_cast<uint8_t>(src.high ? byte >> 4 : byte & 0x0F);
    Store(out, i, Mxfp4Value(nibble, scales[src.group]));
  }
}

}  // namespace

void DequantizeMxfp4(int64_t experts, int64_t rows, int64_t groups, const uint8_t* blocks,
                     const uint8_t* scales, Out out, cudaStream_t stream) {
  const int64_t total = experts * rows * groups * 32;
  if (total <= 0) return;
  DequantizeMxfp4Kernel<<<BlocksFor(total, kThreads), kThreads, 0, stream>>>(experts, rows, groups,
                                                                             blocks, scales, out);
  AIR_CUDA_CHECK_LAUNCH();
}

}  // namespace air::engine::cuda
