// LlamaModel::Forward and ::Backward: the whole-model pass over a TokenBatch (the per-layer
// math is in decoder_layer.cc, the head's in lm_head.cc). Checkpointed layers (applied from
// outside: CausalLm::set_checkpointed_layers) keep only their input and are recomputed in the
// backward; the head's gradient is computed in the training forward (fused, chunked).
#include <string>

#include "engine/model/batch_inputs.h"
#include "engine/model/llama_model.h"
#include "engine/model/llama_model_impl.h"

namespace air::engine {

Result<ForwardResult> LlamaModel::Forward(const TokenBatch& batch, const ForwardOptions& options) {
  const ModelConfig& c = config();
  AIR_RETURN_IF_ERROR(ValidateTokenBatch(batch, c.vocab_size));
  // The head's gradient is written during a training forward: held units need their gradients.
  if (options.training) AIR_RETURN_IF_ERROR(EnsureGradients());
  Impl& m = *impl_;
  const Backend& ops = backend();
  const DType dtype = this->options().compute_dtype;
  m.has_forward = false;
  m.batch = batch.batch_size;
  m.seq = batch.seq_len;
  m.pass = LinearPass{.training = options.training, .seed = options.rng_seed};
  const int64_t n = m.batch * m.seq, dim = c.hidden_size, vocab = c.vocab_size;
  const int64_t half = c.head_dim / 2;
  const bool training = options.training;
  const bool unfused = options.unfused_head || options.return_logits;
  const bool has_segments = !batch.segment_ids.empty();
  bool any_checkpointed = false;
  for (int l = 0; l < c.num_layers; ++l) any_checkpointed |= training && checkpointed(l);
  // A layer keeps every activation when it trains without checkpointing; otherwise only its
  // input (checkpointed) or nothing (evaluation: it runs in the scratch activations).
  auto keeps_all = [&](int l) { return training && !checkpointed(l); };

  // Device memory for this batch shape: inputs, activations, and (training) gradient scratch.
  AIR_RETURN_IF_ERROR(m.workspace.Arrange([&](Workspace& ws) {
    m.input_ids = ws.Take(DType::kI32, {n});
    m.targets = ws.Take(DType::kI32, {n});
    m.positions = ws.Take(DType::kI32, {n});
    m.segments = has_segments ? ws.Take(DType::kI32, {m.batch, m.seq}) : View();
    m.rope_cos = ws.F32({n, half});
    m.rope_sin = ws.F32({n, half});
    m.acts.resize(static_cast<size_t>(c.num_layers));
    for (int l = 0; l < c.num_layers; ++l) {
      LayerActivations& a = m.acts[static_cast<size_t>(l)];
      if (keeps_all(l)) {
        LayoutLayerActivations(ws, c, dtype, m.batch, m.seq, true, a);
      } else {
        a = LayerActivations{};
        a.x = ws.F32({n, dim});  // the residual stream stays fp32
      }
    }
    bool needs_scratch = !training || any_checkpointed;
    if (needs_scratch) {
      LayoutLayerActivations(ws, c, dtype, m.batch, m.seq, false, m.scratch_acts);
    }
    m.final_x = ws.F32({n, dim});
    m.xf = ws.Take(dtype, {n, dim});
    m.rstd_f = ws.F32({n});
    m.head = LayoutHead(ws, n, vocab, unfused);
    if (training) {
      LayoutLayerGradScratch(ws, c, dtype, n, m.grad_scratch);
      m.dxf = ws.F32({n, dim});
      m.dx = ws.F32({n, dim});
      m.recompute_out = any_checkpointed ? ws.F32({n, dim}) : View();
    }
  }));

  // Inputs: ids, shifted targets (logits at t predict labels[t + 1]), positions, segments —
  // prepared on the host from the host batch and uploaded; the RoPE tables are built on the
  // device from the positions.
  m.loss_tokens = StageBatchInputs(batch, m.host_targets, m.host_positions);
  ops.CopyToDevice(m.input_ids, batch.input_ids.data());
  ops.CopyToDevice(m.targets, m.host_targets.data());
  ops.CopyToDevice(m.positions, m.host_positions.data());
  if (has_segments) ops.CopyToDevice(m.segments, batch.segment_ids.data());
  ops.RopeTables(m.positions, m.inv_freq, 1.0f, m.rope_cos, m.rope_sin);

  const int root = root_unit();
  if (hooks().before_forward) hooks().before_forward(root);
  // x (N, C) = embed[input_ids]
  const View& x0 = c.num_layers > 0 ? m.acts[0].x : m.final_x;
  ops.EmbeddingForward(m.input_ids, m.embed->value, x0);

  for (int l = 0; l < c.num_layers; ++l) {
    if (hooks().before_forward) hooks().before_forward(l);
    const LayerContext ctx = m.Context(*this, l);
    const View& out = l + 1 < c.num_layers ? m.acts[l + 1].x : m.final_x;
    if (keeps_all(l)) {
      LayerForward(ctx, m.layers[l], m.acts[l], out);
    } else {
      LayerActivations acts = m.scratch_acts;
      acts.x = m.acts[l].x;
      LayerForward(ctx, m.layers[l], acts, out);
    }
    if (hooks().after_forward) hooks().after_forward(l);
  }

  // xf = RMSNorm(x) * w; then the head and the loss (and in training its gradient, with the
  // per-token scale known now: d(loss_scale * loss_sum / tokens)).
  ops.RmsNormForward(m.final_x, m.final_norm->value, static_cast<float>(c.rms_norm_eps), m.xf,
                     m.rstd_f);
  const float per_token =
      m.loss_tokens > 0 ? options.loss_scale / static_cast<float>(m.loss_tokens) : 0.0f;
  m.head_done = false;
  ForwardResult result;
  if (options.return_logits) {
    // The caller wants the logits: compute the unfused head, copy them out, then its gradient.
    HeadForward(ops, m.xf, *m.lm_head, m.targets, m.head, true);
    result.logits = ops.ToHostTensor(m.head.logits);
    result.logits.Reshape({m.batch, m.seq, vocab});
  }
  if (training) {
    HeadForwardBackward(ops, m.xf, *m.lm_head, m.targets, per_token, m.head, unfused, m.dxf);
    m.head_done = true;
  } else if (!options.return_logits) {
    HeadForward(ops, m.xf, *m.lm_head, m.targets, m.head, unfused);
  }
  if (hooks().after_forward) hooks().after_forward(root);

  result.loss_sum = ops.ReadScalar(m.head.loss_sum);  // the one read-back of a step's forward
  result.loss_tokens = m.loss_tokens;
  result.loss = m.loss_tokens > 0 ? result.loss_sum / static_cast<double>(m.loss_tokens) : 0.0;
  m.has_forward = training;
  return result;
}

Status LlamaModel::Backward() {
  Impl& m = *impl_;
  if (!m.has_forward) {
    return FailedPrecondition(
        "Backward needs a preceding Forward with training = true (each Forward allows one "
        "Backward)");
  }
  m.has_forward = false;
  const ModelConfig& c = config();
  const Backend& ops = backend();
  const int root = root_unit();
  if (hooks().before_backward) hooks().before_backward(root);
  // dx (N, C) = final RMSNorm backward of dxf (the op accumulates into dx: start from zero)
  ops.Zero(m.dx);
  ops.RmsNormBackward(m.final_x, m.final_norm->value, m.rstd_f, m.dxf, m.dx,
                      m.final_norm->trainable ? m.final_norm->grad : View());
  for (int l = static_cast<int>(c.num_layers) - 1; l >= 0; --l) {
    if (hooks().before_backward) hooks().before_backward(l);
    const LayerContext ctx = m.Context(*this, l);
    if (checkpointed(l)) {
      // Recompute this layer's activations from its saved input, then run its backward.
      LayerActivations acts = m.scratch_acts;
      acts.x = m.acts[l].x;
      LayerForward(ctx, m.layers[l], acts, m.recompute_out);
      LayerBackward(ctx, m.layers[l], acts, m.dx, m.grad_scratch);
    } else {
      LayerBackward(ctx, m.layers[l], m.acts[l], m.dx, m.grad_scratch);
    }
    if (hooks().after_backward) hooks().after_backward(l);
  }
  // dembed[input_ids] += dx, except the padding row (nn.Embedding's padding_idx).
  if (m.embed->trainable) {
    const int32_t skip = c.pad_token_id >= 0 ? static_cast<int32_t>(c.pad_token_id) : -1;
    ops.EmbeddingBackward(m.input_ids, m.dx, skip, m.embed->grad);
  }
  if (hooks().after_backward) hooks().after_backward(root);
  return Status::Ok();
}

}  // namespace air::engine
