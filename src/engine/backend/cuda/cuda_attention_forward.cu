// AttentionForward on the GPU (cuda_kernels.h, ops.h): causal attention with GQA, packing
// segments, sliding windows, KV-cache steps and GPT-OSS sinks, out (B, Tq, Hq, D) and the
// log-sum-exp lse (B, Hq, Tq). Hand-written because fused flash attention with segments, sinks
// and windows is not a cuBLAS product, and not cuDNN's SDPA either: it has no per-head sink
// logit in the softmax and no packing segments in the form this engine passes them.
//
// Two paths (cuda_attention.cuh: FastPathFits decides):
//   FastForwardKernel      q, k, v BF16, D in {16, 32, 64, 128}, aligned: flash-attention-2
//                          tiles, a block per (64 queries, q head, batch row), 16 queries a
//                          warp, 64 keys a step: S = Q K^T and O += P V on tensor cores (fp32
//                          sums; P rounded to bf16 as V's partner, ops.h's rule), the online
//                          softmax in fp32 in base 2. Key tiles outside the block's visible
//                          range are never visited; a tile every query of the block sees whole
//                          skips the per-element mask.
//   GenericForwardKernel   everything else (F32 or mixed dtypes, other head sizes): a warp per
//                          (batch, head, query) row, 32 keys at a time (a lane a key), the
//                          online softmax in fp32 with expf, the value rows summed in fp32 by
//                          the lanes owning each dimension.
// The harness's cases (ops_harness_test.cc): F32 runs all generic; BF16 runs D 2 and 8 generic
// and D 16 and 32 (GQA, several blocks, segments, KV-cache steps, sinks) fast.
// Both: the sink starts each row's running max with its logit and joins the denominator at the
// end; a query that sees nothing and has no sink gets out = 0, lse = -inf (the reference's).
// Deterministic: every sum runs in a fixed order (no atomics).
// Thread safety: the launcher is stateless; calls on one stream are ordered by it.
#include <cstdint>

#include "engine/backend/cuda/cuda_attention.cuh"

