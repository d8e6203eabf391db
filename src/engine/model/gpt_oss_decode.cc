// GptOssModel::ForwardStep: incremental decoding with a KV cache, as LlamaModel's
// (kv_decode.cc): the new tokens go through the training pieces (ProjectQkv with YaRN tables,
// attention with sinks over the whole cache and the layer's window, the MoE block); their keys
// and values are appended to the cache, so logits equal a full forward over the sequence.
#include <utility>

#include "engine/model/gpt_oss_config.h"
#include "engine/model/gpt_oss_model_impl.h"

namespace air::engine {

Result<Tensor> GptOssModel::ForwardStep(std::span<const int32_t> tokens, KvCache& cache,
                                        bool all_positions) {
  const ModelConfig& c = config();
  const Backend& ops = backend();
  const DType dtype = options().compute_dtype;
  Impl& m = *impl_;
  AIR_ASSIGN_OR_RETURN(const int64_t step, CheckDecodeStep(cache, c, tokens));
  const int64_t batch = cache.batch;
  const int64_t n = batch * step, dim = c.hidden_size, kv_dim = c.kv_dim();
  const int64_t rows = all_positions ? n : batch;  // rows that get logits

  View ids, positions, cos, sin, x, out, selected, normed, rstd, logits;
  GptOssLayerActivations acts;
  AIR_RETURN_IF_ERROR(m.decode_workspace.Arrange([&](Workspace& ws) {
    ids = ws.Take(DType::kI32, {n});
    positions = ws.Take(DType::kI32, {n});
    cos = ws.F32({n, c.head_dim / 2});
    sin = ws.F32({n, c.head_dim / 2});
    x = ws.F32({n, dim});
    out = ws.F32({n, dim});
    LayoutGptOssLayerActivations(ws, c, dtype, batch, step, false, &m.scratch_offsets, acts);
    selected = ws.F32({rows, dim});
    normed = ws.Take(dtype, {rows, dim});
    rstd = ws.F32({rows});
    logits = ws.F32({rows, c.vocab_size});
  }));
  m.host_positions.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    m.host_positions[i] = static_cast<int32_t>(cache.length + i % step);
  }
  ops.CopyToDevice(ids, tokens.data());
  ops.CopyToDevice(positions, m.host_positions.data());
  ops.RopeTables(positions, m.inv_freq, m.attention_factor, cos, sin);

  LayerContext ctx;
  ctx.config = &c;
  ctx.backend = &ops;
  ctx.batch = batch;
  ctx.seq = step;
  ctx.rope_cos = cos;
  ctx.rope_sin = sin;
  const float eps = static_cast<float>(c.rms_norm_eps);

  ops.EmbeddingForward(ids, m.embed->value, x);
  for (int l = 0; l < c.num_layers; ++l) {
    ctx.layer = l;
    const GptOssLayerWeights& w = m.layers[l];
    LayerActivations& a = acts.attn;
    a.x = x;
    ops.RmsNormForward(x, w.attn.input_norm->value, eps, a.xn1, a.rstd1);
    ProjectQkv(ctx, w.attn, a.xn1, a);
    const View keys = cache.keys[l].Reshaped({batch * cache.capacity, kv_dim});
    const View values = cache.values[l].Reshaped({batch * cache.capacity, kv_dim});
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t dst = b * cache.capacity + cache.length;
      ops.Convert(a.k.Rows(b * step, step), keys.Rows(dst, step));
      ops.Convert(a.v.Rows(b * step, step), values.Rows(dst, step));
    }
    AttentionShape s = GptOssAttentionShape(ctx);
    s.kv_len = cache.length + step;
    s.kv_capacity = cache.capacity;
    s.q_offset = cache.length;
    ops.AttentionForward(s, a.q, keys, values, w.sinks->value, View(), View(), a.att, View());
    LinearForward(ops, ctx.pass, a.att, w.attn.o, a.h);
    ops.AddInPlace(a.h, x);
    ops.RmsNormForward(a.h, w.attn.post_norm->value, eps, a.xn2, a.rstd2);
    MoeForward(ops, ctx.pass, w.moe, a.xn2, acts.moe, out);
    ops.AddInPlace(out, a.h);
    std::swap(x, out);
  }
  cache.length += step;

  for (int64_t r = 0; r < rows; ++r) {
    const int64_t src = all_positions ? r : r * step + step - 1;
    ops.Copy(selected.Rows(r, 1), x.Rows(src, 1));
  }
  ops.RmsNormForward(selected, m.final_norm->value, eps, normed, rstd);
  ops.Gemm(false, true, rows, c.vocab_size, dim, normed, dim, m.lm_head->value, dim, 0.0f, logits,
           c.vocab_size);
  Tensor host_logits = ops.ToHostTensor(logits);
  if (all_positions) host_logits.Reshape({batch, step, c.vocab_size});
  return host_logits;
}

}  // namespace air::engine
