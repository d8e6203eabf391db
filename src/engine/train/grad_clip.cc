// Global-norm gradient clipping and helpers (see grad_clip.h).
#include "engine/train/grad_clip.h"

#include <algorithm>
#include <cmath>

namespace air::engine::train {

void AddSquaredGradNorm(const std::vector<ParamView>& params, const Backend& backend,
                        const View& sum_slot) {
  for (const ParamView& p : params) backend.SumOfSquares(p.grad, sum_slot);
}

double GlobalGradNorm(const std::vector<ParamView>& params, const Backend& backend,
                      const View& sum_slot) {
  backend.Zero(sum_slot);
  AddSquaredGradNorm(params, backend, sum_slot);
  return std::sqrt(backend.ReadScalar(sum_slot));
}

float ClipCoefficient(double total, double max_norm) {
  if (max_norm <= 0.0) return 1.0f;
  return static_cast<float>(std::min(1.0, max_norm / (total + 1e-6)));
}

}  // namespace air::engine::train
