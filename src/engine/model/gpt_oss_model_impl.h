// Internal state of GptOssModel shared by its implementation files (gpt_oss_model.cc:
// parameters, creation, initialization; gpt_oss_forward.cc: Forward/Backward;
// gpt_oss_decode.cc: ForwardStep). Not part of the public API.
// Thread safety: owned by one GptOssModel, driven by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/model/gpt_oss_layer.h"
#include "engine/model/gpt_oss_model.h"
#include "engine/model/lm_head.h"
#include "engine/workspace.h"

namespace air::engine {

struct GptOssModel::Impl {
  explicit Impl(const Backend* backend) : workspace(backend), decode_workspace(backend) {}

  Parameter* embed = nullptr;       // (V, C)
  Parameter* final_norm = nullptr;  // (C)
  Parameter* lm_head = nullptr;     // (V, C); == embed when tied
  std::vector<GptOssLayerWeights> layers;
  std::unique_ptr<Buffer> inv_freq_buffer;
  View inv_freq;                  // (D/2) F32, rounded to the buffer dtype
  float attention_factor = 1.0f;  // YaRN's cos/sin scale

  std::vector<int32_t> host_targets, host_positions;

  Workspace workspace;
  Workspace decode_workspace;
  bool has_forward = false;
  LinearPass pass;  // the last Forward's (training and its rng_seed), for adapters
  int64_t batch = 0, seq = 0;
  View input_ids, targets, positions, segments;
  View rope_cos, rope_sin;                   // (N, D/2) F32
  std::vector<GptOssLayerActivations> acts;  // per layer; only .attn.x for checkpointed layers
  GptOssLayerActivations scratch_acts;       // recomputation / evaluation
  std::vector<std::vector<int32_t>> host_offsets;  // per layer: the MoE's row ranges
  std::vector<int32_t> scratch_offsets;            // scratch_acts' row ranges
  View recompute_out;
  View final_x, xf, rstd_f;
  HeadViews head;
  int64_t loss_tokens = 0;
  GptOssGradScratch grad_scratch;
  View dxf, dx;

  LayerContext Context(const GptOssModel& model, int layer) const {
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
