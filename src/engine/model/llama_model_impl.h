// Internal state of LlamaModel shared by its implementation files (llama_model.cc: building,
// loading, saving; llama_forward.cc: Forward/Backward; kv_decode.cc: ForwardStep). Not part of
// the public API.
// Thread safety: owned by one LlamaModel, driven by one thread.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/decoder_layer.h"
#include "engine/model/llama_model.h"

namespace air::engine {

struct LlamaModel::Impl {
  // Views into LlamaModel::params_.
  Parameter* embed = nullptr;       // (V, C)
  Parameter* final_norm = nullptr;  // (C)
  Parameter* lm_head = nullptr;     // (V, C); == embed when tied
  std::vector<LayerWeights> layers;
  std::vector<float> inv_freq;  // (D/2)

  // State saved by a training Forward for the Backward.
  bool has_forward = false;
  int64_t batch = 0, seq = 0;
  std::vector<int32_t> input_ids;         // (N)
  std::vector<int32_t> targets;           // (N) shifted labels: targets[t] = labels[t + 1]
  std::vector<int32_t> segments;          // (N) or empty
  std::vector<float> rope_cos, rope_sin;  // (N, D/2)
  std::vector<LayerActivations> acts;     // per layer; only .x under checkpointing
  LayerActivations scratch_acts;          // recomputation / evaluation scratch
  Tensor final_x;                         // (N, C) input of the final norm
  Tensor xf, rstd_f;                      // (N, C), (N) after the final norm
  Tensor logits;                          // (N, V); overwritten by dlogits in Backward
  Tensor ce_lse;                          // (N)
  int64_t loss_tokens = 0;
  LayerGradScratch grad_scratch;
  Tensor dx;  // (N, C) gradient flowing down the stack

  LayerContext Context(const LlamaModel& model, int layer) const {
    LayerContext ctx;
    ctx.config = &model.config_;
    ctx.ops = model.ops_.get();
    ctx.batch = batch;
    ctx.seq = seq;
    ctx.rope_cos = rope_cos.data();
    ctx.rope_sin = rope_sin.data();
    ctx.segments = segments.empty() ? nullptr : segments.data();
    ctx.layer = layer;
    return ctx;
  }
};

}  // namespace air::engine
