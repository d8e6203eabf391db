// Learning-rate schedules (see lr_schedule.h for the formulas).
#include "engine/train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace air::engine::train {

double LrSchedule::Multiplier(int step) const {
  const double s = step;
  const double warmup = warmup_steps_;
  const double total = total_steps_;
  if (type_ == LrSchedulerType::kConstant) return 1.0;
  if (step < warmup_steps_) return s / std::max(1.0, warmup);
  const double decay_span = std::max(1.0, total - warmup);
  switch (type_) {
    case LrSchedulerType::kConstant:
    case LrSchedulerType::kConstantWithWarmup:
      return 1.0;
    case LrSchedulerType::kLinear:
      return std::max(0.0, (total - s) / decay_span);
    case LrSchedulerType::kCosine: {
      const double progress = (s - warmup) / decay_span;
      // num_cycles = 0.5: cos(pi * 0.5 * 2 * progress).
      return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
    }
  }
  return 1.0;
}

}  // namespace air::engine::train
