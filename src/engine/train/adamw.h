// AdamW exactly as torch.optim.AdamW (foreach=False, amsgrad=False, maximize=False) computes it,
// on fp32 parameters with fp32 state:
//   t += 1
//   p  *= 1 - lr * weight_decay                 (decoupled decay, before the Adam update;
//                                                  only for tensors with 2+ dims)
//   m   = m + (1 - beta1) * (g - m)              (lerp)
//   v   = beta2 * v + (1 - beta2) * g * g
//   p  -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// The scalar factors are computed in double as Python does, then used in fp32 like torch; the
// elementwise update is Ops::AdamWUpdate (the model's ops: threaded and vectorized on the fast
// path, the same bits as the reference).
// Thread safety: none; one optimizer per model, stepped by the training thread.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ops/ops.h"
#include "engine/train/param_view.h"

namespace air::engine::train {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double weight_decay = 0.0;
};

class AdamW {
 public:
  // State (first and second moments) starts at zero, one pair per parameter. `ops` (the
  // model's; it must outlive the optimizer) runs the update.
  AdamW(std::vector<ParamView> params, AdamWOptions options, const Ops& ops);

  // One update of every parameter from its current gradient, with learning rate `lr`.
  void Step(double lr);

  int64_t step_count() const { return step_count_; }
  const std::vector<ParamView>& params() const { return params_; }
  // The moments of parameter i (for checks and resumable checkpoints).
  const std::vector<float>& first_moment(size_t i) const { return exp_avg_[i]; }
  const std::vector<float>& second_moment(size_t i) const { return exp_avg_sq_[i]; }

 private:
  std::vector<ParamView> params_;
  AdamWOptions options_;
  const Ops* ops_;
  std::vector<std::vector<float>> exp_avg_;
  std::vector<std::vector<float>> exp_avg_sq_;
  int64_t step_count_ = 0;
};

}  // namespace air::engine::train
