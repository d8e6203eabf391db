// Gradient clipping with torch.nn.utils.clip_grad_norm_ semantics, over a list of parameters:
// total = sqrt(sum of every gradient element squared) (what torch returns and the progress line
// shows); coef = max_norm / (total + 1e-6), clamped to at most 1; every gradient is multiplied
// by coef — inside AdamW's pass (AdamW::Step's grad_scale, the same bits) rather than in place.
// The sums run on the model's backend (threaded on the fast path, kernels on a GPU) into a
// device scalar the caller owns and reads when it reads the step's other scalars: one device
// read per step (the trainer's).
// Thread safety: pure over the pointees.
#pragma once

#include <vector>

#include "engine/backend/backend.h"
#include "engine/train/param_view.h"

namespace air::engine::train {

// *sum_slot (an F64 device scalar) += sum_i ||g_i||^2, accumulated in double on the device;
// nothing is read back.
void AddSquaredGradNorm(const std::vector<ParamView>& params, const Backend& backend,
                        const View& sum_slot);

// sqrt(sum_i ||g_i||^2): AddSquaredGradNorm into a zeroed `sum_slot`, read back (one sync).
double GlobalGradNorm(const std::vector<ParamView>& params, const Backend& backend,
                      const View& sum_slot);

// torch's clip coefficient as the fp32 factor the gradients are multiplied by: min(1, max_norm /
// (total + 1e-6)); 1 when max_norm <= 0 (no clipping).
float ClipCoefficient(double total, double max_norm);

}  // namespace air::engine::train
