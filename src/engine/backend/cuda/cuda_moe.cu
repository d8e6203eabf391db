// The CUDA kernels of GPT-OSS's mixture of experts (cuda_kernels.h's MoE launchers): the clamped
// SwiGLU, the top-k router, and the dispatch / gather / combine that group a batch's (token, slot)
// choices by expert. Hand-written: each is a short memory-bound loop whose rounding and summation
// order must be the CPU reference's (backend/cpu/reference_moe_loops.cc):
//   - SwiGLU, the router's softmax and its backward compute in double as the reference does, then
//     round once to fp32 (only CUDA's double exp and FMA contraction in double can differ, by a
//     double ulp: the fp32 results agree but at a rounding tie);
//   - the router's choice and the dispatch (CUB's stable radix sort by expert id) are integer
//     work: bit-identical;
//   - gather copies; combine rounds each product and each sum in fp32 in ascending row order from
//     zero (__fmul_rn / __fadd_rn: no FMA); gather's backward sums in double in ascending row
//     order; only combine backward's dot (double, over dim) is a fixed tree, not sequential.
// Row kernels run one block per token (or grouped row), its threads over the columns in packs of
// 8 (cuda_loops.cuh's 16-byte accesses) where the dimension and the pointers allow, else 1.
// Thread safety: launchers are stateless; calls on one stream are ordered by it.
#include <algorithm>
#include <cstdint>
#include <cub/cub.cuh>

#include "engine/backend/cuda/cuda_loops.cuh"

namespace air::engine::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kElementThreads = 256;        // elementwise and per-token-thread kernels
constexpr int kRowThreads = 128;            // one block per row: 1024 columns per pass in packs
constexpr int64_t kMaxRowBlocks = 1 << 20;  // row kernels loop over rows beyond this many blocks

unsigned RowBlocks(int64_t rows) { return static_cast<unsigned>(std::min(rows, kMaxRowBlocks)); }

// One dynamic shared-memory buffer for every kernel of the file (one declaration, one type).
__device__ __forceinline__ unsigned char* DynamicShared() {
  extern __shared__ __align__(16) unsigned char moe_dynamic_shared[];
  return moe_dynamic_shared;
}

// Whether rows of `dim` elements at these pointers go in packs of kPack (cuda_loops.cuh).
bool PacksFit(int64_t dim, std::initializer_list<const void*> pointers) {
  return dim % kPack == 0 && Aligned16(pointers);
}

// Token t's k grouped rows in ascending order (MoeSlotsByRow), with the slot each came from;
// an insertion sort by one thread (k is a handful).
__device__ void SortSlotsByRow(const int32_t* rows_of_token, int64_t k, int32_t* sorted_rows,
                               int32_t* sorted_slots) {
  for (int64_t j = 0; j < k; ++j) {
    const int32_t row = rows_of_token[j];
    int64_t i = j;
    for (; i > 0 && sorted_rows[i - 1] > row; --i) {
      sorted_rows[i] = sorted_rows[i - 1];
      sorted_slots[i] = sorted_slots[i - 1];
    }
    sorted_rows[i] = row;
    sorted_slots[i] = static_cast<int32_t>(j);
  }
}

// ---- clamped SwiGLU -----------------------------------------------------------------------------
// std::min(a, b) and std::clamp(v, lo, hi) as the reference calls them (a NaN input stays NaN).
__device__ __forceinline__ float StdMin(float a, float b) { return b < a ? b : a; }
__device__ __forceinline__ float StdClamp(float v, float lo, float hi) {
  return v < lo ? lo : (hi < v ? hi : v);
}
__device__ __forceinline__ double SigmoidD(double x) { return 1.0 / (1.0 + exp(-x)); }

