// DecoderStack: the whole-model training and evaluation pass that every decoder-only model here
// shares (LlamaModel, GptOssModel), and the state it runs on. A TokenBatch's inputs are staged
// on the host and uploaded, the RoPE tables built from its positions; the embedding, then the
// layers in order — a checkpointed layer (applied from outside: CausalLm::
// set_checkpointed_layers) keeps only its input and is recomputed in the backward, an
// evaluation pass runs every layer in one set of scratch activations — then the final RMSNorm
// and the head, whose gradient the training forward computes (fused, chunked: lm_head.h). The
// model's unit hooks bracket the root unit and every layer, in both directions.
//
// What differs between models is their decoder layer: `Kind` names its types (Weights,
// Activations, GradScratch) and where an Activations keeps the layer's input (Input), and a
// Kind object lays them out and runs the layer:
//   LayoutActivations(ws, config, dtype, batch, seq, keep_all, layer, acts)  layer -1: scratch
//   LayoutGradScratch(ws, config, dtype, rows, scratch)
//   Forward(ctx, weights, acts, out)        out (N, C) = the layer of acts' input
//   Backward(ctx, weights, acts, dx, scratch)  dx: dL/d(output) in, dL/d(input) out (in place)
//   DecodeLayer(ctx, weights, acts, cache, x, out)  a decode step's layer: appends the new
//       tokens' keys and values to layer ctx.layer's cache (AppendToKvCache), attends over it
//       and writes out (N, C) from x (N, C)
// ForwardStep is the incremental decode over a KV cache that `air generate` runs: the same
// embedding, layers (Kind::DecodeLayer), final norm and head, in the stack's decode workspace.
// Thread safety: owned by one model, driven by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "engine/model/batch_inputs.h"
#include "engine/model/causal_lm.h"
#include "engine/model/decoder_layer.h"
#include "engine/model/kv_cache.h"
#include "engine/model/lm_head.h"
#include "engine/workspace.h"

namespace air::engine {

template <typename Kind>
struct DecoderStack {
  using Activations = typename Kind::Activations;

  explicit DecoderStack(const Backend* backend) : workspace(backend), decode_workspace(backend) {}

  // Views into the model's parameters.
  Parameter* embed = nullptr;       // (V, C)
  Parameter* final_norm = nullptr;  // (C)
  Parameter* lm_head = nullptr;     // (V, C); == embed when tied
  std::vector<typename Kind::Weights> layers;
  std::unique_ptr<Buffer> inv_freq_buffer;
  View inv_freq;                  // (D/2) F32 on the device, rounded to the buffer dtype
  float attention_factor = 1.0f;  // the RoPE tables' cos/sin scale (YaRN's; 1 otherwise)

  // Host staging of a batch's inputs (reused; uploaded to the device views below).
  std::vector<int32_t> host_targets, host_positions;

  // Forward/Backward memory on the backend (views into `workspace`).
  Workspace workspace;
  Workspace decode_workspace;  // ForwardStep's, so generation never clobbers a training step
  bool has_forward = false;
  int64_t batch = 0, seq = 0;
  LinearPass pass;  // the last Forward's (training and its rng_seed), for adapters
  View input_ids, targets, positions, segments;  // (N) I32; segments empty when none
  View rope_cos, rope_sin;                       // (N, D/2) F32
  std::vector<Activations> acts;                 // per layer; only the input when checkpointed
  Activations scratch_acts;                      // recomputation / evaluation (no input of its own)
  View recompute_out;                            // (N, C) output of a recomputed layer (discarded)
  View final_x;                                  // (N, C) input of the final norm
  View xf, rstd_f;                               // (N, C), (N) after the final norm
  HeadViews head;                                // a chunk of logits, lse, the loss sum
  int64_t loss_tokens = 0;
  typename Kind::GradScratch grad_scratch;
  View dxf;  // (N, C) F32 gradient of the final norm's output (from the head, in the forward)
  View dx;   // (N, C) F32 gradient flowing down the stack

  LayerContext Context(const CausalLm& model, int layer) const {
    LayerContext ctx;
    ctx.config = &model.config();
    ctx.backend = &model.backend();
    ctx.batch = batch;
    ctx.seq = seq;
    ctx.rope_cos = rope_cos;
    ctx.rope_sin = rope_sin;
    ctx.segments = segments;
    ctx.layer = layer;
    ctx.pass = pass;
    return ctx;
  }

