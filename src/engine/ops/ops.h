// Ops: the compute half of a Backend (engine/backend/backend.h: a backend owns memory and
// computes over it, ggml's idea).
//
// Every op takes Views (engine/view.h) of the backend's own memory; each view carries its dtype
// and shape, and the op reads its sizes from them (shapes are spelled out in the comments,
// `x (N, C)`; a view may be any shape with that element count) except where an explicit size
// says more (Gemm's leading dimensions, AttentionShape). An op's arguments play one of these
// roles, and each role allows these dtypes:
//   data      activations, weights and their gradients: F32 or BF16, each argument on its own
//             (an op may read BF16 x and write an F32 y); the op computes in fp32 and rounds a
//             BF16 output once (round to nearest even). Which data dtypes an op accepts on a
//             backend is what Supports(op, dtype) says; everything else is fixed:
//   stat      per-row statistics (rstd, log-sum-exp), RoPE tables: F32
//   master    optimizer-owned state (AdamW's p, g, m, v; parameter gradients; gradient norms
//             and scaling): F32, or BF16 where the run keeps its state in bf16 (torch_dtype
//             bfloat16, the seed's recipe) — computed in fp32, a BF16 result rounded once
//   index     token ids, targets, positions, segments: I32
//   scalar    one-element accumulators (a loss sum, a squared norm): F64, written on the device
//             and read back with one copy, so a GPU backend needs no sync per op
//   packed    quantized weights as stored (MXFP4 blocks and scales): U8
// A view of a dtype its role does not allow is a broken invariant (AIR_ENGINE_CHECK), not a
// silent conversion: code that builds a model for a dtype asks Supports() first and reports an
// unsupported combination as an error (CheckOpsSupport), so an op is never called with one.
//
// The checks live in one place, in front of every backend: each public op checks its arguments
// (roles, dtypes, sizes: ops_checked.cc) once per call and then calls the backend's kernel hook
// (AIR_OPS_KERNELS below), as ggml-backend keeps supports_op apart from the kernels.
// Implementations are folders beside the backend interface: backend/cpu/reference_ops (clear
// loops, the ground truth: BF16 arguments are widened to fp32, computed by the fp32 loops, and
// rounded back), backend/cpu/fast_ops (blocked, vectorized, threaded) and backend/cuda (the
// GPU's kernels and cuBLASLt). The per-element rules they share are op_semantics.h. Every
// registered backend is tested against the fp32 reference op by op and dtype by dtype with its
// own tolerances, and every backward against finite differences (backend/registry.h,
// tests/unit/engine_core/ops_harness_test.cc, ops_gradcheck_test.cc).
//
// Conventions:
//   - Forward ops write (overwrite) their outputs.
//   - Backward ops ACCUMULATE (+=) into gradients of inputs and parameters, so a tensor that
//     feeds two consumers (the residual stream, a tied embedding) simply receives both; the
//     caller zeroes gradient buffers when a new accumulation starts. Exceptions say so.
//   - Scalar results accumulate (+=) into their F64 view; the caller zeroes it.
//
// Thread safety: calls on one Ops object must not overlap (the fast path keeps per-worker
// scratch space and its own thread pool, which one call uses fully); give each thread that
// drives a model its own Ops. The reference implementation is stateless.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"
#include "engine/ops/op_semantics.h"
#include "engine/view.h"

