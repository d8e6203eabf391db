// Ops: the compute half of a Backend (engine/backend/backend.h: a backend owns memory and
// computes over it, ggml's idea).
//
// Every op works on fp32, row-major, contiguous arrays passed as device addresses of the
// backend's memory (View::f32(), View::i32(), which check the view's dtype) plus sizes; the
// shapes are spelled out in the comments (`x (N, C)`). Scalar results (a loss sum, a squared
// norm) are written to device scalars, never returned, so a GPU backend needs no sync per op.
// An implementation is a folder under ops/: ops/cpu/reference_ops (clear loops, the ground
// truth) and ops/cpu/fast_ops (blocked, vectorized, multithreaded; overrides what it speeds up
// and inherits the rest). A CUDA backend will be a third. Every registered backend is tested
// against the reference op by op with its own tolerances (backend/registry.h,
// tests/unit/engine_core/ops_harness_test.cc) and every backward against finite differences.
//
// Conventions:
//   - Forward ops write (overwrite) their outputs.
//   - Backward ops ACCUMULATE (+=) into gradients of inputs and parameters, so a tensor that
//     feeds two consumers (the residual stream, a tied embedding) simply receives both; the
//     caller zeroes gradient buffers when a new accumulation starts. Exceptions say so.
//   - Sizes are int64_t; token ids, positions and segment ids are int32_t.
//
// Thread safety: calls on one Ops object must not overlap (the fast path keeps per-worker
// scratch space and its own thread pool, which one call uses fully); give each thread that
// drives a model its own Ops. The reference implementation is stateless.
#pragma once

#include <cstdint>
#include <string>

namespace air::engine {

// Shape and masking of one attention call. Queries are the tokens being computed; keys and
// values are the sequence they look at (the same tokens when training, the KV cache plus the
// new tokens when generating). Query i of a row sits at absolute index q_offset + i of the
// key sequence. Key j is visible to query i when
//   j <= q_offset + i                                     (causal)
//   and (sliding_window == 0 or (q_offset + i) - j < sliding_window)   (HF: kv > q - window)
//   and (no segments given or q_segments[i] == kv_segments[j])        (packing)
struct AttentionShape {
  int64_t batch = 0;           // B
  int64_t q_len = 0;           // Tq
  int64_t kv_len = 0;          // Tk: keys actually present (<= kv_capacity)
  int64_t kv_capacity = 0;     // rows per batch entry in the k/v buffers; 0 means kv_len
  int64_t q_heads = 0;         // Hq
  int64_t kv_heads = 0;        // Hkv; Hq % Hkv == 0, query head h reads kv head h / (Hq / Hkv)
  int64_t head_dim = 0;        // D
  int64_t q_offset = 0;        // absolute index of query 0 in the key sequence
  int64_t sliding_window = 0;  // 0: no window
  float scale = 1.0f;          // usually 1/sqrt(D)

  int64_t kv_rows() const { return kv_capacity > 0 ? kv_capacity : kv_len; }
};

// The per-step scalars of one AdamW update (train/adamw.h computes them in double, as torch
// does, and passes them in fp32).
struct AdamWScalars {
  float step_size = 0.0f;              // lr / (1 - beta1^t)
  float bias_correction2_sqrt = 1.0f;  // sqrt(1 - beta2^t)
  float one_minus_beta1 = 0.1f;
  float beta2 = 0.999f;
  float one_minus_beta2 = 0.001f;
  float eps = 1e-8f;
  bool decay = false;         // apply decoupled weight decay to this tensor
  float decay_factor = 1.0f;  // 1 - lr * weight_decay
};

class Ops {
 public:
  virtual ~Ops() = default;

  // "reference" or "fast": which implementation this is (for logs and tests).
  virtual std::string name() const = 0;

  // ---- matrix multiply -------------------------------------------------------------------
  // C (M, N) = op(A) @ op(B) + beta * C, where op(A) is (M, K) and op(B) is (K, N).
  //   trans_a == false: A is stored (M, K) with row stride lda; true: A is stored (K, M).
  //   trans_b == false: B is stored (K, N) with row stride ldb; true: B is stored (N, K).
  // beta == 0 overwrites C (whatever it held, even NaN); beta == 1 accumulates.
  // A linear layer y = x W^T is Gemm(false, true, ...) with W stored (out, in) as in HF.
  virtual void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                    int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc) const = 0;

  // ---- embedding -------------------------------------------------------------------------
  // out (N, C) = table[ids[n]] with table (V, C). ids are validated by the caller (0 <= id < V).
  virtual void EmbeddingForward(const int32_t* ids, int64_t n, const float* table, int64_t dim,
                                float* out) const = 0;
  // dtable[ids[n]] += dout[n] for every n whose id != skip_id (nn.Embedding's padding_idx; pass
  // -1 to skip nothing).
  virtual void EmbeddingBackward(const int32_t* ids, int64_t n, const float* dout, int64_t dim,
                                 int32_t skip_id, float* dtable) const = 0;

  // ---- RMSNorm ---------------------------------------------------------------------------
  // y (N, C) = x * rstd * w with rstd (N) = 1 / sqrt(mean(x^2) + eps), w (C). y may alias x.
  virtual void RmsNormForward(const float* x, const float* w, int64_t rows, int64_t dim, float eps,
                              float* y, float* rstd) const = 0;
  // Given x, w, rstd from the forward and dy: dx += dL/dx, dw += dL/dw (dw may be null).
  virtual void RmsNormBackward(const float* x, const float* w, const float* rstd, const float* dy,
                               int64_t rows, int64_t dim, float* dx, float* dw) const = 0;

