// The language-model head and its loss, shared by the models: logits = xf W^T (N, V) from the
// final norm's output xf (N, C), cross-entropy against the shifted targets, and — in a training
// forward — the gradients, fused and chunked as Liger-Kernel's FusedLinearCrossEntropy does:
// for each chunk of rows, logits (rows, V, fp32) -> loss and lse -> dlogits -> dxf (rows, C) =
// dlogits W and dW += dlogits^T xf. dlogits are written over the logits, or, when the model
// computes in BF16, into a bf16 chunk of their own: the products would round them to bf16 anyway,
// so this is the same arithmetic with half the bytes, and the input-gradient product reads them
// in place instead of packing them. Only one chunk of logits ever exists, never
// the N x V matrix (vocab 128k x 8k tokens would be 4 GiB of fp32). The loss and softmax are
// fp32 whatever the compute dtype.
// The unfused path (one (N, V) product; needed when the caller wants the logits) computes the
// same values with a different summation order in nothing but the GEMM blocking.
// Thread safety: functions over caller-owned views.
#pragma once

#include <cstdint>

#include "engine/backend/backend.h"
#include "engine/model/parameter.h"
#include "engine/workspace.h"

namespace air::engine {

// Rows per chunk of the fused head, at least 64, at most n. When the pass writes the head's
// gradient, the chunk's fp32 logits stay under ~128 MiB: the weight-gradient product reads and
// writes all of dW once per chunk, so chunks must not get small. Otherwise (a frozen head, as
// LoRA's, or evaluation) under ~4 MiB, so that a chunk's logits stay in cache from the product
// through the loss and its gradient to the input-gradient product instead of going to memory
// and back three times.
int64_t HeadChunkRows(int64_t n, int64_t vocab, bool head_gradient = true);

struct HeadViews {
  View logits;    // (chunk rows, V) F32: one chunk, or (N, V) for the unfused head
  View dlogits;   // (chunk rows, V) BF16 for a BF16 head in training, else empty (over logits)
  View lse;       // (N) F32
  View loss_sum;  // F64 scalar
  // W packed once per pass for the chunks' products (Ops::PackGemmB), when there is more than
  // one chunk and the backend packs: as the B of logits = xf W^T and, training, of dxf =
  // dlogits W. Empty: each product packs W itself (for a 128k vocabulary, 1 GiB per chunk).
  View packed_for_logits, packed_for_dx;  // U8
};

// The bytes of the head weight's packed copies (Ops::GemmPackedBBytes: 0 where the backend
// keeps none), as the B of the logits' product and of the input gradient's.
struct HeadPacking {
  int64_t for_logits = 0, for_dx = 0;
};

// Takes the head's views for n rows from `ws` (`unfused`: room for all n rows of logits;
// `compute`: the model's compute dtype, with `training`, whether dlogits get a bf16 chunk;
// `head_trainable`: whether a training pass writes the head's gradient, for HeadChunkRows;
// `packing`: the packed copies' bytes, taken when the head has more than one chunk).
HeadViews LayoutHead(Workspace& ws, int64_t n, int64_t vocab, bool unfused, DType compute,
                     bool training, bool head_trainable, const HeadPacking& packing = {});

// What `ops` takes for the head weight's packed copies: W (vocab, dim) of `dtype`.
HeadPacking PackingOfHead(const Backend& ops, int64_t vocab, int64_t dim, DType dtype);

// Training: loss_sum += the summed token loss (the caller zeroes it, or sums several batches); dxf
// (N, C, F32) = d(per_token * loss_sum)/dxf (written); head.grad += its gradient when the head is
// trainable. `xf` (N, C) is the final norm's output, `targets` (N) I32 with -100 for rows without
// loss.
void HeadForwardBackward(const Backend& ops, const View& xf, Parameter& head, const View& targets,
                         float per_token, const HeadViews& views, bool unfused, const View& dxf);
// Evaluation: loss_sum += the summed token loss only; with `keep_logits` the unfused head leaves
// the (N, V) logits in views.logits.
void HeadForward(const Backend& ops, const View& xf, const Parameter& head, const View& targets,
                 const HeadViews& views, bool unfused);

}  // namespace air::engine
