// Internal state of LlamaModel shared by its implementation files (llama_model.cc: parameters,
// units, initialization; llama_forward.cc: Forward/Backward; kv_decode.cc: ForwardStep). Not
// part of the public API.
// Thread safety: owned by one LlamaModel, driven by one thread.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/decoder_layer.h"
#include "engine/model/llama_model.h"
#include "engine/workspace.h"

namespace air::engine {

struct LlamaModel::Impl {
  explicit Impl(const Backend* backend) : workspace(backend), decode_workspace(backend) {}

  // Views into LlamaModel::params_.
  Parameter* embed = nullptr;       // (V, C)
  Parameter* final_norm = nullptr;  // (C)
  Parameter* lm_head = nullptr;     // (V, C); == embed when tied
  std::vector<LayerWeights> layers;
  std::vector<float> inv_freq;  // (D/2)

  // Host staging of a batch's inputs (reused; uploaded to the device views below).
  std::vector<int32_t> host_targets, host_positions;
  std::vector<float> host_cos, host_sin;

  // Forward/Backward memory on the backend (views into `workspace`).
  Workspace workspace;
  Workspace decode_workspace;  // ForwardStep's, so generation never clobbers a training step
  bool has_forward = false;
  int64_t batch = 0, seq = 0;
  View input_ids, targets, segments;   // (N) I32; segments empty when the batch has none
  View rope_cos, rope_sin;             // (N, D/2)
  std::vector<LayerActivations> acts;  // per layer; only .x unless every activation is kept
  LayerActivations scratch_acts;       // recomputation / evaluation (no .x of its own)
  View recompute_out;                  // (N, C) output of a recomputed layer (discarded)
  View final_x;                        // (N, C) input of the final norm
  View xf, rstd_f;                     // (N, C), (N) after the final norm
  View logits;                         // (N, V); overwritten by dlogits in Backward
  View ce_lse;                         // (N)
  View loss_sum;                       // F64 scalar
  int64_t loss_tokens = 0;
  LayerGradScratch grad_scratch;
  View dx;  // (N, C) gradient flowing down the stack

  LayerContext Context(const LlamaModel& model, int layer) const {
    LayerContext ctx;
    ctx.config = &model.config_;
    ctx.backend = model.backend_.get();
    ctx.batch = batch;
    ctx.seq = seq;
    ctx.rope_cos = rope_cos.f32();
    ctx.rope_sin = rope_sin.f32();
    ctx.segments = segments.empty() ? nullptr : segments.i32();
    ctx.layer = layer;
    return ctx;
  }
};

}  // namespace air::engine
