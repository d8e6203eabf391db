// AdamW exactly as torch.optim.AdamW (foreach=False, amsgrad=False, maximize=False) computes it,
// on fp32 parameters with fp32 state (or, under torch_dtype bfloat16, bf16 parameters, gradients
// and moments, each element updated in fp32 and rounded once, as torch's fused AdamW does):
//   t += 1
//   p  *= 1 - lr * weight_decay                 (decoupled decay, before the Adam update;
//                                                  only for tensors with 2+ dims)
//   m   = m + (1 - beta1) * (g - m)              (lerp)
//   v   = beta2 * v + (1 - beta2) * g * g
//   p  -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// The scalar factors are computed in double as Python does, then used in fp32 like torch; the
// elementwise update is Ops::AdamWUpdate on the model's backend (threaded and vectorized on the
// fast path, the same bits as the reference), one call per run of parameters that are adjacent
// in all their buffers and share the decay (a unit's flat buffers: the same bits, more threads).
// The moments live on the backend too: one flat buffer of every trainable element for each (frozen
// parameters have no view, so no state). Thread safety: none; one optimizer per model, stepped by
// the training thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "engine/backend/backend.h"
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
  // State (first and second moments) starts at zero, one pair per parameter, allocated on
  // `backend` (the model's; it must outlive the optimizer), which also runs the update.
  static Result<std::unique_ptr<AdamW>> Create(std::vector<ParamView> params, AdamWOptions options,
                                               const Backend& backend);
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;

  // One update of every parameter from its current gradient times grad_scale (clipping's
  // coefficient: the bits of scaling the gradients first, without a pass over them), with
  // learning rate `lr`.
  void Step(double lr, float grad_scale = 1.0f);

  int64_t step_count() const { return step_count_; }
  const std::vector<ParamView>& params() const { return params_; }
  // Host copies of the moments of parameter i (for checks and resumable checkpoints).
  std::vector<float> first_moment(size_t i) const;
  std::vector<float> second_moment(size_t i) const;
  // Restores parameter i's moments (each params()[i].numel floats) and the step count, when
  // resuming from a checkpoint.
  void SetMoments(size_t i, const std::vector<float>& exp_avg,
                  const std::vector<float>& exp_avg_sq);
  void set_step_count(int64_t steps) { step_count_ = steps; }

 private:
  AdamW(std::vector<ParamView> params, AdamWOptions options, const Backend& backend)
      : params_(std::move(params)), options_(options), backend_(&backend) {}
  std::vector<float> Download(const std::vector<View>& views, size_t i) const;
  // Whether `next` starts where `first` ends, in the same buffer and dtype (two empty views:
  // true); Joined is the view from `first`'s start to `last`'s end (flat).
  static bool Adjacent(const View& first, const View& next);
  static View Joined(const View& first, const View& last);

  std::vector<ParamView> params_;
  AdamWOptions options_;
  const Backend* backend_;
  std::unique_ptr<Buffer> exp_avg_buffer_, exp_avg_sq_buffer_;
  std::vector<View> exp_avg_, exp_avg_sq_;  // per parameter, views into the buffers
  int64_t step_count_ = 0;
};

}  // namespace air::engine::train
