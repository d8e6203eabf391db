// Linear layers through their descriptor (see linear.h).
#include "engine/model/linear.h"

namespace air::engine {

void LinearForward(const Backend& ops, const LinearPass& pass, const View& x, const Linear& linear,
                   const View& y) {
  const Parameter& w = *linear.weight;
  const int64_t out = w.shape[0], in = w.shape[1], rows = x.numel() / in;
  FoldedBranch branch;
  if (linear.adapter != nullptr && linear.adapter->Fold(ops, pass, x, &branch)) {
    // y (N, out) = x (N, in) @ W (out, in)^T + u (N, r) @ B (out, r)^T: one pass over y
    ops.GemmConcatK(true, rows, out, in, x, in, w.value, in, branch.r, branch.u, branch.r, branch.b,
                    branch.r, y, branch.scratch);
    if (linear.bias != nullptr) ops.AddBias(y, linear.bias->value);
    return;
  }
  // y (N, out) = x (N, in) @ W (out, in)^T
  ops.Gemm(false, true, rows, out, in, x, in, w.value, in, 0.0f, y, out);
  if (linear.bias != nullptr) ops.AddBias(y, linear.bias->value);
  if (linear.adapter != nullptr) linear.adapter->Forward(ops, pass, x, y);
}

void LinearBackward(const Backend& ops, const LinearPass& pass, const View& x, const Linear& linear,
                    const View& dy, const View& dx, bool accumulate_dx) {
  Parameter& w = *linear.weight;
  const int64_t out = w.shape[0], in = w.shape[1], rows = x.numel() / in;
  // dW (out, in) += dy (N, out)^T @ x (N, in) (the step's first write overwrites); none for a
  // frozen W
  if (w.trainable) {
    ops.Gemm(true, false, out, in, rows, dy, out, x, in, GradientBeta(w), w.grad, in);
  }
  if (linear.bias != nullptr && linear.bias->trainable && !linear.bias->grad.empty()) {
    ops.BiasBackward(dy, linear.bias->grad);
  }
  // dx (N, in) (+)= dy (N, out) @ W (out, in)
  if (!dx.empty()) {
    ops.Gemm(false, false, rows, in, out, dy, out, w.value, in, accumulate_dx ? 1.0f : 0.0f, dx,
             in);
  }
  if (linear.adapter != nullptr) linear.adapter->Backward(ops, pass, x, dy, dx);
}

}  // namespace air::engine
