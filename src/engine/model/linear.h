// Linear: the descriptor every linear layer of a model is called through, y = x W^T (+ b), and
// where adapters go (torchtitan's model_converter idea: LoRA is attached from outside the model,
// engine/lora). A model keeps one Linear per projection (LlamaModel: q, k, v, o, gate, up, down
// of every layer) and lists them with their module names (CausalLm::Linears); a converter sets
// `adapter`, and LinearForward / LinearBackward then add the adapter's branch after the base
// product. The model knows nothing of what the adapter is. ExpertLinear is the same for a
// mixture of experts' per-expert weight [E, in, out] (model/moe.h): the model lists them
// (CausalLm::ExpertLinears) and an ExpertLinearAdapter (PEFT's LoRA on parameters,
// engine/lora/expert_lora.h) adds its branch over each expert's rows.
//
// LinearPass says what kind of pass a call belongs to: a training forward (and its
// recomputation under activation checkpointing, which must draw the same dropout masks: the same
// seed) or evaluation / generation (no dropout, nothing kept for a backward).
//
// Thread safety: functions over caller-owned views; an adapter is driven by the model's thread.
#pragma once

#include <cstdint>
#include <string>

#include "engine/backend/backend.h"
#include "engine/model/parameter.h"

namespace air::engine {

struct LinearPass {
  bool training = false;  // a training forward (dropout active, activations kept)
  uint64_t seed = 0;      // the forward's random stream (ForwardOptions::rng_seed)
};

// A branch that is a rank-r product, y += u B^T, for the base product to add in its own pass
// over y (Ops::GemmConcatK): u (N, r) for x's rows, B (out, r), and the op's scratch (F32, at
// least `out` elements).
struct FoldedBranch {
  View u, b;
  int64_t r = 0;
  View scratch;
};

// A branch added to a linear layer's output, owned outside the model (a LoRA adapter).
class LinearAdapter {
 public:
  virtual ~LinearAdapter() = default;
  // For a branch that folds into the base product: computes u for x (keeping what Backward
  // needs, as Forward would), sets *branch and returns true; LinearForward then adds it inside
  // the base product and does not call Forward. False: Forward after the base product.
  virtual bool Fold(const Backend& /*ops*/, const LinearPass& /*pass*/, const View& /*x*/,
                    FoldedBranch* /*branch*/) {
    return false;
  }
  // y (N, out) += adapter(x (N, in)); in training, keeps what Backward needs.
  virtual void Forward(const Backend& ops, const LinearPass& pass, const View& x,
                       const View& y) = 0;
  // Given the same x and dy = dL/dy (N, out, F32) of the last training Forward of this batch
  // shape: accumulates the adapter's parameter gradients and dx (N, in) += dL/dx through the
  // branch (dx may be empty: nothing flows to x).
  virtual void Backward(const Backend& ops, const LinearPass& pass, const View& x, const View& dy,
                        const View& dx) = 0;
};

// A linear layer y = x W^T (+ b), and where adapters go.
struct Linear {
  Parameter* weight = nullptr;       // (out, in) as in HF
  Parameter* bias = nullptr;         // (out) or null
  LinearAdapter* adapter = nullptr;  // attached from outside (engine/lora), or null
};

// A branch added to a per-expert linear's output (rows grouped by expert: expert e owns rows
// [offsets[e], offsets[e + 1]) of x and y; offsets (E + 1, I32) in the backend's memory, read
// only by its grouped ops, never copied to the host), owned outside the model.
class ExpertLinearAdapter {
 public:
  virtual ~ExpertLinearAdapter() = default;
  // y (rows, out) += adapter(x (rows, in)) per expert; in training, keeps what Backward needs.
  virtual void Forward(const Backend& ops, const LinearPass& pass, const View& x,
                       const View& offsets, const View& y) = 0;
  // Given the same x and offsets and dy (rows, out, F32) of the last training Forward:
  // accumulates the adapter's gradients and dx (rows, in, F32) += dL/dx through the branch.
  virtual void Backward(const Backend& ops, const LinearPass& pass, const View& x,
                        const View& offsets, const View& dy, const View& dx) = 0;
};

// A per-expert linear layer y_e = x_e W_e (+ b_e), W (E, in, out) as transformers' GptOssExperts
// stores gate_up_proj and down_proj, and where expert adapters go.
struct ExpertLinear {
  Parameter* weight = nullptr;             // (E, in, out)
  Parameter* bias = nullptr;               // (E, out) or null
  ExpertLinearAdapter* adapter = nullptr;  // attached from outside (engine/lora), or null
};

// A model's per-expert linear layer by its weight's name ("layers.0.moe.experts.mlp1_weight").
struct NamedExpertLinear {
  std::string parameter;
  ExpertLinear* linear = nullptr;
};

// A model's linear layer by its module name (the model's own: "layers.0.attention.wq").
struct NamedLinear {
  std::string module;
  Linear* linear = nullptr;
};

// y (N, out) = x (N, in) W^T (+ b) (+ the adapter's branch: in the same product when it folds).
void LinearForward(const Backend& ops, const LinearPass& pass, const View& x, const Linear& linear,
                   const View& y);
// dx (N, in) += or = dy W (accumulate selects beta) (+ the adapter's part); dW += dy^T x (=
// for the step's first write: GradientBeta) and
// db += colsum(dy) for the trainable ones (a frozen W or b is skipped: no weight-gradient GEMM);
// the adapter accumulates its own gradients. dx may be empty.
void LinearBackward(const Backend& ops, const LinearPass& pass, const View& x, const Linear& linear,
                    const View& dy, const View& dx, bool accumulate_dx);

}  // namespace air::engine
