// Greedy and top-p sampling (see sampling.h).
#include "engine/train/sampling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace air::engine::train {

Status ValidateSamplingOptions(const SamplingOptions& options) {
  if (!(options.temperature >= 0.0) || !std::isfinite(options.temperature)) {
    return InvalidArgument(
        fmt::format("--temperature: {} is out of range: must be >= 0 (0 is "
                    "greedy)",
                    options.temperature));
  }
  if (!(options.top_p > 0.0 && options.top_p <= 1.0)) {
    return InvalidArgument(
        fmt::format("--top-p: {} is out of range: must be in (0, 1]", options.top_p));
  }
  return Status::Ok();
}

int32_t ArgMax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int32_t TokenSampler::Sample(std::span<const float> logits) {
  if (options_.temperature == 0.0 || logits.size() <= 1) return ArgMax(logits);
  const size_t n = logits.size();
  // softmax(logits / T), in double.
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  std::vector<double> probs(n);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    probs[i] = std::exp((logits[i] - max_logit) / options_.temperature);
    total += probs[i];
  }
  for (double& p : probs) p /= total;

  // The nucleus: most likely first, until the cumulative probability reaches top_p.
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return probs[a] > probs[b]; });
  size_t keep = n;
  if (options_.top_p < 1.0) {
    double cumulative = 0.0;
    for (size_t i = 0; i < n; ++i) {
      cumulative += probs[order[i]];
      if (cumulative >= options_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept_mass = 0.0;
  for (size_t i = 0; i < keep; ++i) kept_mass += probs[order[i]];

  // A uniform draw in [0, kept_mass) from 53 random bits.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * kept_mass;
  double cumulative = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cumulative += probs[order[i]];
    if (u < cumulative) return order[i];
  }
  return order[keep - 1];
}

}  // namespace air::engine::train
