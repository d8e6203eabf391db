// The generation loop (see generate.h).
#include "engine/train/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "base/time_format.h"

namespace air::engine::train {

Result<GenerateResult> Generate(CausalLm& model, std::span<const int32_t> prompt,
                                const GenerateOptions& options,
                                const std::function<void(int32_t)>& on_token) {
  AIR_RETURN_IF_ERROR(ValidateSamplingOptions(options.sampling));
  if (prompt.empty()) return InvalidArgument("the prompt is empty (it encoded to no tokens)");
  if (options.max_new_tokens < 0) {
    return InvalidArgument(
        fmt::format("--max-new-tokens: {} is out of range: must be >= 0", options.max_new_tokens));
  }
  const int64_t capacity = static_cast<int64_t>(prompt.size()) + options.max_new_tokens;
  const int64_t max_positions = model.config().max_position_embeddings;
  if (max_positions > 0 && static_cast<int64_t>(prompt.size()) >= max_positions) {
    return InvalidArgument(
        fmt::format("the prompt is {} tokens, but the model's max_position_embeddings is {}: it "
                    "must be shorter, to leave room for at least one new token",
                    prompt.size(), max_positions));
  }
  if (max_positions > 0 && capacity > max_positions) {
    return InvalidArgument(
        fmt::format("the prompt ({} tokens) plus --max-new-tokens ({}) exceeds the model's "
                    "max_position_embeddings ({}); ask for at most {} new tokens",
                    prompt.size(), options.max_new_tokens, max_positions,
                    std::max<int64_t>(0, max_positions - static_cast<int64_t>(prompt.size()))));
  }

  GenerateResult result;
  if (options.max_new_tokens == 0) return result;
  AIR_ASSIGN_OR_RETURN(KvCache cache, model.NewKvCache(1, capacity));
  TokenSampler sampler(options.sampling);

  auto start = std::chrono::steady_clock::now();
  AIR_ASSIGN_OR_RETURN(Tensor logits, model.ForwardStep(prompt, cache));
  result.prefill_s = SecondsSince(start);
  start = std::chrono::steady_clock::now();
  for (int i = 0; i < options.max_new_tokens; ++i) {
    const int32_t token = sampler.Sample(logits.values());
    result.tokens.push_back(token);
    if (on_token) on_token(token);
    if (std::find(options.eos_token_ids.begin(), options.eos_token_ids.end(), token) !=
        options.eos_token_ids.end()) {
      result.stopped_at_eos = true;
      break;
    }
    if (i + 1 == options.max_new_tokens) break;
    AIR_ASSIGN_OR_RETURN(logits, model.ForwardStep(std::span<const int32_t>(&token, 1), cache));
  }
  result.decode_s = SecondsSince(start);
  return result;
}

}  // namespace air::engine::train
