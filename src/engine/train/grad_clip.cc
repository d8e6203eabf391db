// Global-norm gradient clipping and helpers (see grad_clip.h).
#include "engine/train/grad_clip.h"

#include <algorithm>
#include <cmath>

namespace air::engine::train {

double SquaredGradNorm(const std::vector<ParamView>& params, const Backend& backend,
                       const View& sum_slot) {
  backend.Zero(sum_slot);
  for (const ParamView& p : params) backend.SumOfSquares(p.grad, sum_slot);
  return backend.ReadScalar(sum_slot);
}

double GlobalGradNorm(const std::vector<ParamView>& params, const Backend& backend,
                      const View& sum_slot) {
  return std::sqrt(SquaredGradNorm(params, backend, sum_slot));
}

double ClipGradNorm(const std::vector<ParamView>& params, double max_norm, const Backend& backend,
                    const View& sum_slot) {
  const double total = GlobalGradNorm(params, backend, sum_slot);
  if (max_norm <= 0.0) return total;
  return ClipToNorm(params, total, max_norm, backend);
}

float ClipCoefficient(double total, double max_norm) {
  if (max_norm <= 0.0) return 1.0f;
  return static_cast<float>(std::min(1.0, max_norm / (total + 1e-6)));
}

double ClipToNorm(const std::vector<ParamView>& params, double total, double max_norm,
                  const Backend& backend) {
  // torch multiplies by the clamped coefficient unconditionally; at coef == 1 that is a no-op.
  const float coef = ClipCoefficient(total, max_norm);
  if (coef < 1.0f) ScaleGrads(params, coef, backend);
  return total;
}

void ScaleGrads(const std::vector<ParamView>& params, float factor, const Backend& backend) {
  for (const ParamView& p : params) backend.Scale(p.grad, factor);
}

}  // namespace air::engine::train
