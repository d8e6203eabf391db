// The CUDA backend's cross-entropy kernels (cuda_kernels.h): the per-row log-sum-exp and the
// loss sum (forward), and the softmax-minus-one-hot gradient (backward). Hand-written because
// the op is a fused, memory-bound pass over logits (rows, vocab) that never materializes the
// softmax, must skip ignored rows (kIgnoreIndex) and must add the loss deterministically; no
// library kernel does that with these dtypes (logits and gradient each BF16 or F32).
//
// Forward: one block per row (grid-stride over rows). Each thread reads its columns once, in
// packs of 8 where the vocabulary and the pointers allow, keeping an online (max, sum of
// exp(x - max)) pair: the exponentials in fp32 (expf), summed per pack in fp32 and into a
// double per thread; a new max rescales the thread's sum by exp(old - new) in double. The
// threads' pairs combine by BlockMax and BlockSum (a fixed tree); lse = max + log(sum) in
// double, rounded once into lse. Each row's loss, lse - logit[target] in double (0 for an
// ignored row), goes to a scratch array; one block then adds the rows in a fixed order and adds
// the total into *loss_sum. The reference sums in double throughout (exp and all): the fp32
// exponentials put lse within a few 1e-7 of it.
// Backward: an elementwise pass, scale * (expf(x - lse) - onehot) in fp32 (0 on ignored rows),
// each element read and then written by the same thread, so dlogits may alias logits.
// Thread safety: launchers are stateless; calls on one stream are ordered by it.
#include <cstdint>

#include "engine/backend/cuda/cuda_common.cuh"
#include "engine/backend/cuda/cuda_loops.cuh"

namespace air::engine::cuda {
namespace {

constexpr int kRowThreads = 512;          // at most, per row of the forward
constexpr int64_t kMaxRowGrid = 1 << 20;  // blocks of the forward; grid-stride beyond

// logits (n, vocab) -> lse (n), row_loss (n) = lse - logit[target] (0 where ignored).
template <int N>
__global__ void CrossEntropyRowsKernel(In logits, const int32_t* targets, int64_t n, int64_t vocab,
                                       float* lse, double* row_loss) {
  __shared__ float shared_max[32];
  __shared__ double shared_sum[32];
  const int64_t step = static_cast<int64_t>(blockDim.x) * N;
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const int64_t row = r * vocab;
    float max_seen = -INFINITY;  // this thread's running max
    double sum = 0.0;            // of exp(x - max_seen) over this thread's columns so far
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * N; c < vocab; c += step) {
      float v[N];
      LoadN<N>(logits, row + c, v);
      float pack_max = v[0];
      for (int k = 1; k < N; ++k) pack_max = fmaxf(pack_max, v[k]);
      if (pack_max > max_seen) {  // exp(-inf) = 0 clears the empty sum of a first pack
        sum *= exp(static_cast<double>(max_seen) - static_cast<double>(pack_max));
        max_seen = pack_max;
      }
      float pack_sum = 0.0f;
      for (int k = 0; k < N; ++k) {
        // -inf adds nothing (and max_seen may be -inf too: no -inf - -inf); NaN stays NaN.
        pack_sum += v[k] == -INFINITY ? 0.0f : expf(v[k] - max_seen);
      }
      sum += pack_sum;
    }
    const float row_max = BlockMax(max_seen, shared_max, -INFINITY);
    const double scaled =
        sum == 0.0 ? 0.0 : sum * exp(static_cast<double>(max_seen) - static_cast<double>(row_max));
    const double total = BlockSum(scaled, shared_sum);
    if (threadIdx.x == 0) {
      const double row_lse = static_cast<double>(row_max) + log(total);
      lse[r] = static_cast<float>(row_lse);
      const int32_t target = targets[r];
      row_loss[r] =
          target == kIgnoreIndex ? 0.0 : row_lse - static_cast<double>(Load(logits, row + target));
    }
  }
}

// dlogits (n, vocab) [r, c] = scale * (exp(logit - lse[r]) - (c == target[r])), 0 on ignored rows.
struct CrossEntropyGradBody {
  In logits;
  const int32_t* targets;
  const float* lse;
  float scale;
  Out dlogits;
  int64_t vocab;
  template <int N>
  __device__ void Run(int64_t r, int64_t c) const {
    const int32_t target = targets[r];
    float v[N];
    if (target == kIgnoreIndex) {
      for (int k = 0; k < N; ++k) v[k] = 0.0f;
    } else {
      LoadN<N>(logits, r * vocab + c, v);  // read before dlogits (maybe the same) is written
      const float row_lse = lse[r];
      for (int k = 0; k < N; ++k) {
        const float onehot = c + k == target ? 1.0f : 0.0f;
        v[k] = scale * (expf(v[k] - row_lse) - onehot);
      }
    }
    StoreN<N>(dlogits, r * vocab + c, v);
  }
};

}  // namespace

void CrossEntropyForward(In logits, const int32_t* targets, int64_t n, int64_t vocab, float* lse,
                         double* loss_sum, cudaStream_t stream) {
  if (n <= 0 || vocab <= 0) return;
  double* row_loss = nullptr;
  AIR_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&row_loss),
                                 static_cast<size_t>(n) * sizeof(double), stream));
  const bool packed = vocab % kPack == 0 && Aligned16({logits.ptr});
  const int threads = ThreadsFor(packed ? vocab / kPack : vocab, kRowThreads);
  const unsigned blocks = static_cast<unsigned>(n < kMaxRowGrid ? n : kMaxRowGrid);
  if (packed) {
    CrossEntropyRowsKernel<kPack>
        <<<blocks, threads, 0, stream>>>(logits, targets, n, vocab, lse, row_loss);
  } else {
    CrossEntropyRowsKernel<1>
        <<<blocks, threads, 0, stream>>>(logits, targets, n, vocab, lse, row_loss);
  }
  AIR_CUDA_CHECK_LAUNCH();
  LaunchAddOrderedSum(row_loss, n, loss_sum, stream);  // rows in a fixed order, then += once
  AIR_CUDA_CHECK_LAUNCH();
  AIR_CUDA_CHECK(cudaFreeAsync(row_loss, stream));
}

void CrossEntropyBackward(In logits, const int32_t* targets, const float* lse, int64_t n,
                          int64_t vocab, float scale, Out dlogits, cudaStream_t stream) {
  if (n <= 0 || vocab <= 0) return;
  const bool packed = vocab % kPack == 0 && Aligned16({logits.ptr, dlogits.ptr});
  LaunchRows(CrossEntropyGradBody{logits, targets, lse, scale, dlogits, vocab}, n, vocab, packed,
             stream);
  AIR_CUDA_CHECK_LAUNCH();
}

}  // namespace air::engine::cuda
