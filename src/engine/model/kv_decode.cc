// LlamaModel::ForwardStep: incremental decoding with a KV cache. New tokens go through the
// same per-layer pieces as training (ProjectQkv, attention, MlpForward); their keys and values
// are appended to the cache and attention reads the whole cache (q_offset = tokens already
// cached), so logits match a full forward over the concatenated sequence.
#include <cmath>
#include <string>

#include "engine/model/llama_model.h"
#include "engine/model/llama_model_impl.h"

namespace air::engine {

Result<Tensor> LlamaModel::ForwardStep(std::span<const int32_t> tokens, KvCache& cache,
                                       bool all_positions) {
  const ModelConfig& c = config();
  const Backend& ops = backend();
  const DType dtype = options().compute_dtype;
  Impl& m = *impl_;
  AIR_ASSIGN_OR_RETURN(const int64_t step, CheckDecodeStep(cache, c, tokens));
  const int64_t batch = cache.batch;
  const int64_t n = batch * step, dim = c.hidden_size, kv_dim = c.kv_dim();
  const int64_t rows = all_positions ? n : batch;  // rows that get logits

  // Device memory for this step (its own workspace: a training step's activations survive).
  View ids, positions, cos, sin, x, out, selected, normed, rstd, logits;
  LayerActivations acts;
  AIR_RETURN_IF_ERROR(m.decode_workspace.Arrange([&](Workspace& ws) {
    ids = ws.Take(DType::kI32, {n});
    positions = ws.Take(DType::kI32, {n});
    cos = ws.F32({n, c.head_dim / 2});
    sin = ws.F32({n, c.head_dim / 2});
    x = ws.F32({n, dim});  // the residual stream, fp32 as in training
    out = ws.F32({n, dim});
    LayoutLayerActivations(ws, c, dtype, batch, step, false, acts);
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
  ops.RopeTables(positions, m.inv_freq, 1.0f, cos, sin);

  LayerContext ctx;
  ctx.config = &c;
  ctx.backend = &ops;
  ctx.batch = batch;
  ctx.seq = step;
  ctx.rope_cos = cos;
  ctx.rope_sin = sin;

  ops.EmbeddingForward(ids, m.embed->value, x);
  for (int l = 0; l < c.num_layers; ++l) {
    ctx.layer = l;
    const LayerWeights& w = m.layers[l];
    acts.x = x;
    ops.RmsNormForward(x, w.input_norm->value, static_cast<float>(c.rms_norm_eps), acts.xn1,
                       acts.rstd1);
    ProjectQkv(ctx, w, acts.xn1, acts);
    // Append k, v (B*step, Hkv*D) to the cache rows [length, length + step) of each batch row.
    const View keys = cache.keys[l].Reshaped({batch * cache.capacity, kv_dim});
    const View values = cache.values[l].Reshaped({batch * cache.capacity, kv_dim});
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t dst = b * cache.capacity + cache.length;
      ops.Convert(acts.k.Rows(b * step, step), keys.Rows(dst, step));
      ops.Convert(acts.v.Rows(b * step, step), values.Rows(dst, step));
    }
    AttentionShape s;
    s.batch = batch;
    s.q_len = step;
    s.kv_len = cache.length + step;
    s.kv_capacity = cache.capacity;
    s.q_heads = c.num_heads;
    s.kv_heads = c.num_kv_heads;
    s.head_dim = c.head_dim;
    s.q_offset = cache.length;
    s.sliding_window = c.sliding_window(l);
    s.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    ops.AttentionForward(s, acts.q, keys, values, View(), View(), View(), acts.att, View());
    // h = x + att Wo^T; then the MLP block.
    LinearForward(ops, ctx.pass, acts.att, w.o, acts.h);
    ops.AddInPlace(acts.h, x);
    MlpForward(ctx, w, acts, out);
    std::swap(x, out);
  }
  cache.length += step;

  // Final norm and head, on every new token or only the last of each row.
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t src = all_positions ? r : r * step + step - 1;
    ops.Copy(selected.Rows(r, 1), x.Rows(src, 1));
  }
  ops.RmsNormForward(selected, m.final_norm->value, static_cast<float>(c.rms_norm_eps), normed,
                     rstd);
  ops.Gemm(false, true, rows, c.vocab_size, dim, normed, dim, m.lm_head->value, dim, 0.0f, logits,
           c.vocab_size);
  Tensor host_logits = ops.ToHostTensor(logits);
  if (all_positions) host_logits.Reshape({batch, step, c.vocab_size});
  return host_logits;
}

}  // namespace air::engine
