// Learning-rate schedules with warmup, as transformers' get_*_schedule_with_warmup define them.
//
// LrMultiplier(step) is the factor applied to the base learning rate for the optimizer step
// whose 0-based index is `step` (a LambdaLR is stepped after optimizer.step(), so the first
// update uses the factor of step 0 — which is 0 during a warmup, exactly as in transformers):
//   warmup (step < W):      step / max(1, W)
//   constant:               1
//   linear:                 max(0, (N - step) / max(1, N - W))
//   cosine (half a cycle):  max(0, 0.5 * (1 + cos(pi * (step - W) / max(1, N - W))))
// with N the total number of optimizer steps and W the warmup steps. Plain value; thread-safe.
#pragma once

#include "engine/train/train_config.h"

namespace air::engine::train {

class LrSchedule {
 public:
  LrSchedule(LrSchedulerType type, double base_lr, int warmup_steps, int total_steps)
      : type_(type), base_lr_(base_lr), warmup_steps_(warmup_steps), total_steps_(total_steps) {}

  double Multiplier(int step) const;
  double LearningRate(int step) const { return base_lr_ * Multiplier(step); }

  int warmup_steps() const { return warmup_steps_; }
  int total_steps() const { return total_steps_; }

 private:
  LrSchedulerType type_;
  double base_lr_;
  int warmup_steps_;
  int total_steps_;
};

}  // namespace air::engine::train
