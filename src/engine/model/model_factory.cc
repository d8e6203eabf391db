// Architecture -> model (see model_factory.h).
#include "engine/model/model_factory.h"

#include "engine/model/gpt_oss_model.h"
#include "engine/model/llama_model.h"

namespace air::engine {

Result<std::unique_ptr<CausalLm>> CreateModel(const ModelConfig& config,
                                              std::shared_ptr<Backend> backend,
                                              const ModelOptions& options) {
  if (config.arch == Architecture::kGptOss) {
    AIR_ASSIGN_OR_RETURN(std::unique_ptr<GptOssModel> model,
                         GptOssModel::Create(config, std::move(backend), options));
    return std::unique_ptr<CausalLm>(std::move(model));
  }
  AIR_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model,
                       LlamaModel::Create(config, std::move(backend), options));
  return std::unique_ptr<CausalLm>(std::move(model));
}

std::vector<ParameterSpec> ParameterSpecsFor(const ModelConfig& config) {
  if (config.arch == Architecture::kGptOss) return GptOssModel::ParameterSpecs(config);
  return LlamaModel::ParameterSpecs(config);
}

size_t PassWorkspaceBytes(const ModelConfig& config, DType compute, const PassShape& shape) {
  if (config.arch == Architecture::kGptOss) {
    return GptOssModel::PassWorkspaceBytes(config, compute, shape);
  }
  return LlamaModel::PassWorkspaceBytes(config, compute, shape);
}

}  // namespace air::engine
