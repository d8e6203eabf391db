// Text generation with a CausalLm and its KV cache: the prompt is fed once, then one token
// per step through CausalLm::ForwardStep, each chosen by a TokenSampler, until an end-of-
// sequence id or max_new_tokens. Used by `air generate` and by the trainer's sample generations.
// Thread safety: drives one model from the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/model/causal_lm.h"
#include "engine/train/sampling.h"

namespace air::engine::train {

struct GenerateOptions {
  int max_new_tokens = 128;
  SamplingOptions sampling;
  std::vector<int64_t> eos_token_ids;  // generation stops after emitting any of these
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // the new tokens (an ending eos included)
  bool stopped_at_eos = false;
  double prefill_s = 0.0;  // time to process the prompt
  double decode_s = 0.0;   // time for the new tokens
};

// `on_token` (optional) sees each new token as it is chosen, for streaming output.
Result<GenerateResult> Generate(CausalLm& model, std::span<const int32_t> prompt,
                                const GenerateOptions& options,
                                const std::function<void(int32_t)>& on_token = nullptr);

}  // namespace air::engine::train
