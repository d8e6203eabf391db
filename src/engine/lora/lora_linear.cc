// The LoRA branch of a linear layer (see lora_linear.h for the math and the memory).
#include "engine/lora/lora_linear.h"

#include <algorithm>
#include <utility>

namespace air::engine::lora {

LoraScratch::LoraScratch(const Backend* backend, int rank, std::vector<int64_t> mask_widths,
                         int64_t folded_out)
    : training_(backend),
      eval_(backend),
      rank_(rank),
      mask_widths_(std::move(mask_widths)),
      max_in_(0),
      folded_out_(folded_out),
      adapters_(static_cast<int>(mask_widths_.size())) {
  for (int64_t width : mask_widths_) max_in_ = std::max(max_in_, width);
}

// Training keeps u and, with dropout, the mask of every adapter; evaluation one shared u.
void LoraScratch::LayOut(Workspace& w, Layout& layout, int64_t rows, DType dtype,
                         bool training) const {
  layout.input = w.Take(dtype, {rows, max_in_});
  layout.input_grad = w.F32({std::max(rows * max_in_, folded_out_)});
  layout.du = w.F32({rows, rank_});
  layout.u.assign(training ? static_cast<size_t>(adapters_) : 1, View());
  for (View& u : layout.u) u = w.Take(folded() ? dtype : DType::kF32, {rows, rank_});
  layout.mask.assign(training ? mask_widths_.size() : 0, View());
  for (size_t i = 0; i < layout.mask.size(); ++i) {
    if (mask_widths_[i] > 0) {
      layout.mask[i] = w.Take(DType::kU8, {(rows * mask_widths_[i] + 7) / 8});
    }
  }
}

size_t LoraScratch::PlanBytes(int64_t rows, DType dtype) const {
  size_t bytes = 0;
  for (bool training : {true, false}) {
    Layout layout;
    bytes += Workspace::Measure([&](Workspace& w) { LayOut(w, layout, rows, dtype, training); });
  }
  return bytes;
}

Status LoraScratch::Arrange(Workspace& ws, Layout& layout, int64_t rows, DType dtype,
                            bool training) {
  Status s = ws.Arrange([&](Workspace& w) { LayOut(w, layout, rows, dtype, training); });
  layout.rows = s.ok() ? rows : -1;
  layout.dtype = dtype;
  return s;
}

Status LoraScratch::Reserve(int64_t rows, DType dtype) {
  AIR_RETURN_IF_ERROR(Arrange(training_, training_layout_, rows, dtype, true));
  return Arrange(eval_, eval_layout_, rows, dtype, false);
}

LoraScratch::Views LoraScratch::For(int index, int64_t rows, DType dtype, bool training) {
  Layout& layout = training ? training_layout_ : eval_layout_;
  if (layout.rows != rows || layout.dtype != dtype) {
    Status s = Arrange(training ? training_ : eval_, layout, rows, dtype, training);
    if (!s.ok()) {
      if (status_.ok()) status_ = s;
      return {};
    }
  }
  const View& u = layout.u[training ? static_cast<size_t>(index) : 0];
  const View mask = training ? layout.mask[static_cast<size_t>(index)] : View();
  return {layout.input, layout.input_grad, u, layout.du, mask};
}

uint64_t LoraLinear::Seed(const LinearPass& pass) const {
  // splitmix64's increment keeps the adapters' streams apart.
  return pass.seed ^ (static_cast<uint64_t>(index_ + 1) * 0xD1B54A32D192ED03ull);
}

bool LoraLinear::Drops(const LinearPass& pass) const { return pass.training && dropout_ > 0.0f; }

LoraDropout LoraLinear::DropoutOf(const LinearPass& pass, const View& x,
                                  const LoraScratch::Views& s) const {
  if (!Drops(pass)) return {};
  return {MaskOf(x, s), dropout_, s.input.Slice(0, x.numel()), s.input_grad.Slice(0, x.numel())};
}

View LoraLinear::MaskOf(const View& x, const LoraScratch::Views& s) {
  return s.mask.Slice(0, (x.numel() + 7) / 8);
}

void LoraBranchU(const Backend& ops, const LoraFactors& f, float scaling, int64_t rows,
                 const View& x, const LoraDropout& drop, const View& u) {
  // u (N, r) = scaling * xd (N, in) @ A (r, in)^T
  if (drop.bits.empty()) {
    ops.Gemm(false, true, rows, f.r, f.in, x, f.in, f.a, f.in, 0.0f, u, f.r);
  } else {
    ops.GemmDropped(false, false, true, rows, f.r, f.in, x, f.in, f.a, f.in, 0.0f, u, f.r,
                    drop.bits, drop.p, drop.scratch);
  }
  if (scaling != 1.0f) ops.Scale(u, scaling);
}

void LoraBranchForward(const Backend& ops, const LoraFactors& f, float scaling, int64_t rows,
                       const View& x, const LoraDropout& drop, const View& u, const View& y) {
  LoraBranchU(ops, f, scaling, rows, x, drop, u);
  // y (N, out) += u (N, r) @ B (out, r)^T
  ops.Gemm(false, true, rows, f.out, f.r, u, f.r, f.b, f.r, 1.0f, y, f.out);
}

void LoraBranchBackward(const Backend& ops, const LoraFactors& f, float scaling, int64_t rows,
                        const View& x, const LoraDropout& drop, const View& dy, const View& u,
                        const View& du, const View& dx) {
  // dB (out, r) += dy (N, out)^T @ u (N, r)   (u already carries the scaling)
  ops.Gemm(true, false, f.out, f.r, rows, dy, f.out, u, f.r, 1.0f, f.b_grad, f.r);
  // du (N, r) = scaling * dy (N, out) @ B (out, r)
  ops.Gemm(false, false, rows, f.r, f.out, dy, f.out, f.b, f.r, 0.0f, du, f.r);
  if (scaling != 1.0f) ops.Scale(du, scaling);
  if (drop.bits.empty()) {
    // dA (r, in) += du (N, r)^T @ x (N, in);  dx (N, in) += du (N, r) @ A (r, in)
    ops.Gemm(true, false, f.r, f.in, rows, du, f.r, x, f.in, 1.0f, f.a_grad, f.in);
    if (!dx.empty()) ops.Gemm(false, false, rows, f.in, f.r, du, f.r, f.a, f.in, 1.0f, dx, f.in);
    return;
  }
  // dA += du^T xd;  dx += mask / (1 - p) * (du @ A) (the dropout's backward: the same masked
  // scaling), in one pass over x, the mask and dx.
  ops.DroppedLinearBackward(rows, f.r, f.in, x, drop.bits, drop.p, f.a, du, 1.0f, f.a_grad, dx,
                            drop.scratch, drop.grad_scratch);
}

bool LoraLinear::Fold(const Backend& ops, const LinearPass& pass, const View& x,
                      FoldedBranch* branch) {
  if (!scratch_->folded()) return false;
  const LoraFactors f{a_->value,    b_->value,    a_->grad,    b_->grad,
                      a_->shape[0], a_->shape[1], b_->shape[0]};
  const int64_t rows = x.numel() / f.in;
  const LoraScratch::Views s = scratch_->For(index_, rows, x.dtype(), pass.training);
  if (s.u.empty()) return false;  // out of memory: recorded; Forward adds nothing either
  if (Drops(pass)) ops.DropoutMask(x.numel(), dropout_, Seed(pass), MaskOf(x, s));
  LoraBranchU(ops, f, scaling_, rows, x, DropoutOf(pass, x, s), s.u);
  *branch = {s.u, f.b, f.r, s.input_grad};
  return true;
}

void LoraLinear::Forward(const Backend& ops, const LinearPass& pass, const View& x, const View& y) {
  const LoraFactors f{a_->value,    b_->value,    a_->grad,    b_->grad,
                      a_->shape[0], a_->shape[1], b_->shape[0]};
  const int64_t rows = x.numel() / f.in;
  const LoraScratch::Views s = scratch_->For(index_, rows, x.dtype(), pass.training);
  if (s.u.empty()) return;  // out of memory: recorded in the scratch's status
  // The mask drawn once; the backward applies it again (lora_linear.h).
  if (Drops(pass)) ops.DropoutMask(x.numel(), dropout_, Seed(pass), MaskOf(x, s));
  LoraBranchForward(ops, f, scaling_, rows, x, DropoutOf(pass, x, s), s.u, y);
}

void LoraLinear::Backward(const Backend& ops, const LinearPass& pass, const View& x, const View& dy,
                          const View& dx) {
  const LoraFactors f{a_->value,    b_->value,    a_->grad,    b_->grad,
                      a_->shape[0], a_->shape[1], b_->shape[0]};
  const int64_t rows = x.numel() / f.in;
  const LoraScratch::Views s = scratch_->For(index_, rows, x.dtype(), true);
  if (s.u.empty()) return;
  // The forward's mask applied to x and to the input gradient again.
  LoraBranchBackward(ops, f, scaling_, rows, x, DropoutOf(pass, x, s), dy, s.u, s.du, dx);
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
