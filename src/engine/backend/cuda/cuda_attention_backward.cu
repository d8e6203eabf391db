// AttentionBackward on the GPU (cuda_kernels.h, ops.h): dq, dk, dv += the gradients of
// AttentionForward (cuda_attention_forward.cu, which says why this is hand-written), dsinks +=
// the sinks' gradient. With p_ij = exp(scale q_i.k_j - lse_i) recomputed from the forward's lse,
// dp_ij = dout_i . v_j, delta_i = dout_i . out_i and ds_ij = p_ij (dp_ij - delta_i):
//   dq_i += scale sum_j ds_ij k_j;  dk_j += scale sum_i ds_ij q_i;  dv_j += sum_i p_ij dout_i
//   dsink_h += sum_(b, i) -exp(sink_h - lse_i) delta_i
// A query whose lse is infinite saw nothing and adds nothing (the reference skips it).
//
// Deterministic without atomics: every output element has one owner that sums in a fixed order.
//   DeltaKernel            delta (B, Hq, Tq) in scratch: a warp per row, fixed butterfly.
//   SinkGradientKernel     a block per head: thread slices of (b, i) in order, then BlockSum.
//   fast (cuda_attention.cuh: FastPathFits; the harness's BF16 cases of D 16 and 32)
//     FastKeyValueGradKernel  a block per (64 keys, kv head, batch row), 16 keys a warp: the
//                             dk, dv rows stay in registers while the q heads of the GQA group
//                             and their query tiles (64 queries, 32 for D 128) pass in order:
//                             S^T = K Q^T, dP^T = V dO^T, dV += P^T dO, dK += dS^T Q.
//     FastQueryGradKernel     a block per (64 queries, q head, batch row), 16 queries a warp:
//                             key tiles of 64 in order: S = Q K^T, dP = dO V^T, dQ += dS K.
//     P and dS = P (dP - delta) scale are rounded to bf16 as tensor-core operands (the CPU
//     fast path rounds the same two), dout too when it is F32; every sum is fp32.
//   generic (everything else)
//     GenericKeyValueGradKernel  a warp per (batch, kv head, key): the GQA group's heads and
//                                the key's queries in order, 32 at a time (a lane a query).
//     GenericQueryGradKernel     a warp per (batch, q head, query): its keys, 32 at a time.
// Thread safety: the launcher is stateless; calls on one stream are ordered by it.
#include <cstdint>

#include "engine/backend/cuda/cuda_attention.cuh"

