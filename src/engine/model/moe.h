// GPT-OSS's mixture-of-experts block (transformers' GptOssMLP), forward and backward by hand,
// over N = B*T tokens of width C with E experts, k per token, each of width I:
//
//   logits = xn Wr^T + br                           (N, E)   router (a Linear), fp32
//   experts, weights = top-k(logits), softmax over the k   (N, k)
//   grouped rows: the N*k (token, slot) choices sorted by expert (MoeDispatch); expert e owns
//   rows [offsets[e], offsets[e+1])
//   xg = xn[token of each row]                      (N*k, C)
//   gate_up = xg W1_e + b1_e    for each expert e over its rows  (N*k, 2I)  one grouped GEMM
//   act = clamped SwiGLU(gate_up)                   (N*k, I)
//   y = act W2_e + b2_e         for each expert e over its rows  (N*k, C)  one grouped GEMM
//   out[n] = sum over n's slots (in expert order) of weight * y[row]   (N, C)
//
// No expert runs on tokens not routed to it, and an expert with no tokens runs nothing. The
// row ranges never leave the backend: Ops::GroupedGemm reads them where MoeDispatch wrote them
// (a GPU sizes its launch from N*k and E alone), so a block costs no host sync. They are kept
// in the activations for the backward (and recomputed with the layer under activation
// checkpointing — the same inputs give the same routing).
//
// The experts' projections go through ExpertLinear descriptors (model/linear.h: the per-expert
// weight [E, in, out], x @ W as transformers' GptOssExperts stores gate_up_proj and down_proj,
// and bias [E, out]), where expert adapters (PEFT's target_parameters, engine/lora) attach; an
// adapter's branch is added after the base product, its gradient after the base's.
// Thread safety: functions over caller-owned views; one thread per call.
#pragma once

#include <cstdint>

#include "engine/backend/backend.h"
#include "engine/model/decoder_layer.h"
#include "engine/model/parameter.h"
#include "engine/workspace.h"

namespace air::engine {

struct MoeWeights {
  Linear router;      // (E, C) + (E)
  ExpertLinear mlp1;  // gate_up: (E, C, 2I) + (E, 2I), gate and up interleaved
  ExpertLinear mlp2;  // down: (E, I, C) + (E, C)
  float swiglu_alpha = 1.702f;
  float swiglu_limit = 7.0f;
};

struct MoeActivations {
  View logits;                     // (N, E) F32 router logits (scratch)
  View experts, weights;           // (N, k) I32 chosen experts, F32 their weights
  View offsets;                    // (E + 1) I32 first grouped row of each expert
  View token_of_row, row_of_slot;  // (N*k) I32 each
  View xg, gate_up, act, y;        // (N*k, C), (N*k, 2I), (N*k, I), (N*k, C)
};

struct MoeGradScratch {
  View dy, dact, dgate_up, dxg;  // (N*k, C), (N*k, I), (N*k, 2I), (N*k, C) F32
  View dweights, dlogits;        // (N, k), (N, E) F32
};

// Takes one block's activations for `rows` tokens from `ws` (data views in `dtype`; the
// router's logits and weights F32, index views I32).
void LayoutMoeActivations(Workspace& ws, int64_t rows, int64_t hidden, int64_t inter,
                          int64_t experts, int64_t k, DType dtype, MoeActivations& a);
void LayoutMoeGradScratch(Workspace& ws, int64_t rows, int64_t hidden, int64_t inter,
                          int64_t experts, int64_t k, MoeGradScratch& g);

// out (N, C) = the MoE block of xn (N, C) (written; the caller adds the residual). Fills `a`.
// `pass` is the experts' adapters' (training or evaluation).
void MoeForward(const Backend& ops, const LinearPass& pass, const MoeWeights& w, const View& xn,
                const MoeActivations& a, const View& out);
// dxn (N, C) += d/dxn of the block for dout (N, C); accumulates the trainable parameters'
// gradients. `a` holds the forward's activations.
void MoeBackward(const Backend& ops, const LinearPass& pass, const MoeWeights& w, const View& xn,
                 const MoeActivations& a, const View& dout, const MoeGradScratch& g,
                 const View& dxn);

// y (rows, out) = x W_e (+ b_e) (+ the adapter's branch) over each expert's row range of x
// (rows, in); `offsets` (E + 1, I32) is the backend's own (MoeDispatch's).
void ExpertLinearForward(const Backend& ops, const LinearPass& pass, const View& x,
                         const View& offsets, const ExpertLinear& linear, const View& y);
// dx (rows, in) = dy W_e^T per expert (written; then + the adapter's part); dW_e += x^T dy and
// db_e += colsum(dy) over the expert's rows for the trainable ones (a frozen W or b is
// skipped); the adapter accumulates its own gradients.
void ExpertLinearBackward(const Backend& ops, const LinearPass& pass, const View& x,
                          const View& offsets, const ExpertLinear& linear, const View& dy,
                          const View& dx);

}  // namespace air::engine