  // The pass (CausalLm::Forward's contract) over a batch the model has validated, with its
  // gradients ensured for a training pass.
  Result<ForwardResult> Forward(const CausalLm& model, const UnitHooks& hooks, const Kind& kind,
                                const TokenBatch& batch, const ForwardOptions& options);
  // Forward's device memory for a pass of `shape`, laid out in `ws` (measured alone with
  // Workspace::Measure: the plan's activation memory).
  void LayoutPass(Workspace& ws, const ModelConfig& c, DType dtype, const Kind& kind,
                  const PassShape& shape);
  // CausalLm::Backward's contract.
  Status Backward(const CausalLm& model, const UnitHooks& hooks, const Kind& kind);
  // CausalLm::ForwardStep's contract.
  Result<Tensor> ForwardStep(const CausalLm& model, const Kind& kind,
                             std::span<const int32_t> tokens, KvCache& cache, bool all_positions);
};

// Appends k, v (batch * step rows, Hkv * D) of a decode step to layer `layer`'s cache rows
// [length, length + step) of each batch row; returns the cache's keys and values as
// (batch * capacity, Hkv * D) views, what the step's attention reads.
inline std::pair<View, View> AppendToKvCache(const Backend& ops, const KvCache& cache, int layer,
                                             int64_t step, const View& k, const View& v) {
  const int64_t batch = cache.batch, rows = batch * cache.capacity, kv_dim = k.dim(-1);
  const View keys = cache.keys[layer].Reshaped({rows, kv_dim});
  const View values = cache.values[layer].Reshaped({rows, kv_dim});
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t dst = b * cache.capacity + cache.length;
    ops.Convert(k.Rows(b * step, step), keys.Rows(dst, step));
    ops.Convert(v.Rows(b * step, step), values.Rows(dst, step));
  }
  return {keys, values};
}

