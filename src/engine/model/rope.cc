// RoPE inverse frequencies (see rope.h).
#include "engine/model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace air::engine {

std::vector<float> RopeInverseFrequencies(const ModelConfig& config) {
  const int64_t dim = config.head_dim;
  std::vector<float> inv_freq(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    // transformers: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), all in fp32.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float power = std::pow(static_cast<float>(config.rope.theta), exponent);
    inv_freq[static_cast<size_t>(i)] = 1.0f / power;
  }
  if (config.rope.type == "llama3") {
    const RopeConfig& r = config.rope;
    const double old_len = static_cast<double>(r.original_max_position_embeddings);
    const double low_freq_wavelen = old_len / r.low_freq_factor;
    const double high_freq_wavelen = old_len / r.high_freq_factor;
    for (float& f : inv_freq) {
      const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
      if (wavelen > low_freq_wavelen) {
        f = static_cast<float>(f / r.factor);  // long wavelengths: scaled down
      } else if (wavelen >= high_freq_wavelen) {
        // In between: blend the scaled and unscaled frequency.
        const float smooth = static_cast<float>((old_len / wavelen - r.low_freq_factor) /
                                                (r.high_freq_factor - r.low_freq_factor));
        f = (1.0f - smooth) * f / static_cast<float>(r.factor) + smooth * f;
      }  // short wavelengths: unchanged
    }
  }
  return inv_freq;
}

std::vector<float> GptOssRopeInverseFrequencies(const GptOssConfig& config) {
  const GptOssRope& r = config.rope;
  const int64_t dim = static_cast<int64_t>(static_cast<double>(config.head_dim) *
                                           r.partial_rotary_factor);  // int(head_dim * prf)
  const int64_t half = dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  const float base = static_cast<float>(r.theta);
  std::vector<float> pos_freqs(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    // base ** (arange(0, dim, 2).float() / dim), in fp32
    pos_freqs[i] = std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dim));
  }
  if (r.type != "yarn") {
    for (int64_t i = 0; i < half; ++i) inv_freq[i] = 1.0f / pos_freqs[i];
    return inv_freq;
  }
  // find_correction_dim / find_correction_range in Python floats (double).
  auto correction_dim = [&](double rotations) {
    return (static_cast<double>(dim) *
            std::log(static_cast<double>(r.original_max_position_embeddings) /
                     (rotations * 2.0 * std::numbers::pi))) /
           (2.0 * std::log(r.theta));
  };
  double low = correction_dim(r.beta_fast), high = correction_dim(r.beta_slow);
  if (r.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // linear_ramp_factor's guard against a singularity
  const float factor = static_cast<float>(r.factor);
  const float low_f = static_cast<float>(low), span_f = static_cast<float>(high - low);
  for (int64_t i = 0; i < half; ++i) {
    const float extrapolation = 1.0f / pos_freqs[i];
    const float interpolation = 1.0f / (factor * pos_freqs[i]);
    // (arange(dim // 2) - min) / (max - min), clamped to [0, 1], all fp32
    const float ramp = std::clamp((static_cast<float>(i) - low_f) / span_f, 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    inv_freq[i] =
        interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return inv_freq;
}

}  // namespace air::engine
