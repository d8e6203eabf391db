// The model of an architecture: the one place that maps a ModelConfig's architecture to the
// CausalLm implementing it (LlamaModel for the Llama family today).
// Thread safety: pure functions.
#pragma once

#include <memory>

#include "base/status.h"
#include "engine/model/causal_lm.h"

namespace air::engine {

Result<std::unique_ptr<CausalLm>> CreateModel(const ModelConfig& config,
                                              std::shared_ptr<Backend> backend,
                                              const ModelOptions& options = {});

}  // namespace air::engine
