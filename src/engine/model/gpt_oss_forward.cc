// GptOssModel::Forward and ::Backward: the whole-model pass over a TokenBatch (the per-layer
// math is in gpt_oss_layer.cc and moe.cc, the head's in lm_head.cc). The shape of the pass is
// LlamaModel's: checkpointed layers keep only their input and are recomputed in the backward,
// the head's gradient is computed in the training forward (fused, chunked), the unit hooks
// bracket the root and every layer.
#include "engine/model/batch_inputs.h"
#include "engine/model/gpt_oss_config.h"
#include "engine/model/gpt_oss_model_impl.h"

namespace air::engine {

Result<ForwardResult> GptOssModel::Forward(const TokenBatch& batch, const ForwardOptions& options) {
  const ModelConfig& c = config();
  AIR_RETURN_IF_ERROR(ValidateTokenBatch(batch, c.vocab_size));
  if (options.training) AIR_RETURN_IF_ERROR(EnsureGradients());
  Impl& m = *impl_;
  const Backend& ops = backend();
  const DType dtype = this->options().compute_dtype;
  m.has_forward = false;
  m.pass = LinearPass{.training = options.training, .seed = options.rng_seed};
  m.batch = batch.batch_size;
  m.seq = batch.seq_len;
  const int64_t n = m.batch * m.seq, dim = c.hidden_size, vocab = c.vocab_size;
  const bool training = options.training;
  const bool unfused = options.unfused_head || options.return_logits;
  const bool has_segments = !batch.segment_ids.empty();
  bool any_checkpointed = false;
  for (int l = 0; l < c.num_layers; ++l) any_checkpointed |= training && checkpointed(l);
  auto keeps_all = [&](int l) { return training && !checkpointed(l); };
  m.host_offsets.resize(static_cast<size_t>(c.num_layers));

  AIR_RETURN_IF_ERROR(m.workspace.Arrange([&](Workspace& ws) {
    m.input_ids = ws.Take(DType::kI32, {n});
    m.targets = ws.Take(DType::kI32, {n});
    m.positions = ws.Take(DType::kI32, {n});
    m.segments = has_segments ? ws.Take(DType::kI32, {m.batch, m.seq}) : View();
    m.rope_cos = ws.F32({n, c.head_dim / 2});
    m.rope_sin = ws.F32({n, c.head_dim / 2});
    m.acts.resize(static_cast<size_t>(c.num_layers));
    for (int l = 0; l < c.num_layers; ++l) {
      GptOssLayerActivations& a = m.acts[static_cast<size_t>(l)];
      if (keeps_all(l)) {
        LayoutGptOssLayerActivations(ws, c, dtype, m.batch, m.seq, true, &m.host_offsets[l], a);
      } else {
        a = GptOssLayerActivations{};
        a.attn.x = ws.F32({n, dim});  // the residual stream stays fp32
      }
    }
    if (!training || any_checkpointed) {
      LayoutGptOssLayerActivations(ws, c, dtype, m.batch, m.seq, false, &m.scratch_offsets,
                                   m.scratch_acts);
    }
    m.final_x = ws.F32({n, dim});
    m.xf = ws.Take(dtype, {n, dim});
    m.rstd_f = ws.F32({n});
    m.head = LayoutHead(ws, n, vocab, unfused);
    if (training) {
      LayoutGptOssGradScratch(ws, c, n, m.grad_scratch);
      m.dxf = ws.F32({n, dim});
      m.dx = ws.F32({n, dim});
      m.recompute_out = any_checkpointed ? ws.F32({n, dim}) : View();
    }
  }));

  m.loss_tokens = StageBatchInputs(batch, m.host_targets, m.host_positions);
  ops.CopyToDevice(m.input_ids, batch.input_ids.data());
  ops.CopyToDevice(m.targets, m.host_targets.data());
  ops.CopyToDevice(m.positions, m.host_positions.data());
  if (has_segments) ops.CopyToDevice(m.segments, batch.segment_ids.data());
  ops.RopeTables(m.positions, m.inv_freq, m.attention_factor, m.rope_cos, m.rope_sin);

  const int root = root_unit();
  if (hooks().before_forward) hooks().before_forward(root);
  const View& x0 = c.num_layers > 0 ? m.acts[0].attn.x : m.final_x;
  ops.EmbeddingForward(m.input_ids, m.embed->value, x0);
  for (int l = 0; l < c.num_layers; ++l) {
    if (hooks().before_forward) hooks().before_forward(l);
    const LayerContext ctx = m.Context(*this, l);
    const View& out = l + 1 < c.num_layers ? m.acts[l + 1].attn.x : m.final_x;
    if (keeps_all(l)) {
      GptOssLayerForward(ctx, m.layers[l], m.acts[l], out);
    } else {
      GptOssLayerActivations acts = m.scratch_acts;
      acts.attn.x = m.acts[l].attn.x;
      GptOssLayerForward(ctx, m.layers[l], acts, out);
    }
    if (hooks().after_forward) hooks().after_forward(l);
  }

  ops.RmsNormForward(m.final_x, m.final_norm->value, static_cast<float>(c.rms_norm_eps), m.xf,
                     m.rstd_f);
  const float per_token =
      m.loss_tokens > 0 ? options.loss_scale / static_cast<float>(m.loss_tokens) : 0.0f;
  ForwardResult result;
  if (options.return_logits) {
    HeadForward(ops, m.xf, *m.lm_head, m.targets, m.head, true);
    result.logits = ops.ToHostTensor(m.head.logits);
    result.logits.Reshape({m.batch, m.seq, vocab});
  }
  if (training) {
    HeadForwardBackward(ops, m.xf, *m.lm_head, m.targets, per_token, m.head, unfused, m.dxf);
  } else if (!options.return_logits) {
    HeadForward(ops, m.xf, *m.lm_head, m.targets, m.head, unfused);
  }
  if (hooks().after_forward) hooks().after_forward(root);

  result.loss_sum = ops.ReadScalar(m.head.loss_sum);
  result.loss_tokens = m.loss_tokens;
  result.loss = m.loss_tokens > 0 ? result.loss_sum / static_cast<double>(m.loss_tokens) : 0.0;
  m.has_forward = training;
  return result;
}

Status GptOssModel::Backward() {
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
  ops.Zero(m.dx);
  ops.RmsNormBackward(m.final_x, m.final_norm->value, m.rstd_f, m.dxf, m.dx,
                      m.final_norm->trainable ? m.final_norm->grad : View());
  for (int l = static_cast<int>(c.num_layers) - 1; l >= 0; --l) {
    if (hooks().before_backward) hooks().before_backward(l);
    const LayerContext ctx = m.Context(*this, l);
    if (checkpointed(l)) {
      GptOssLayerActivations acts = m.scratch_acts;
      acts.attn.x = m.acts[l].attn.x;
      GptOssLayerForward(ctx, m.layers[l], acts, m.recompute_out);
      GptOssLayerBackward(ctx, m.layers[l], acts, m.dx, m.grad_scratch);
    } else {
      GptOssLayerBackward(ctx, m.layers[l], m.acts[l], m.dx, m.grad_scratch);
    }
    if (hooks().after_backward) hooks().after_backward(l);
  }
  if (m.embed->trainable) {
    const int32_t skip = c.pad_token_id >= 0 ? static_cast<int32_t>(c.pad_token_id) : -1;
    ops.EmbeddingBackward(m.input_ids, m.dx, skip, m.embed->grad);
  }
  if (hooks().after_backward) hooks().after_backward(root);
  return Status::Ok();
}

}  // namespace air::engine
