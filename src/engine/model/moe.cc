// GPT-OSS's mixture-of-experts block, forward and backward (see moe.h for the math).
#include "engine/model/moe.h"

namespace air::engine {

void LayoutMoeActivations(Workspace& ws, int64_t n, int64_t hidden, int64_t inter, int64_t experts,
                          int64_t k, DType dtype, MoeActivations& a) {
  const int64_t m = n * k;
  a.logits = ws.F32({n, experts});
  a.experts = ws.Take(DType::kI32, {n, k});
  a.weights = ws.F32({n, k});
  a.offsets = ws.Take(DType::kI32, {experts + 1});
  a.token_of_row = ws.Take(DType::kI32, {m});
  a.row_of_slot = ws.Take(DType::kI32, {n, k});
  a.xg = ws.Take(dtype, {m, hidden});
  a.gate_up = ws.Take(dtype, {m, 2 * inter});
  a.act = ws.Take(dtype, {m, inter});
  a.y = ws.Take(dtype, {m, hidden});
}

void LayoutMoeGradScratch(Workspace& ws, int64_t n, int64_t hidden, int64_t inter, int64_t experts,
                          int64_t k, MoeGradScratch& g) {
  const int64_t m = n * k;
  g.dy = ws.F32({m, hidden});
  g.dact = ws.F32({m, inter});
  g.dgate_up = ws.F32({m, 2 * inter});
  g.dxg = ws.F32({m, hidden});
  g.dweights = ws.F32({n, k});
  g.dlogits = ws.F32({n, experts});
}

void ExpertLinearForward(const Backend& ops, const LinearPass& pass, const View& x,
                         const View& offsets, const ExpertLinear& linear, const View& y) {
  const Parameter& w = *linear.weight;
  const int64_t in = w.shape[1], out = w.shape[2];
  // y_e (rows, out) = x_e (rows, in) @ W_e (in, out) + b_e, every expert in one call
  ops.GroupedGemm(false, out, in, x, w.value, linear.bias != nullptr ? linear.bias->value : View(),
                  offsets, 0.0f, y);
  if (linear.adapter != nullptr) linear.adapter->Forward(ops, pass, x, offsets, y);
}

void ExpertLinearBackward(const Backend& ops, const LinearPass& pass, const View& x,
                          const View& offsets, const ExpertLinear& linear, const View& dy,
                          const View& dx) {
  const Parameter& w = *linear.weight;
  const int64_t in = w.shape[1], out = w.shape[2];
  // dW_e (in, out) += x_e^T dy_e; db_e += colsum(dy_e) (the trainable ones)
  const View dw = w.trainable ? w.grad : View(), db = GradOrEmpty(linear.bias);
  if (!dw.empty() || !db.empty()) ops.GroupedGemmWeightGrad(in, out, x, dy, offsets, dw, db);
  // dx_e (rows, in) = dy_e (rows, out) @ W_e^T
  ops.GroupedGemm(true, in, out, dy, w.value, View(), offsets, 0.0f, dx);
  if (linear.adapter != nullptr) linear.adapter->Backward(ops, pass, x, offsets, dy, dx);
}

void MoeForward(const Backend& ops, const LinearPass& pass, const MoeWeights& w, const View& xn,
                const MoeActivations& a, const View& out) {
  // Route: logits (N, E) -> the k experts of each token and their weights.
  LinearForward(ops, LinearPass{}, xn, w.router, a.logits);  // no adapter on the router
  ops.RouterTopK(a.logits, a.experts, a.weights);
  // Group the choices by expert; the row ranges stay on the device (the grouped GEMMs read them).
  ops.MoeDispatch(a.experts, a.offsets, a.token_of_row, a.row_of_slot);
  ops.MoeGather(xn, a.token_of_row, a.xg);
  ExpertLinearForward(ops, pass, a.xg, a.offsets, w.mlp1, a.gate_up);
  ops.ClampedSwigluForward(a.gate_up, w.swiglu_alpha, w.swiglu_limit, a.act);
  ExpertLinearForward(ops, pass, a.act, a.offsets, w.mlp2, a.y);
  ops.MoeCombine(a.y, a.weights, a.row_of_slot, out);
}

void MoeBackward(const Backend& ops, const LinearPass& pass, const MoeWeights& w, const View& xn,
                 const MoeActivations& a, const View& dout, const MoeGradScratch& g,
                 const View& dxn) {
  const View& offsets = a.offsets;
  // out = sum_j weight_j y[row_j]: dy (written), dweights (accumulated: start from zero)
  ops.Zero(g.dweights);
  ops.MoeCombineBackward(a.y, a.weights, a.row_of_slot, dout, g.dy, g.dweights);
  // y = act W2_e + b2_e;  act = SwiGLU(gate_up);  gate_up = xg W1_e + b1_e
  ExpertLinearBackward(ops, pass, a.act, offsets, w.mlp2, g.dy, g.dact);
  ops.Zero(g.dgate_up);
  ops.ClampedSwigluBackward(a.gate_up, w.swiglu_alpha, w.swiglu_limit, g.dact, g.dgate_up);
  ExpertLinearBackward(ops, pass, a.xg, offsets, w.mlp1, g.dgate_up, g.dxg);
  // xg = xn[token]: each token's rows add back into dxn
  ops.MoeGatherBackward(g.dxg, a.row_of_slot, dxn);
  // The router: softmax over the k chosen logits, then the Linear.
  ops.Zero(g.dlogits);
  ops.RouterTopKBackward(a.experts, a.weights, g.dweights, g.dlogits);
  LinearBackward(ops, LinearPass{}, xn, w.router, g.dlogits, dxn, true);
}

}  // namespace air::engine