namespace air::engine::cuda {
namespace {

using namespace attention;  // NOLINT(build/namespaces): this file's own helpers

// The arguments every backward kernel reads.
struct BackwardArgs {
  AttentionShape s;
  In q, k, v, dout;
  const int32_t* q_segments;
  const int32_t* kv_segments;
  const float* lse;    // (B, Hq, Tq)
  const float* delta;  // (B, Hq, Tq): dout . out
};

// ---- delta and the sinks' gradient ----------------------------------------------------------
constexpr int kRowWarps = 4;

// delta[b, h, i] = dout . out over D, a warp per (b, i, h) row of the (B, Tq, Hq, D) tensors.
__global__ void __launch_bounds__(kRowWarps * 32)
    DeltaKernel(AttentionShape s, In out, In dout, float* delta) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowWarps + warp;
  if (row >= s.batch * s.q_len * s.q_heads) return;
  const int64_t h = row % s.q_heads, i = (row / s.q_heads) % s.q_len;
  const int64_t b = row / (s.q_heads * s.q_len);
  float sum = 0.0f;
  for (int64_t d = lane; d < s.head_dim; d += 32) {
    sum += Load(dout, row * s.head_dim + d) * Load(out, row * s.head_dim + d);
  }
  sum = WarpSum(sum);
  if (lane == 0) delta[(b * s.q_heads + h) * s.q_len + i] = sum;
}

constexpr int kSinkThreads = 256;

// dsinks[h] += -sum over (b, i) of exp(sink_h - lse) delta; thread t takes (b, i) = t, t + 256,
// ... in order, then BlockSum's fixed tree.
__global__ void __launch_bounds__(kSinkThreads)
    SinkGradientKernel(AttentionShape s, In sinks, const float* lse, const float* delta,
                       Out dsinks) {
  __shared__ float partial[32];
  const int64_t h = blockIdx.x;
  const float sink = Load(sinks, h);
  float sum = 0.0f;
  for (int64_t e = threadIdx.x; e < s.batch * s.q_len; e += kSinkThreads) {
    const int64_t at = ((e / s.q_len) * s.q_heads + h) * s.q_len + e % s.q_len;
    if (!isinf(lse[at])) sum += expf(sink - lse[at]) * delta[at];
  }
  sum = BlockSum(sum, partial);
  if (threadIdx.x == 0) Accumulate(dsinks, h, -sum);
}

// ---- fast path: dk, dv ----------------------------------------------------------------------
template <int D>
constexpr int kQueryTile = D == 128 ? 32 : 64;  // fewer registers with D 128's accumulators

// Shared: K, V (64 rows), Q, dO (the query tile), and per query its lse (base 2), delta, segment.
template <int D>
constexpr size_t FastKeyValueSharedBytes() {
  return 2 * kTileBytes<D, kBlockRows> + 2 * kTileBytes<D, kQueryTile<D>> +
         kQueryTile<D> * (2 * sizeof(float) + sizeof(int32_t));
}

template <int D>
__global__ void __launch_bounds__(kFastThreads)
    FastKeyValueGradKernel(BackwardArgs a, Out dk, Out dv) {
  constexpr int kQueries = kQueryTile<D>;
  extern __shared__ __align__(16) unsigned char shared[];
  uint16_t* tile_k = reinterpret_cast<uint16_t*>(shared);
  uint16_t* tile_v = tile_k + kBlockRows * kTileStride<D>;
  uint16_t* tile_q = tile_v + kBlockRows * kTileStride<D>;
  uint16_t* tile_do = tile_q + kQueries * kTileStride<D>;
  float* query_lse = reinterpret_cast<float*>(tile_do + kQueries * kTileStride<D>);  // base 2
  float* query_delta = query_lse + kQueries;
  int32_t* query_segment = reinterpret_cast<int32_t*>(query_delta + kQueries);

  const AttentionShape& s = a.s;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  const int64_t kv_head = blockIdx.y, b = blockIdx.z;
  const int64_t group = s.q_heads / s.kv_heads, kv_rows = s.kv_rows();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane & 3;
  const bool segmented = a.q_segments != nullptr;

  const int64_t kv_first = RowOffset(b, j0, kv_rows, s.kv_heads, kv_head, D);
  LoadTile<D, kBlockRows>(tile_k, a.k, kv_first, s.kv_heads * D, s.kv_len - j0);
  LoadTile<D, kBlockRows>(tile_v, a.v, kv_first, s.kv_heads * D, s.kv_len - j0);

  // This thread's key rows key[r] = j0 + warp*16 + g + 8r, the queries each may be seen by
  // (by position) and its segment.
  int64_t key[2], key_lo[2], key_hi[2];
  int32_t key_segment[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    key[r] = j0 + warp * kWarpRows + (lane >> 2) + 8 * r;
    VisibleQueries(s, key[r], &key_lo[r], &key_hi[r]);
    key_segment[r] = segmented && key[r] < s.kv_len ? a.kv_segments[b * kv_rows + key[r]] : 0;
  }
  // The queries that may see any key of the block.
  const int64_t j_last = (j0 + kBlockRows < s.kv_len ? j0 + kBlockRows : s.kv_len) - 1;
  int64_t query_begin, query_end, unused;
  VisibleQueries(s, j0, &query_begin, &unused);
  VisibleQueries(s, j_last, &unused, &query_end);

  const float scale_log2 = s.scale * kLog2e;
  float dk_acc[D / 8][4] = {}, dv_acc[D / 8][4] = {};
  for (int64_t h = kv_head * group; h < (kv_head + 1) * group; ++h) {
    for (int64_t i0 = query_begin; i0 < query_end; i0 += kQueries) {
      __syncthreads();  // the previous tile's readers are done (the first time: K, V loaded)
      const int64_t q_first = RowOffset(b, i0, s.q_len, s.q_heads, h, D);
      LoadTile<D, kQueries>(tile_q, a.q, q_first, s.q_heads * D, s.q_len - i0);
      LoadTile<D, kQueries>(tile_do, a.dout, q_first, s.q_heads * D, s.q_len - i0);
      if (threadIdx.x < kQueries) {
        const int64_t i = i0 + threadIdx.x;
        const bool real = i < s.q_len;
        const float l = real ? a.lse[(b * s.q_heads + h) * s.q_len + i] : INFINITY;
        query_lse[threadIdx.x] = isinf(l) ? INFINITY : l * kLog2e;  // +inf: p = 0
        query_delta[threadIdx.x] = real ? a.delta[(b * s.q_heads + h) * s.q_len + i] : 0.0f;
        query_segment[threadIdx.x] = segmented && real ? a.q_segments[b * s.q_len + i] : 0;
      }
      __syncthreads();

      // S^T, dP^T (16 keys x kQueries): cols c = n*8 + 2t + e are queries i0 + c.
      float score[kQueries / 8][4], dprob[kQueries / 8][4];
      WarpRowDots<D, kQueries / 8>(score, tile_k, warp * kWarpRows, tile_q);
      WarpRowDots<D, kQueries / 8>(dprob, tile_v, warp * kWarpRows, tile_do);
      const bool full =
          TileFullyVisible(s, segmented, i0, i0 + kQueries - 1, j0, j0 + kBlockRows - 1);
      int lo[2], hi[2];  // the visible columns of each key row, by position
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int64_t l = key_lo[r] - i0, u = key_hi[r] - i0;
        lo[r] = static_cast<int>(l < 0 ? 0 : (l > kQueries ? kQueries : l));
        hi[r] = static_cast<int>(u < 0 ? 0 : (u > kQueries ? kQueries : u));
      }
#pragma unroll
      for (int n = 0; n < kQueries / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = n * 8 + 2 * t + e;
          const float l = query_lse[c], delta = query_delta[c];
          const int32_t segment = query_segment[c];
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const bool visible = full || (c >= lo[r] && c < hi[r] && segment == key_segment[r]);
            const float p = visible ? exp2f(score[n][2 * r + e] * scale_log2 - l) : 0.0f;
            score[n][2 * r + e] = p;
            dprob[n][2 * r + e] = p * (dprob[n][2 * r + e] - delta) * s.scale;  // dS
          }
        }
      }
      WarpProductAdd<D, kQueries / 8>(dv_acc, score, tile_do);  // dV += P^T dO
      WarpProductAdd<D, kQueries / 8>(dk_acc, dprob, tile_q);   // dK += dS^T Q
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (key[r] >= s.kv_len) continue;
    const int64_t at = RowOffset(b, key[r], kv_rows, s.kv_heads, kv_head, D) + 2 * t;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      Accumulate(dk, at + n * 8, dk_acc[n][2 * r]);
      Accumulate(dk, at + n * 8 + 1, dk_acc[n][2 * r + 1]);
      Accumulate(dv, at + n * 8, dv_acc[n][2 * r]);
      Accumulate(dv, at + n * 8 + 1, dv_acc[n][2 * r + 1]);
    }
  }
}

