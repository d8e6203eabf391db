// LlamaModel::ForwardStep: incremental decoding with a KV cache. New tokens go through the
// same per-layer pieces as training (ProjectQkv, attention, MlpForward); their keys and values
// are appended to the cache and attention reads the whole cache (q_offset = tokens already
// cached), so logits match a full forward over the concatenated sequence.
#include <cmath>
#include <cstring>
#include <string>

#include "engine/model/llama_model.h"
#include "engine/model/llama_model_impl.h"
#include "engine/model/rope.h"

namespace air::engine {

Result<Tensor> LlamaModel::ForwardStep(std::span<const int32_t> tokens, KvCache& cache,
                                       bool all_positions) {
  const ModelConfig& c = config_;
  const Ops& ops = *ops_;
  Impl& m = *impl_;
  if (cache.batch <= 0 || static_cast<int64_t>(cache.keys.size()) != c.num_layers ||
      static_cast<int64_t>(cache.values.size()) != c.num_layers) {
    return InvalidArgument("KV cache was not made by NewKvCache for this model (" +
                           std::to_string(cache.keys.size()) + " layers, model has " +
                           std::to_string(c.num_layers) + ")");
  }
  const int64_t batch = cache.batch;
  if (tokens.empty() || static_cast<int64_t>(tokens.size()) % batch != 0) {
    return InvalidArgument("ForwardStep: " + std::to_string(tokens.size()) +
                           " tokens cannot be split into " + std::to_string(batch) +
                           " rows of at least one new token");
  }
  const int64_t step = static_cast<int64_t>(tokens.size()) / batch;
  if (step > cache.remaining()) {
    return ResourceExhausted("ForwardStep: KV cache full: " + std::to_string(cache.length) +
                             " of " + std::to_string(cache.capacity) + " positions used, " +
                             std::to_string(step) + " more requested");
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size) {
      return InvalidArgument("ForwardStep: token " + std::to_string(tokens[i]) + " at index " +
                             std::to_string(i) + " is outside the vocabulary [0, " +
                             std::to_string(c.vocab_size) + ")");
    }
  }
  const int64_t n = batch * step, dim = c.hidden_size, kv_dim = c.kv_dim();

  std::vector<int32_t> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(cache.length + i % step);
  std::vector<float> rope_cos, rope_sin;
  RopeTables(m.inv_freq, positions.data(), n, rope_cos, rope_sin);
  LayerContext ctx;
  ctx.config = &c;
  ctx.ops = &ops;
  ctx.batch = batch;
  ctx.seq = step;
  ctx.rope_cos = rope_cos.data();
  ctx.rope_sin = rope_sin.data();

  LayerActivations acts;
  acts.x = Tensor({n, dim});
  ops.EmbeddingForward(tokens.data(), n, m.embed->value.data(), dim, acts.x.data());
  Tensor out;
  for (int l = 0; l < c.num_layers; ++l) {
    ctx.layer = l;
    const LayerWeights& w = m.layers[l];
    acts.xn1.ResizeZeroed({n, dim});
    acts.rstd1.ResizeZeroed({n});
    ops.RmsNormForward(acts.x.data(), w.input_norm->value.data(), n, dim,
                       static_cast<float>(c.rms_norm_eps), acts.xn1.data(), acts.rstd1.data());
    ProjectQkv(ctx, w, acts.xn1.data(), acts);
    // Append k, v (B*step, Hkv*D) to the cache rows [length, length + step) of each batch row.
    float* keys = cache.keys[l].data();
    float* values = cache.values[l].data();
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t dst = (b * cache.capacity + cache.length) * kv_dim;
      const int64_t src = b * step * kv_dim;
      std::memcpy(keys + dst, acts.k.data() + src, sizeof(float) * step * kv_dim);
      std::memcpy(values + dst, acts.v.data() + src, sizeof(float) * step * kv_dim);
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
    acts.att.ResizeZeroed({n, c.q_dim()});
    ops.AttentionForward(s, acts.q.data(), keys, values, nullptr, nullptr, acts.att.data(),
                         nullptr);
    // h = x + att Wo^T; then the MLP block.
    acts.h.ResizeZeroed({n, dim});
    LinearForward(ops, acts.att.data(), n, *w.o_proj, w.o_bias, acts.h.data());
    ops.AddInPlace(acts.h.data(), acts.x.data(), n * dim);
    MlpForward(ctx, w, acts, out);
    std::swap(acts.x, out);
  }
  cache.length += step;

  // Final norm and head, on every new token or only the last of each row.
  const int64_t rows = all_positions ? n : batch;
  Tensor selected({rows, dim});
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t src = all_positions ? r : r * step + step - 1;
    std::memcpy(selected.data() + r * dim, acts.x.data() + src * dim, sizeof(float) * dim);
  }
  Tensor normed({rows, dim});
  Tensor rstd({rows});
  ops.RmsNormForward(selected.data(), m.final_norm->value.data(), rows, dim,
                     static_cast<float>(c.rms_norm_eps), normed.data(), rstd.data());
  Tensor logits({rows, c.vocab_size});
  ops.Gemm(false, true, rows, c.vocab_size, dim, normed.data(), dim, m.lm_head->value.data(), dim,
           0.0f, logits.data(), c.vocab_size);
  if (all_positions) logits.Reshape({batch, step, c.vocab_size});
  return logits;
}

}  // namespace air::engine
