// LlamaModel::Forward and ::Backward: the whole-model pass over a TokenBatch (the per-layer
// math is in decoder_layer.cc).
#include <algorithm>
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
  const Ops& ops = *ops_;
  m.has_forward = false;
  m.batch = batch.batch_size;
  m.seq = batch.seq_len;
  const int64_t n = m.batch * m.seq, dim = c.hidden_size, vocab = c.vocab_size;

  // Inputs: ids, shifted targets (logits at t predict labels[t + 1]), positions, segments.
  m.input_ids = batch.input_ids;
  m.targets.assign(static_cast<size_t>(n), kIgnoreIndex);
  if (!batch.labels.empty()) {
    for (int64_t b = 0; b < m.batch; ++b) {
      for (int64_t t = 0; t + 1 < m.seq; ++t) {
        m.targets[b * m.seq + t] = batch.labels[b * m.seq + t + 1];
      }
    }
  }
  std::vector<int32_t> positions = batch.position_ids;
  if (positions.empty()) {
    positions.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(i % m.seq);
  }
  m.segments = batch.segment_ids;
  RopeTables(m.inv_freq, positions.data(), n, m.rope_cos, m.rope_sin);

  // x (N, C) = embed[input_ids]
  const bool keep_all = options.training && !activation_checkpointing_;
  m.acts.resize(static_cast<size_t>(c.num_layers));
  Tensor* x = c.num_layers > 0 ? &m.acts[0].x : &m.final_x;
  x->ResizeZeroed({n, dim});
  ops.EmbeddingForward(m.input_ids.data(), n, m.embed->value.data(), dim, x->data());

  for (int l = 0; l < c.num_layers; ++l) {
    if (hooks_.before_forward) hooks_.before_forward(l);
    const LayerContext ctx = m.Context(*this, l);
    Tensor& out = l + 1 < c.num_layers ? m.acts[l + 1].x : m.final_x;
    if (keep_all) {
      LayerForward(ctx, m.layers[l], m.acts[l], out);
    } else {
      // Keep only the layer input (checkpointing) or nothing (evaluation): run in scratch.
      std::swap(m.scratch_acts.x, m.acts[l].x);
      LayerForward(ctx, m.layers[l], m.scratch_acts, out);
      std::swap(m.scratch_acts.x, m.acts[l].x);
    }
  }

  // xf = RMSNorm(x) * w; logits (N, V) = xf W_head^T
  m.xf.ResizeZeroed({n, dim});
  m.rstd_f.ResizeZeroed({n});
  ops.RmsNormForward(m.final_x.data(), m.final_norm->value.data(), n, dim,
                     static_cast<float>(c.rms_norm_eps), m.xf.data(), m.rstd_f.data());
  m.logits.ResizeZeroed({n, vocab});
  ops.Gemm(false, true, n, vocab, dim, m.xf.data(), dim, m.lm_head->value.data(), dim, 0.0f,
           m.logits.data(), vocab);

  ForwardResult result;
  if (options.return_logits) {
    result.logits = m.logits;
    result.logits.Reshape({m.batch, m.seq, vocab});
  }
  m.ce_lse.ResizeZeroed({n});
  result.loss_sum =
      ops.CrossEntropyForward(m.logits.data(), m.targets.data(), n, vocab, m.ce_lse.data());
  m.loss_tokens = 0;
  for (int32_t t : m.targets) m.loss_tokens += t != kIgnoreIndex;
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
  const Ops& ops = *ops_;
  const int64_t n = m.batch * m.seq, dim = c.hidden_size, vocab = c.vocab_size;
  for (Parameter& p : params_) {
    if (p.grad.shape() != p.value.shape()) p.grad = Tensor(p.value.shape());
  }
  if (m.loss_tokens == 0 || scale == 0.0f) return Status::Ok();  // the gradient is zero

  // dlogits (N, V) = scale / tokens * (softmax - onehot), written over the logits.
  const float per_token = scale / static_cast<float>(m.loss_tokens);
  ops.CrossEntropyBackward(m.logits.data(), m.targets.data(), m.ce_lse.data(), n, vocab, per_token,
                           m.logits.data());
  const float* dlogits = m.logits.data();
  // dW_head (V, C) += dlogits^T xf;  dxf (N, C) = dlogits W_head  (kept in grad_scratch.dxn)
  ops.Gemm(true, false, vocab, dim, n, dlogits, vocab, m.xf.data(), dim, 1.0f,
           m.lm_head->grad.data(), dim);
  Tensor& dxf = m.grad_scratch.dxn;
  dxf.ResizeZeroed({n, dim});
  ops.Gemm(false, false, n, dim, vocab, dlogits, vocab, m.lm_head->value.data(), dim, 0.0f,
           dxf.data(), dim);
  // dx (N, C) = final RMSNorm backward
  m.dx.ResizeZeroed({n, dim});
  ops.RmsNormBackward(m.final_x.data(), m.final_norm->value.data(), m.rstd_f.data(), dxf.data(), n,
                      dim, m.dx.data(), m.final_norm->grad.data());

  for (int l = static_cast<int>(c.num_layers) - 1; l >= 0; --l) {
    if (hooks_.before_backward) hooks_.before_backward(l);
    const LayerContext ctx = m.Context(*this, l);
    if (activation_checkpointing_) {
      // Recompute this layer's activations from its saved input, then run its backward.
      std::swap(m.scratch_acts.x, m.acts[l].x);
      Tensor discard;
      LayerForward(ctx, m.layers[l], m.scratch_acts, discard);
      LayerBackward(ctx, m.layers[l], m.scratch_acts, m.dx, m.grad_scratch, m.dx);
      std::swap(m.scratch_acts.x, m.acts[l].x);
    } else {
      LayerBackward(ctx, m.layers[l], m.acts[l], m.dx, m.grad_scratch, m.dx);
    }
    if (hooks_.after_backward) hooks_.after_backward(l);
  }
  // dembed[input_ids] += dx, except the padding row (nn.Embedding's padding_idx).
  const int32_t skip = c.pad_token_id >= 0 ? static_cast<int32_t>(c.pad_token_id) : -1;
  ops.EmbeddingBackward(m.input_ids.data(), n, m.dx.data(), dim, skip, m.embed->grad.data());
  return Status::Ok();
}

}  // namespace air::engine