namespace air::engine {

// Every op, for Supports() and the harness.
enum class OpKind {
  kGemm,
  kEmbeddingForward,
  kEmbeddingBackward,
  kRmsNormForward,
  kRmsNormBackward,
  kRopeTables,
  kRopeForward,
  kRopeBackward,
  kAttentionForward,
  kAttentionBackward,
  kSwigluForward,
  kSwigluBackward,
  kAddInPlace,
  kAddBias,
  kBiasBackward,
  kCrossEntropyForward,
  kCrossEntropyBackward,
  kAdamWUpdate,
  kSumOfSquares,
  kScale,
  kConvert,
  kDropout,
  kDropoutMask,
  kApplyDropoutMask,
  kGemmDropped,
  kGemmAddDropped,
  kGemmConcatK,
  kDroppedLinearBackward,
  kPackGemmB,
  kGemmPackedB,
  kClampedSwigluForward,
  kClampedSwigluBackward,
  kRouterTopK,
  kRouterTopKBackward,
  kMoeDispatch,
  kMoeGather,
  kMoeGatherBackward,
  kMoeCombine,
  kMoeCombineBackward,
  kGroupedGemm,
  kGroupedGemmWeightGrad,
  kDequantizeMxfp4,
};
inline constexpr OpKind kAllOps[] = {OpKind::kGemm,
                                     OpKind::kEmbeddingForward,
                                     OpKind::kEmbeddingBackward,
                                     OpKind::kRmsNormForward,
                                     OpKind::kRmsNormBackward,
                                     OpKind::kRopeTables,
                                     OpKind::kRopeForward,
                                     OpKind::kRopeBackward,
                                     OpKind::kAttentionForward,
                                     OpKind::kAttentionBackward,
                                     OpKind::kSwigluForward,
                                     OpKind::kSwigluBackward,
                                     OpKind::kAddInPlace,
                                     OpKind::kAddBias,
                                     OpKind::kBiasBackward,
                                     OpKind::kCrossEntropyForward,
                                     OpKind::kCrossEntropyBackward,
                                     OpKind::kAdamWUpdate,
                                     OpKind::kSumOfSquares,
                                     OpKind::kScale,
                                     OpKind::kConvert,
                                     OpKind::kDropout,
                                     OpKind::kDropoutMask,
                                     OpKind::kApplyDropoutMask,
                                     OpKind::kGemmDropped,
                                     OpKind::kGemmAddDropped,
                                     OpKind::kGemmConcatK,
                                     OpKind::kDroppedLinearBackward,
                                     OpKind::kPackGemmB,
                                     OpKind::kGemmPackedB,
                                     OpKind::kClampedSwigluForward,
                                     OpKind::kClampedSwigluBackward,
                                     OpKind::kRouterTopK,
                                     OpKind::kRouterTopKBackward,
                                     OpKind::kMoeDispatch,
                                     OpKind::kMoeGather,
                                     OpKind::kMoeGatherBackward,
                                     OpKind::kMoeCombine,
                                     OpKind::kMoeCombineBackward,
                                     OpKind::kGroupedGemm,
                                     OpKind::kGroupedGemmWeightGrad,
                                     OpKind::kDequantizeMxfp4};
// "Gemm", "RmsNormForward", ...
const char* OpName(OpKind op);

// The kernel hooks, one per op: the op's signature with "Kernel" after its name. Ops declares
// them pure virtual (AIR_OPS_KERNELS(virtual, = 0)); a backend overrides every one
// (AIR_OPS_KERNELS(, override) in its class) and writes kernels only: each public op below checks
// its arguments once (ops_checked.cc, with op_checks.h's checks) and then calls its kernel, so a
// kernel can rely on the dtypes and sizes its op documents and no backend can skip a check.
#define AIR_OPS_KERNELS(VIRTUAL, SPEC)                                                             \
  VIRTUAL void GemmKernel(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,             \
                          const View& a, int64_t lda, const View& b, int64_t ldb, float beta,      \
                          const View& c, int64_t ldc) const SPEC;                                  \
  VIRTUAL void EmbeddingForwardKernel(const View& ids, const View& table, const View& out)         \
      const SPEC;                                                                                  \
  VIRTUAL void EmbeddingBackwardKernel(const View& ids, const View& dout, int32_t skip_id,         \
                                       const View& dtable) const SPEC;                             \
  VIRTUAL void RmsNormForwardKernel(const View& x, const View& w, float eps, const View& y,        \
                                    const View& rstd) const SPEC;                                  \
  VIRTUAL void RmsNormBackwardKernel(const View& x, const View& w, const View& rstd,               \
                                     const View& dy, const View& dx, const View& dw) const SPEC;   \
  VIRTUAL void RopeTablesKernel(const View& positions, const View& inv_freq, float scale,          \
                                const View& cos, const View& sin) const SPEC;                      \
  VIRTUAL void RopeForwardKernel(const View& x, const View& cos, const View& sin) const SPEC;      \
  VIRTUAL void RopeBackwardKernel(const View& dx, const View& cos, const View& sin) const SPEC;    \
  VIRTUAL void AttentionForwardKernel(const AttentionShape& s, const View& q, const View& k,       \
                                      const View& v, const View& sinks, const View& q_segments,    \
                                      const View& kv_segments, const View& out, const View& lse)   \
      const SPEC;                                                                                  \
  VIRTUAL void AttentionBackwardKernel(const AttentionShape& s, const View& q, const View& k,      \
                                       const View& v, const View& sinks, const View& q_segments,   \
                                       const View& kv_segments, const View& out, const View& lse,  \
                                       const View& dout, const View& dq, const View& dk,           \
                                       const View& dv, const View& dsinks) const SPEC;             \
  VIRTUAL void SwigluForwardKernel(const View& gate, const View& up, const View& out) const SPEC;  \
  VIRTUAL void SwigluBackwardKernel(const View& gate, const View& up, const View& dout,            \
                                    const View& dgate, const View& dup) const SPEC;                \
  VIRTUAL void ClampedSwigluForwardKernel(const View& gate_up, float alpha, float limit,           \
                                          const View& out) const SPEC;                             \
  VIRTUAL void ClampedSwigluBackwardKernel(const View& gate_up, float alpha, float limit,          \
                                           const View& dout, const View& dgate_up) const SPEC;     \
  VIRTUAL void RouterTopKKernel(const View& logits, const View& indices, const View& weights)      \
      const SPEC;                                                                                  \
  VIRTUAL void RouterTopKBackwardKernel(const View& indices, const View& weights,                  \
                                        const View& dweights, const View& dlogits) const SPEC;     \
  VIRTUAL void MoeDispatchKernel(const View& indices, const View& offsets,                         \
                                 const View& token_of_row, const View& row_of_slot) const SPEC;    \
  VIRTUAL void MoeGatherKernel(const View& x, const View& token_of_row, const View& grouped)       \
      const SPEC;                                                                                  \
  VIRTUAL void MoeGatherBackwardKernel(const View& dgrouped, const View& row_of_slot,              \
                                       const View& dx) const SPEC;                                 \
  VIRTUAL void MoeCombineKernel(const View& y, const View& weights, const View& row_of_slot,       \
                                const View& out) const SPEC;                                       \
  VIRTUAL void MoeCombineBackwardKernel(const View& y, const View& weights,                        \
                                        const View& row_of_slot, const View& dout, const View& dy, \
                                        const View& dweights) const SPEC;                          \
  VIRTUAL void GroupedGemmKernel(bool trans_w, int64_t n, int64_t k, const View& x, const View& w, \
                                 const View& bias, const View& offsets, float beta, const View& y) \
      const SPEC;                                                                                  \
  VIRTUAL void GroupedGemmWeightGradKernel(int64_t k, int64_t n, const View& x, const View& dy,    \
                                           const View& offsets, const View& dw, const View& dbias) \
      const SPEC;                                                                                  \
  VIRTUAL void DequantizeMxfp4Kernel(int64_t experts, int64_t rows, int64_t groups,                \
                                     const View& blocks, const View& scales, const View& out)      \
      const SPEC;                                                                                  \
  VIRTUAL void AddInPlaceKernel(const View& y, const View& x) const SPEC;                          \
  VIRTUAL void AddBiasKernel(const View& y, const View& bias) const SPEC;                          \
  VIRTUAL void BiasBackwardKernel(const View& dy, const View& dbias) const SPEC;                   \
  VIRTUAL void ConvertKernel(const View& src, const View& dst) const SPEC;                         \
  VIRTUAL void DropoutKernel(const View& x, float p, uint64_t seed, const View& out) const SPEC;   \
  VIRTUAL void DropoutMaskKernel(int64_t n, float p, uint64_t seed, const View& bits) const SPEC;  \
  VIRTUAL void ApplyDropoutMaskKernel(const View& x, const View& bits, float p, float beta,        \
                                      const View& out) const SPEC;                                 \
  VIRTUAL void GemmDroppedKernel(bool drop_b, bool trans_a, bool trans_b, int64_t m, int64_t n,    \
                                 int64_t k, const View& a, int64_t lda, const View& b,             \
                                 int64_t ldb, float beta, const View& c, int64_t ldc,              \
                                 const View& bits, float p, const View& scratch) const SPEC;       \
  VIRTUAL void GemmAddDroppedKernel(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,   \
                                    const View& a, int64_t lda, const View& b, int64_t ldb,        \
                                    const View& c, const View& bits, float p, const View& scratch) \
      const SPEC;                                                                                  \
  VIRTUAL void GemmConcatKKernel(bool trans_b, int64_t m, int64_t n, int64_t k, const View& a,     \
                                 int64_t lda, const View& b, int64_t ldb, int64_t k2,              \
                                 const View& a2, int64_t lda2, const View& b2, int64_t ldb2,       \
                                 const View& c, const View& scratch) const SPEC;                   \
  VIRTUAL void PackGemmBKernel(bool trans_b, int64_t n, int64_t k, const View& b, int64_t ldb,     \
                               const View& packed) const SPEC;                                     \
  VIRTUAL void GemmPackedBKernel(int64_t m, int64_t n, int64_t k, const View& a, int64_t lda,      \
                                 const View& packed, float beta, const View& c, int64_t ldc)       \
      const SPEC;                                                                                  \
  VIRTUAL void DroppedLinearBackwardKernel(                                                        \
      int64_t n, int64_t r, int64_t in, const View& x, const View& bits, float p, const View& w,   \
      const View& dy, float beta, const View& w_grad, const View& dx, const View& x_scratch,       \
      const View& f32_scratch) const SPEC;                                                         \
  VIRTUAL void CrossEntropyForwardKernel(const View& logits, const View& targets, const View& lse, \
                                         const View& loss_sum) const SPEC;                         \
  VIRTUAL void CrossEntropyBackwardKernel(const View& logits, const View& targets,                 \
                                          const View& lse, float scale, const View& dlogits)       \
      const SPEC;                                                                                  \
  VIRTUAL void AdamWUpdateKernel(const AdamWScalars& s, const View& p, const View& g,              \
                                 const View& m, const View& v, const View& p_copy) const SPEC;     \
  VIRTUAL void SumOfSquaresKernel(const View& x, const View& sum) const SPEC;                      \
  VIRTUAL void ScaleKernel(const View& x, float factor) const SPEC;

class Ops {
 public:
  virtual ~Ops() = default;

