// Architecture -> model (see model_factory.h).
#include "engine/model/model_factory.h"

#include "engine/model/llama_model.h"

namespace air::engine {

Result<std::unique_ptr<CausalLm>> CreateModel(const ModelConfig& config,
                                              std::shared_ptr<Backend> backend,
                                              const ModelOptions& options) {
  AIR_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model,
                       LlamaModel::Create(config, std::move(backend), options));
  return std::unique_ptr<CausalLm>(std::move(model));
}

}  // namespace air::engine