// out (n) from gate_up (n pairs): (u + 1) * g * sigmoid(alpha * g) in double, as the reference.
__global__ void ClampedSwigluForwardKernel(In gate_up, int64_t n, float alpha, float limit,
                                           Out out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const double g = StdMin(Load(gate_up, 2 * i), limit);
    const double u = StdClamp(Load(gate_up, 2 * i + 1), -limit, limit);
    Store(out, i, static_cast<float>((u + 1.0) * g * SigmoidD(alpha * g)));
  }
}

// dgate_up (n pairs) += the reference's double-precision gradient, none where clamped.
__global__ void ClampedSwigluBackwardKernel(In gate_up, int64_t n, float alpha, float limit,
                                            In dout, Out dgate_up) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float gate = Load(gate_up, 2 * i), up = Load(gate_up, 2 * i + 1), d = Load(dout, i);
    const double g = StdMin(gate, limit);
    const double u = StdClamp(up, -limit, limit);
    const double sig = SigmoidD(alpha * g);
    if (gate <= limit) {
      Accumulate(dgate_up, 2 * i,
                 static_cast<float>(d * (u + 1.0) * (sig + alpha * g * sig * (1.0 - sig))));
    }
    if (up >= -limit && up <= limit)
      Accumulate(dgate_up, 2 * i + 1, static_cast<float>(d * g * sig));
  }
}

// ---- router -------------------------------------------------------------------------------------

// Whether logit (a_value, expert a) comes before (b_value, b) in the descending, stable order.
__device__ __forceinline__ bool Ahead(float a_value, int32_t a, float b_value, int32_t b) {
  return a_value > b_value || (!(b_value > a_value) && a < b);
}

// One warp per token. Its shared slice: values (experts, fp32), chosen (k), taken (experts).
// k rounds of an arg-max over the untaken experts (each lane over experts lane, lane + 32, ...,
// then a butterfly), then the softmax over the k chosen in double as the reference.
__global__ void RouterTopKKernel(In logits, int64_t n, int64_t experts, int64_t k,
                                 int64_t warp_bytes, int32_t* indices, float* weights) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  unsigned char* slice = DynamicShared() + warp * warp_bytes;
  float* values = reinterpret_cast<float*>(slice);
  int32_t* chosen = reinterpret_cast<int32_t*>(values + experts);
  unsigned char* taken = reinterpret_cast<unsigned char*>(chosen + k);
  const int64_t token_stride = static_cast<int64_t>(gridDim.x) * warps;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * warps + warp; t < n; t += token_stride) {
    for (int64_t e = lane; e < experts; e += 32) {
      values[e] = Load(logits, t * experts + e);
      taken[e] = 0;
    }
    __syncwarp();
    for (int64_t j = 0; j < k; ++j) {
      float best_value = 0.0f;
      int32_t best = -1;  // none yet
      for (int32_t e = lane; e < experts; e += 32) {
        if (!taken[e] && (best < 0 || Ahead(values[e], e, best_value, best))) {
          best_value = values[e];
          best = e;
        }
      }
      for (int offset = 16; offset > 0; offset >>= 1) {
        const float other_value = __shfl_xor_sync(kFullMask, best_value, offset);
        const int32_t other = __shfl_xor_sync(kFullMask, best, offset);
        if (other >= 0 && (best < 0 || Ahead(other_value, other, best_value, best))) {
          best_value = other_value;
          best = other;
        }
      }
      best = __shfl_sync(kFullMask, best, 0);  // one answer for the warp, even among NaNs
      if (lane == 0) chosen[j] = best;
      if (best >= 0 && (best & 31) == lane) taken[best] = 1;  // only its owner lane reads it
      __syncwarp();
    }
    // The softmax: denom summed in slot order in double, each weight exp(l_j - top) / denom.
    const double top = values[chosen[0]];
    double denom = 0.0;
    if (lane == 0) {
      for (int64_t j = 0; j < k; ++j) denom += exp(static_cast<double>(values[chosen[j]]) - top);
    }
    denom = __shfl_sync(kFullMask, denom, 0);
    for (int64_t j = lane; j < k; j += 32) {
      indices[t * k + j] = chosen[j];
      weights[t * k + j] =
          static_cast<float>(exp(static_cast<double>(values[chosen[j]]) - top) / denom);
    }
    __syncwarp();  // the next token overwrites the slice
  }
}

