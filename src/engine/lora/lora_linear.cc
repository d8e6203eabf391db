// The LoRA branch of a linear layer (see lora_linear.h for the math and the memory).
#include "engine/lora/lora_linear.h"

namespace air::engine::lora {

Status LoraScratch::Arrange(Workspace& ws, Layout& layout, int64_t rows, DType dtype, int kept) {
  layout.u.assign(static_cast<size_t>(kept), View());
  Status s = ws.Arrange([&](Workspace& w) {
    layout.input = w.Take(dtype, {rows, max_in_});
    layout.input_grad = w.F32({rows, max_in_});
    layout.du = w.F32({rows, rank_});
    for (View& u : layout.u) u = w.F32({rows, rank_});
  });
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

void LoraLinear::Forward(const Backend& ops, const LinearPass& pass, const View& x, const View& y) {
  const int64_t r = a_->shape[0], in = a_->shape[1], out = b_->shape[0];
  const int64_t rows = x.numel() / in;
  const LoraScratch::Views s = scratch_->For(index_, rows, x.dtype(), pass.training);
  if (s.u.empty()) return;  // out of memory: recorded in the scratch's status
  const View xd = DroppedInput(ops, pass, x, s.input);
  // u (N, r) = scaling * xd (N, in) @ A (r, in)^T
  ops.Gemm(false, true, rows, r, in, xd, in, a_->value, in, 0.0f, s.u, r);
  if (scaling_ != 1.0f) ops.Scale(s.u, scaling_);
  // y (N, out) += u (N, r) @ B (out, r)^T
  ops.Gemm(false, true, rows, out, r, s.u, r, b_->value, r, 1.0f, y, out);
}

void LoraLinear::Backward(const Backend& ops, const LinearPass& pass, const View& x, const View& dy,
                          const View& dx) {
  const int64_t r = a_->shape[0], in = a_->shape[1], out = b_->shape[0];
  const int64_t rows = x.numel() / in;
  const LoraScratch::Views s = scratch_->For(index_, rows, x.dtype(), true);
  if (s.u.empty()) return;
  // dB (out, r) += dy (N, out)^T @ u (N, r)   (u already carries the scaling)
  ops.Gemm(true, false, out, r, rows, dy, out, s.u, r, 1.0f, b_->grad, r);
  // du (N, r) = scaling * dy (N, out) @ B (out, r)
  ops.Gemm(false, false, rows, r, out, dy, out, b_->value, r, 0.0f, s.du, r);
  if (scaling_ != 1.0f) ops.Scale(s.du, scaling_);
  // dA (r, in) += du (N, r)^T @ xd (N, in): the mask drawn again from the forward's stream
  const View xd = DroppedInput(ops, pass, x, s.input);
  ops.Gemm(true, false, r, in, rows, s.du, r, xd, in, 1.0f, a_->grad, in);
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

}  // namespace air::engine::lora