// ---- fast path: dq --------------------------------------------------------------------------
// Shared: Q, dO (64 queries), K, V (64 keys) and the key tile's segment ids.
template <int D>
constexpr size_t FastQuerySharedBytes() {
  return 4 * kTileBytes<D, kBlockRows> + kBlockRows * sizeof(int32_t);
}

template <int D>
__global__ void __launch_bounds__(kFastThreads) FastQueryGradKernel(BackwardArgs a, Out dq) {
  extern __shared__ __align__(16) unsigned char shared[];
  uint16_t* tile_q = reinterpret_cast<uint16_t*>(shared);
  uint16_t* tile_do = tile_q + kBlockRows * kTileStride<D>;
  uint16_t* tile_k = tile_do + kBlockRows * kTileStride<D>;
  uint16_t* tile_v = tile_k + kBlockRows * kTileStride<D>;
  int32_t* key_segments = reinterpret_cast<int32_t*>(tile_v + kBlockRows * kTileStride<D>);

  const AttentionShape& s = a.s;
  const int64_t i0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kBlockRows;
  const int64_t h = blockIdx.y, b = blockIdx.z;
  const int64_t kv_head = h / (s.q_heads / s.kv_heads), kv_rows = s.kv_rows();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane & 3;
  const bool segmented = a.q_segments != nullptr;

  const int64_t q_first = RowOffset(b, i0, s.q_len, s.q_heads, h, D);
  LoadTile<D, kBlockRows>(tile_q, a.q, q_first, s.q_heads * D, s.q_len - i0);
  LoadTile<D, kBlockRows>(tile_do, a.dout, q_first, s.q_heads * D, s.q_len - i0);

  // This thread's query rows row[r] = i0 + warp*16 + g + 8r: visible keys, segment, lse (base
  // 2; +inf for a row that saw nothing or is past the end: p = 0) and delta.
  int64_t row[2], row_lo[2], row_hi[2];
  int32_t row_segment[2];
  float row_lse[2], row_delta[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row[r] = i0 + warp * kWarpRows + (lane >> 2) + 8 * r;
    VisibleKeys(s, row[r], &row_lo[r], &row_hi[r]);
    const bool real = row[r] < s.q_len;
    const int64_t at = (b * s.q_heads + h) * s.q_len + row[r];
    row_segment[r] = segmented && real ? a.q_segments[b * s.q_len + row[r]] : 0;
    const float l = real ? a.lse[at] : INFINITY;
    row_lse[r] = isinf(l) ? INFINITY : l * kLog2e;
    row_delta[r] = real ? a.delta[at] : 0.0f;
  }
  const int64_t i_last = (i0 + kBlockRows < s.q_len ? i0 + kBlockRows : s.q_len) - 1;
  int64_t key_begin, key_end, unused;
  VisibleKeys(s, i0, &key_begin, &unused);
  VisibleKeys(s, i_last, &unused, &key_end);

  const float scale_log2 = s.scale * kLog2e;
  float acc[D / 8][4] = {};
  for (int64_t j0 = key_begin; j0 < key_end; j0 += kBlockRows) {
    __syncthreads();  // the previous tile's readers are done (the first time: Q, dO loaded)
    const int64_t kv_first = RowOffset(b, j0, kv_rows, s.kv_heads, kv_head, D);
    LoadTile<D, kBlockRows>(tile_k, a.k, kv_first, s.kv_heads * D, s.kv_len - j0);
    LoadTile<D, kBlockRows>(tile_v, a.v, kv_first, s.kv_heads * D, s.kv_len - j0);
    if (segmented && threadIdx.x < kBlockRows) {
      const int64_t key = j0 + threadIdx.x;
      key_segments[threadIdx.x] = key < s.kv_len ? a.kv_segments[b * kv_rows + key] : 0;
    }
    __syncthreads();

    // S, dP (16 queries x 64 keys): cols c = n*8 + 2t + e are keys j0 + c.
    float score[kBlockRows / 8][4], dprob[kBlockRows / 8][4];
    WarpRowDots<D, kBlockRows / 8>(score, tile_q, warp * kWarpRows, tile_k);
    WarpRowDots<D, kBlockRows / 8>(dprob, tile_do, warp * kWarpRows, tile_v);
    const bool full =
        TileFullyVisible(s, segmented, i0, i0 + kBlockRows - 1, j0, j0 + kBlockRows - 1);
    int lo[2], hi[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      TileColumns<kBlockRows>(row_lo[r], row_hi[r], j0, &lo[r], &hi[r]);
    }
#pragma unroll
    for (int n = 0; n < kBlockRows / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = n * 8 + 2 * t + e;
        const int32_t key_segment = segmented ? key_segments[c] : 0;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const bool visible = full || (c >= lo[r] && c < hi[r] && key_segment == row_segment[r]);
          const float p = visible ? exp2f(score[n][2 * r + e] * scale_log2 - row_lse[r]) : 0.0f;
          dprob[n][2 * r + e] = p * (dprob[n][2 * r + e] - row_delta[r]) * s.scale;  // dS
        }
      }
    }
    WarpProductAdd<D, kBlockRows / 8>(acc, dprob, tile_k);  // dQ += dS K
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row[r] >= s.q_len) continue;
    const int64_t at = RowOffset(b, row[r], s.q_len, s.q_heads, h, D) + 2 * t;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      Accumulate(dq, at + n * 8, acc[n][2 * r]);
      Accumulate(dq, at + n * 8 + 1, acc[n][2 * r + 1]);
    }
  }
}

