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
// LayerWeights points into the model's Parameter list (views into the layer's unit buffer, in
// whatever float dtype the unit is bound in); LayerActivations and LayerGradScratch are views
// into the model's workspace, laid out once per batch shape: activations in the model's compute
// dtype (F32, or BF16 under mixed precision) except the residual stream (x, h: F32 always, the
// sum of every layer's output), per-row statistics in F32, gradient scratch in F32 (the residual
// gradient and the sums of several products stay fp32). A layer call allocates,
// copies and zeroes nothing on the host: every step goes through the backend. A frozen weight
// (Parameter::trainable false) gets no weight-gradient GEMM.
// Thread safety: functions over caller-owned views; one thread per layer call.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/linear.h"
#include "engine/model/model_config.h"
#include "engine/model/parameter.h"
#include "engine/workspace.h"

namespace air::engine {

struct LayerWeights {
  Parameter* input_norm = nullptr;  // (C)
  Linear q, k, v, o;                // (Hq*D, C), (Hkv*D, C) x2, (C, Hq*D); model/linear.h
  Parameter* q_norm = nullptr;      // (D) Qwen3, else null
  Parameter* k_norm = nullptr;
  Parameter* post_norm = nullptr;  // (C)
  Linear gate, up, down;           // (I, C) x2, (C, I)
};

// Per-batch inputs shared by all layers.
struct LayerContext {
  const ModelConfig* config = nullptr;
  const Backend* backend = nullptr;
  int64_t batch = 0;  // B
  int64_t seq = 0;    // T
  View rope_cos;      // (N, D/2) F32
  View rope_sin;
  View segments;  // (B, T) I32, or empty
  int layer = 0;
  LinearPass pass;  // training (with its random stream) or evaluation, for adapters
  // Whether the backward must produce dL/d(layer input): false for layer 0 when the embeddings
  // are frozen (nothing reads it; PyTorch's autograd skips it the same way), which drops the
  // attention's input-gradient products and its input norm's backward there.
  bool input_grad = true;
  int64_t rows() const { return batch * seq; }
};

struct LayerActivations {
  View x;                             // (N, C) layer input (F32: the residual stream)
  View xn1, rstd1;                    // (N, C), (N)
  View q_raw, k_raw, rstd_q, rstd_k;  // Qwen3: projections before q/k norm, (N*H) rstd
  View q, k, v;                       // (N, Hq*D), (N, Hkv*D) x2, after norm and RoPE
  View att, lse;                      // (N, Hq*D), (B, Hq, T)
  View h;                             // (N, C) after the attention residual (F32)
  View xn2, rstd2;                    // (N, C), (N)
  View gate, up, act;                 // (N, I) each
};

// Scratch gradients reused across layers during the backward: F32, except in the compute dtype
// dgate and dup (they only feed the gate/up backward's products, which round them to bf16
// anyway: stored rounded once, read in place) and datt (the attention output's gradient, bf16
// as FSDP's bf16 modules and autocast give it: attention's backward products take it as bf16).
struct LayerGradScratch {
  View dxn, dq, dk, dv, datt, dgate, dup, dact, dq_raw, dk_raw;
};

// Takes the views of one layer's activations for `batch` x `seq` tokens from `ws` in `dtype`
// (`x` too unless with_input is false: then the caller sets it).
void LayoutLayerActivations(Workspace& ws, const ModelConfig& c, DType dtype, int64_t batch,
                            int64_t seq, bool with_input, LayerActivations& acts);
void LayoutLayerGradScratch(Workspace& ws, const ModelConfig& c, DType dtype, int64_t rows,
                            LayerGradScratch& g);

// The attention shape of layer ctx.layer for a training pass (keys = queries).
AttentionShape LayerAttentionShape(const LayerContext& ctx);

// Runs the layer on acts.x (already set) and writes `out` (N, C); fills every other field of
// `acts`. `out` must not alias any of them.
void LayerForward(const LayerContext& ctx, const LayerWeights& w, const LayerActivations& acts,
                  const View& out);

// Given the activations of this layer's forward, turns `dres` (N, C, F32) from dL/d(out) into
// dL/d(x) in place, and accumulates the trainable parameters' gradients.
void LayerBackward(const LayerContext& ctx, const LayerWeights& w, const LayerActivations& acts,
                   const View& dres, const LayerGradScratch& scratch);

// The q/k/v projections with bias, Qwen3 norms and RoPE: writes acts.q/k/v (and q_raw/k_raw,
// rstd_q/k when qk_norm) from `xn` (N, C). Shared by training and KV-cache decoding.
void ProjectQkv(const LayerContext& ctx, const LayerWeights& w, const View& xn,
                const LayerActivations& acts);

// The MLP block and residual: from h (N, C) computes xn2, gate, up, act and out = h + down.
void MlpForward(const LayerContext& ctx, const LayerWeights& w, const LayerActivations& acts,
                const View& out);

}  // namespace air::engine
