// LoraLinear: the LoRA branch of one linear layer, a LinearAdapter (model/linear.h) attached from
// outside the model — PEFT's lora.Linear forward, y = base(x) + B(A(dropout(x))) * scaling, with
// A (r, in) and B (out, r) real Parameters of the model (so FSDP, the optimizer, checkpoints and
// the state-dict adapter see them):
//
//   forward   xd = dropout(x) (training only; the adapter's input only, never the base's)
//             u = scaling * xd A^T (N, r, kept for the backward); y += u B^T, inside the base
//             product (LinearAdapter::Fold, Ops::GemmConcatK: one pass over y) where the
//             scratch is made for it (u then in the activations' dtype, as the product's
//             operand; else F32)
//   backward  dB += dy^T u;  du = scaling * dy B;  dA += du^T xd;  dx += dropout'(du A)
//
// ExpertLora: the same branch per expert of a per-expert weight W (E, in, out), an
// ExpertLinearAdapter — PEFT's LoRA on a parameter (its ParamWrapper, target_parameters), whose
// weight is W_e + scaling A_e^T B_e^T, computed unmerged over expert e's rows (the same product:
// x_e (W_e + scaling A_e^T B_e^T) = x_e W_e + (scaling x_e A_e^T) B_e^T), without dropout (PEFT
// refuses it there). A is PEFT's lora_A (E*r, in), expert-major (A_e = rows e*r ... e*r + r - 1);
// B is kept (E, out, r), so each B_e (out, r) is one block (PEFT's lora_B is (out, r*E) with
// B_e's column j at j*E + e: lora_model.h converts at the files).
//
// The dropout mask is drawn once per training forward (Ops::DropoutMask, from a counter-based
// stream seeded by the forward's LinearPass seed and this adapter's index) and kept as bits, one
// per input element. The products that read xd take x through those bits (Ops::GemmDropped in the
// forward, a fusing backend never writing xd out), and the backward's dA and dx through them in
// one op (Ops::DroppedLinearBackward: nor du A) instead of drawing the mask twice more. A
// recomputed layer (activation checkpointing) draws the same bits again; a resumed run repeats
// them.
//
// Memory: each adapter keeps u (N x r; N*k rows for an expert adapter) and, with dropout,
// its mask (N x in bits: 1/16 of a bf16 copy of its input) between a training forward and its
// backward; the temporaries (dropout(x), du, the masked input gradient) are shared by all adapters
// of a scratch. Both live in LoraScratch's workspaces, laid out per row
// count; Reserve() sizes them before a run so the step loop never allocates (an allocation
// failure inside a forward is recorded in status()).
//
// Thread safety: driven by the model's thread.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/model/linear.h"
#include "engine/workspace.h"

namespace air::engine::lora {

// The memory all adapters of a model (of one row count: the linear layers', or the experts')
// share. `mask_widths` has one entry per adapter: the input width its dropout mask covers (0: no
// dropout); the widest is the width of the shared dropout(x) buffer. `folded_out` > 0: the
// adapters fold their branch into the base product (LoraLinear::Fold) and the widest output is
// folded_out: u is kept in the activations' dtype (the product's operand) and input_grad holds
// at least folded_out floats (GemmConcatK's scratch).
class LoraScratch {
 public:
  LoraScratch(const Backend* backend, int rank, std::vector<int64_t> mask_widths,
              int64_t folded_out = 0);

  // Lays out both workspaces for up to `rows` tokens with activations of `dtype` (the high-water
  // mark: later layouts for fewer rows allocate nothing).
  Status Reserve(int64_t rows, DType dtype);
  // The bytes Reserve(rows, dtype) allocates (both workspaces; measured, nothing allocated).
  size_t PlanBytes(int64_t rows, DType dtype) const;

  struct Views {
    View input;       // (rows, max_in) in the activations' dtype: dropout(x) (GemmDropped's
                      // scratch: a fusing backend never writes it)
    View input_grad;  // (rows, max_in) F32, at least folded_out: the gradient before the
                      // dropout mask (GemmAddDropped's scratch, the same), GemmConcatK's scratch
    View u;           // (rows, r), F32 or folded in the activations' dtype: this adapter's kept
                      // product (training) or a temporary
    View du;          // (rows, r) F32
    View mask;        // (ceil(rows * in / 8)) U8: this adapter's kept dropout mask (training with
                      // dropout; else empty)
  };
  // The views for adapter `index` over `rows` tokens; laid out again when rows or dtype changed
  // (training: every adapter's u is kept until the next layout). Empty views after a failed
  // allocation, recorded in status().
  Views For(int index, int64_t rows, DType dtype, bool training);
  const Status& status() const { return status_; }
  bool folded() const { return folded_out_ > 0; }