// One thread per token: dot = sum_m w_m dw_m (double, slot order); dlogits[t, e_j] += w_j (dw_j -
// dot) staged in fp32 and rounded once per expert (a repeated expert sums in slot order first).
__global__ void RouterTopKBackwardKernel(const int32_t* indices, const float* weights,
                                         const float* dweights, int64_t n, int64_t experts,
                                         int64_t k, Out dlogits) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += stride) {
    const int32_t* idx = indices + t * k;
    const float *w = weights + t * k, *dw = dweights + t * k;
    double dot = 0.0;
    for (int64_t j = 0; j < k; ++j) dot += static_cast<double>(w[j]) * dw[j];
    for (int64_t j = 0; j < k; ++j) {
      bool seen = false;
      for (int64_t m = 0; m < j; ++m) seen = seen || idx[m] == idx[j];
      if (seen) continue;
      const int64_t at = t * experts + idx[j];
      float staged = Load(dlogits, at);
      for (int64_t m = j; m < k; ++m) {
        if (idx[m] == idx[j]) staged += static_cast<float>(w[m] * (dw[m] - dot));
      }
      Store(dlogits, at, staged);
    }
  }
}

// ---- dispatch -----------------------------------------------------------------------------------
__global__ void IotaKernel(int32_t* values, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    values[i] = static_cast<int32_t>(i);
  }
}

// offsets[e] (e <= experts) = the first sorted position whose expert is >= e (lower_bound).
__global__ void DispatchOffsetsKernel(const uint32_t* sorted_experts, int64_t count,
                                      int64_t experts, int32_t* offsets) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e > experts) return;
  int64_t low = 0, high = count;
  while (low < high) {
    const int64_t mid = low + (high - low) / 2;
    if (static_cast<int64_t>(sorted_experts[mid]) < e) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  offsets[e] = static_cast<int32_t>(low);
}

// Grouped row r holds flat slot s = sorted_slots[r] = t * k + j: token_of_row[r] = t,
// row_of_slot[s] = r.
__global__ void DispatchScatterKernel(const int32_t* sorted_slots, int64_t count, int64_t k,
                                      int32_t* token_of_row, int32_t* row_of_slot) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < count;
       r += stride) {
    const int32_t slot = sorted_slots[r];
    token_of_row[r] = static_cast<int32_t>(slot / k);
    row_of_slot[slot] = static_cast<int32_t>(r);
  }
}

// ---- gather and combine (one block per row or token) --------------------------------------------

// grouped (rows, dim) [r] = x [token_of_row[r]]: widened and rounded as the reference's staging.
template <int V>
__global__ void MoeGatherKernel(In x, const int32_t* token_of_row, int64_t rows, int64_t dim,
                                Out grouped) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t from = token_of_row[r] * dim, to = r * dim;
    for (int64_t c = threadIdx.x * V; c < dim; c += blockDim.x * V) {
      float v[V];
      LoadN<V>(x, from + c, v);
      StoreN<V>(grouped, to + c, v);
    }
  }
}

// dx (n, dim) [t] += (float) (sum in double over t's rows, ascending, of dgrouped[row]).
// Shared: the token's sorted rows and slots (2k int32).
template <int V>
__global__ void MoeGatherBackwardKernel(In dgrouped, const int32_t* row_of_slot, int64_t n,
                                        int64_t k, int64_t dim, Out dx) {
  int32_t* rows = reinterpret_cast<int32_t*>(DynamicShared());
  int32_t* slots = rows + k;
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    if (threadIdx.x == 0) SortSlotsByRow(row_of_slot + t * k, k, rows, slots);
    __syncthreads();
    for (int64_t c = threadIdx.x * V; c < dim; c += blockDim.x * V) {
      double sum[V] = {};
      for (int64_t j = 0; j < k; ++j) {
        float g[V];
        LoadN<V>(dgrouped, static_cast<int64_t>(rows[j]) * dim + c, g);
        for (int e = 0; e < V; ++e) sum[e] += g[e];
      }
      float acc[V];
      LoadN<V>(dx, t * dim + c, acc);
      for (int e = 0; e < V; ++e) acc[e] += static_cast<float>(sum[e]);
      StoreN<V>(dx, t * dim + c, acc);
    }
    __syncthreads();  // the next token overwrites the sorted rows
  }
}

