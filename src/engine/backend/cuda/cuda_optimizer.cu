// The CUDA backend's optimizer kernels (cuda_kernels.h): the AdamW update of the master state
// (fp32, or bf16 under torch_dtype bfloat16: widened, updated in fp32, rounded once), and the sum
// of squares behind the gradient's global norm. Hand-written because they
// must give the CPU's results: AdamW the reference's bits (op_semantics.h's AdamWElement, every
// operation rounded on its own: this file is compiled with -fmad=false, CMakeLists.txt, so nvcc
// contracts no a * b + c into a fused multiply-add; sqrtf and '/' are IEEE without
// --use_fast_math), with the updated parameters' compute copy written in the same pass, and the
// sum of squares a deterministic double sum, which no library reduction promises.
//
// AdamWUpdate: ElementwiseKernel's grid-stride loop (cuda_loops.cuh) in packs of 8 floats where
// every pointer is 16-byte aligned. SumOfSquares: the array is cut into chunks of kSquaresChunk
// elements, one block each (so the order of the sum depends on n alone, never on the GPU); a
// block's threads each add every kSquaresThreads-th quad of the chunk in order, in double (a
// float's square is exact in double), the threads combine by BlockSum's fixed tree, and one
// block adds the chunks' partial sums in a fixed order into *sum.
// Thread safety: launchers are stateless; calls on one stream are ordered by it.
#include <cstdint>

#include "engine/backend/cuda/cuda_common.cuh"
#include "engine/backend/cuda/cuda_loops.cuh"

namespace air::engine::cuda {
namespace {

// p, m, v (n) updated in place from g (n), each F32 or BF16; p_copy (ptr null: none) = the
// updated p, as Convert writes it.
struct AdamWBody {
  AdamWScalars s;
  Out p;
  In g;
  Out m;
  Out v;
  Out p_copy;
  template <int N>
  __device__ void Run(int64_t i) const {
    float pv[N], gv[N], mv[N], vv[N];
    LoadN<N>(p, i, pv);
    LoadN<N>(g, i, gv);
    LoadN<N>(m, i, mv);
    LoadN<N>(v, i, vv);
    for (int k = 0; k < N; ++k) AdamWElement(s, pv[k], gv[k], mv[k], vv[k]);
    StoreN<N>(p, i, pv);
    StoreN<N>(m, i, mv);
    StoreN<N>(v, i, vv);
    if (p_copy.ptr != nullptr) StoreN<N>(p_copy, i, pv);
  }
};

constexpr int64_t kSquaresChunk = int64_t{1} << 16;  // elements per block: fixes the order
constexpr int kSquaresThreads = 256;
constexpr int64_t kQuad = 4;

// partial[b] = the sum of x[i]^2 over chunk b (blockIdx.x) in double. Thread t adds quads t,
// t + kSquaresThreads, ... of the chunk, each quad's elements in order: one float4 where the
// array is aligned and the quad whole, else element by element with 0 past the end (adding
// +0.0 to a sum >= 0 changes nothing), so both paths give the same bits.
// A BF16 x (bf16 gradients) is widened element by element: the same values, the same order.
__global__ void __launch_bounds__(kSquaresThreads)
    SumOfSquaresChunksKernel(In x, int64_t n, bool aligned, double* partial) {
  __shared__ double shared[32];
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kSquaresChunk;
  const int64_t count = n - begin < kSquaresChunk ? n - begin : kSquaresChunk;
  const bool f32 = x.dtype == DType::kF32;
  const float* chunk = static_cast<const float*>(x.ptr) + begin;
  double sum = 0.0;
#pragma unroll 4
  for (int64_t q = static_cast<int64_t>(threadIdx.x) * kQuad; q < count;
       q += kSquaresThreads * kQuad) {
    float v[kQuad];
    if (f32 && aligned && q + kQuad <= count) {
      const float4 f = *reinterpret_cast<const float4*>(chunk + q);
      v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
    } else {
      for (int k = 0; k < kQuad; ++k) v[k] = q + k < count ? Load(x, begin + q + k) : 0.0f;
    }
    for (int k = 0; k < kQuad; ++k) {
      const double d = v[k];
      sum += d * d;
    }
  }
  sum = BlockSum(sum, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

}  // namespace

void AdamWUpdate(const AdamWScalars& s, Out p, In g, Out m, Out v, Out p_copy, int64_t n,
                 cudaStream_t stream) {
  if (n <= 0) return;
  const bool packed = Aligned16({p.ptr, g.ptr, m.ptr, v.ptr, p_copy.ptr});
  LaunchElementwise(AdamWBody{s, p, g, m, v, p_copy}, n, packed, stream);
  AIR_CUDA_CHECK_LAUNCH();
}

void SumOfSquares(In x, int64_t n, double* sum, cudaStream_t stream) {
  if (n <= 0) return;
  const int64_t chunks = (n + kSquaresChunk - 1) / kSquaresChunk;
  double* partial = nullptr;
  AIR_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&partial),
                                 static_cast<size_t>(chunks) * sizeof(double), stream));
  SumOfSquaresChunksKernel<<<static_cast<unsigned>(chunks), kSquaresThreads, 0, stream>>>(
      x, n, Aligned16({x.ptr}), partial);
  AIR_CUDA_CHECK_LAUNCH();
  LaunchAddOrderedSum(partial, chunks, sum, stream);
  AIR_CUDA_CHECK_LAUNCH();
  AIR_CUDA_CHECK(cudaFreeAsync(partial, stream));
}

}  // namespace air::engine::cuda
