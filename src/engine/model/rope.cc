// RoPE inverse frequencies (see rope.h).
#include "engine/model/rope.h"

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

}  // namespace air::engine
