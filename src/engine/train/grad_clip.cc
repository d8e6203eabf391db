// Global-norm gradient clipping and helpers (see grad_clip.h).
#include "engine/train/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace air::engine::train {

double GlobalGradNorm(const std::vector<ParamView>& params) {
  double sum_sq = 0.0;
  for (const ParamView& p : params) {
    double tensor_sum = 0.0;
    for (int64_t j = 0; j < p.numel; ++j) {
      const double g = p.grad[j];
      tensor_sum += g * g;
    }
    sum_sq += tensor_sum;
  }
  return std::sqrt(sum_sq);
}

double ClipGradNorm(const std::vector<ParamView>& params, double max_norm) {
  const double total = GlobalGradNorm(params);
  if (max_norm <= 0.0) return total;
  const double coef = std::min(1.0, max_norm / (total + 1e-6));
  // torch multiplies by the clamped coefficient unconditionally; at coef == 1 that is a no-op.
  if (coef < 1.0) ScaleGrads(params, static_cast<float>(coef));
  return total;
}

void ZeroGrads(const std::vector<ParamView>& params) {
  for (const ParamView& p : params) {
    std::memset(p.grad, 0, static_cast<size_t>(p.numel) * sizeof(float));
  }
}

void ScaleGrads(const std::vector<ParamView>& params, float factor) {
  for (const ParamView& p : params) {
    for (int64_t j = 0; j < p.numel; ++j) p.grad[j] *= factor;
  }
}

}  // namespace air::engine::train
