// The loops and memory accesses the memory-bound kernel files share (cuda_elementwise.cu,
// cuda_rowwise.cu, cuda_loss.cu, cuda_optimizer.cu): packs of 8 consecutive elements of a data
// argument moved with 16-byte accesses, the grid-stride loop over a flat array, the loop over a
// (rows, cols) matrix, and the ordered sum of a few partial sums into a scalar.
//
// A pack is 8 elements: one uint4 of 8 bf16, or two float4 of 8 floats. A kernel reads and
// writes in packs where every pointer it touches is 16-byte aligned and every row is a whole
// number of packs (the launcher checks: Aligned16), element by element otherwise; both paths
// widen and round as cuda_common.cuh's Load/Store do, so the choice never changes a result.
// Thread safety: device functions over their arguments; launch helpers are stateless.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "engine/backend/cuda/cuda_common.cuh"

namespace air::engine::cuda {

inline constexpr int kPack = 8;

// Whether every pointer is 16-byte aligned (null pointers, absent arguments, are ignored).
inline bool Aligned16(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

__device__ __forceinline__ void UnpackBf16Pair(uint32_t bits, float& lo, float& hi) {
  lo = WidenBf16(static_cast<uint16_t>(bits & 0xffffu));  // the lower address: little-endian
  hi = WidenBf16(static_cast<uint16_t>(bits >> 16));
}
__device__ __forceinline__ uint32_t PackBf16Pair(float lo, float hi) {
  return static_cast<uint32_t>(RoundToBf16(lo)) | (static_cast<uint32_t>(RoundToBf16(hi)) << 16);
}

// v = a[i .. i + N), N = 1 or kPack (then i is a multiple of kPack and a's pointer aligned).
template <int N>
__device__ __forceinline__ void LoadN(In a, int64_t i, float (&v)[N]) {
  if constexpr (N == 1) {
    v[0] = Load(a, i);
  } else {
    static_assert(N == kPack, "a pack is 8 elements");
    if (a.dtype == DType::kBF16) {
      const uint4 raw = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(a.ptr) + i);
      UnpackBf16Pair(raw.x, v[0], v[1]);
      UnpackBf16Pair(raw.y, v[2], v[3]);
      UnpackBf16Pair(raw.z, v[4], v[5]);
      UnpackBf16Pair(raw.w, v[6], v[7]);
    } else {
      const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(a.ptr) + i);
      const float4 lo = p[0], hi = p[1];
      v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w;
      v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
    }
  }
}
template <int N>
__device__ __forceinline__ void LoadN(Out a, int64_t i, float (&v)[N]) {
  LoadN<N>(AsIn(a), i, v);
}

// a[i .. i + N) = v, a BF16 destination rounded to nearest even element by element.
template <int N>
__device__ __forceinline__ void StoreN(Out a, int64_t i, const float (&v)[N]) {
  if constexpr (N == 1) {
    Store(a, i, v[0]);
  } else {
    static_assert(N == kPack, "a pack is 8 elements");
    if (a.dtype == DType::kBF16) {
      uint4 raw;
      raw.x = PackBf16Pair(v[0], v[1]);
      raw.y = PackBf16Pair(v[2], v[3]);
      raw.z = PackBf16Pair(v[4], v[5]);
      raw.w = PackBf16Pair(v[6], v[7]);
      *reinterpret_cast<uint4*>(static_cast<uint16_t*>(a.ptr) + i) = raw;
    } else {
      float4* p = reinterpret_cast<float4*>(static_cast<float*>(a.ptr) + i);
      p[0] = make_float4(v[0], v[1], v[2], v[3]);
      p[1] = make_float4(v[4], v[5], v[6], v[7]);
    }
  }
}