template <int D>
void LaunchFastBackward(const BackwardArgs& a, Out dq, Out dk, Out dv, cudaStream_t stream) {
  const AttentionShape& s = a.s;
  if (s.kv_len <= 0) return;  // no keys: nothing to add
  constexpr size_t kv_bytes = FastKeyValueSharedBytes<D>();
  AllowSharedBytes(FastKeyValueGradKernel<D>, kv_bytes);
  const dim3 kv_grid(static_cast<unsigned>((s.kv_len + kBlockRows - 1) / kBlockRows),
                     static_cast<unsigned>(s.kv_heads), static_cast<unsigned>(s.batch));
  FastKeyValueGradKernel<D><<<kv_grid, kFastThreads, kv_bytes, stream>>>(a, dk, dv);
  AIR_CUDA_CHECK_LAUNCH();
  constexpr size_t q_bytes = FastQuerySharedBytes<D>();
  AllowSharedBytes(FastQueryGradKernel<D>, q_bytes);
  const dim3 q_grid(static_cast<unsigned>((s.q_len + kBlockRows - 1) / kBlockRows),
                    static_cast<unsigned>(s.q_heads), static_cast<unsigned>(s.batch));
  FastQueryGradKernel<D><<<q_grid, kFastThreads, q_bytes, stream>>>(a, dq);
  AIR_CUDA_CHECK_LAUNCH();
}

