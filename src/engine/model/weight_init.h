// Random initialization as transformers' _init_weights does it, shared by the models
// (LlamaModel, GptOssModel): each parameter is normal(0, initializer_range), zero or one by a
// rule the model gives; the embedding's padding row (config pad_token_id) starts at zero, as
// nn.Embedding(padding_idx) does. Draws are Box-Muller on 53-bit uniforms of one mt19937_64
// stream in parameter order: the same numbers on every platform.
// Thread safety: one call per model at a time (it writes the model's parameters).
#pragma once

#include <cstdint>
#include <functional>

#include "engine/model/causal_lm.h"

namespace air::engine {

enum class InitRule { kNormal, kZero, kOne };

// Initializes every parameter of `model` from `seed` by `rule`; `embed` (may be null) is the
// token embedding whose padding row is zeroed.
void InitWeightsLikeTransformers(CausalLm& model, uint64_t seed, const Parameter* embed,
                                 const std::function<InitRule(const Parameter&)>& rule);

}  // namespace air::engine