  // "reference", "fast" or "cuda": which implementation this is (for logs and tests).
  virtual std::string name() const = 0;
  // The device whose memory every view passed to an op must be on (checked: op_checks.h).
  virtual Device device() const = 0;

  // Whether `op` accepts data arguments (see the roles above) of `dtype` on this backend.
  virtual bool Supports(OpKind op, DType dtype) const = 0;

  // ---- matrix multiply (a, b, c: data) ---------------------------------------------------
  // C (M, N) = op(A) @ op(B) + beta * C, where op(A) is (M, K) and op(B) is (K, N).
  //   trans_a == false: A is stored (M, K) with row stride lda; true: A is stored (K, M).
  //   trans_b == false: B is stored (K, N) with row stride ldb; true: B is stored (N, K).
  // beta == 0 overwrites C (whatever it held, even NaN); beta == 1 accumulates. The views must
  // hold every element the strides address. Precision: when A or B is BF16, every input element
  // is rounded to bf16 (the other operand too), products are exact and sums fp32 (bf16 GEMM
  // with fp32 accumulation); with both F32 the product is fp32.
  // A linear layer y = x W^T is Gemm(false, true, ...) with W stored (out, in) as in HF.
  void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const View& a, int64_t lda,
            const View& b, int64_t ldb, float beta, const View& c, int64_t ldc) const;
  // A B that several products read (a language model head's weight, read by each chunk of rows)
  // laid out once in the backend's own form: GemmPackedBBytes says how many bytes that takes for
  // op(B) (K, N) of `dtype` (0: this backend reads B as it is stored, nothing to gain; the
  // caller calls Gemm); PackGemmB writes it into `packed` (U8, that many bytes) from B as Gemm
  // takes it; GemmPackedB is then Gemm(false, trans_b, m, n, k, a, lda, B, ldb, beta, c, ldc) on
  // the B it was packed from, bit for bit, for any M (A stored (M, K), not transposed).
  virtual int64_t GemmPackedBBytes(int64_t /*n*/, int64_t /*k*/, DType /*dtype*/) const {
    return 0;
  }
  void PackGemmB(bool trans_b, int64_t n, int64_t k, const View& b, int64_t ldb,
                 const View& packed) const;
  void GemmPackedB(int64_t m, int64_t n, int64_t k, const View& a, int64_t lda, const View& packed,
                   float beta, const View& c, int64_t ldc) const;