namespace air::engine::cuda {
namespace {

using namespace attention;  // NOLINT(build/namespaces): this file's own helpers

// ---- fast path ------------------------------------------------------------------------------
// Shared: the Q, K, V tiles (64 rows each) and the key tile's segment ids.
template <int D>
constexpr size_t FastForwardSharedBytes() {
  return 3 * kTileBytes<D, kBlockRows> + kBlockRows * sizeof(int32_t);
}

template <int D>
__global__ void __launch_bounds__(kFastThreads)
    FastForwardKernel(AttentionShape s, In q, In k, In v, In sinks, const int32_t* q_segments,
                      const int32_t* kv_segments, Out out, float* lse) {
  extern __shared__ __align__(16) unsigned char shared[];
  uint16_t* tile_q = reinterpret_cast<uint16_t*>(shared);
  uint16_t* tile_k = tile_q + kBlockRows * kTileStride<D>;
  uint16_t* tile_v = tile_k + kBlockRows * kTileStride<D>;
  int32_t* key_segments = reinterpret_cast<int32_t*>(tile_v + kBlockRows * kTileStride<D>);

  // The last query blocks see the most keys: they start first.
  const int64_t i0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kBlockRows;
  const int64_t h = blockIdx.y, b = blockIdx.z;
  const int64_t kv_head = h / (s.q_heads / s.kv_heads), kv_rows = s.kv_rows();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane & 3;
  const bool segmented = q_segments != nullptr;

  LoadTile<D, kBlockRows>(tile_q, q, RowOffset(b, i0, s.q_len, s.q_heads, h, D), s.q_heads * D,
                          s.q_len - i0);

  // This thread's rows of the C fragments: row[r] = i0 + warp*16 + g + 8r, with the keys each
  // may see by position and its segment.
  int64_t row[2], row_lo[2], row_hi[2];
  int32_t row_segment[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row[r] = i0 + warp * kWarpRows + (lane >> 2) + 8 * r;
    VisibleKeys(s, row[r], &row_lo[r], &row_hi[r]);
    row_segment[r] = segmented && row[r] < s.q_len ? q_segments[b * s.q_len + row[r]] : 0;
  }
  // The keys any query of the block may see.
  const int64_t i_last = (i0 + kBlockRows < s.q_len ? i0 + kBlockRows : s.q_len) - 1;
  int64_t key_begin, key_end, unused;
  VisibleKeys(s, i0, &key_begin, &unused);
  VisibleKeys(s, i_last, &unused, &key_end);

  // Scores in base 2: x = score * log2(e), so exp(score - m) = exp2(x - m2).
  const float scale_log2 = s.scale * kLog2e;
  const bool has_sink = sinks.ptr != nullptr;
  const float sink_log2 = has_sink ? Load(sinks, h) * kLog2e : -INFINITY;
  float row_max[2] = {sink_log2, sink_log2};  // running max (base 2), the sink's included
  float row_sum[2] = {0.0f, 0.0f};            // this thread's columns' sum of exp2(x - max)
  float acc[D / 8][4] = {};                   // O (16 x D), unnormalized

  for (int64_t j0 = key_begin; j0 < key_end; j0 += kBlockRows) {
    __syncthreads();  // the previous tile's readers are done (the first time: Q is loaded)
    const int64_t kv_first = RowOffset(b, j0, kv_rows, s.kv_heads, kv_head, D);
    LoadTile<D, kBlockRows>(tile_k, k, kv_first, s.kv_heads * D, s.kv_len - j0);
    LoadTile<D, kBlockRows>(tile_v, v, kv_first, s.kv_heads * D, s.kv_len - j0);
    if (segmented && threadIdx.x < kBlockRows) {
      const int64_t key = j0 + threadIdx.x;
      key_segments[threadIdx.x] = key < s.kv_len ? kv_segments[b * kv_rows + key] : 0;
    }
    __syncthreads();

    float score[kBlockRows / 8][4];  // S (16 x 64): cols c = n*8 + 2t + e are keys j0 + c
    WarpRowDots<D, kBlockRows / 8>(score, tile_q, warp * kWarpRows, tile_k);

    const bool full =
        TileFullyVisible(s, segmented, i0, i0 + kBlockRows - 1, j0, j0 + kBlockRows - 1);
    int lo[2], hi[2];  // the visible columns of each row, by position
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      TileColumns<kBlockRows>(row_lo[r], row_hi[r], j0, &lo[r], &hi[r]);
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kBlockRows / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = n * 8 + 2 * t + e;
        const int32_t key_segment = segmented ? key_segments[c] : 0;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float x = score[n][2 * r + e] * scale_log2;
          if (!full && !(c >= lo[r] && c < hi[r] && key_segment == row_segment[r])) x = -INFINITY;
          score[n][2 * r + e] = x;
          tile_max[r] = fmaxf(tile_max[r], x);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // A row's 64 columns live in the 4 lanes of its quad.
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float new_max = fmaxf(row_max[r], tile_max[r]);
      // Nothing seen yet (and no sink): every p is exp2(-inf) = 0 against any finite base.
      const float base = new_max == -INFINITY ? 0.0f : new_max;
      const float rescale = exp2f(row_max[r] - base);  // 0 when row_max was -inf
      row_max[r] = new_max;
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < kBlockRows / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = exp2f(score[n][2 * r + e] - base);
          score[n][2 * r + e] = p;
          sum += p;
        }
      }
      row_sum[r] = row_sum[r] * rescale + sum;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        acc[n][2 * r] *= rescale;
        acc[n][2 * r + 1] *= rescale;
      }
    }
    WarpProductAdd<D, kBlockRows / 8>(acc, score, tile_v);  // O += P V, P rounded to bf16
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float total = row_sum[r];
    total += __shfl_xor_sync(0xffffffffu, total, 1);
    total += __shfl_xor_sync(0xffffffffu, total, 2);
    if (has_sink) total += exp2f(sink_log2 - row_max[r]);  // row_max >= sink_log2
    if (row[r] >= s.q_len) continue;
    // total == 0 only when the row saw nothing and has no sink: out = 0, lse = -inf.
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    const int64_t at = RowOffset(b, row[r], s.q_len, s.q_heads, h, D) + 2 * t;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      Store(out, at + n * 8, acc[n][2 * r] * inv);
      Store(out, at + n * 8 + 1, acc[n][2 * r + 1] * inv);
    }
    if (lse != nullptr && t == 0) {
      lse[(b * s.q_heads + h) * s.q_len + row[r]] =
          row_max[r] == -INFINITY ? -INFINITY : (row_max[r] + log2f(total)) * kLn2;
    }
  }
}

template <int D>
void LaunchFastForward(const AttentionShape& s, In q, In k, In v, In sinks,
                       const int32_t* q_segments, const int32_t* kv_segments, Out out, float* lse,
                       cudaStream_t stream) {
  constexpr size_t bytes = FastForwardSharedBytes<D>();
  AllowSharedBytes(FastForwardKernel<D>, bytes);
  const dim3 grid(static_cast<unsigned>((s.q_len + kBlockRows - 1) / kBlockRows),
                  static_cast<unsigned>(s.q_heads), static_cast<unsigned>(s.batch));
  FastForwardKernel<D>
      <<<grid, kFastThreads, bytes, stream>>>(s, q, k, v, sinks, q_segments, kv_segments, out, lse);
  AIR_CUDA_CHECK_LAUNCH();
}

// ---- generic path ---------------------------------------------------------------------------
constexpr int kGenericWarps = 4;

