// AdamW (see adamw.h for the update rule and how it matches torch.optim.AdamW).
#include "engine/train/adamw.h"

#include <cmath>

namespace air::engine::train {

AdamW::AdamW(std::vector<ParamView> params, AdamWOptions options, const Ops& ops)
    : params_(std::move(params)), options_(options), ops_(&ops) {
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
  AdamWScalars scalars;
  scalars.step_size = static_cast<float>(lr / bias_correction1);
  scalars.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  scalars.one_minus_beta1 = static_cast<float>(1.0 - options_.beta1);
  scalars.beta2 = static_cast<float>(options_.beta2);
  scalars.one_minus_beta2 = static_cast<float>(1.0 - options_.beta2);
  scalars.eps = static_cast<float>(options_.epsilon);
  scalars.decay_factor = static_cast<float>(1.0 - lr * options_.weight_decay);
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamView& p = params_[i];
    scalars.decay = options_.weight_decay != 0.0 && p.decay;
    ops_->AdamWUpdate(scalars, p.numel, p.value, p.grad, exp_avg_[i].data(), exp_avg_sq_[i].data());
  }
}

}  // namespace air::engine::train