// ---- generic path ---------------------------------------------------------------------------
constexpr int kGenericWarps = 4;

// A warp per (b, kv head, key j). Shared per warp: k_j, v_j and the dk, dv sums (D each),
// dimension d owned by lane d % 32. Queries go 32 at a time, a lane computing one query's p and
// ds, then every lane adds the 32 in order.
__global__ void __launch_bounds__(kGenericWarps * 32)
    GenericKeyValueGradKernel(BackwardArgs a, Out dk, Out dv) {
  extern __shared__ __align__(16) unsigned char shared[];
  const AttentionShape& s = a.s;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row_id = static_cast<int64_t>(blockIdx.x) * kGenericWarps + warp;
  if (row_id >= s.batch * s.kv_heads * s.kv_len) return;  // whole warps: no block barrier here
  const int64_t j = row_id % s.kv_len, kv_head = (row_id / s.kv_len) % s.kv_heads;
  const int64_t b = row_id / (s.kv_len * s.kv_heads);
  const int64_t dim = s.head_dim, group = s.q_heads / s.kv_heads;
  float* k_row = reinterpret_cast<float*>(shared) + warp * 4 * dim;
  float* v_row = k_row + dim;
  float* dk_acc = v_row + dim;
  float* dv_acc = dk_acc + dim;
  const int64_t kv_at = RowOffset(b, j, s.kv_rows(), s.kv_heads, kv_head, dim);
  for (int64_t d = lane; d < dim; d += 32) {
    k_row[d] = Load(a.k, kv_at + d);
    v_row[d] = Load(a.v, kv_at + d);
    dk_acc[d] = dv_acc[d] = 0.0f;
  }
  __syncwarp();

  int64_t query_begin, query_end;
  VisibleQueries(s, j, &query_begin, &query_end);
  for (int64_t h = kv_head * group; h < (kv_head + 1) * group; ++h) {
    const int64_t stat_first = (b * s.q_heads + h) * s.q_len;
    for (int64_t i0 = query_begin; i0 < query_end; i0 += 32) {
      const int64_t i = i0 + lane;
      float p = 0.0f, ds = 0.0f;
      if (i < query_end && AttentionVisible(s, b, i, j, a.q_segments, a.kv_segments) &&
          !isinf(a.lse[stat_first + i])) {
        const int64_t q_at = RowOffset(b, i, s.q_len, s.q_heads, h, dim);
        float dot = 0.0f, dp = 0.0f;
        for (int64_t d = 0; d < dim; ++d) {
          dot += Load(a.q, q_at + d) * k_row[d];
          dp += Load(a.dout, q_at + d) * v_row[d];
        }
        p = expf(s.scale * dot - a.lse[stat_first + i]);
        ds = p * (dp - a.delta[stat_first + i]);
      }
      const int queries = static_cast<int>(query_end - i0 < 32 ? query_end - i0 : 32);
      for (int ii = 0; ii < queries; ++ii) {
        const float pi = __shfl_sync(0xffffffffu, p, ii);
        const float dsi = __shfl_sync(0xffffffffu, ds, ii);
        if (pi == 0.0f) continue;  // not visible (uniform); ds is 0 then too
        const int64_t q_at = RowOffset(b, i0 + ii, s.q_len, s.q_heads, h, dim);
        for (int64_t d = lane; d < dim; d += 32) {
          dv_acc[d] += pi * Load(a.dout, q_at + d);
          dk_acc[d] += dsi * Load(a.q, q_at + d);
        }
      }
    }
  }
  for (int64_t d = lane; d < dim; d += 32) {
    Accumulate(dk, kv_at + d, s.scale * dk_acc[d]);
    Accumulate(dv, kv_at + d, dv_acc[d]);
  }
}

