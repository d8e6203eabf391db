// Internal state of LlamaModel shared by its implementation files (llama_model.cc: parameters,
// initialization; llama_forward.cc: Forward/Backward; kv_decode.cc: ForwardStep): the decoder
// stack's (decoder_stack.h) over Llama's decoder layer (decoder_layer.h). Not part of the
// public API.
// Thread safety: owned by one LlamaModel, driven by one thread.
#pragma once

#include "engine/model/decoder_layer.h"
#include "engine/model/decoder_stack.h"
#include "engine/model/llama_model.h"

namespace air::engine {

// Llama's decoder layer as DecoderStack runs it.
struct LlamaLayerKind {
  using Weights = LayerWeights;
  using Activations = LayerActivations;
  using GradScratch = LayerGradScratch;
  static View& Input(Activations& a) { return a.x; }

  void LayoutActivations(Workspace& ws, const ModelConfig& c, DType dtype, int64_t batch,
                         int64_t seq, bool with_input, int /*layer*/, Activations& a) const {
    LayoutLayerActivations(ws, c, dtype, batch, seq, with_input, a);
  }
  void LayoutGradScratch(Workspace& ws, const ModelConfig& c, DType dtype, int64_t rows,
                         GradScratch& g) const {
    LayoutLayerGradScratch(ws, c, dtype, rows, g);
  }
  void Forward(const LayerContext& ctx, const Weights& w, const Activations& a,
               const View& out) const {
    LayerForward(ctx, w, a, out);
  }
  // A decode step's layer (kv_decode.cc / gpt_oss_decode.cc).
  void DecodeLayer(const LayerContext& ctx, const Weights& w, Activations& a, const KvCache& cache,
                   const View& x, const View& out) const;
  void Backward(const LayerContext& ctx, const Weights& w, const Activations& a, const View& dx,
                const GradScratch& g) const {
    LayerBackward(ctx, w, a, dx, g);
  }
};

struct LlamaModel::Impl : DecoderStack<LlamaLayerKind> {
  using DecoderStack::DecoderStack;
};

}  // namespace air::engine
