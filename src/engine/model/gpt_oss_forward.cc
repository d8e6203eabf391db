// GptOssModel::Forward and ::Backward: the decoder stack's pass (decoder_stack.h) over
// GPT-OSS's decoder layers (gpt_oss_layer.cc and moe.cc; the head's math is in lm_head.cc).
#include "engine/model/batch_inputs.h"
#include "engine/model/gpt_oss_config.h"
#include "engine/model/gpt_oss_model_impl.h"

namespace air::engine {

Result<ForwardResult> GptOssModel::Forward(const TokenBatch& batch, const ForwardOptions& options) {
  AIR_RETURN_IF_ERROR(ValidateTokenBatch(batch, config().vocab_size));
  if (options.training) AIR_RETURN_IF_ERROR(EnsureGradients());
  return impl_->Forward(*this, hooks(), impl_->LayerKind(), batch, options);
}

size_t GptOssModel::PassWorkspaceBytes(const ModelConfig& config, DType compute,
                                       const PassShape& shape) {
  GptOssModel::Impl stack(nullptr);
  return Workspace::Measure(
      [&](Workspace& ws) { stack.LayoutPass(ws, config, compute, stack.LayerKind(), shape); });
}

Status GptOssModel::Backward() { return impl_->Backward(*this, hooks(), impl_->LayerKind()); }

}  // namespace air::engine