// A warp per (b, q head, query i). Shared per warp: q_i, dout_i and the dq sums (D each).
__global__ void __launch_bounds__(kGenericWarps * 32)
    GenericQueryGradKernel(BackwardArgs a, Out dq) {
  extern __shared__ __align__(16) unsigned char shared[];
  const AttentionShape& s = a.s;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row_id = static_cast<int64_t>(blockIdx.x) * kGenericWarps + warp;
  if (row_id >= s.batch * s.q_heads * s.q_len) return;  // whole warps: no block barrier here
  const int64_t i = row_id % s.q_len, h = (row_id / s.q_len) % s.q_heads;
  const int64_t b = row_id / (s.q_len * s.q_heads);
  const int64_t stat_at = (b * s.q_heads + h) * s.q_len + i;
  const float lse = a.lse[stat_at];
  if (isinf(lse)) return;  // saw nothing: adds nothing
  const float delta = a.delta[stat_at];
  const int64_t dim = s.head_dim, kv_head = h / (s.q_heads / s.kv_heads);
  const int64_t kv_stride = s.kv_heads * dim;
  float* q_row = reinterpret_cast<float*>(shared) + warp * 3 * dim;
  float* do_row = q_row + dim;
  float* acc = do_row + dim;
  const int64_t q_at = RowOffset(b, i, s.q_len, s.q_heads, h, dim);
  for (int64_t d = lane; d < dim; d += 32) {
    q_row[d] = Load(a.q, q_at + d);
    do_row[d] = Load(a.dout, q_at + d);
    acc[d] = 0.0f;
  }
  __syncwarp();

  int64_t key_begin, key_end;
  VisibleKeys(s, i, &key_begin, &key_end);
  const int64_t k_first = RowOffset(b, 0, s.kv_rows(), s.kv_heads, kv_head, dim);
  for (int64_t j0 = key_begin; j0 < key_end; j0 += 32) {
    const int64_t j = j0 + lane;
    float ds = 0.0f;
    if (j < key_end && AttentionVisible(s, b, i, j, a.q_segments, a.kv_segments)) {
      const int64_t kv_at = k_first + j * kv_stride;
      float dot = 0.0f, dp = 0.0f;
      for (int64_t d = 0; d < dim; ++d) {
        dot += q_row[d] * Load(a.k, kv_at + d);
        dp += do_row[d] * Load(a.v, kv_at + d);
      }
      ds = expf(s.scale * dot - lse) * (dp - delta);
    }
    const int keys = static_cast<int>(key_end - j0 < 32 ? key_end - j0 : 32);
    for (int jj = 0; jj < keys; ++jj) {
      const float dsj = __shfl_sync(0xffffffffu, ds, jj);
      if (dsj == 0.0f) continue;  // uniform
      const int64_t kv_at = k_first + (j0 + jj) * kv_stride;
      for (int64_t d = lane; d < dim; d += 32) acc[d] += dsj * Load(a.k, kv_at + d);
    }
  }
  for (int64_t d = lane; d < dim; d += 32) Accumulate(dq, q_at + d, s.scale * acc[d]);
}

