// What every CUDA kernel file of the backend shares: reading and writing a data argument of
// either float dtype (In/Out of cuda_kernels.h) with the CPU's rounding rules, launch-size
// helpers and the ordered block reductions the deterministic sums are built from. Device code
// only includes this (nvcc); cuda_kernels.h is what the host side sees.
//
// BF16 goes through op_semantics.h's RoundToBf16/WidenBf16, the bits the CPU backends use
// (round to nearest even, NaN kept quiet). A dtype branch per element is uniform across a warp
// (one argument has one dtype), so it costs an instruction, not divergence; kernels whose speed
// matters specialise on the dtypes they see in training instead.
// Thread safety: device functions over their arguments.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/ops/op_semantics.h"

namespace air::engine::cuda {

__device__ __forceinline__ float Load(In a, int64_t i) {
  if (a.dtype == DType::kBF16) return WidenBf16(static_cast<const uint16_t*>(a.ptr)[i]);
  return static_cast<const float*>(a.ptr)[i];
}
__device__ __forceinline__ float Load(Out a, int64_t i) { return Load(In{a.ptr, a.dtype}, i); }
__device__ __forceinline__ void Store(Out a, int64_t i, float value) {
  if (a.dtype == DType::kBF16) {
    static_cast<uint16_t*>(a.ptr)[i] = RoundToBf16(value);
  } else {
    static_cast<float*>(a.ptr)[i] = value;
  }
}
// a[i] += value: read, one fp32 add, rounded once.
__device__ __forceinline__ void Accumulate(Out a, int64_t i, float value) {
  Store(a, i, Load(a, i) + value);
}

// Blocks of `threads` threads covering n items, at most `max_blocks` (grid-stride loops cover
// the rest).
inline unsigned BlocksFor(int64_t n, int threads, int64_t max_blocks = 65535LL * 32) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > max_blocks ? max_blocks : blocks));
}

// The sum of `value` over a warp, in a fixed butterfly order (every lane gets it).
template <typename T>
__device__ __forceinline__ T WarpSum(T value) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}
template <typename T>
__device__ __forceinline__ T WarpMax(T value) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    value = max(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// The sum of `value` over the block (blockDim.x a multiple of 32, at most 1024), in a fixed
// order: each warp's butterfly, then warp 0 over the warps' sums. Every thread gets the sum.
// `shared` holds 32 T; the call ends with a barrier, so it may be reused at once.
template <typename T>
__device__ __forceinline__ T BlockSum(T value, T* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  value = WarpSum(value);
  __syncthreads();
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  T total = lane < warps ? shared[lane] : T(0);
  total = WarpSum(total);
  __syncthreads();
  return total;
}
template <typename T>
__device__ __forceinline__ T BlockMax(T value, T* shared, T lowest) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  value = WarpMax(value);
  __syncthreads();
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  T total = lane < warps ? shared[lane] : lowest;
  total = WarpMax(total);
  __syncthreads();
  return total;
}

}  // namespace air::engine::cuda
