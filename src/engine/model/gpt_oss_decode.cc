// GptOssModel::ForwardStep: incremental decoding with a KV cache (the decoder stack's
// ForwardStep, decoder_stack.h, as LlamaModel's): the new tokens go through the training pieces
// (ProjectQkv with YaRN tables, attention with sinks over the whole cache and the layer's
// window, the MoE block); their keys and values are appended to the cache, so logits equal a
// full forward over the sequence.
#include "engine/model/gpt_oss_config.h"
#include "engine/model/gpt_oss_model_impl.h"

namespace air::engine {

void GptOssLayerKind::DecodeLayer(const LayerContext& ctx, const GptOssLayerWeights& w,
                                  GptOssLayerActivations& acts, const KvCache& cache, const View& x,
                                  const View& out) const {
  const ModelConfig& c = *ctx.config;
  const Backend& ops = *ctx.backend;
  const float eps = static_cast<float>(c.rms_norm_eps);
  LayerActivations& a = acts.attn;
  ops.RmsNormForward(x, w.attn.input_norm->value, eps, a.xn1, a.rstd1);
  ProjectQkv(ctx, w.attn, a.xn1, a);
  const auto [keys, values] = AppendToKvCache(ops, cache, ctx.layer, ctx.seq, a.k, a.v);
  AttentionShape s = GptOssAttentionShape(ctx);
  s.kv_len = cache.length + ctx.seq;
  s.kv_capacity = cache.capacity;
  s.q_offset = cache.length;
  ops.AttentionForward(s, a.q, keys, values, w.sinks->value, View(), View(), a.att, View());
  LinearForward(ops, ctx.pass, a.att, w.attn.o, a.h);
  ops.AddInPlace(a.h, x);
  ops.RmsNormForward(a.h, w.attn.post_norm->value, eps, a.xn2, a.rstd2);
  MoeForward(ops, ctx.pass, w.moe, a.xn2, acts.moe, out);
  ops.AddInPlace(out, a.h);
}

Result<Tensor> GptOssModel::ForwardStep(std::span<const int32_t> tokens, KvCache& cache,
                                        bool all_positions) {
  return impl_->ForwardStep(*this, impl_->LayerKind(), tokens, cache, all_positions);
}

}  // namespace air::engine
