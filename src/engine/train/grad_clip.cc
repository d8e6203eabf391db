// Global-norm gradient clipping and helpers (see grad_clip.h).
#include "engine/train/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace air::engine::train {

double GlobalGradNorm(const std::vector<ParamView>& params, const Ops& ops) {
  double sum_sq = 0.0;
  for (const ParamView& p : params) sum_sq += ops.SumOfSquares(p.grad, p.numel);
  return std::sqrt(sum_sq);
}

double ClipGradNorm(const std::vector<ParamView>& params, double max_norm, const Ops& ops) {
  const double total = GlobalGradNorm(params, ops);
  if (max_norm <= 0.0) return total;
  const double coef = std::min(1.0, max_norm / (total + 1e-6));
  // torch multiplies by the clamped coefficient unconditionally; at coef == 1 that is a no-op.
  if (coef < 1.0) ScaleGrads(params, static_cast<float>(coef), ops);
  return total;
}

void ZeroGrads(const std::vector<ParamView>& params) {
  for (const ParamView& p : params) {
    std::memset(p.grad, 0, static_cast<size_t>(p.numel) * sizeof(float));
  }
}

void ScaleGrads(const std::vector<ParamView>& params, float factor, const Ops& ops) {
  for (const ParamView& p : params) ops.Scale(p.grad, p.numel, factor);
}

}  // namespace air::engine::train