void LaunchGenericBackward(const BackwardArgs& a, Out dq, Out dk, Out dv, cudaStream_t stream) {
  const AttentionShape& s = a.s;
  const size_t row_bytes = static_cast<size_t>(s.head_dim) * sizeof(float) * kGenericWarps;
  const int64_t key_rows = s.batch * s.kv_heads * s.kv_len;
  if (key_rows > 0) {
    AllowSharedBytes(GenericKeyValueGradKernel, 4 * row_bytes);
    GenericKeyValueGradKernel<<<static_cast<unsigned>((key_rows + kGenericWarps - 1) /
                                                      kGenericWarps),
                                kGenericWarps * 32, 4 * row_bytes, stream>>>(a, dk, dv);
    AIR_CUDA_CHECK_LAUNCH();
  }
  const int64_t query_rows = s.batch * s.q_heads * s.q_len;
  AllowSharedBytes(GenericQueryGradKernel, 3 * row_bytes);
  GenericQueryGradKernel<<<static_cast<unsigned>((query_rows + kGenericWarps - 1) / kGenericWarps),
                           kGenericWarps * 32, 3 * row_bytes, stream>>>(a, dq);
  AIR_CUDA_CHECK_LAUNCH();
}

}  // namespace

void AttentionBackward(const AttentionShape& s, In q, In k, In v, In sinks,
                       const int32_t* q_segments, const int32_t* kv_segments, In out,
                       const float* lse, In dout, Out dq, Out dk, Out dv, Out dsinks,
                       cudaStream_t stream) {
  const int64_t query_rows = s.batch * s.q_heads * s.q_len;
  if (query_rows <= 0) return;
  float* delta = nullptr;
  AIR_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&delta),
                                 static_cast<size_t>(query_rows) * sizeof(float), stream));
  DeltaKernel<<<static_cast<unsigned>((query_rows + kRowWarps - 1) / kRowWarps), kRowWarps * 32, 0,
                stream>>>(s, out, dout, delta);
  AIR_CUDA_CHECK_LAUNCH();
  if (sinks.ptr != nullptr && dsinks.ptr != nullptr) {
    SinkGradientKernel<<<static_cast<unsigned>(s.q_heads), kSinkThreads, 0, stream>>>(
        s, sinks, lse, delta, dsinks);
    AIR_CUDA_CHECK_LAUNCH();
  }
  const BackwardArgs args{s, q, k, v, dout, q_segments, kv_segments, lse, delta};
  using Launcher = void (*)(const BackwardArgs&, Out, Out, Out, cudaStream_t);
  Launcher launch = LaunchGenericBackward;
  if (FastPathFits(s, q, k, v, dout)) {
    const int64_t d = s.head_dim;
    launch = d == 16   ? LaunchFastBackward<16>
             : d == 32 ? LaunchFastBackward<32>
             : d == 64 ? LaunchFastBackward<64>
                       : LaunchFastBackward<128>;  // FastHeadDim: one of the four
  }
  launch(args, dq, dk, dv, stream);
  AIR_CUDA_CHECK(cudaFreeAsync(delta, stream));
}

}  // namespace air::engine::cuda