  // ---- embedding -------------------------------------------------------------------------
  // out (N, C) = table (V, C) [ids (N)] (table, out: data). ids are validated by the caller.
  void EmbeddingForward(const View& ids, const View& table, const View& out) const;
  // dtable (V, C) [ids[n]] += dout (N, C) [n] for every n whose id != skip_id
  // (nn.Embedding's padding_idx; -1 skips nothing). dout: data; dtable: master (a row that
  // several tokens add to receives their sum in token order, in fp32, rounded once for BF16).
  void EmbeddingBackward(const View& ids, const View& dout, int32_t skip_id,
                         const View& dtable) const;

  // ---- RMSNorm ---------------------------------------------------------------------------
  // y (N, C) = x * rstd * w with rstd (N, stat) = 1 / sqrt(mean(x^2) + eps), w (C); C is
  // w's element count. y may alias x.
  void RmsNormForward(const View& x, const View& w, float eps, const View& y,
                      const View& rstd) const;
  // Given x, w, rstd from the forward and dy: dx += dL/dx (data), dw += dL/dw (master; may be
  // an empty view).
  void RmsNormBackward(const View& x, const View& w, const View& rstd, const View& dy,
                       const View& dx, const View& dw) const;

  // ---- rotary position embedding (rotate-half, as HF) ------------------------------------
  // cos, sin (N, D/2) = scale * cos/sin(positions[n] * inv_freq[i]) (positions: index;
  // inv_freq (D/2), cos, sin: stat), the product in fp32 as transformers computes it, then the
  // fp32 product with `scale` (YaRN's attention factor; 1 leaves the values as they are): the
  // tables RopeForward and RopeBackward read, built on the device from the batch's positions.
  void RopeTables(const View& positions, const View& inv_freq, float scale, const View& cos,
                  const View& sin) const;
  // x (N, H, D) in place (data): for each token n and head, pairs (i, i + D/2) for i < D/2
  // rotate by the angle whose cos/sin are cos[n, i], sin[n, i] (N and D/2 from the tables):
  // x1' = x1 cos - x2 sin; x2' = x2 cos + x1 sin.
  void RopeForward(const View& x, const View& cos, const View& sin) const;
  // The transpose of the rotation (angle negated), in place on dx (N, H, D). Not accumulating:
  // it maps the gradient w.r.t. the rotated x to the gradient w.r.t. the unrotated x.
  void RopeBackward(const View& dx, const View& cos, const View& sin) const;