// out (n, dim) [t] = ((0 + w_a y_a) + w_b y_b) + ... in ascending row order, each product and
// each sum rounded to fp32 (no FMA), the result rounded once to out's dtype.
// Shared: the token's sorted rows and slots (2k int32).
template <int V>
__global__ void MoeCombineKernel(In y, const float* weights, const int32_t* row_of_slot, int64_t n,
                                 int64_t k, int64_t dim, Out out) {
  int32_t* rows = reinterpret_cast<int32_t*>(DynamicShared());
  int32_t* slots = rows + k;
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    if (threadIdx.x == 0) SortSlotsByRow(row_of_slot + t * k, k, rows, slots);
    __syncthreads();
    for (int64_t c = threadIdx.x * V; c < dim; c += blockDim.x * V) {
      float sum[V];
      for (int e = 0; e < V; ++e) sum[e] = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        const float w = weights[t * k + slots[j]];
        float yr[V];
        LoadN<V>(y, static_cast<int64_t>(rows[j]) * dim + c, yr);
        for (int e = 0; e < V; ++e) sum[e] = __fadd_rn(sum[e], __fmul_rn(yr[e], w));
      }
      StoreN<V>(out, t * dim + c, sum);
    }
    __syncthreads();
  }
}

// Per token t and slot j (row = row_of_slot[t, j]): dy[row] = w * dout[t] (fp32 product, rounded
// once to dy's dtype); dweights[t, j] += (float) dot(dout[t], y[row]), the dot in double: each
// thread's columns in order, then BlockSum's fixed tree.
template <int V>
__global__ void MoeCombineBackwardKernel(In y, const float* weights, const int32_t* row_of_slot,
                                         In dout, int64_t n, int64_t k, int64_t dim, Out dy,
                                         float* dweights) {
  __shared__ double partials[32];
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t row = row_of_slot[t * k + j];
      const float w = weights[t * k + j];
      double dot = 0.0;
      for (int64_t c = threadIdx.x * V; c < dim; c += blockDim.x * V) {
        float d[V], yr[V], g[V];
        LoadN<V>(dout, t * dim + c, d);
        LoadN<V>(y, row * dim + c, yr);
        for (int e = 0; e < V; ++e) {
          g[e] = __fmul_rn(w, d[e]);
          dot += static_cast<double>(d[e]) * static_cast<double>(yr[e]);  // exact product
        }
        StoreN<V>(dy, row * dim + c, g);
      }
      dot = BlockSum(dot, partials);
      if (threadIdx.x == 0) dweights[t * k + j] += static_cast<float>(dot);
    }
  }
}

}  // namespace

// ---- launchers ----------------------------------------------------------------------------------

void ClampedSwigluForward(In gate_up, int64_t rows, int64_t inter, float alpha, float limit,
                          Out out, cudaStream_t stream) {
  const int64_t n = rows * inter;
  if (n <= 0) return;
  ClampedSwigluForwardKernel<<<BlocksFor(n, kElementThreads), kElementThreads, 0, stream>>>(
      gate_up, n, alpha, limit, out);
  AIR_CUDA_CHECK_LAUNCH();
}