 private:
  struct Layout {
    int64_t rows = -1;
    DType dtype = DType::kF32;
    View input, input_grad, du;
    std::vector<View> u;     // one per adapter (training), or one shared (evaluation)
    std::vector<View> mask;  // one per adapter (training), empty without dropout; none (evaluation)
  };
  Status Arrange(Workspace& ws, Layout& layout, int64_t rows, DType dtype, bool training);
  void LayOut(Workspace& w, Layout& layout, int64_t rows, DType dtype, bool training) const;

  Workspace training_, eval_;
  Layout training_layout_, eval_layout_;
  int rank_;
  std::vector<int64_t> mask_widths_;
  int64_t max_in_;
  int64_t folded_out_;
  int adapters_;
  Status status_;
};

// One adapter's factors as views: A (r, in), B (out, r) and their F32 gradients.
struct LoraFactors {
  View a, b, a_grad, b_grad;
  int64_t r = 0, in = 0, out = 0;
};

// The dropout of the branch's input: x's kept mask (empty: none), its p, and where a backend
// that does not fuse GemmDropped writes dropout(x) (x's dtype, at least x's size) and
// GemmAddDropped the input gradient before the mask (F32, x's size).
struct LoraDropout {
  View bits;
  float p = 0.0f;
  View scratch;
  View grad_scratch;
};

// The branch's first product over `rows` rows of x, xd = dropout(x) as `drop` says:
// u (rows, r) = scaling * xd A^T (written).
void LoraBranchU(const Backend& ops, const LoraFactors& f, float scaling, int64_t rows,
                 const View& x, const LoraDropout& drop, const View& u);
// The branch: u as LoraBranchU writes it, then y (rows, out) += u B^T.
void LoraBranchForward(const Backend& ops, const LoraFactors& f, float scaling, int64_t rows,
                       const View& x, const LoraDropout& drop, const View& u, const View& y);
// Given the forward's x, drop and u: dB += dy^T u; du (rows, r) = scaling * dy B (written);
// dA += du^T xd; dx (rows, in) += dropout'(du A) unless dx is empty (with dropout, dA and dx in
// one pass over x: Ops::DroppedLinearBackward).
void LoraBranchBackward(const Backend& ops, const LoraFactors& f, float scaling, int64_t rows,
                        const View& x, const LoraDropout& drop, const View& dy, const View& u,
                        const View& du, const View& dx);

class LoraLinear final : public LinearAdapter {
 public:
  // a (r, in) and b (out, r) are the model's parameters; `index` numbers the adapter (its
  // dropout stream and its kept product in `scratch`).
  LoraLinear(Parameter* a, Parameter* b, float scaling, float dropout, int index,
             LoraScratch* scratch)
      : a_(a), b_(b), scaling_(scaling), dropout_(dropout), index_(index), scratch_(scratch) {}

  bool Fold(const Backend& ops, const LinearPass& pass, const View& x,
            FoldedBranch* branch) override;
  void Forward(const Backend& ops, const LinearPass& pass, const View& x, const View& y) override;
  void Backward(const Backend& ops, const LinearPass& pass, const View& x, const View& dy,
                const View& dx) override;

  Parameter* a() const { return a_; }
  Parameter* b() const { return b_; }

 private:
  // The dropout stream of this adapter in a pass.
  uint64_t Seed(const LinearPass& pass) const;
  // Whether this pass drops (training with dropout).
  bool Drops(const LinearPass& pass) const;
  // x's dropout in this pass: its kept mask in s.mask (none unless Drops(pass)).
  LoraDropout DropoutOf(const LinearPass& pass, const View& x, const LoraScratch::Views& s) const;
  // The bytes of s.mask that x's elements use.
  static View MaskOf(const View& x, const LoraScratch::Views& s);

  Parameter* a_;
  Parameter* b_;
  float scaling_;
  float dropout_;
  int index_;
  LoraScratch* scratch_;
};

class ExpertLora final : public ExpertLinearAdapter {
 public:
  // a (E*r, in) and b (E, out, r) are the model's parameters; `index` numbers the adapter among
  // the experts' (its kept product in `scratch`, laid out for the experts' rows).
  ExpertLora(Parameter* a, Parameter* b, float scaling, int index, LoraScratch* scratch)
      : a_(a), b_(b), scaling_(scaling), index_(index), scratch_(scratch) {}

  // Every expert's branch in grouped GEMMs over the device offsets (no host read).
  void Forward(const Backend& ops, const LinearPass& pass, const View& x, const View& offsets,
               const View& y) override;
  void Backward(const Backend& ops, const LinearPass& pass, const View& x, const View& offsets,
                const View& dy, const View& dx) override;

  Parameter* a() const { return a_; }
  Parameter* b() const { return b_; }
  int64_t experts() const { return b_->shape[0]; }

 private:
  Parameter* a_;
  Parameter* b_;
  float scaling_;
  int index_;
  LoraScratch* scratch_;
};

}  // namespace air::engine::lora