  // ---- causal self-attention with GQA, segments, sliding window and sinks ---------------
  // q (B, Tq, Hq, D), k and v (B, kv_rows, Hkv, D) (rows >= Tk used), out (B, Tq, Hq, D): data;
  // sinks (Hq): data, or an empty view: GPT-OSS's learned sink logit per query head, which joins
  // every query's softmax as one more key without a value (p_j = exp(s_j) / (exp(sink) +
  // sum exp(s)), so the weights of the real keys sum to less than one). q_segments (B, Tq) and
  // kv_segments (B, kv_rows): index, or both empty views; lse (B, Hq, Tq): stat, receives the
  // log-sum-exp of each query's scaled, masked scores, the sink's included (needed by the
  // backward; may be empty). A query that sees no key gets a zero output. The softmax is fp32;
  // with BF16 v the probabilities are rounded to bf16 for the P @ V product (as HF's eager
  // attention casts them to the value dtype).
  void AttentionForward(const AttentionShape& s, const View& q, const View& k, const View& v,
                        const View& sinks, const View& q_segments, const View& kv_segments,
                        const View& out, const View& lse) const;
  // Given the forward's inputs, out, lse and dout (B, Tq, Hq, D): dq += ..., dk += ...,
  // dv += ... (data); dsinks (Hq, master) += d/dsink (may be empty: no sinks, or frozen).
  void AttentionBackward(const AttentionShape& s, const View& q, const View& k, const View& v,
                         const View& sinks, const View& q_segments, const View& kv_segments,
                         const View& out, const View& lse, const View& dout, const View& dq,
                         const View& dk, const View& dv, const View& dsinks) const;

  // ---- SwiGLU (data) ---------------------------------------------------------------------
  // out (n) = silu(gate) * up, silu(g) = g / (1 + exp(-g)), elementwise.
  void SwigluForward(const View& gate, const View& up, const View& out) const;
  // dgate += dout * up * silu'(gate); dup += dout * silu(gate).
  void SwigluBackward(const View& gate, const View& up, const View& dout, const View& dgate,
                      const View& dup) const;
  // GPT-OSS's experts: gate_up (N, 2I) holds gate and up interleaved (gate the even columns,
  // up the odd ones); out (N, I) = (u + 1) * g * sigmoid(alpha * g) with g = min(gate, limit)
  // and u = clamp(up, -limit, limit) (data).
  void ClampedSwigluForward(const View& gate_up, float alpha, float limit, const View& out) const;
  // dgate_up (N, 2I) += the gradient of out for dout (N, I) (data); a clamped input gets none
  // (torch.clamp's rule: the gradient passes where min <= x <= max).
  void ClampedSwigluBackward(const View& gate_up, float alpha, float limit, const View& dout,
                             const View& dgate_up) const;

  // ---- mixture of experts routing (GPT-OSS) ----------------------------------------------
  // A token's k choices are its (token, slot) pairs; grouped by expert they are the rows of
  // the experts' inputs (N*k rows, expert 0's first, each expert's in token order), so that
  // each expert runs one GEMM over a contiguous block of rows.
  //
  // For each token n of logits (N, E) (data): the k = indices.dim(-1) largest logits in
  // descending order (equal values: the lower expert first), their experts into indices (N, k)
  // (index) and the softmax over those k logits into weights (N, k) (stat), as transformers'
  // top-k router.
  void RouterTopK(const View& logits, const View& indices, const View& weights) const;
  // dlogits (N, E) (data) += the softmax's backward at the chosen experts: for slot j of token
  // n, w_j * (dw_j - sum_m w_m dw_m) with dweights (N, k) (stat); nothing elsewhere (top-k's
  // choice has no gradient).
  void RouterTopKBackward(const View& indices, const View& weights, const View& dweights,
                          const View& dlogits) const;
  // Groups the choices indices (N, k) by expert (all index): offsets (E + 1) = the first grouped
  // row of each expert (offsets[E] = N*k), token_of_row (N*k) = the token of each grouped row,
  // row_of_slot (N*k) = the grouped row of each (token, slot). Every expert id must be in
  // [0, E) (E = offsets.numel() - 1).
  void MoeDispatch(const View& indices, const View& offsets, const View& token_of_row,
                   const View& row_of_slot) const;
  // grouped (N*k, C) [r] = x (N, C) [token_of_row[r]] (data).
  void MoeGather(const View& x, const View& token_of_row, const View& grouped) const;
  // dx (N, C) [n] += the sum of dgrouped (N*k, C) over token n's k rows in ascending row order
  // (row_of_slot (N, k)) (data).
  void MoeGatherBackward(const View& dgrouped, const View& row_of_slot, const View& dx) const;
  // out (N, C) [n] = sum over token n's slots, in ascending row (= expert) order, of
  // weights[n, j] * y[row_of_slot[n, j]] (y (N*k, C), out: data; weights (N, k): stat),
  // rounded as transformers' index_add_ accumulates it: each product rounded, added to the
  // running sum from zero. WRITES out.
  void MoeCombine(const View& y, const View& weights, const View& row_of_slot,
                  const View& out) const;
  // dy (N*k, C) [row_of_slot[n, j]] = weights[n, j] * dout[n] (WRITTEN: every row once);
  // dweights (N, k) (stat) += dout[n] . y[row] (dout, dy, y: data).
  void MoeCombineBackward(const View& y, const View& weights, const View& row_of_slot,
                          const View& dout, const View& dy, const View& dweights) const;