// A warp per (b, h, i). Shared per warp: the query row (D) and the output sums (D), dimension d
// owned by lane d % 32.
__global__ void __launch_bounds__(kGenericWarps * 32)
    GenericForwardKernel(AttentionShape s, In q, In k, In v, In sinks, const int32_t* q_segments,
                         const int32_t* kv_segments, Out out, float* lse) {
  extern __shared__ __align__(16) unsigned char shared[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row_id = static_cast<int64_t>(blockIdx.x) * kGenericWarps + warp;
  if (row_id >= s.batch * s.q_heads * s.q_len) return;  // whole warps: no block barrier here
  const int64_t i = row_id % s.q_len, h = (row_id / s.q_len) % s.q_heads;
  const int64_t b = row_id / (s.q_len * s.q_heads);
  const int64_t dim = s.head_dim, kv_head = h / (s.q_heads / s.kv_heads);
  const int64_t kv_rows = s.kv_rows(), kv_stride = s.kv_heads * dim;
  float* q_row = reinterpret_cast<float*>(shared) + warp * 2 * dim;
  float* acc = q_row + dim;

  const int64_t q_at = RowOffset(b, i, s.q_len, s.q_heads, h, dim);
  for (int64_t d = lane; d < dim; d += 32) {
    q_row[d] = Load(q, q_at + d);
    acc[d] = 0.0f;
  }
  __syncwarp();

  const bool has_sink = sinks.ptr != nullptr;
  const float sink = has_sink ? Load(sinks, h) : -INFINITY;
  const bool round_p = v.dtype == DType::kBF16;  // P @ V with a BF16 V: P in bf16 (ops.h)
  float row_max = sink, row_sum = 0.0f;          // row_sum: the keys' sum of exp(score - max)
  int64_t key_begin, key_end;
  VisibleKeys(s, i, &key_begin, &key_end);
  const int64_t k_first = RowOffset(b, 0, kv_rows, s.kv_heads, kv_head, dim);
  for (int64_t j0 = key_begin; j0 < key_end; j0 += 32) {
    const int64_t j = j0 + lane;
    float score = -INFINITY;
    if (j < key_end && AttentionVisible(s, b, i, j, q_segments, kv_segments)) {
      const int64_t k_at = k_first + j * kv_stride;
      float dot = 0.0f;
      for (int64_t d = 0; d < dim; ++d) dot += q_row[d] * Load(k, k_at + d);
      score = s.scale * dot;
    }
    const float new_max = fmaxf(row_max, WarpMax(score));
    if (new_max == -INFINITY) continue;  // nothing seen yet, no sink (uniform in the warp)
    const float rescale = expf(row_max - new_max);
    const float p = expf(score - new_max);
    row_max = new_max;
    row_sum = row_sum * rescale + WarpSum(p);
    for (int64_t d = lane; d < dim; d += 32) acc[d] *= rescale;
    const float p_value = round_p ? WidenBf16(RoundToBf16(p)) : p;
    const int keys = static_cast<int>(key_end - j0 < 32 ? key_end - j0 : 32);
    for (int jj = 0; jj < keys; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, p_value, jj);
      if (pj == 0.0f) continue;  // masked (uniform)
      const int64_t v_at = k_first + (j0 + jj) * kv_stride;
      for (int64_t d = lane; d < dim; d += 32) acc[d] += pj * Load(v, v_at + d);
    }
  }
  const float total = row_sum + (has_sink ? expf(sink - row_max) : 0.0f);
  for (int64_t d = lane; d < dim; d += 32) {
    Store(out, q_at + d, total > 0.0f ? acc[d] / total : 0.0f);
  }
  if (lse != nullptr && lane == 0) {
    lse[(b * s.q_heads + h) * s.q_len + i] =
        row_max == -INFINITY ? -INFINITY : row_max + logf(total);
  }
}

void LaunchGenericForward(const AttentionShape& s, In q, In k, In v, In sinks,
                          const int32_t* q_segments, const int32_t* kv_segments, Out out,
                          float* lse, cudaStream_t stream) {
  const int64_t rows = s.batch * s.q_heads * s.q_len;
  const size_t bytes = size_t{kGenericWarps} * 2 * static_cast<size_t>(s.head_dim) * sizeof(float);
  AllowSharedBytes(GenericForwardKernel, bytes);
  const auto blocks = static_cast<unsigned>((rows + kGenericWarps - 1) / kGenericWarps);
  GenericForwardKernel<<<blocks, kGenericWarps * 32, bytes, stream>>>(s, q, k, v, sinks, q_segments,
                                                                      kv_segments, out, lse);
  AIR_CUDA_CHECK_LAUNCH();
}

}  // namespace

void AttentionForward(const AttentionShape& s, In q, In k, In v, In sinks,
                      const int32_t* q_segments, const int32_t* kv_segments, Out out, float* lse,
                      cudaStream_t stream) {
  if (s.batch <= 0 || s.q_len <= 0 || s.q_heads <= 0) return;
  using Launcher = void (*)(const AttentionShape&, In, In, In, In, const int32_t*, const int32_t*,
                            Out, float*, cudaStream_t);
  Launcher launch = LaunchGenericForward;
  if (FastPathFits(s, q, k, v, In{})) {
    const int64_t d = s.head_dim;
    launch = d == 16   ? LaunchFastForward<16>
             : d == 32 ? LaunchFastForward<32>
             : d == 64 ? LaunchFastForward<64>
                       : LaunchFastForward<128>;  // FastHeadDim: one of the four
  }
  launch(s, q, k, v, sinks, q_segments, kv_segments, out, lse, stream);
}

}  // namespace air::engine::cuda