// ---- a flat array: body.Run<N>(i) for i in [0, n) ------------------------------------------
// Whole packs first (when `packed`), then the last n % kPack elements one by one; grid-stride,
// so any grid covers any n. Each element is handled by exactly one thread, once: a body may
// read an element and then write it (in place).
template <typename Body>
__global__ void ElementwiseKernel(Body body, int64_t n, bool packed) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t done = 0;
  if (packed) {
    const int64_t packs = n / kPack;
    for (int64_t p = first; p < packs; p += stride) body.template Run<kPack>(p * kPack);
    done = packs * kPack;
  }
  for (int64_t i = done + first; i < n; i += stride) body.template Run<1>(i);
}

inline constexpr int kElementwiseThreads = 256;
inline constexpr int64_t kMaxElementwiseBlocks = 8192;  // 2M threads; grid-stride beyond

// The caller checks the launch (AIR_CUDA_CHECK_LAUNCH, so a failure names its launcher).
template <typename Body>
void LaunchElementwise(const Body& body, int64_t n, bool packed, cudaStream_t stream) {
  if (n <= 0) return;
  const int64_t items = packed ? (n + kPack - 1) / kPack : n;
  const unsigned blocks = BlocksFor(items, kElementwiseThreads, kMaxElementwiseBlocks);
  ElementwiseKernel<<<blocks, kElementwiseThreads, 0, stream>>>(body, n, packed);
}

// ---- a matrix: body.Run<N>(row, col) for col = 0, N, 2N, ... < cols of every row < rows -----
// N = kPack needs cols % kPack == 0 (and the body's row starts aligned). blockIdx.y strides over
// the rows, the x dimension over the columns; each (row, col) is visited by one thread, once.
template <int N, typename Body>
__global__ void RowsKernel(Body body, int64_t rows, int64_t cols) {
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x * N;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    for (int64_t c = first; c < cols; c += stride) body.template Run<N>(r, c);
  }
}

// Threads for `units` items of work per row: a multiple of 32, at most `max_threads`.
inline int ThreadsFor(int64_t units, int max_threads) {
  const int64_t rounded = (units + 31) / 32 * 32;
  return static_cast<int>(rounded < 32 ? 32 : (rounded > max_threads ? max_threads : rounded));
}

// The caller checks the launch. `packed`: cols % kPack == 0 and the body's pointers aligned.
template <typename Body>
void LaunchRows(const Body& body, int64_t rows, int64_t cols, bool packed, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const int64_t units = packed ? cols / kPack : cols;
  const int threads = ThreadsFor(units, 256);
  const dim3 grid(BlocksFor(units, threads, 65535),
                  static_cast<unsigned>(rows < 65535 ? rows : 65535));
  if (packed) {
    RowsKernel<kPack><<<grid, threads, 0, stream>>>(body, rows, cols);
  } else {
    RowsKernel<1><<<grid, threads, 0, stream>>>(body, rows, cols);
  }
}

// ---- *total += the sum of values (n doubles), in an order fixed by n alone -----------------
// One block of kOrderedSumThreads: thread t adds the t-th contiguous slice in index order, the
// slices combine by BlockSum's fixed tree; thread 0 adds the result into *total. For the few
// partial sums (one per row or per chunk) of a deterministic reduction.
inline constexpr int kOrderedSumThreads = 256;

// (A template, T = double, so that every file including this header may instantiate it.)
template <typename T>
__global__ void __launch_bounds__(kOrderedSumThreads)
    AddOrderedSumKernel(const T* values, int64_t n, T* total) {
  __shared__ T shared[32];
  const int64_t per_thread = (n + kOrderedSumThreads - 1) / kOrderedSumThreads;
  const int64_t begin = threadIdx.x * per_thread;
  const int64_t end = begin + per_thread < n ? begin + per_thread : n;
  T sum = 0;
  for (int64_t i = begin; i < end; ++i) sum += values[i];
  sum = BlockSum(sum, shared);
  if (threadIdx.x == 0) *total += sum;
}

// The caller checks the launch.
inline void LaunchAddOrderedSum(const double* values, int64_t n, double* total,
                                cudaStream_t stream) {
  AddOrderedSumKernel<double><<<1, kOrderedSumThreads, 0, stream>>>(values, n, total);
}

}  // namespace air::engine::cuda