  // ---- grouped GEMM: one product per group of rows (the experts' projections) -------------
  // The rows of x and y are grouped: group g owns rows [offsets[g], offsets[g + 1]) for g < G
  // (offsets (G + 1): index, in the backend's memory as MoeDispatch writes it). The host never
  // reads the offsets: a GPU backend sizes its launch from M and G alone, and every tile reads
  // its group's bounds on the device, so no per-layer copy to the host is needed. They must be
  // non-decreasing from offsets[0] >= 0 with offsets[G] <= M (a CPU backend checks it); rows
  // outside every group are not touched. Precision as Gemm's (a BF16 x or w makes the product
  // bf16, fp32 sums); each group's result is the Gemm of its rows (and, on the CPU backends,
  // is computed by exactly that Gemm call, so its bits are that call's).
  //
  // y (M, N) [rows of g] = x (M, K) [rows of g] @ op(w_g) + beta * y [rows of g], then
  // + bias (G, N) [g] on each of those rows when bias is not empty, as a second step (Gemm then
  // AddBias: a BF16 y is rounded after the product and again after the bias, as transformers'
  // bmm + bias). w (G, K, N), w_g = x @ w_g (GptOssExperts' layout); trans_w: w (G, N, K),
  // x @ w_g^T (an (out, in) weight per group: PEFT's lora_A, dx = dy W^T). x, w, y, bias:
  // data; M = x.numel() / K. beta == 0 ignores y (NaN too).
  void GroupedGemm(bool trans_w, int64_t n, int64_t k, const View& x, const View& w,
                   const View& bias, const View& offsets, float beta, const View& y) const;
  // The weight gradient of GroupedGemm: dw (G, K, N) [g] += x [rows of g]^T @ dy [rows of g]
  // with x (M, K) and dy (M, N) (a group with no rows adds nothing), and dbias (G, N) [g] +=
  // the column sums of dy over g's rows. dw or dbias may be empty (a frozen weight or bias); x
  // may be empty when dw is. x, dy: data; dw, dbias: master.
  void GroupedGemmWeightGrad(int64_t k, int64_t n, const View& x, const View& dy,
                             const View& offsets, const View& dw, const View& dbias) const;

  // ---- MXFP4 (GPT-OSS's released expert weights) ----------------------------------------
  // out (E, G*32, R) = the MXFP4 values of blocks (E, R, G, 16) and scales (E, R, G) (both
  // packed: U8, in the backend's memory), in transformers' layout — each expert's stored (R, C)
  // matrix transposed, as io/mxfp4.h's kTransformers orientation: value c = 2j of group g of
  // row r is byte j's low nibble, c = 2j + 1 its high one, each ldexp(E2M1(nibble), scale - 127)
  // (mxfp4_decode.h: exact in F32 and BF16; ±inf past the float range). out: data. Lets a GPU
  // backend receive the 4-bit weights and expand them in its own memory.
  void DequantizeMxfp4(int64_t experts, int64_t rows, int64_t groups, const View& blocks,
                       const View& scales, const View& out) const;

  // ---- elementwise and bias (data) -------------------------------------------------------
  // y (n) += x (n).
  void AddInPlace(const View& y, const View& x) const;
  // y (N, C) += bias (C) on every row.
  void AddBias(const View& y, const View& bias) const;
  // dbias (C, master) += sum over rows of dy (N, C).
  void BiasBackward(const View& dy, const View& dbias) const;
  // dst = src element by element (same element count; any data dtypes: a cast, rounding to
  // nearest even into BF16).
  void Convert(const View& src, const View& dst) const;

