// The CUDA backend's kernel launchers (llm.c's layout: one host function per op that launches its
// kernels on a stream, over raw device pointers and sizes). CudaBackend (cuda_backend.h) unpacks
// the Views an op was called with (ops.h: the public op has already checked every argument)
// and calls these; nothing else should. Each launcher computes exactly what the op of the same
// name in engine/ops/ops.h documents, with the sizes the CPU reference derives
// (backend/cpu/reference_ops.cc), and the per-element rules of engine/ops/op_semantics.h.
//
// Rules every launcher keeps:
//   - Data arguments come as In/Out: a device pointer and its dtype, F32 or BF16, each argument
//     on its own (an op may read BF16 x and write an F32 y). Math is fp32; a BF16 output is
//     rounded once (round to nearest even); an accumulating output (+=) is read, summed in fp32
//     and rounded once.
//   - Deterministic: the same call gives the same bits. Sums run in a fixed order (blocked
//     partial sums combined in order, never atomics on floats), whatever the occupancy.
//   - Scratch memory comes from the stream-ordered pool (cudaMallocAsync / cudaFreeAsync on
//     `stream`), so a launcher never synchronizes the host.
//   - n == 0 (or any empty size) launches nothing.
//   - A failed launch aborts naming the kernel (AIR_CUDA_CHECK, cuda_check.h): a broken
//     invariant, not a user error.
// Thread safety: launchers are stateless; calls on one stream are ordered by it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/dtype.h"
#include "engine/ops/op_semantics.h"