void ClampedSwigluBackward(In gate_up, int64_t rows, int64_t inter, float alpha, float limit,
                           In dout, Out dgate_up, cudaStream_t stream) {
  const int64_t n = rows * inter;
  if (n <= 0) return;
  ClampedSwigluBackwardKernel<<<BlocksFor(n, kElementThreads), kElementThreads, 0, stream>>>(
      gate_up, n, alpha, limit, dout, dgate_up);
  AIR_CUDA_CHECK_LAUNCH();
}

void RouterTopK(In logits, int64_t n, int64_t experts, int64_t k, int32_t* indices, float* weights,
                cudaStream_t stream) {
  if (n <= 0 || k <= 0 || experts < k) return;  // experts >= k: the op's check
  const int64_t warp_bytes = (experts * 4 + k * 4 + experts + 15) / 16 * 16;
  constexpr int64_t kDefaultShared = 48 * 1024;
  const int warps = warp_bytes * 4 <= kDefaultShared ? 4 : 1;
  const int64_t shared = warps * warp_bytes;
  if (shared > kDefaultShared) {  // thousands of experts: opt in to more shared memory
    AIR_CUDA_CHECK(cudaFuncSetAttribute(
        RouterTopKKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  }
  RouterTopKKernel<<<BlocksFor(n, warps), 32 * warps, static_cast<size_t>(shared), stream>>>(
      logits, n, experts, k, warp_bytes, indices, weights);
  AIR_CUDA_CHECK_LAUNCH();
}

void RouterTopKBackward(const int32_t* indices, const float* weights, const float* dweights,
                        int64_t n, int64_t experts, int64_t k, Out dlogits, cudaStream_t stream) {
  if (n <= 0 || k <= 0 || experts <= 0) return;
  RouterTopKBackwardKernel<<<BlocksFor(n, kElementThreads), kElementThreads, 0, stream>>>(
      indices, weights, dweights, n, experts, k, dlogits);
  AIR_CUDA_CHECK_LAUNCH();
}

// A stable radix sort of (expert id, flat slot) pairs over the bits the ids need: rows come out
// expert-major, each expert's in ascending flat slot = token order, as the reference's counting
// sort. Scratch (one pool allocation): sorted ids, the slots in and out, CUB's temporary storage.
void MoeDispatch(const int32_t* indices, int64_t n, int64_t k, int64_t experts, int32_t* offsets,
                 int32_t* token_of_row, int32_t* row_of_slot, cudaStream_t stream) {
  if (experts < 0) return;
  const int64_t count = n * k;
  if (count <= 0) {  // no choices: every expert's range starts (and ends) at row 0
    AIR_CUDA_CHECK(
        cudaMemsetAsync(offsets, 0, static_cast<size_t>(experts + 1) * sizeof(int32_t), stream));
    return;
  }
  int end_bit = 1;  // ids < experts <= 2^end_bit
  while (end_bit < 32 && (int64_t{1} << end_bit) < experts) ++end_bit;
  const uint32_t* ids = reinterpret_cast<const uint32_t*>(indices);  // valid ids are >= 0
  size_t temp_bytes = 0;
  AIR_CUDA_CHECK(
      cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, ids, static_cast<uint32_t*>(nullptr),
                                      static_cast<const int32_t*>(nullptr),
                                      static_cast<int32_t*>(nullptr), count, 0, end_bit, stream));
  const size_t array_bytes = (static_cast<size_t>(count) * 4 + 255) / 256 * 256;
  void* scratch = nullptr;
  AIR_CUDA_CHECK(cudaMallocAsync(&scratch, 3 * array_bytes + temp_bytes, stream));
  char* base = static_cast<char*>(scratch);
  uint32_t* sorted_ids = reinterpret_cast<uint32_t*>(base);
  int32_t* slots = reinterpret_cast<int32_t*>(base + array_bytes);
  int32_t* sorted_slots = reinterpret_cast<int32_t*>(base + 2 * array_bytes);
  void* temp = base + 3 * array_bytes;

  IotaKernel<<<BlocksFor(count, kElementThreads), kElementThreads, 0, stream>>>(slots, count);
  AIR_CUDA_CHECK_LAUNCH();
  AIR_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, ids, sorted_ids, slots,
                                                 sorted_slots, count, 0, end_bit, stream));
  DispatchOffsetsKernel<<<BlocksFor(experts + 1, kElementThreads), kElementThreads, 0, stream>>>(
      sorted_ids, count, experts, offsets);
  AIR_CUDA_CHECK_LAUNCH();
  DispatchScatterKernel<<<BlocksFor(count, kElementThreads), kElementThreads, 0, stream>>>(
      sorted_slots, count, k, token_of_row, row_of_slot);
  AIR_CUDA_CHECK_LAUNCH();
  AIR_CUDA_CHECK(cudaFreeAsync(scratch, stream));
}