  // out (n) = x (n) * (DropoutUniform(seed, i) >= p ? 1 / (1 - p) : 0) element by element (x,
  // out: data; p in [0, 1); torch's inverted dropout, with a counter-based mask). Its own
  // backward: the same op on dL/dout with the same seed. out may alias x.
  void Dropout(const View& x, float p, uint64_t seed, const View& out) const;
  // Dropout's mask kept instead of drawn again (LoRA applies each adapter's mask three times a
  // step: its input in the forward and the backward, and the input gradient):
  // bits (ceil(n / 8), packed: U8) = the mask of Dropout(., p, seed) over elements [0, n): bit
  // i % 8 (least significant first) of byte i / 8 set when element i is kept
  // (DropoutUniform(seed, i) >= p); the bits past n clear.
  void DropoutMask(int64_t n, float p, uint64_t seed, const View& bits) const;
  // out (n) = beta * out + (bit i of bits ? x (n) * (1 / (1 - p)) : 0), the sum in fp32 rounded
  // once into out's dtype (x, out: data; bits: packed, ceil(n / 8) bytes from DropoutMask with
  // the same p; beta 0 or 1). beta 0 is Dropout(x, p, seed, out) for the mask's seed, bit for
  // bit; beta 1 adds the masked x into out (a dropout's backward accumulated into a gradient).
  // out may alias x when beta is 0.
  void ApplyDropoutMask(const View& x, const View& bits, float p, float beta,
                        const View& out) const;
  // Gemm with one operand taken through its kept mask first (LoRA's dropped input in its two
  // products, u = drop(x) A^T and dA += du^T drop(x), without writing drop(x) out): C = op(A')
  // op(B') + beta * C with A' = ApplyDropoutMask(A, bits, p, 0) and B' = B (drop_b false), or
  // A' = A and B' = ApplyDropoutMask(B, bits, p, 0) (drop_b true) — the values ApplyDropoutMask
  // writes in the dropped operand's dtype, so the result has the bits of ApplyDropoutMask into
  // `scratch` followed by Gemm on it (what a backend that does not fuse the two runs). The
  // dropped operand is stored contiguously (its ld is its stored row length: k or m for A, n or
  // k for B) and bit i of bits (ceil(its elements / 8) bytes from DropoutMask with p) masks its
  // flat element i. scratch: data of the dropped operand's dtype and element count, the
  // backend's to write.
  void GemmDropped(bool drop_b, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                   const View& a, int64_t lda, const View& b, int64_t ldb, float beta,
                   const View& c, int64_t ldc, const View& bits, float p,
                   const View& scratch) const;
  // The product added into c through a kept mask (LoRA's input gradient, dx += dropout'(du A),
  // without writing du A out): c (M, N) += ApplyDropoutMask(op(A) op(B), bits, p) — the bits of
  // Gemm into scratch (F32, M x N, beta 0) followed by ApplyDropoutMask(scratch, bits, p, 1, c),
  // which a backend that does not fuse the two runs. c is contiguous (row stride N) and bit i of
  // bits (ceil(M N / 8) bytes from DropoutMask with p) masks its flat element i.
  void GemmAddDropped(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const View& a,
                      int64_t lda, const View& b, int64_t ldb, const View& c, const View& bits,
                      float p, const View& scratch) const;
  // Two products summed before C is written (LoRA's forward, y = x W^T + u B^T, in one pass
  // over y): c (M, N) = A (M, K) op(B) + A2 (M, K2) op(B2), op(X) = X^T when trans_b (B stored
  // (N, K), B2 (N, K2)); A and A2 as stored (M, K), (M, K2) with row strides lda, lda2; c
  // contiguous (row stride N). Each product takes its operands as Gemm does (a BF16 partner
  // rounds an F32 operand to bf16), the sums are fp32 and a BF16 c is rounded once. Its
  // definition, which a backend that does not fuse the two runs: Gemm into c then Gemm adding
  // into it for an F32 c; for a BF16 c the same into scratch (F32, at least N elements: as many
  // rows at a time as it holds), converted.
  void GemmConcatK(bool trans_b, int64_t m, int64_t n, int64_t k, const View& a, int64_t lda,
                   const View& b, int64_t ldb, int64_t k2, const View& a2, int64_t lda2,
                   const View& b2, int64_t ldb2, const View& c, const View& scratch) const;
  // The backward of a linear layer whose input passes through a kept dropout mask, y = drop(x)
  // W^T (LoRA's A: u = drop(x) A^T), both gradients from one pass over x, the mask and dx:
  //   w_grad (R, IN) = dy (N, R)^T drop(x) (N, IN) + beta * w_grad
  //   dx (N, IN) += ApplyDropoutMask(dy W (R, IN), bits, p)   (skipped when dx is empty)
  // x, w: data; dy: F32 or data; w_grad: master; dx: F32 or data; bits: ceil(N IN / 8) bytes
  // from DropoutMask with p (bit i masks x's and dx's flat element i). Its definition, which a
  // backend that does not fuse it runs and whose bits a fused backend keeps: GemmDropped(drop_b,
  // trans_a: dy^T drop(x), beta, x_scratch) then GemmAddDropped(dy W, f32_scratch); x_scratch:
  // data of x's dtype, N IN elements; f32_scratch: F32, N IN elements (unused when dx is empty).
  void DroppedLinearBackward(int64_t n, int64_t r, int64_t in, const View& x, const View& bits,
                             float p, const View& w, const View& dy, float beta, const View& w_grad,
                             const View& dx, const View& x_scratch, const View& f32_scratch) const;

