// The fused, chunked linear + cross-entropy head (see lm_head.h).
#include "engine/model/lm_head.h"

#include <algorithm>

namespace air::engine {

int64_t HeadChunkRows(int64_t n, int64_t vocab, bool head_gradient) {
  const int64_t chunk_bytes = head_gradient ? int64_t{128} << 20 : int64_t{4} << 20;
  const int64_t rows = chunk_bytes / (std::max<int64_t>(1, vocab) * 4);
  return std::max<int64_t>(1, std::min(n, std::max<int64_t>(64, rows)));
}

HeadViews LayoutHead(Workspace& ws, int64_t n, int64_t vocab, bool unfused, DType compute,
                     bool training, bool head_trainable, const HeadPacking& packing) {
  HeadViews v;
  const int64_t rows = unfused ? n : HeadChunkRows(n, vocab, training && head_trainable);
  v.logits = ws.F32({rows, vocab});
  if (training && compute == DType::kBF16) v.dlogits = ws.Take(DType::kBF16, {rows, vocab});
  v.lse = ws.F32({n});
  v.loss_sum = ws.Take(DType::kF64, {1});
  if (rows < n) {  // several chunks read W: packed once for all of them
    if (packing.for_logits > 0) v.packed_for_logits = ws.Take(DType::kU8, {packing.for_logits});
    if (training && packing.for_dx > 0) v.packed_for_dx = ws.Take(DType::kU8, {packing.for_dx});
  }
  return v;
}

HeadPacking PackingOfHead(const Backend& ops, int64_t vocab, int64_t dim, DType dtype) {
  return {ops.GemmPackedBBytes(vocab, dim, dtype), ops.GemmPackedBBytes(dim, vocab, dtype)};
}

namespace {

// Rows [r0, r0 + rows) of one chunk: logits = xf W^T, then the loss (added to loss_sum) and the
// per-row lse.
void ChunkLoss(const Backend& ops, const View& xf, const Parameter& head, const View& targets,
               const HeadViews& views, int64_t r0, int64_t rows, View* logits) {
  const int64_t dim = head.shape[1], vocab = head.shape[0];
  *logits = views.logits.Rows(0, rows);
  if (!views.packed_for_logits.empty()) {
    ops.GemmPackedB(rows, vocab, dim, xf.Rows(r0, rows), dim, views.packed_for_logits, 0.0f,
                    *logits, vocab);
  } else {
    ops.Gemm(false, true, rows, vocab, dim, xf.Rows(r0, rows), dim, head.value, dim, 0.0f, *logits,
             vocab);
  }
  ops.CrossEntropyForward(*logits, targets.Slice(r0, rows), views.lse.Slice(r0, rows),
                          views.loss_sum);
}

// W packed for this pass's chunks, in the layouts the views hold room for (W does not change
// within a pass: an optimizer step comes between passes).
void PackHead(const Backend& ops, const Parameter& head, const HeadViews& views) {
  const int64_t dim = head.shape[1], vocab = head.shape[0];
  if (!views.packed_for_logits.empty()) {
    ops.PackGemmB(true, vocab, dim, head.value, dim, views.packed_for_logits);
  }
  if (!views.packed_for_dx.empty()) {
    ops.PackGemmB(false, dim, vocab, head.value, dim, views.packed_for_dx);
  }
}

}  // namespace

void HeadForwardBackward(const Backend& ops, const View& xf, Parameter& head, const View& targets,
                         float per_token, const HeadViews& views, bool unfused, const View& dxf) {
  const int64_t n = targets.numel(), dim = head.shape[1], vocab = head.shape[0];
  const int64_t chunk = unfused ? n : views.logits.dim(0);
  PackHead(ops, head, views);
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t rows = std::min(chunk, n - r0);
    View logits;
    ChunkLoss(ops, xf, head, targets, views, r0, rows, &logits);
    // dlogits (rows, V) = per_token * (softmax - onehot), over the logits or in their bf16 chunk.
    const View dlogits = views.dlogits.empty() ? logits : views.dlogits.Rows(0, rows);
    ops.CrossEntropyBackward(logits, targets.Slice(r0, rows), views.lse.Slice(r0, rows), per_token,
                             dlogits);
    // dW (V, C) += dlogits^T xf (the step's first write overwrites);  dxf (rows, C) = dlogits W
    if (head.trainable) {
      ops.Gemm(true, false, vocab, dim, rows, dlogits, vocab, xf.Rows(r0, rows), dim,
               GradientBeta(head), head.grad, dim);
    }
    if (!views.packed_for_dx.empty()) {
      ops.GemmPackedB(rows, dim, vocab, dlogits, vocab, views.packed_for_dx, 0.0f,
                      dxf.Rows(r0, rows), dim);
    } else {
      ops.Gemm(false, false, rows, dim, vocab, dlogits, vocab, head.value, dim, 0.0f,
               dxf.Rows(r0, rows), dim);
    }
  }
}

void HeadForward(const Backend& ops, const View& xf, const Parameter& head, const View& targets,
                 const HeadViews& views, bool unfused) {
  const int64_t n = targets.numel();
  const int64_t chunk = unfused ? n : views.logits.dim(0);
  PackHead(ops, head, views);
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    View logits;
    ChunkLoss(ops, xf, head, targets, views, r0, std::min(chunk, n - r0), &logits);
  }
}

}  // namespace air::engine
