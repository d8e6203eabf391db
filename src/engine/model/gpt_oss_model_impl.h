// Internal state of GptOssModel shared by its implementation files (gpt_oss_model.cc:
// parameters, creation, initialization; gpt_oss_forward.cc: Forward/Backward;
// gpt_oss_decode.cc: ForwardStep): the decoder stack's (decoder_stack.h) over GPT-OSS's decoder
// layer (gpt_oss_layer.h). Not part of the public API.
// Thread safety: owned by one GptOssModel, driven by one thread.
#pragma once

#include <cstdint>

#include "engine/model/decoder_stack.h"
#include "engine/model/gpt_oss_layer.h"
#include "engine/model/gpt_oss_model.h"

namespace air::engine {

// GPT-OSS's decoder layer as DecoderStack runs it (stateless: the MoE's row ranges stay in each
// layer's activations on the device).
struct GptOssLayerKind {
  using Weights = GptOssLayerWeights;
  using Activations = GptOssLayerActivations;
  using GradScratch = GptOssGradScratch;
  static View& Input(Activations& a) { return a.attn.x; }

  void LayoutActivations(Workspace& ws, const ModelConfig& c, DType dtype, int64_t batch,
                         int64_t seq, bool with_input, int /*layer*/, Activations& a) const {
    LayoutGptOssLayerActivations(ws, c, dtype, batch, seq, with_input, a);
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

  GptOssLayerKind LayerKind() { return {}; }
};

}  // namespace air::engine
