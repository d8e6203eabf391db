// Internal state of LlamaModel shared by its implementation files (llama_model.cc: parameters,
// initialization; llama_forward.cc: Forward/Backward; kv_decode.cc: ForwardStep). Not part of
// the public API.
// Thread safety: owned by one LlamaModel, driven by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/model/decoder_layer.h"
#include "engine/model/llama_model.h"
#include "engine/model/lm_head.h"
#include "engine/workspace.h"

namespace air::engine {

struct LlamaModel::Impl {
  explicit Impl(const Backend* backend) : workspace(backend), decode_workspace(backend) {}

  // Views into the model's parameters.
  Parameter* embed = nullptr;       // (V, C)
  Parameter* final_norm = nullptr;  // (C)
  Parameter* lm_head = nullptr;     // (V, C); == embed when tied
  std::vector<LayerWeights> layers;
  std::unique_ptr<Buffer> inv_freq_buffer;
  View inv_freq;  // (D/2) F32 on the device, rounded to the buffer dtype

  // Host staging of a batch's inputs (reused; uploaded to the device views below).
  std::vector<int32_t> host_targets, host_positions;

  // Forward/Backward memory on the backend (views into `workspace`).
  Workspace workspace;
  Workspace decode_workspace;  // ForwardStep's, so generation never clobbers a training step
  bool has_forward = false;
  bool head_done = false;  // the training forward computed the head's gradient (dxf)
  int64_t batch = 0, seq = 0;
  LinearPass pass;  // the last Forward's (training and its rng_seed), for adapters
  View input_ids, targets, positions, segments;  // (N) I32; segments empty when none
  View rope_cos, rope_sin;                       // (N, D/2) F32
  std::vector<LayerActivations> acts;            // per layer; only .x for checkpointed layers
  LayerActivations scratch_acts;                 // recomputation / evaluation (no .x of its own)
  View recompute_out;                            // (N, C) output of a recomputed layer (discarded)
  View final_x;                                  // (N, C) input of the final norm
  View xf, rstd_f;                               // (N, C), (N) after the final norm
  HeadViews head;                                // a chunk of logits, lse, the loss sum
  int64_t loss_tokens = 0;
  LayerGradScratch grad_scratch;
  View dxf;  // (N, C) F32 gradient of the final norm's output (from the head, in the forward)
  View dx;   // (N, C) F32 gradient flowing down the stack

  LayerContext Context(const LlamaModel& model, int layer) const {
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
};

}  // namespace air::engine
