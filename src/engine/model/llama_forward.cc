// LlamaModel::Forward and ::Backward: the decoder stack's pass (decoder_stack.h) over Llama's
// decoder layers (decoder_layer.cc; the head's math is in lm_head.cc).
#include "engine/model/batch_inputs.h"
#include "engine/model/llama_model.h"
#include "engine/model/llama_model_impl.h"

namespace air::engine {

Result<ForwardResult> LlamaModel::Forward(const TokenBatch& batch, const ForwardOptions& options) {
  AIR_RETURN_IF_ERROR(ValidateTokenBatch(batch, config().vocab_size));
  // The head's gradient is written during a training forward: held units need their gradients.
  if (options.training) AIR_RETURN_IF_ERROR(EnsureGradients());
  return impl_->Forward(*this, hooks(), LlamaLayerKind{}, batch, options);
}

size_t LlamaModel::PassWorkspaceBytes(const ModelConfig& config, DType compute,
                                      const PassShape& shape) {
  DecoderStack<LlamaLayerKind> stack(nullptr);
  return Workspace::Measure(
      [&](Workspace& ws) { stack.LayoutPass(ws, config, compute, LlamaLayerKind{}, shape); });
}

Status LlamaModel::Backward() { return impl_->Backward(*this, hooks(), LlamaLayerKind{}); }

}  // namespace air::engine
