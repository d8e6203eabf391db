// The LoRA branch of a linear layer (see lora_linear.h for the math and the memory).
#include "engine/lora/lora_linear.h"

namespace air::engine::lora {

void LoraScratch::LayOut(Workspace& w, Layout& layout, int64_t rows, DType dtype) const {
  layout.input = w.Take(dtype, {rows, max_in_});
  layout.input_grad = w.F32({rows, max_in_});
  layout.du = w.F32({rows, rank_});
  for (View& u : layout.u) u = w.F32({rows, rank_});
}

size_t LoraScratch::PlanBytes(int64_t rows, DType dtype) const {
  size_t bytes = 0;
  for (int kept : {adapters_, 1}) {  // training's and evaluation's
    Layout layout;
    layout.u.assign(static_cast<size_t>(kept), View());
    bytes += Workspace::Measure([&](Workspace& w) { LayOut(w, layout, rows, dtype); });
  }
  return bytes;
}

Status LoraScratch::Arrange(Workspace& ws, Layout& layout, int64_t rows, DType dtype, int kept) {
  layout.u.assign(static_cast<size_t>(kept), View());
  Status s = ws.Arrange([&](Workspace& w) { LayOut(w, layout, rows, dtype); });
  layout.rows = s.ok() ? rows : -1;
  layout.dtype = dtype;
  return s;
}

Status LoraScratch::Reserve(int64_t rows, DType dtype) {
  AIR_RETURN_IF_ERROR(Arrange(training_, training_layout_, rows, dtype, adapters_));
  return Arrange(eval_, eval_layout_, rows, dtype, 1);
}

LoraScratch::Views LoraScratch::For(int index, int64_t rows, DType dtype, bool training) {
  Layout& layout = training ? training_layout_ : eval_layout_;
  if (layout.rows != rows || layout.dtype != dtype) {
    Status s = Arrange(training ? training_ : eval_, layout, rows, dtype, training ? adapters_ : 1);
    if (!s.ok()) {
      if (status_.ok()) status_ = s;
      return {};
    }
  }
  const View& u = layout.u[training ? static_cast<size_t>(index) : 0];
  return {layout.input, layout.input_grad, u, layout.du};
}

uint64_t LoraLinear::Seed(const LinearPass& pass) const {
  // splitmix64's increment keeps the adapters' streams apart.
  return pass.seed ^ (static_cast<uint64_t>(index_ + 1) * 0xD1B54A32D192ED03ull);
}

View LoraLinear::DroppedInput(const Backend& ops, const LinearPass& pass, const View& x,
                              const View& input) const {
  if (!pass.training || dropout_ <= 0.0f) return x;
  const View xd = input.Slice(0, x.numel()).Reshaped(x.shape());
  ops.Dropout(x, dropout_, Seed(pass), xd);
  return xd;
}

void LoraBranchForward(const Backend& ops, const LoraFactors& f, float scaling, int64_t rows,
                       const View& x, const View& u, const View& y) {
  // u (N, r) = scaling * x (N, in) @ A (r, in)^T
  ops.Gemm(false, true, rows, f.r, f.in, x, f.in, f.a, f.in, 0.0f, u, f.r);
  if (scaling != 1.0f) ops.Scale(u, scaling);
  // y (N, out) += u (N, r) @ B (out, r)^T
  ops.Gemm(false, true, rows, f.out, f.r, u, f.r, f.b, f.r, 1.0f, y, f.out);
}

void LoraBranchBackward(const Backend& ops, const LoraFactors& f, float scaling, int64_t rows,
                        const View& x, const View& dy, const View& u, const View& du) {
  // dB (out, r) += dy (N, out)^T @ u (N, r)   (u already carries the scaling)
  ops.Gemm(true, false, f.out, f.r, rows, dy, f.out, u, f.r, 1.0f, f.b_grad, f.r);
  // du (N, r) = scaling * dy (N, out) @ B (out, r)
  ops.Gemm(false, false, rows, f.r, f.out, dy, f.out, f.b, f.r, 0.0f, du, f.r);
  if (scaling != 1.0f) ops.Scale(du, scaling);
  // dA (r, in) += du (N, r)^T @ x (N, in)
  ops.Gemm(true, false, f.r, f.in, rows, du, f.r, x, f.in, 1.0f, f.a_grad, f.in);
}

void LoraLinear::Forward(const Backend& ops, const LinearPass& pass, const View& x, const View& y) {
  const LoraFactors f{a_->value,    b_->value,    a_->grad,    b_->grad,
                      a_->shape[0], a_->shape[1], b_->shape[0]};
  const int64_t rows = x.numel() / f.in;
  const LoraScratch::Views s = scratch_->For(index_, rows, x.dtype(), pass.training);
  if (s.u.empty()) return;  // out of memory: recorded in the scratch's status
  LoraBranchForward(ops, f, scaling_, rows, DroppedInput(ops, pass, x, s.input), s.u, y);
}

void LoraLinear::Backward(const Backend& ops, const LinearPass& pass, const View& x, const View& dy,
                          const View& dx) {
  const LoraFactors f{a_->value,    b_->value,    a_->grad,    b_->grad,
                      a_->shape[0], a_->shape[1], b_->shape[0]};
  const int64_t r = f.r, in = f.in, rows = x.numel() / in;
  const LoraScratch::Views s = scratch_->For(index_, rows, x.dtype(), true);
  if (s.u.empty()) return;
  // The mask drawn again from the forward's stream.
  LoraBranchBackward(ops, f, scaling_, rows, DroppedInput(ops, pass, x, s.input), dy, s.u, s.du);
  if (dx.empty()) return;
  if (!pass.training || dropout_ <= 0.0f) {
    // dx (N, in) += du (N, r) @ A (r, in)
    ops.Gemm(false, false, rows, in, r, s.du, r, a_->value, in, 1.0f, dx, in);
    return;
  }
  // dx += mask / (1 - p) * (du @ A): the dropout's backward is the same masked scaling.
  const View t = s.input_grad.Slice(0, rows * in).Reshaped({rows, in});
  ops.Gemm(false, false, rows, in, r, s.du, r, a_->value, in, 0.0f, t, in);
  ops.Dropout(t, dropout_, Seed(pass), t);
  ops.AddInPlace(dx, t);
}

void ExpertLora::Forward(const Backend& ops, const LinearPass& pass, const View& x,
                         const View& offsets, const View& y) {
  const int64_t in = a_->shape[1], rows = x.numel() / in;
  const int64_t r = a_->shape[0] / experts(), out = b_->shape[1];
  const LoraScratch::Views s = scratch_->For(index_, rows, x.dtype(), pass.training);
  if (s.u.empty()) return;  // out of memory: recorded in the scratch's status
  // Every expert at once (LoraBranchForward per expert, grouped): u_e (n, r) = scaling *
  // x_e (n, in) @ A_e (r, in)^T; y_e (n, out) += u_e @ B_e (out, r)^T.
  ops.GroupedGemm(true, r, in, x, a_->value, View(), offsets, 0.0f, s.u);
  if (scaling_ != 1.0f) ops.Scale(s.u, scaling_);
  ops.GroupedGemm(true, out, r, s.u, b_->value, View(), offsets, 1.0f, y);
}

void ExpertLora::Backward(const Backend& ops, const LinearPass& /*pass*/, const View& x,
                          const View& offsets, const View& dy, const View& dx) {
  const int64_t in = a_->shape[1], rows = x.numel() / in;
  const int64_t r = a_->shape[0] / experts(), out = b_->shape[1];
  const LoraScratch::Views s = scratch_->For(index_, rows, x.dtype(), true);
  if (s.u.empty()) return;
  // LoraBranchBackward per expert, grouped: dB_e (out, r) += dy_e^T u_e (u carries the
  // scaling); du_e (n, r) = scaling * dy_e @ B_e; dA_e (r, in) += du_e^T x_e.
  if (!b_->grad.empty()) ops.GroupedGemmWeightGrad(out, r, dy, s.u, offsets, b_->grad, View());
  ops.GroupedGemm(false, r, out, dy, b_->value, View(), offsets, 0.0f, s.du);
  if (scaling_ != 1.0f) ops.Scale(s.du, scaling_);
  if (!a_->grad.empty()) ops.GroupedGemmWeightGrad(r, in, s.du, x, offsets, a_->grad, View());
  // dx_e (n, in) += du_e (n, r) @ A_e (r, in)
  if (!dx.empty()) ops.GroupedGemm(false, in, r, s.du, a_->value, View(), offsets, 1.0f, dx);
}

}  // namespace air::engine::lora