template <typename Kind>
void DecoderStack<Kind>::LayoutPass(Workspace& ws, const ModelConfig& c, DType dtype,
                                    const Kind& kind, const PassShape& s) {
  const int64_t n = s.batch * s.seq, dim = c.hidden_size;
  bool any_checkpointed = false;
  for (int l = 0; l < c.num_layers; ++l) any_checkpointed |= s.training && s.checkpointed[l];
  input_ids = ws.Take(DType::kI32, {n});
  targets = ws.Take(DType::kI32, {n});
  positions = ws.Take(DType::kI32, {n});
  segments = s.segments ? ws.Take(DType::kI32, {s.batch, s.seq}) : View();
  rope_cos = ws.F32({n, c.head_dim / 2});
  rope_sin = ws.F32({n, c.head_dim / 2});
  acts.resize(static_cast<size_t>(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    Activations& a = acts[static_cast<size_t>(l)];
    if (s.training && !s.checkpointed[l]) {  // every activation kept for the backward
      kind.LayoutActivations(ws, c, dtype, s.batch, s.seq, true, l, a);
    } else {
      a = Activations{};
      Kind::Input(a) = ws.F32({n, dim});  // the residual stream stays fp32
    }
  }
  if (!s.training || any_checkpointed) {
    kind.LayoutActivations(ws, c, dtype, s.batch, s.seq, false, -1, scratch_acts);
  }
  final_x = ws.F32({n, dim});
  xf = ws.Take(dtype, {n, dim});
  rstd_f = ws.F32({n});
  head = LayoutHead(ws, n, c.vocab_size, s.unfused_head, dtype, s.training, s.head_gradient,
                    s.head_packing);
  if (s.training) {
    kind.LayoutGradScratch(ws, c, dtype, n, grad_scratch);
    dxf = ws.F32({n, dim});
    dx = ws.F32({n, dim});
    recompute_out = any_checkpointed ? ws.F32({n, dim}) : View();
  }
}

template <typename Kind>
Result<ForwardResult> DecoderStack<Kind>::Forward(const CausalLm& model, const UnitHooks& hooks,
                                                  const Kind& kind, const TokenBatch& tokens,
                                                  const ForwardOptions& options) {
  const ModelConfig& c = model.config();
  const Backend& ops = model.backend();
  const DType dtype = model.options().compute_dtype;
  has_forward = false;
  batch = tokens.batch_size;
  seq = tokens.seq_len;
  pass = LinearPass{.training = options.training, .seed = options.rng_seed};
  const int64_t vocab = c.vocab_size;
  const bool training = options.training;
  const bool unfused = options.unfused_head || options.return_logits;
  const bool has_segments = !tokens.segment_ids.empty();
  // A layer keeps every activation when it trains without checkpointing; otherwise only its
  // input (checkpointed) or nothing (evaluation: it runs in the scratch activations).
  auto keeps_all = [&](int l) { return training && !model.checkpointed(l); };

  // Device memory for this batch shape: inputs, activations, and (training) gradient scratch.
  PassShape shape{.batch = batch,
                  .seq = seq,
                  .training = training,
                  .unfused_head = unfused,
                  .head_gradient = lm_head->trainable,
                  .segments = has_segments,
                  .head_packing = PackingOfHead(ops, vocab, c.hidden_size, lm_head->value.dtype())};
  for (int l = 0; l < c.num_layers; ++l) shape.checkpointed.push_back(model.checkpointed(l));
  AIR_RETURN_IF_ERROR(
      workspace.Arrange([&](Workspace& ws) { LayoutPass(ws, c, dtype, kind, shape); }));

  // Inputs: ids, shifted targets (logits at t predict labels[t + 1]), positions, segments —
  // prepared on the host from the host batch and uploaded; the RoPE tables are built on the
  // device from the positions.
  loss_tokens = StageBatchInputs(tokens, host_targets, host_positions);
  ops.CopyToDevice(input_ids, tokens.input_ids.data());
  ops.CopyToDevice(targets, host_targets.data());
  ops.CopyToDevice(positions, host_positions.data());
  if (has_segments) ops.CopyToDevice(segments, tokens.segment_ids.data());
  ops.RopeTables(positions, inv_freq, attention_factor, rope_cos, rope_sin);

  const int root = model.root_unit();
  if (hooks.before_forward) hooks.before_forward(root);
  // x (N, C) = embed[input_ids]
  const View& x0 = c.num_layers > 0 ? Kind::Input(acts[0]) : final_x;
  ops.EmbeddingForward(input_ids, embed->value, x0);
  for (int l = 0; l < c.num_layers; ++l) {
    if (hooks.before_forward) hooks.before_forward(l);
    const LayerContext ctx = Context(model, l);
    const View& out = l + 1 < c.num_layers ? Kind::Input(acts[l + 1]) : final_x;
    if (keeps_all(l)) {
      kind.Forward(ctx, layers[l], acts[l], out);
    } else {
      Activations scratch = scratch_acts;
      Kind::Input(scratch) = Kind::Input(acts[l]);
      kind.Forward(ctx, layers[l], scratch, out);
    }
    if (hooks.after_forward) hooks.after_forward(l);
  }

  // xf = RMSNorm(x) * w; then the head and the loss (and in training its gradient, with the
  // per-token scale known now: d(loss_scale * loss_sum / tokens)).
  ops.RmsNormForward(final_x, final_norm->value, static_cast<float>(c.rms_norm_eps), xf, rstd_f);
  const float per_token =
      loss_tokens > 0 ? options.loss_scale / static_cast<float>(loss_tokens) : 0.0f;
  ForwardResult result;
  // The loss sum goes to the caller's device accumulator, or to the head's own (read below).
  const bool accumulate = !options.loss_sum_into.empty();
  HeadViews loss_views = head;
  if (accumulate) loss_views.loss_sum = options.loss_sum_into;
  ops.Zero(head.loss_sum);
  if (options.return_logits) {
    // The caller wants the logits: compute the unfused head, copy them out, then its gradient.
    HeadForward(ops, xf, *lm_head, targets, head, true);
    result.logits = ops.ToHostTensor(head.logits);
    result.logits.Reshape({batch, seq, vocab});
    if (training && !accumulate) ops.Zero(head.loss_sum);  // counted again by the training head
  }
  if (training) {
    HeadForwardBackward(ops, xf, *lm_head, targets, per_token, loss_views, unfused, dxf);
  } else if (!options.return_logits) {
    HeadForward(ops, xf, *lm_head, targets, loss_views, unfused);
  }
  if (hooks.after_forward) hooks.after_forward(root);

  result.loss_tokens = loss_tokens;
  if (!accumulate || (options.return_logits && !training)) {
    result.loss_sum = ops.ReadScalar(head.loss_sum);  // the forward's one read-back
    result.loss = loss_tokens > 0 ? result.loss_sum / static_cast<double>(loss_tokens) : 0.0;
  }
  has_forward = training;
  return result;
}

template <typename Kind>
Status DecoderStack<Kind>::Backward(const CausalLm& model, const UnitHooks& hooks,
                                    const Kind& kind) {
  if (!has_forward) {
    return FailedPrecondition(
        "Backward needs a preceding Forward with training = true (each Forward allows one "
        "Backward)");
  }
  has_forward = false;
  const ModelConfig& c = model.config();
  const Backend& ops = model.backend();
  const int root = model.root_unit();
  if (hooks.before_backward) hooks.before_backward(root);
  // dx (N, C) = final RMSNorm backward of dxf (the op accumulates into dx: start from zero)
  ops.Zero(dx);
  ops.RmsNormBackward(final_x, final_norm->value, rstd_f, dxf, dx,
                      final_norm->trainable ? final_norm->grad : View());
  for (int l = static_cast<int>(c.num_layers) - 1; l >= 0; --l) {
    if (hooks.before_backward) hooks.before_backward(l);
    LayerContext ctx = Context(model, l);
    ctx.input_grad = l > 0 || embed->trainable;
    if (model.checkpointed(l)) {
      // Recompute this layer's activations from its saved input, then run its backward.
      Activations recomputed = scratch_acts;
      Kind::Input(recomputed) = Kind::Input(acts[l]);
      kind.Forward(ctx, layers[l], recomputed, recompute_out);
      kind.Backward(ctx, layers[l], recomputed, dx, grad_scratch);
    } else {
      kind.Backward(ctx, layers[l], acts[l], dx, grad_scratch);
    }
    model.FinishUnitGradients(l);
    if (hooks.after_backward) hooks.after_backward(l);
  }
  // dembed[input_ids] += dx, except the padding row (nn.Embedding's padding_idx).
  if (embed->trainable) {
    const int32_t skip = c.pad_token_id >= 0 ? static_cast<int32_t>(c.pad_token_id) : -1;
    ops.EmbeddingBackward(input_ids, dx, skip, embed->grad);
  }
  model.FinishUnitGradients(root);
  if (hooks.after_backward) hooks.after_backward(root);
  return Status::Ok();
}

template <typename Kind>
Result<Tensor> DecoderStack<Kind>::ForwardStep(const CausalLm& model, const Kind& kind,
                                               std::span<const int32_t> tokens, KvCache& cache,
                                               bool all_positions) {
  const ModelConfig& c = model.config();
  const Backend& ops = model.backend();
  const DType dtype = model.options().compute_dtype;
  AIR_ASSIGN_OR_RETURN(const int64_t step, CheckDecodeStep(cache, c, tokens));
  const int64_t batch_rows = cache.batch;
  const int64_t n = batch_rows * step, dim = c.hidden_size;
  const int64_t rows = all_positions ? n : batch_rows;  // rows that get logits

  // Device memory for this step (its own workspace: a training step's activations survive).
  View ids, step_positions, cos, sin, x, out, selected, normed, rstd, logits;
  Activations step_acts;
  AIR_RETURN_IF_ERROR(decode_workspace.Arrange([&](Workspace& ws) {
    ids = ws.Take(DType::kI32, {n});
    step_positions = ws.Take(DType::kI32, {n});
    cos = ws.F32({n, c.head_dim / 2});
    sin = ws.F32({n, c.head_dim / 2});
    x = ws.F32({n, dim});  // the residual stream, fp32 as in training
    out = ws.F32({n, dim});
    kind.LayoutActivations(ws, c, dtype, batch_rows, step, false, -1, step_acts);
    selected = ws.F32({rows, dim});
    normed = ws.Take(dtype, {rows, dim});
    rstd = ws.F32({rows});
    logits = ws.F32({rows, c.vocab_size});
  }));
  host_positions.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    host_positions[i] = static_cast<int32_t>(cache.length + i % step);
  }
  ops.CopyToDevice(ids, tokens.data());
  ops.CopyToDevice(step_positions, host_positions.data());
  ops.RopeTables(step_positions, inv_freq, attention_factor, cos, sin);

  LayerContext ctx;
  ctx.config = &c;
  ctx.backend = &ops;
  ctx.batch = batch_rows;
  ctx.seq = step;
  ctx.rope_cos = cos;
  ctx.rope_sin = sin;
  ops.EmbeddingForward(ids, embed->value, x);
  for (int l = 0; l < c.num_layers; ++l) {
    ctx.layer = l;
    Kind::Input(step_acts) = x;
    kind.DecodeLayer(ctx, layers[l], step_acts, cache, x, out);
    std::swap(x, out);
  }
  cache.length += step;

  // Final norm and head, on every new token or only the last of each row.
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t src = all_positions ? r : r * step + step - 1;
    ops.Copy(selected.Rows(r, 1), x.Rows(src, 1));
  }
  ops.RmsNormForward(selected, final_norm->value, static_cast<float>(c.rms_norm_eps), normed, rstd);
  ops.Gemm(false, true, rows, c.vocab_size, dim, normed, dim, lm_head->value, dim, 0.0f, logits,
           c.vocab_size);
  Tensor host_logits = ops.ToHostTensor(logits);
  if (all_positions) host_logits.Reshape({batch_rows, step, c.vocab_size});
  return host_logits;
}

}  // namespace air::engine