namespace air::engine::cuda {

// A data argument read by a kernel: F32 or BF16 elements at `ptr` (null: absent, where the op
// allows it).
struct In {
  const void* ptr = nullptr;
  DType dtype = DType::kF32;
};
// A data argument written (or accumulated into) by a kernel.
struct Out {
  void* ptr = nullptr;
  DType dtype = DType::kF32;
};
// An output read as an input (the same memory).
AIR_HD inline In AsIn(Out a) { return In{a.ptr, a.dtype}; }

// ---- memory and elementwise (cuda_elementwise.cu) -------------------------------------------
// dst[i] = value (rounded for BF16), i < n.
void Fill(Out dst, int64_t n, float value, cudaStream_t stream);
// dst[i] = src[i] (a cast; BF16 rounds to nearest even).
void Convert(In src, Out dst, int64_t n, cudaStream_t stream);
// y[i] += x[i].
void AddInPlace(Out y, In x, int64_t n, cudaStream_t stream);
// y (rows, cols) += bias (cols) on every row.
void AddBias(Out y, In bias, int64_t rows, int64_t cols, cudaStream_t stream);
// out[i] = DropoutUniform(seed, i) >= p ? x[i] / (1 - p) : 0 (the reference's scale: x * (1 /
// (1 - p)) as one fp32 product of x and the fp32 reciprocal). out may alias x.
void Dropout(In x, float p, uint64_t seed, Out out, int64_t n, cudaStream_t stream);
// bits[j] (j < ceil(n / 8)): bit b set when element 8j + b < n is kept by Dropout's mask.
void DropoutMask(int64_t n, float p, uint64_t seed, uint8_t* bits, cudaStream_t stream);
// out[i] = (accumulate ? out[i] : 0) + (bit i of bits ? x[i] * (1 / (1 - p)) : 0), i < n.
void ApplyDropoutMask(In x, const uint8_t* bits, float p, bool accumulate, Out out, int64_t n,
                      cudaStream_t stream);
// x[i] *= factor (master state, F32 or BF16: one fp32 product, rounded once).
void Scale(Out x, int64_t n, float factor, cudaStream_t stream);
// A strided matrix c (rows, cols; row stride ld) = beta * c, and 0 where beta == 0 (whatever c
// held, NaN included): Gemm with k == 0.
void ScaleMatrix(Out c, int64_t rows, int64_t cols, int64_t ld, float beta, cudaStream_t stream);
// out = silu(gate) * up; silu(g) = g / (1 + exp(-g)).
void SwigluForward(In gate, In up, Out out, int64_t n, cudaStream_t stream);
// dgate += dout * up * silu'(gate); dup += dout * silu(gate).
void SwigluBackward(In gate, In up, In dout, Out dgate, Out dup, int64_t n, cudaStream_t stream);
// out (n, dim) = table (V, dim) [ids (n)].
void EmbeddingForward(const int32_t* ids, int64_t n, In table, int64_t dim, Out out,
                      cudaStream_t stream);
// cos, sin (n, half) from positions (n) and inv_freq (half): RopeAngle (op_semantics.h).
void RopeTables(const int32_t* positions, int64_t n, const float* inv_freq, int64_t half,
                float scale, float* cos, float* sin, cudaStream_t stream);
// x (n, heads, head_dim) rotated in place by the tables (n, head_dim / 2); `backward`: the
// transposed rotation (ops.h's RopeBackward).
void Rope(Out x, int64_t n, int64_t heads, int64_t head_dim, const float* cos, const float* sin,
          bool backward, cudaStream_t stream);

// ---- row-wise ops and column sums (cuda_rowwise.cu) ------------------------------------------
// y (rows, dim) = x * rstd * w, rstd (rows) = 1 / sqrt(mean(x^2) + eps). y may alias x.
void RmsNormForward(In x, In w, int64_t rows, int64_t dim, float eps, Out y, float* rstd,
                    cudaStream_t stream);
// dx += dL/dx; dw (ptr null: none) += dL/dw (summed over rows in a fixed order).
void RmsNormBackward(In x, In w, const float* rstd, In dy, int64_t rows, int64_t dim, Out dx,
                     Out dw, cudaStream_t stream);
// dbias (cols) += the sum over rows of dy (rows, cols), in a fixed order.
void BiasBackward(In dy, int64_t rows, int64_t cols, Out dbias, cudaStream_t stream);
// dtable (V, dim) [ids[i]] += dout (n, dim) [i] for every i with ids[i] != skip_id; a row that
// several tokens share receives their sum in token order (no atomics).
void EmbeddingBackward(const int32_t* ids, int64_t n, In dout, int64_t dim, int32_t skip_id,
                       Out dtable, cudaStream_t stream);

// ---- cross-entropy (cuda_loss.cu) -------------------------------------------------------------
// lse (n) = each row's log-sum-exp of logits (n, vocab); *loss_sum += the sum over rows whose
// target is not kIgnoreIndex of lse - logit[target], in double, rows in order.
void CrossEntropyForward(In logits, const int32_t* targets, int64_t n, int64_t vocab, float* lse,
                         double* loss_sum, cudaStream_t stream);
// dlogits (n, vocab) = scale * (exp(logit - lse) - onehot(target)), 0 on ignored rows. WRITES;
// dlogits may alias logits.
void CrossEntropyBackward(In logits, const int32_t* targets, const float* lse, int64_t n,
                          int64_t vocab, float scale, Out dlogits, cudaStream_t stream);

// ---- optimizer (cuda_optimizer.cu, compiled with -fmad=false) ----------------------------------
// AdamWElement on every element of p, g, m, v (n each, F32 or BF16 each: widened, updated in
// fp32, rounded once); p_copy (ptr null: none) receives the updated p as Convert writes it.
void AdamWUpdate(const AdamWScalars& s, Out p, In g, Out m, Out v, Out p_copy, int64_t n,
                 cudaStream_t stream);
// *sum += the sum of x[i]^2 in double, in a fixed blocked order (independent of the GPU).
void SumOfSquares(In x, int64_t n, double* sum, cudaStream_t stream);

// ---- attention (cuda_attention.cu) -------------------------------------------------------------
// ops.h's AttentionForward: q (B, Tq, Hq, D), k, v (B, kv_rows, Hkv, D), out (B, Tq, Hq, D);
// sinks (Hq) or ptr null; segments (B, Tq), (B, kv_rows) or both null; lse (B, Hq, Tq) or null.
// Softmax in fp32 online (flash-attention's tiles); with BF16 v the probabilities are rounded
// to bf16 for the P @ V product.
void AttentionForward(const AttentionShape& s, In q, In k, In v, In sinks,
                      const int32_t* q_segments, const int32_t* kv_segments, Out out, float* lse,
                      cudaStream_t stream);
// ops.h's AttentionBackward: dq, dk, dv += ...; dsinks (Hq) += ... (ptr null: none). Sums over
// queries for dk, dv and dsinks in a fixed order.
void AttentionBackward(const AttentionShape& s, In q, In k, In v, In sinks,
                       const int32_t* q_segments, const int32_t* kv_segments, In out,
                       const float* lse, In dout, Out dq, Out dk, Out dv, Out dsinks,
                       cudaStream_t stream);

// ---- mixture of experts (cuda_moe.cu) ----------------------------------------------------------
// gate_up (rows, 2 * inter) interleaved (gate even columns, up odd); out (rows, inter).
void ClampedSwigluForward(In gate_up, int64_t rows, int64_t inter, float alpha, float limit,
                          Out out, cudaStream_t stream);
// dgate_up (rows, 2 * inter) += the gradient for dout (rows, inter).
void ClampedSwigluBackward(In gate_up, int64_t rows, int64_t inter, float alpha, float limit,
                           In dout, Out dgate_up, cudaStream_t stream);
// For each of n tokens of logits (n, experts): the k largest (descending, ties: lower expert
// first) into indices (n, k), and their softmax into weights (n, k, F32).
void RouterTopK(In logits, int64_t n, int64_t experts, int64_t k, int32_t* indices, float* weights,
                cudaStream_t stream);
// dlogits (n, experts) += w_j (dw_j - sum_m w_m dw_m) at the chosen experts.
void RouterTopKBackward(const int32_t* indices, const float* weights, const float* dweights,
                        int64_t n, int64_t experts, int64_t k, Out dlogits, cudaStream_t stream);
// Groups the (token, slot) choices by expert, each expert's rows in token order: offsets
// (experts + 1), token_of_row (n * k), row_of_slot (n * k). All on the device: no host read.
void MoeDispatch(const int32_t* indices, int64_t n, int64_t k, int64_t experts, int32_t* offsets,
                 int32_t* token_of_row, int32_t* row_of_slot, cudaStream_t stream);
// grouped (rows, dim) [r] = x [token_of_row[r]].
void MoeGather(In x, const int32_t* token_of_row, int64_t rows, int64_t dim, Out grouped,
               cudaStream_t stream);
// dx (n, dim) [t] += the sum of dgrouped over token t's k rows in ascending row order.
void MoeGatherBackward(In dgrouped, const int32_t* row_of_slot, int64_t n, int64_t k, int64_t dim,
                       Out dx, cudaStream_t stream);
// out (n, dim) [t] = sum over t's slots in ascending row order of weights[t, j] * y[row], each
// product rounded, added to a running fp32 sum from zero. WRITES out.
void MoeCombine(In y, const float* weights, const int32_t* row_of_slot, int64_t n, int64_t k,
                int64_t dim, Out out, cudaStream_t stream);
// dy [row_of_slot[t, j]] = weights[t, j] * dout[t] (WRITES every row); dweights (n, k, F32) +=
// dout[t] . y[row].
void MoeCombineBackward(In y, const float* weights, const int32_t* row_of_slot, In dout, int64_t n,
                        int64_t k, int64_t dim, Out dy, float* dweights, cudaStream_t stream);

// ---- grouped GEMM and MXFP4 (cuda_grouped_gemm.cu, cuda_mxfp4.cu) -----------------------------
// ops.h's GroupedGemm: y (rows, n) [rows of g] = x (rows, k) [rows of g] @ op(w_g) + beta * y,
// then + bias (groups, n) [g] (ptr null: none), for each group g of the device offsets
// (groups + 1). The launch is sized from rows and groups alone (no host read of the offsets).
void GroupedGemm(bool trans_w, int64_t rows, int64_t n, int64_t k, In x, In w, In bias,
                 const int32_t* offsets, int64_t groups, float beta, Out y, cudaStream_t stream);
// ops.h's GroupedGemmWeightGrad: dw (groups, k, n) [g] += x [rows of g]^T @ dy [rows of g]
// (dw.ptr null: none); dbias (groups, n) [g] += the column sums of dy over g's rows (ptr null:
// none), in row order.
void GroupedGemmWeightGrad(int64_t rows, int64_t k, int64_t n, In x, In dy, const int32_t* offsets,
                           int64_t groups, Out dw, Out dbias, cudaStream_t stream);
// ops.h's DequantizeMxfp4: out (experts, groups * 32, rows) from blocks (experts, rows, groups,
// 16) and scales (experts, rows, groups), Mxfp4Value (op_semantics.h) per element.
void DequantizeMxfp4(int64_t experts, int64_t rows, int64_t groups, const uint8_t* blocks,
                     const uint8_t* scales, Out out, cudaStream_t stream);

}  // namespace air::engine::cuda
