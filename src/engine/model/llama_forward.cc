// LlamaModel::Forward and ::Backward: the whole-model pass over a TokenBatch (the per-layer
// math is in decoder_layer.cc).
#include <string>

#include "engine/model/llama_model.h"
#include "engine/model/llama_model_impl.h"
#include "engine/model/rope.h"

namespace air::engine {

namespace {

std::string At(int64_t index, int64_t seq) {
  return "row " + std::to_string(index / seq) + ", column " + std::to_string(index % seq);
}

// Checks sizes and value ranges of a batch before anything indexes with it.
Status ValidateBatch(const TokenBatch& batch, int64_t vocab) {
  if (batch.batch_size <= 0 || batch.seq_len <= 0) {
    return InvalidArgument("token batch: batch_size and seq_len must be positive, got " +
                           std::to_string(batch.batch_size) + " x " +
                           std::to_string(batch.seq_len));
  }
  const size_t n = static_cast<size_t>(batch.batch_size) * static_cast<size_t>(batch.seq_len);
  auto check_size = [&](const std::vector<int32_t>& v, const char* field, bool optional) {
    if (v.size() == n || (optional && v.empty())) return Status::Ok();
    return InvalidArgument("token batch: " + std::string(field) + " has " +
                           std::to_string(v.size()) + " values, expected batch_size*seq_len = " +
                           std::to_string(n) + (optional ? " (or none)" : ""));
  };
  AIR_RETURN_IF_ERROR(check_size(batch.input_ids, "input_ids", false));
  AIR_RETURN_IF_ERROR(check_size(batch.labels, "labels", true));
  AIR_RETURN_IF_ERROR(check_size(batch.position_ids, "position_ids", true));
  AIR_RETURN_IF_ERROR(check_size(batch.segment_ids, "segment_ids", true));
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = batch.input_ids[i];
    if (id < 0 || id >= vocab) {
      return InvalidArgument("token batch: input_ids at " + At(i, batch.seq_len) + " is " +
                             std::to_string(id) + ", outside the vocabulary [0, " +
                             std::to_string(vocab) + ")");
    }
    if (!batch.labels.empty()) {
      const int32_t label = batch.labels[i];
      if (label != kIgnoreIndex && (label < 0 || label >= vocab)) {
        return InvalidArgument("token batch: labels at " + At(i, batch.seq_len) + " is " +
                               std::to_string(label) + ": valid labels are -100 or [0, " +
                               std::to_string(vocab) + ")");
      }
    }
    if (!batch.position_ids.empty() && batch.position_ids[i] < 0) {
      return InvalidArgument("token batch: position_ids at " + At(i, batch.seq_len) + " is " +
                             std::to_string(batch.position_ids[i]) + ", must be >= 0");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ForwardResult> LlamaModel::Forward(const TokenBatch& batch, const ForwardOptions& options) {
  const ModelConfig& c = config_;
  AIR_RETURN_IF_ERROR(ValidateBatch(batch, c.vocab_size));
  Impl& m = *impl_;
  const Backend& ops = *backend_;
  m.has_forward = false;
  m.batch = batch.batch_size;
  m.seq = batch.seq_len;
  const int64_t n = m.batch * m.seq, dim = c.hidden_size, vocab = c.vocab_size;
  const int64_t half = c.head_dim / 2;
  const bool keep_all = options.training && !activation_checkpointing_;
  const bool has_segments = !batch.segment_ids.empty();

  // Device memory for this batch shape: inputs, activations, and (training) gradient scratch.
  AIR_RETURN_IF_ERROR(m.workspace.Arrange([&](Workspace& ws) {
    m.input_ids = ws.Take(DType::kI32, {n});
    m.targets = ws.Take(DType::kI32, {n});
    m.segments = has_segments ? ws.Take(DType::kI32, {n}) : View();
    m.rope_cos = ws.F32({n, half});
    m.rope_sin = ws.F32({n, half});
    m.acts.resize(static_cast<size_t>(c.num_layers));
    for (LayerActivations& a : m.acts) {
      if (keep_all) {
        LayoutLayerActivations(ws, c, m.batch, m.seq, true, a);
      } else {
        a.x = ws.F32({n, dim});
      }
    }
    if (!keep_all) LayoutLayerActivations(ws, c, m.batch, m.seq, false, m.scratch_acts);
    m.final_x = ws.F32({n, dim});
    m.xf = ws.F32({n, dim});
    m.rstd_f = ws.F32({n});
    m.logits = ws.F32({n, vocab});
    m.ce_lse = ws.F32({n});
    m.loss_sum = ws.Take(DType::kF64, {1});
    if (options.training) {
      LayoutLayerGradScratch(ws, c, n, m.grad_scratch);
      m.dx = ws.F32({n, dim});
      m.recompute_out = activation_checkpointing_ ? ws.F32({n, dim}) : View();
    }
  }));

  // Inputs: ids, shifted targets (logits at t predict labels[t + 1]), positions, segments —
  // prepared on the host from the host batch and uploaded.
  m.host_targets.assign(static_cast<size_t>(n), kIgnoreIndex);
  if (!batch.labels.empty()) {
    for (int64_t b = 0; b < m.batch; ++b) {
      for (int64_t t = 0; t + 1 < m.seq; ++t) {
        m.host_targets[b * m.seq + t] = batch.labels[b * m.seq + t + 1];
      }
    }
  }
  if (batch.position_ids.empty()) {
    m.host_positions.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) m.host_positions[i] = static_cast<int32_t>(i % m.seq);
  } else {
    m.host_positions.assign(batch.position_ids.begin(), batch.position_ids.end());
  }
  RopeTables(m.inv_freq, m.host_positions.data(), n, m.host_cos, m.host_sin);
  ops.CopyToDevice(m.input_ids, batch.input_ids.data());
  ops.CopyToDevice(m.targets, m.host_targets.data());
  if (has_segments) ops.CopyToDevice(m.segments, batch.segment_ids.data());
  ops.CopyToDevice(m.rope_cos, m.host_cos.data());
  ops.CopyToDevice(m.rope_sin, m.host_sin.data());
  m.loss_tokens = 0;
  for (int32_t t : m.host_targets) m.loss_tokens += t != kIgnoreIndex;

  const int root = root_unit();
  if (hooks_.before_forward) hooks_.before_forward(root);
  // x (N, C) = embed[input_ids]
  const View& x0 = c.num_layers > 0 ? m.acts[0].x : m.final_x;
  ops.EmbeddingForward(m.input_ids.i32(), n, m.embed->value.f32(), dim, x0.f32());

  for (int l = 0; l < c.num_layers; ++l) {
    if (hooks_.before_forward) hooks_.before_forward(l);
    const LayerContext ctx = m.Context(*this, l);
    const View& out = l + 1 < c.num_layers ? m.acts[l + 1].x : m.final_x;
    if (keep_all) {
      LayerForward(ctx, m.layers[l], m.acts[l], out);
    } else {
      // Keep only the layer input (checkpointing) or nothing (evaluation): run in scratch.
      LayerActivations acts = m.scratch_acts;
      acts.x = m.acts[l].x;
      LayerForward(ctx, m.layers[l], acts, out);
    }
    if (hooks_.after_forward) hooks_.after_forward(l);
  }

  // xf = RMSNorm(x) * w; logits (N, V) = xf W_head^T
  ops.RmsNormForward(m.final_x.f32(), m.final_norm->value.f32(), n, dim,
                     static_cast<float>(c.rms_norm_eps), m.xf.f32(), m.rstd_f.f32());
  ops.Gemm(false, true, n, vocab, dim, m.xf.f32(), dim, m.lm_head->value.f32(), dim, 0.0f,
           m.logits.f32(), vocab);
  ops.CrossEntropyForward(m.logits.f32(), m.targets.i32(), n, vocab, m.ce_lse.f32(),
                          m.loss_sum.f64());
  if (hooks_.after_forward) hooks_.after_forward(root);

  ForwardResult result;
  if (options.return_logits) {
    result.logits = ops.ToHostTensor(m.logits);
    result.logits.Reshape({m.batch, m.seq, vocab});
  }
  result.loss_sum = ops.ReadScalar(m.loss_sum);  // the one read-back of a step's forward
  result.loss_tokens = m.loss_tokens;
  result.loss = m.loss_tokens > 0 ? result.loss_sum / static_cast<double>(m.loss_tokens) : 0.0;
  m.has_forward = options.training;
  return result;
}

Status LlamaModel::Backward(float scale) {
  Impl& m = *impl_;
  if (!m.has_forward) {
    return FailedPrecondition(
        "Backward needs a preceding Forward with training = true (each Forward allows one "
        "Backward)");
  }
  m.has_forward = false;
  const ModelConfig& c = config_;
  const Backend& ops = *backend_;
  const int64_t n = m.batch * m.seq, dim = c.hidden_size, vocab = c.vocab_size;
  AIR_RETURN_IF_ERROR(EnsureGradients());
  const bool hooked = hooks_.before_backward || hooks_.after_backward;
  // The gradient is zero; skip the work unless hooks (FSDP: collectives every rank must join)
  // need the pass.
  if ((m.loss_tokens == 0 || scale == 0.0f) && !hooked) return Status::Ok();

  const int root = root_unit();
  if (hooks_.before_backward) hooks_.before_backward(root);
  // dlogits (N, V) = scale / tokens * (softmax - onehot), written over the logits.
  const float per_token = m.loss_tokens > 0 ? scale / static_cast<float>(m.loss_tokens) : 0.0f;
  ops.CrossEntropyBackward(m.logits.f32(), m.targets.i32(), m.ce_lse.f32(), n, vocab, per_token,
                           m.logits.f32());
  const float* dlogits = m.logits.f32();
  // dW_head (V, C) += dlogits^T xf (when trainable);  dxf (N, C) = dlogits W_head
  if (m.lm_head->trainable) {
    ops.Gemm(true, false, vocab, dim, n, dlogits, vocab, m.xf.f32(), dim, 1.0f,
             m.lm_head->grad.f32(), dim);
  }
  const View& dxf = m.grad_scratch.dxn;
  ops.Gemm(false, false, n, dim, vocab, dlogits, vocab, m.lm_head->value.f32(), dim, 0.0f,
           dxf.f32(), dim);
  // dx (N, C) = final RMSNorm backward (the op accumulates into dx: start from zero)
  ops.Zero(m.dx);
  ops.RmsNormBackward(m.final_x.f32(), m.final_norm->value.f32(), m.rstd_f.f32(), dxf.f32(), n, dim,
                      m.dx.f32(), m.final_norm->trainable ? m.final_norm->grad.f32() : nullptr);

  for (int l = static_cast<int>(c.num_layers) - 1; l >= 0; --l) {
    if (hooks_.before_backward) hooks_.before_backward(l);
    const LayerContext ctx = m.Context(*this, l);
    if (activation_checkpointing_) {
      // Recompute this layer's activations from its saved input, then run its backward.
      LayerActivations acts = m.scratch_acts;
      acts.x = m.acts[l].x;
      LayerForward(ctx, m.layers[l], acts, m.recompute_out);
      LayerBackward(ctx, m.layers[l], acts, m.dx, m.grad_scratch);
    } else {
      LayerBackward(ctx, m.layers[l], m.acts[l], m.dx, m.grad_scratch);
    }
    if (hooks_.after_backward) hooks_.after_backward(l);
  }
  // dembed[input_ids] += dx, except the padding row (nn.Embedding's padding_idx).
  if (m.embed->trainable) {
    const int32_t skip = c.pad_token_id >= 0 ? static_cast<int32_t>(c.pad_token_id) : -1;
    ops.EmbeddingBackward(m.input_ids.i32(), n, m.dx.f32(), dim, skip, m.embed->grad.f32());
  }
  if (hooks_.after_backward) hooks_.after_backward(root);
  return Status::Ok();
}

}  // namespace air::engine
