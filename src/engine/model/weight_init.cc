// Random initialization as transformers does it (see weight_init.h).
#include "engine/model/weight_init.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <vector>

namespace air::engine {

void InitWeightsLikeTransformers(CausalLm& model, uint64_t seed, const Parameter* embed,
                                 const std::function<InitRule(const Parameter&)>& rule) {
  std::mt19937_64 rng(seed);
  // Box-Muller on 53-bit uniforms: the same numbers on every platform.
  auto uniform = [&rng] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; };
  auto normal = [&] {
    return std::sqrt(-2.0 * std::log(uniform())) * std::cos(2.0 * std::numbers::pi * uniform());
  };
  const ModelConfig& c = model.config();
  const double stddev = c.initializer_range;
  const int64_t pad = c.pad_token_id;
  std::vector<float> host;  // initialization is not the step loop: draw on the host, upload
  for (Parameter& p : model.parameters()) {
    host.assign(static_cast<size_t>(p.numel()), 0.0f);
    switch (rule(p)) {
      case InitRule::kOne:
        std::fill(host.begin(), host.end(), 1.0f);
        break;
      case InitRule::kNormal:
        for (float& v : host) v = static_cast<float>(stddev * normal());
        break;
      case InitRule::kZero:
        break;
    }
    // nn.Embedding(padding_idx) starts with the padding row at zero, as HF initializes it.
    if (&p == embed && pad >= 0 && pad < c.vocab_size) {
      std::fill(host.begin() + pad * c.hidden_size, host.begin() + (pad + 1) * c.hidden_size, 0.0f);
    }
    model.backend().FromHostTensor(p.value, host.data());
  }
}

}  // namespace air::engine
