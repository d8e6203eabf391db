// AdamW (see adamw.h for the update rule and how it matches torch.optim.AdamW).
#include "engine/train/adamw.h"

#include <fmt/format.h>

#include <cmath>

namespace air::engine::train {

Result<std::unique_ptr<AdamW>> AdamW::Create(std::vector<ParamView> params, AdamWOptions options,
                                             const Backend& backend) {
  std::unique_ptr<AdamW> opt(new AdamW(std::move(params), options, backend));
  int64_t total = 0;
  // The moments in the parameters' dtype (torch's zeros_like: bf16 under torch_dtype bfloat16).
  const DType dtype = opt->params_.empty() ? DType::kF32 : opt->params_[0].value.dtype();
  for (const ParamView& p : opt->params_) {
    total += p.numel;
    if (p.value.dtype() != dtype) {
      return InvalidArgument(fmt::format("AdamW over parameters of two dtypes ({} is {}, not {})",
                                         p.name, DTypeName(p.value.dtype()), DTypeName(dtype)));
    }
  }
  View m_all, v_all;
  AIR_ASSIGN_OR_RETURN(opt->exp_avg_buffer_, backend.AllocateView(dtype, {total}, &m_all));
  AIR_ASSIGN_OR_RETURN(opt->exp_avg_sq_buffer_, backend.AllocateView(dtype, {total}, &v_all));
  backend.Zero(m_all);
  backend.Zero(v_all);
  int64_t offset = 0;
  for (const ParamView& p : opt->params_) {
    opt->exp_avg_.push_back(m_all.Rows(offset, p.numel));
    opt->exp_avg_sq_.push_back(v_all.Rows(offset, p.numel));
    offset += p.numel;
  }
  return opt;
}

std::vector<float> AdamW::Download(const std::vector<View>& views, size_t i) const {
  const Tensor host = backend_->ToHostTensor(views[i]);  // bf16 moments widened: exact
  return std::vector<float>(host.values().begin(), host.values().end());
}

std::vector<float> AdamW::first_moment(size_t i) const { return Download(exp_avg_, i); }
std::vector<float> AdamW::second_moment(size_t i) const { return Download(exp_avg_sq_, i); }

void AdamW::SetMoments(size_t i, const std::vector<float>& exp_avg,
                       const std::vector<float>& exp_avg_sq) {
  backend_->FromHostTensor(exp_avg_[i], exp_avg.data());
  backend_->FromHostTensor(exp_avg_sq_[i], exp_avg_sq.data());
}

void AdamW::Step(double lr, float grad_scale) {
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
  scalars.grad_scale = grad_scale;
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamView& p = params_[i];
    scalars.decay = options_.weight_decay != 0.0 && p.decay;
    backend_->AdamWUpdate(scalars, p.value, p.grad, exp_avg_[i], exp_avg_sq_[i], p.compute);
  }
}

}  // namespace air::engine::train
