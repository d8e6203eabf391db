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

// The bytes a pass's workspace takes (activations, the head's chunk of logits, gradient scratch,
// the batch's inputs) for a model of `config` computing in `compute` over batches of `shape`:
// what Forward allocates, measured by the model's own layout without allocating (the training
// plan's activation memory).
size_t PassWorkspaceBytes(const ModelConfig& config, DType compute, const PassShape& shape);

}  // namespace air::engine
