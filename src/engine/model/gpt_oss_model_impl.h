// Internal state of GptOssModel shared by its implementation files (gpt_oss_model.cc:
// parameters, creation, initialization; gpt_oss_forward.cc: Forward/Backward;
// gpt_oss_decode.cc: ForwardStep): the decoder stack's (decoder_stack.h) over GPT-OSS's decoder
// layer (gpt_oss_layer.h), plus the MoE's host-side row ranges. Not part of the public API.
// Thread safety: owned by one GptOssModel, driven by one thread.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/decoder_stack.h"
#include "engine/model/gpt_oss_layer.h"
#include "engine/model/gpt_oss_model.h"

namespace air::engine {

// GPT-OSS's decoder layer as DecoderStack runs it: a layer's activations receive its MoE's row
// ranges in `host_offsets[layer]` (`scratch_offsets` for the scratch set).
struct GptOssLayerKind {
  using Weights = GptOssLayerWeights;
  using Activations = GptOssLayerActivations;
  using GradScratch = GptOssGradScratch;
  static View& Input(Activations& a) { return a.attn.x; }

  std::vector<std::vector<int32_t>>* host_offsets;
  std::vector<int32_t>* scratch_offsets;

  void LayoutActivations(Workspace& ws, const ModelConfig& c, DType dtype, int64_t batch,
                         int64_t seq, bool with_input, int layer, Activations& a) const {
    std::vector<int32_t>* offsets =
        layer < 0 ? scratch_offsets : &(*host_offsets)[static_cast<size_t>(layer)];
    LayoutGptOssLayerActivations(ws, c, dtype, batch, seq, with_input, offsets, a);
  }
  void LayoutGradScratch(Workspace& ws, const ModelConfig& c, DType /*dtype*/, int64_t rows,
                         GradScratch& g) const {
    LayoutGptOssGradScratch(ws, c, rows, g);
  }
  void Forward(const LayerContext& ctx, const Weights& w, const Activations& a,
               const View& out) const {
    GptOssLayerForward(ctx, w, a, out);
  }
  // A decode step's layer (kv_decode.cc / gpt_oss_decode.cc).
  void DecodeLayer(const LayerContext& ctx, const Weights& w, Activations& a, const KvCache& cache,
                   const View& x, const View& out) const;
  void Backward(const LayerContext& ctx, const Weights& w, const Activations& a, const View& dx,
                const GradScratch& g) const {
    GptOssLayerBackward(ctx, w, a, dx, g);
  }
};

struct GptOssModel::Impl : DecoderStack<GptOssLayerKind> {
  using DecoderStack::DecoderStack;

  std::vector<std::vector<int32_t>> host_offsets;  // per layer: the MoE's row ranges
  std::vector<int32_t> scratch_offsets;            // scratch_acts' row ranges

  GptOssLayerKind LayerKind() { return {&host_offsets, &scratch_offsets}; }
};

}  // namespace air::engine