  // ---- cross-entropy ---------------------------------------------------------------------
  // logits (N, V): data; targets (N): index, kIgnoreIndex (-100) for rows without loss.
  // *loss_sum (scalar) += the SUM over rows with a target of -log softmax(logits)[target],
  // accumulated in double; lse (N, stat) receives each row's log-sum-exp (rows without a target
  // too). Targets are validated by the caller (-100 or 0 <= t < V).
  void CrossEntropyForward(const View& logits, const View& targets, const View& lse,
                           const View& loss_sum) const;
  // dlogits (N, V) = scale * (softmax(logits) - onehot(target)) for rows with a target, 0 for
  // the others. WRITES (does not accumulate) so dlogits may alias logits.
  void CrossEntropyBackward(const View& logits, const View& targets, const View& lse, float scale,
                            const View& dlogits) const;

  // ---- optimizer (master) ----------------------------------------------------------------
  // One AdamW update of p, g, m, v (n each, master: F32 or BF16 each), torch.optim.AdamW's
  // per-element formula in fp32 (op_semantics.h's AdamWElement) on the widened values:
  //   p *= decay_factor (when decay); m += (1 - beta1) * (g - m);
  //   v = v * beta2 + (1 - beta2) * g * g; p -= step_size * (m / (sqrt(v) / bc2_sqrt + eps)),
  // each BF16 state rounded once after the update (torch's fused AdamW on bf16 parameters).
  // Every implementation gives the same bits (no fused multiply-add, IEEE sqrt and division).
  // p_copy, when not empty (numel as p, F32 or BF16), receives the updated p as Convert writes
  // it, in the same pass: the compute copy of the master (a bf16 run's resident parameters).
  void AdamWUpdate(const AdamWScalars& s, const View& p, const View& g, const View& m,
                   const View& v, const View& p_copy = View()) const;
  // *sum (scalar) += the sum of x[i]^2 (x: master), accumulated in double (the order may
  // differ by implementation; fixed for a backend and thread count).
  void SumOfSquares(const View& x, const View& sum) const;
  // x (master) *= factor (one fp32 product, rounded once for BF16).
  void Scale(const View& x, float factor) const;

 protected:
  AIR_OPS_KERNELS(virtual, = 0)

  // GemmDropped as it is defined: ApplyDropoutMask of the dropped operand into scratch, then
  // Gemm with scratch in its place (the kernel of the backends that do not fuse the two).
  void GemmDroppedThroughScratch(bool drop_b, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                 int64_t k, const View& a, int64_t lda, const View& b, int64_t ldb,
                                 float beta, const View& c, int64_t ldc, const View& bits, float p,
                                 const View& scratch) const;
  // GemmConcatK as it is defined (see there).
  void GemmConcatKInTwo(bool trans_b, int64_t m, int64_t n, int64_t k, const View& a, int64_t lda,
                        const View& b, int64_t ldb, int64_t k2, const View& a2, int64_t lda2,
                        const View& b2, int64_t ldb2, const View& c, const View& scratch) const;
  // The kernel of PackGemmB / GemmPackedB on a backend whose GemmPackedBBytes is 0 (their checks
  // refuse every call before it): aborts naming the op.
  [[noreturn]] void RefusePackedB(OpKind op) const;
  // DroppedLinearBackward as it is defined: GemmDropped, then GemmAddDropped (see there).
  void DroppedLinearBackwardInTwo(int64_t n, int64_t r, int64_t in, const View& x, const View& bits,
                                  float p, const View& w, const View& dy, float beta,
                                  const View& w_grad, const View& dx, const View& x_scratch,
                                  const View& f32_scratch) const;
  // GemmAddDropped as it is defined: Gemm into scratch, then ApplyDropoutMask accumulating it.
  void GemmAddDroppedThroughScratch(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                    const View& a, int64_t lda, const View& b, int64_t ldb,
                                    const View& c, const View& bits, float p,
                                    const View& scratch) const;
};

// OK when `ops` supports every op in `ops_needed` with data of `dtype`; else Unimplemented
// naming the backend, the first missing op, the dtype and `purpose` ("bf16 training of
// LlamaForCausalLM", ...).
Status CheckOpsSupport(const Ops& ops, std::span<const OpKind> ops_needed, DType dtype,
                       const std::string& purpose);

}  // namespace air::engine