void MoeGather(In x, const int32_t* token_of_row, int64_t rows, int64_t dim, Out grouped,
               cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return;
  if (PacksFit(dim, {x.ptr, grouped.ptr})) {
    MoeGatherKernel<kPack>
        <<<RowBlocks(rows), kRowThreads, 0, stream>>>(x, token_of_row, rows, dim, grouped);
  } else {
    MoeGatherKernel<1>
        <<<RowBlocks(rows), kRowThreads, 0, stream>>>(x, token_of_row, rows, dim, grouped);
  }
  AIR_CUDA_CHECK_LAUNCH();
}

void MoeGatherBackward(In dgrouped, const int32_t* row_of_slot, int64_t n, int64_t k, int64_t dim,
                       Out dx, cudaStream_t stream) {
  if (n <= 0 || k <= 0 || dim <= 0) return;
  const size_t shared = static_cast<size_t>(2 * k) * sizeof(int32_t);
  if (PacksFit(dim, {dgrouped.ptr, dx.ptr})) {
    MoeGatherBackwardKernel<kPack>
        <<<RowBlocks(n), kRowThreads, shared, stream>>>(dgrouped, row_of_slot, n, k, dim, dx);
  } else {
    MoeGatherBackwardKernel<1>
        <<<RowBlocks(n), kRowThreads, shared, stream>>>(dgrouped, row_of_slot, n, k, dim, dx);
  }
  AIR_CUDA_CHECK_LAUNCH();
}

void MoeCombine(In y, const float* weights, const int32_t* row_of_slot, int64_t n, int64_t k,
                int64_t dim, Out out, cudaStream_t stream) {
  if (n <= 0 || dim <= 0 || k < 0) return;
  const size_t shared = static_cast<size_t>(2 * k) * sizeof(int32_t);
  if (PacksFit(dim, {y.ptr, out.ptr})) {
    MoeCombineKernel<kPack>
        <<<RowBlocks(n), kRowThreads, shared, stream>>>(y, weights, row_of_slot, n, k, dim, out);
  } else {
    MoeCombineKernel<1>
        <<<RowBlocks(n), kRowThreads, shared, stream>>>(y, weights, row_of_slot, n, k, dim, out);
  }
  AIR_CUDA_CHECK_LAUNCH();
}

void MoeCombineBackward(In y, const float* weights, const int32_t* row_of_slot, In dout, int64_t n,
                        int64_t k, int64_t dim, Out dy, float* dweights, cudaStream_t stream) {
  if (n <= 0 || k <= 0 || dim <= 0) return;
  if (PacksFit(dim, {y.ptr, dout.ptr, dy.ptr})) {
    MoeCombineBackwardKernel<kPack><<<RowBlocks(n), kRowThreads, 0, stream>>>(
        y, weights, row_of_slot, dout, n, k, dim, dy, dweights);
  } else {
    MoeCombineBackwardKernel<1><<<RowBlocks(n), kRowThreads, 0, stream>>>(
        y, weights, row_of_slot, dout, n, k, dim, dy, dweights);
  }
  AIR_CUDA_CHECK_LAUNCH();
}

}  // namespace air::engine::cuda