  // ---- rotary position embedding (rotate-half, as HF) ------------------------------------
  // x (N, H, D) in place: for each token n and head, pairs (i, i + D/2) for i < D/2 rotate by
  // the angle whose cos/sin are cos[n, i], sin[n, i] (tables (N, D/2), built per token from its
  // position: see model/rope.h). x1' = x1 cos - x2 sin; x2' = x2 cos + x1 sin.
  virtual void RopeForward(float* x, int64_t n, int64_t heads, int64_t head_dim, const float* cos,
                           const float* sin) const = 0;
  // The transpose of the rotation (angle negated), in place on dx (N, H, D). Not accumulating:
  // it maps the gradient w.r.t. the rotated x to the gradient w.r.t. the unrotated x.
  virtual void RopeBackward(float* dx, int64_t n, int64_t heads, int64_t head_dim, const float* cos,
                            const float* sin) const = 0;

  // ---- causal self-attention with GQA, segments and sliding window -----------------------
  // q (B, Tq, Hq, D), k and v (B, kv_rows, Hkv, D) (rows >= Tk used), q_segments (B, Tq) and
  // kv_segments (B, kv_rows) or both null; out (B, Tq, Hq, D); lse (B, Hq, Tq) receives the
  // log-sum-exp of each query's scaled, masked scores (needed by the backward; may be null).
  // A query that sees no key (impossible with a causal mask unless segments disagree with
  // themselves) gets a zero output.
  virtual void AttentionForward(const AttentionShape& s, const float* q, const float* k,
                                const float* v, const int32_t* q_segments,
                                const int32_t* kv_segments, float* out, float* lse) const = 0;
  // Given the forward's inputs, out, lse and dout (B, Tq, Hq, D): dq += ..., dk += ..., dv += ...
  virtual void AttentionBackward(const AttentionShape& s, const float* q, const float* k,
                                 const float* v, const int32_t* q_segments,
                                 const int32_t* kv_segments, const float* out, const float* lse,
                                 const float* dout, float* dq, float* dk, float* dv) const = 0;

  // ---- SwiGLU ----------------------------------------------------------------------------
  // out (N) = silu(gate) * up, silu(g) = g / (1 + exp(-g)), elementwise over n values.
  virtual void SwigluForward(const float* gate, const float* up, int64_t n, float* out) const = 0;
  // dgate += dout * up * silu'(gate); dup += dout * silu(gate).
  virtual void SwigluBackward(const float* gate, const float* up, const float* dout, int64_t n,
                              float* dgate, float* dup) const = 0;

  // ---- elementwise and bias --------------------------------------------------------------
  // y (n) += x (n).
  virtual void AddInPlace(float* y, const float* x, int64_t n) const = 0;
  // y (N, C) += bias (C) on every row.
  virtual void AddBias(float* y, const float* bias, int64_t rows, int64_t cols) const = 0;
  // dbias (C) += sum over rows of dy (N, C).
  virtual void BiasBackward(const float* dy, int64_t rows, int64_t cols, float* dbias) const = 0;

  // ---- cross-entropy ---------------------------------------------------------------------
  // logits (N, V), targets (N) with kIgnoreIndex (-100) for rows without loss. WRITES *loss_sum
  // (a device scalar, e.g. an F64 view of the backend's memory: read it back with one copy when
  // needed, so a GPU does not sync per call) = the SUM over rows with a target of
  // -log softmax(logits)[target], accumulated in double; lse (N) receives each row's
  // log-sum-exp (rows without a target too). Targets are validated by the caller (-100 or
  // 0 <= t < V).
  virtual void CrossEntropyForward(const float* logits, const int32_t* targets, int64_t n,
                                   int64_t vocab, float* lse, double* loss_sum) const = 0;
  // dlogits (N, V) = scale * (softmax(logits) - onehot(target)) for rows with a target, 0 for
  // the others. WRITES (does not accumulate) so dlogits may alias logits (saves N*V floats).
  virtual void CrossEntropyBackward(const float* logits, const int32_t* targets, const float* lse,
                                    int64_t n, int64_t vocab, float scale,
                                    float* dlogits) const = 0;

  // ---- optimizer -------------------------------------------------------------------------
  // One AdamW update of n values, torch.optim.AdamW's per-element formula in fp32, in order:
  //   p *= decay_factor (when decay); m += (1 - beta1) * (g - m);
  //   v = v * beta2 + (1 - beta2) * g * g; p -= step_size * (m / (sqrt(v) / bc2_sqrt + eps)).
  // Every implementation gives the same bits (no fused multiply-add, IEEE sqrt and division).
  virtual void AdamWUpdate(const AdamWScalars& s, int64_t n, float* p, const float* g, float* m,
                           float* v) const = 0;
  // *sum (a device scalar) += the sum of x[i]^2 over n values, accumulated in double (the order
  // may differ by implementation; fixed for a backend and thread count). Accumulating lets a
  // global norm over many tensors stay on the device until one read.
  virtual void SumOfSquares(const float* x, int64_t n, double* sum) const = 0;
  // x (n) *= factor.
  virtual void Scale(float* x, int64_t n, float factor) const = 0;
};

}  // namespace air::engine
