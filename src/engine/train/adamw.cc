// AdamW (see adamw.h for the update rule and how it matches torch.optim.AdamW).
#include "engine/train/adamw.h"

#include <cmath>

namespace air::engine::train {

AdamW::AdamW(std::vector<ParamView> params, AdamWOptions options)
    : params_(std::move(params)), options_(options) {
  exp_avg_.reserve(params_.size());
  exp_avg_sq_.reserve(params_.size());
  for (const ParamView& p : params_) {
    exp_avg_.emplace_back(static_cast<size_t>(p.numel), 0.0f);
    exp_avg_sq_.emplace_back(static_cast<size_t>(p.numel), 0.0f);
  }
}

void AdamW::Step(double lr) {
  ++step_count_;
  const double t = static_cast<double>(step_count_);
  const double bias_correction1 = 1.0 - std::pow(options_.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(options_.beta2, t);
  const float step_size = static_cast<float>(lr / bias_correction1);
  const float bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  const float one_minus_beta1 = static_cast<float>(1.0 - options_.beta1);
  const float beta2 = static_cast<float>(options_.beta2);
  const float one_minus_beta2 = static_cast<float>(1.0 - options_.beta2);
  const float eps = static_cast<float>(options_.epsilon);
  const float decay_factor = static_cast<float>(1.0 - lr * options_.weight_decay);

  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamView& p = params_[i];
    float* value = p.value;
    const float* grad = p.grad;
    float* m = exp_avg_[i].data();
    float* v = exp_avg_sq_[i].data();
    const bool decay = options_.weight_decay != 0.0 && p.decay;
    for (int64_t j = 0; j < p.numel; ++j) {
      if (decay) value[j] *= decay_factor;
      const float g = grad[j];
      m[j] += one_minus_beta1 * (g - m[j]);
      v[j] = v[j] * beta2 + one_minus_beta2 * g * g;
      const float denom = std::sqrt(v[j]) / bias_correction2_sqrt + eps;
      value[j] -= step_size * (m[j] / denom);
    }
  }
}

}  // namespace air::engine::train
