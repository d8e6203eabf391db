// LlamaModel::ForwardStep: incremental decoding with a KV cache (the decoder stack's
// ForwardStep, decoder_stack.h). New tokens go through the same per-layer pieces as training
// (ProjectQkv, attention, MlpForward); their keys and values are appended to the cache and
// attention reads the whole cache (q_offset = tokens already cached), so logits match a full
// forward over the concatenated sequence.
#include "engine/model/llama_model.h"
#include "engine/model/llama_model_impl.h"

namespace air::engine {

void LlamaLayerKind::DecodeLayer(const LayerContext& ctx, const LayerWeights& w,
                                 LayerActivations& a, const KvCache& cache, const View& x,
                                 const View& out) const {
  const ModelConfig& c = *ctx.config;
  const Backend& ops = *ctx.backend;
  ops.RmsNormForward(x, w.input_norm->value, static_cast<float>(c.rms_norm_eps), a.xn1, a.rstd1);
  ProjectQkv(ctx, w, a.xn1, a);
  const auto [keys, values] = AppendToKvCache(ops, cache, ctx.layer, ctx.seq, a.k, a.v);
  AttentionShape s = LayerAttentionShape(ctx);
  s.kv_len = cache.length + ctx.seq;
  s.kv_capacity = cache.capacity;
  s.q_offset = cache.length;
  ops.AttentionForward(s, a.q, keys, values, View(), View(), View(), a.att, View());
  // h = x + att Wo^T; then the MLP block.
  LinearForward(ops, ctx.pass, a.att, w.o, a.h);
  ops.AddInPlace(a.h, x);
  MlpForward(ctx, w, a, out);
}

Result<Tensor> LlamaModel::ForwardStep(std::span<const int32_t> tokens, KvCache& cache,
                                       bool all_positions) {
  return impl_->ForwardStep(*this, LlamaLayerKind{}, tokens, cache, all_positions);
}

}  // namespace air::engine
