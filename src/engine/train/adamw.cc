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
  // Parameters that lie next to each other in every buffer (value, gradient, moments, compute
  // copy: a unit's flat buffers) with the same decay are updated by one call: each element's
  // update is the same, while one call over a layer's matrices splits over many more threads
  // than a call per matrix (a 512 x 512 matrix is 8 of the fast path's pieces) and wakes the
  // pool once instead of once per tensor.
  for (size_t i = 0; i < params_.size();) {
    const bool decay = params_[i].decay;
    size_t end = i + 1;
    while (end < params_.size() && params_[end].decay == decay &&
           Adjacent(params_[end - 1].value, params_[end].value) &&
           Adjacent(params_[end - 1].grad, params_[end].grad) &&
           Adjacent(exp_avg_[end - 1], exp_avg_[end]) &&
           Adjacent(exp_avg_sq_[end - 1], exp_avg_sq_[end]) &&
           Adjacent(params_[end - 1].compute, params_[end].compute)) {
      ++end;
    }
    scalars.decay = options_.weight_decay != 0.0 && decay;
    const ParamView& p = params_[i];
    if (end == i + 1) {
      backend_->AdamWUpdate(scalars, p.value, p.grad, exp_avg_[i], exp_avg_sq_[i], p.compute);
    } else {
      const ParamView& last = params_[end - 1];
      backend_->AdamWUpdate(scalars, Joined(p.value, last.value), Joined(p.grad, last.grad),
                            Joined(exp_avg_[i], exp_avg_[end - 1]),
                            Joined(exp_avg_sq_[i], exp_avg_sq_[end - 1]),
                            Joined(p.compute, last.compute));
    }
    i = end;
  }
}

bool AdamW::Adjacent(const View& first, const View& next) {
  if (first.empty() || next.empty()) return first.empty() && next.empty();
  return first.buffer() == next.buffer() && first.dtype() == next.dtype() &&
         first.byte_offset() + first.bytes() == next.byte_offset();
}

View AdamW::Joined(const View& first, const View& last) {
  if (first.empty()) return View();
  const size_t bytes = last.byte_offset() + last.bytes() - first.byte_offset();
  return View(first.buffer(), first.byte_offset(), first.dtype(),
              {static_cast<int64_t>(bytes / DTypeSize(first.dtype()))});
}

}  // namespace air::engine::train
