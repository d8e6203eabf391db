// Choosing the next token from a row of logits: greedy (temperature 0) or nucleus (top-p)
// sampling at a temperature, as transformers' TemperatureLogitsWarper + TopPLogitsWarper do:
// probabilities = softmax(logits / T); keep the most likely tokens whose cumulative probability
// first reaches top_p (at least one token); renormalize; draw. The random source is an
// mt19937_64 seeded by the caller, so a seed gives the same text every time.
// Thread safety: a TokenSampler is used by one generation loop.
#pragma once

#include <cstdint>
#include <random>
#include <span>

#include "base/status.h"

namespace air::engine::train {

struct SamplingOptions {
  double temperature = 0.0;  // 0: greedy
  double top_p = 1.0;        // in (0, 1]
  uint64_t seed = 0;
};

// InvalidArgument naming the flag when temperature < 0 or top_p is outside (0, 1].
Status ValidateSamplingOptions(const SamplingOptions& options);

// Index of the largest logit (the first one on ties).
int32_t ArgMax(std::span<const float> logits);

class TokenSampler {
 public:
  explicit TokenSampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {}

  int32_t Sample(std::span<const float> logits);

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
};

}  // namespace air::engine::train
