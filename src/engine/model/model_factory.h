// The model of an architecture: the one place that maps a ModelConfig's architecture to the
// CausalLm implementing it (LlamaModel for the Llama family, GptOssModel for GptOssForCausalLM)
// and to its parameter list.
// Thread safety: pure functions.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "engine/model/causal_lm.h"

namespace air::engine {

Result<std::unique_ptr<CausalLm>> CreateModel(const ModelConfig& config,
                                              std::shared_ptr<Backend> backend,
                                              const ModelOptions& options = {});

// The parameters (model names, shapes, layers) a model of `config` has, in order, without
// allocating anything. `config` must be valid (ValidateModelConfig).
std::vector<ParameterSpec> ParameterSpecsFor(const ModelConfig& config);

}  // namespace air::engine
