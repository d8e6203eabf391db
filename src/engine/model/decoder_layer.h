// One decoder layer of the Llama family, forward and backward by hand (used by LlamaModel):
//
//   xn1 = RMSNorm(x) * w_in                                    x (N, C), N = B*T tokens
//   q = xn1 Wq^T (+bq) (N, Hq*D);  k, v = xn1 Wk^T, xn1 Wv^T (+b) (N, Hkv*D)
//   [Qwen3] q, k = RMSNorm over D per head * q_norm / k_norm
//   q, k = RoPE(q, k)  (rotate-half, per-token angles)
//   att = Attention(q, k, v) (N, Hq*D)   causal, GQA, segments, sliding window
//   h = x + att Wo^T (+bo)
//   xn2 = RMSNorm(h) * w_post;  act = silu(xn2 Wg^T) * (xn2 Wu^T) (N, I)
//   out = h + act Wd^T
//
// LayerWeights points into the model's Parameter list; LayerActivations holds what the
// backward needs (all of it, or just `x` under activation checkpointing, then recomputed).
// Thread safety: functions over caller-owned buffers; one thread per layer call.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/parameter.h"
#include "engine/ops/ops.h"
#include "engine/tensor.h"

namespace air::engine {

struct LayerWeights {
  Parameter* input_norm = nullptr;  // (C)
  Parameter* q_proj = nullptr;      // (Hq*D, C)
  Parameter* k_proj = nullptr;      // (Hkv*D, C)
  Parameter* v_proj = nullptr;      // (Hkv*D, C)
  Parameter* o_proj = nullptr;      // (C, Hq*D)
  Parameter* q_bias = nullptr;      // (Hq*D) or null
  Parameter* k_bias = nullptr;
  Parameter* v_bias = nullptr;
  Parameter* o_bias = nullptr;  // (C) or null
  Parameter* q_norm = nullptr;  // (D) Qwen3, else null
  Parameter* k_norm = nullptr;
  Parameter* post_norm = nullptr;  // (C)
  Parameter* gate_proj = nullptr;  // (I, C)
  Parameter* up_proj = nullptr;    // (I, C)
  Parameter* down_proj = nullptr;  // (C, I)
  Parameter* gate_bias = nullptr;  // (I) or null (mlp_bias)
  Parameter* up_bias = nullptr;
  Parameter* down_bias = nullptr;  // (C) or null
};

// Per-batch inputs shared by all layers.
struct LayerContext {
  const ModelConfig* config = nullptr;
  const Ops* ops = nullptr;
  int64_t batch = 0;                // B
  int64_t seq = 0;                  // T
  const float* rope_cos = nullptr;  // (N, D/2)
  const float* rope_sin = nullptr;
  const int32_t* segments = nullptr;  // (B, T) or null
  int layer = 0;
  int64_t rows() const { return batch * seq; }
};

struct LayerActivations {
  Tensor x;                             // (N, C) layer input
  Tensor xn1, rstd1;                    // (N, C), (N)
  Tensor q_raw, k_raw, rstd_q, rstd_k;  // Qwen3: projections before q/k norm, (N*H) rstd
  Tensor q, k, v;                       // (N, Hq*D), (N, Hkv*D) x2, after norm and RoPE
  Tensor att, lse;                      // (N, Hq*D), (B, Hq, T)
  Tensor h;                             // (N, C) after the attention residual
  Tensor xn2, rstd2;                    // (N, C), (N)
  Tensor gate, up, act;                 // (N, I) each
};

// Scratch gradients reused across layers during the backward.
struct LayerGradScratch {
  Tensor dh, dxn, dq, dk, dv, datt, dgate, dup, dact, dq_raw, dk_raw;
};

// Runs the layer on acts.x (already set) and writes `out` (N, C); fills every other field of
// `acts`.
void LayerForward(const LayerContext& ctx, const LayerWeights& w, LayerActivations& acts,
                  Tensor& out);

// Given the activations of this layer's forward and dout (N, C), accumulates parameter grads
// and WRITES dx (N, C), the gradient w.r.t. acts.x (dx may alias dout).
void LayerBackward(const LayerContext& ctx, const LayerWeights& w, const LayerActivations& acts,
                   const Tensor& dout, LayerGradScratch& scratch, Tensor& dx);

// y (N, out) = x (N, in) W^T (+ b); W (out, in) as in HF.
void LinearForward(const Ops& ops, const float* x, int64_t rows, const Parameter& w,
                   const Parameter* bias, float* y);
// dx (N, in) += or = dy W (accumulate selects beta); dW += dy^T x; db += colsum(dy).
void LinearBackward(const Ops& ops, const float* x, int64_t rows, Parameter& w, Parameter* bias,
                    const float* dy, float* dx, bool accumulate_dx);

// The q/k/v projections with bias, Qwen3 norms and RoPE: writes acts.q/k/v (and q_raw/k_raw,
// rstd_q/k when qk_norm) from `xn` (N, C). Shared by training and KV-cache decoding.
void ProjectQkv(const LayerContext& ctx, const LayerWeights& w, const float* xn,
                LayerActivations& acts);

// The MLP block and residual: from h (N, C) computes xn2, gate, up, act and out = h + down.
void MlpForward(const LayerContext& ctx, const LayerWeights& w, LayerActivations& acts,
                Tensor& out);

}  // namespace air::engine
