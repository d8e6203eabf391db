// One GPT-OSS decoder layer (transformers' GptOssDecoderLayer), forward and backward by hand
// (used by GptOssModel):
//
//   xn1 = RMSNorm(x) * w_in                                  x (N, C), N = B*T tokens
//   q, k, v = xn1 W^T + b;  q, k = RoPE(q, k)  (YaRN tables: cos/sin scaled by the attention
//             factor)
//   att = Attention(q, k, v) with one learned sink logit per head; causal, GQA, segments, and
//         the layer's sliding window when layer_types says sliding_attention
//   h = x + att Wo^T + bo
//   xn2 = RMSNorm(h) * w_post;  out = h + MoE(xn2)           (model/moe.h)
//
// The attention half reuses the Llama family's pieces (decoder_layer.h: the Linear descriptors,
// ProjectQkv, LayerActivations' attention views); the MLP is the mixture of experts. Views come
// from the model's workspace; the residual stream (x, h) is F32, other activations in the
// compute dtype, gradient scratch F32. A frozen parameter gets no weight gradient.
// Thread safety: functions over caller-owned views; one thread per layer call.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/decoder_layer.h"
#include "engine/model/moe.h"

namespace air::engine {

struct GptOssLayerWeights {
  // input_norm, q, k, v, o (with biases), post_norm; Llama's q/k norms and MLP stay null.
  LayerWeights attn;
  Parameter* sinks = nullptr;  // (Hq)
  MoeWeights moe;
};

struct GptOssLayerActivations {
  // x, xn1, rstd1, q, k, v, att, lse, h, xn2, rstd2 (Llama's gate/up/act stay empty).
  LayerActivations attn;
  MoeActivations moe;
};

struct GptOssGradScratch {
  LayerGradScratch attn;  // dxn, dq, dk, dv, datt
  MoeGradScratch moe;
};

// Takes one layer's activations for `batch` x `seq` tokens (`x` too unless with_input is
// false: then the caller sets it).
void LayoutGptOssLayerActivations(Workspace& ws, const ModelConfig& c, DType dtype, int64_t batch,
                                  int64_t seq, bool with_input, GptOssLayerActivations& acts);
void LayoutGptOssGradScratch(Workspace& ws, const ModelConfig& c, int64_t rows,
                             GptOssGradScratch& g);

// The attention shape of layer ctx.layer for a training pass (keys = queries).
AttentionShape GptOssAttentionShape(const LayerContext& ctx);

// Runs the layer on acts.attn.x (already set) and writes `out` (N, C, F32), which must not
// alias any activation; fills every other field of `acts`.
void GptOssLayerForward(const LayerContext& ctx, const GptOssLayerWeights& w,
                        const GptOssLayerActivations& acts, const View& out);

// Given this layer's forward activations, turns `dres` (N, C, F32) from dL/d(out) into
// dL/d(x) in place and accumulates the trainable parameters' gradients.
void GptOssLayerBackward(const LayerContext& ctx, const GptOssLayerWeights& w,
                         const GptOssLayerActivations& acts, const View& dres,
                         const GptOssGradScratch& g);

}  // namespace air::engine
