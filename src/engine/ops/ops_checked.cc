// The public ops of engine/ops/ops.h: each checks its arguments once per call (the roles'
// dtypes, the sizes the op addresses: op_checks.h) and then calls the backend's kernel hook
// (AIR_OPS_KERNELS). This is the only place the checks live, so every backend (reference, fast,
// a CUDA one) gets the same checks and the same messages, and a kernel only computes.
// Thread safety: as the backend's kernels (ops.h).
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "engine/check.h"
#include "engine/ops/op_checks.h"
#include "engine/ops/op_sizes.h"
#include "engine/ops/ops.h"

namespace air::engine {

namespace {

using Named = std::pair<const View*, const char*>;

// RoPE's x (N, H, D) against its tables cos, sin (N, D/2).
void CheckRope(const Ops& ops, OpKind op, const View& x, const char* arg, const View& cos,
               const View& sin) {
  CheckData(ops, op, x, arg);
  CheckF32(ops, op, cos, "cos");
  CheckF32(ops, op, sin, "sin");
  CheckSameSize(op, cos, sin, "cos, sin");
  const int64_t n = cos.dim(0), half = cos.dim(-1);
  const int64_t row = n > 0 ? x.numel() / n : 0, heads = half > 0 ? row / (2 * half) : 0;
  CheckSize(op, x, n * heads * 2 * half, arg);
}

// Attention's views: the query-shaped ones (B, Tq, Hq, D), the key-shaped ones (B, kv_rows,
// Hkv, D), segments (both or neither), lse (required by the backward) and the sinks.
void CheckAttention(const Ops& ops, OpKind op, const AttentionShape& s,
                    std::initializer_list<Named> q_like, std::initializer_list<Named> kv_like,
                    const View& q_segments, const View& kv_segments, const View& lse,
                    bool lse_required, const View& sinks, const View& dsinks) {
  const int64_t q_size = s.batch * s.q_len * s.q_heads * s.head_dim;
  const int64_t kv_size = s.batch * s.kv_rows() * s.kv_heads * s.head_dim;
  for (const auto& [v, name] : q_like) {
    CheckData(ops, op, *v, name);
    CheckSize(op, *v, q_size, name);
  }
  for (const auto& [v, name] : kv_like) {
    CheckData(ops, op, *v, name);
    CheckSize(op, *v, kv_size, name);
  }
  CheckIndex(ops, op, q_segments, "q_segments");
  CheckIndex(ops, op, kv_segments, "kv_segments");
  if (q_segments.empty() != kv_segments.empty()) {
    CheckSize(op, q_segments.empty() ? q_segments : kv_segments, 1, "segments (give both)");
  }
  CheckF32(ops, op, lse, "lse");
  if (lse_required || !lse.empty()) CheckSize(op, lse, s.batch * s.q_heads * s.q_len, "lse");
  if (!sinks.empty()) {
    CheckData(ops, op, sinks, "sinks");
    CheckSize(op, sinks, s.q_heads, "sinks");
  }
  CheckData(ops, op, dsinks, "dsinks");
  if (!dsinks.empty()) CheckSize(op, dsinks, s.q_heads, "dsinks");
}

// A grouped op's offsets (G + 1, index, at least one entry); returns G.
int64_t CheckGroupOffsets(const Ops& ops, OpKind op, const View& offsets) {
  CheckIndex(ops, op, offsets, "offsets");
  CheckSize(op, offsets, 1, "offsets (G + 1 entries)");
  return offsets.numel() - 1;
}

// A data argument that must hold `elements` elements.
void CheckSizedData(const Ops& ops, OpKind op, const View& v, int64_t elements, const char* arg) {
  CheckData(ops, op, v, arg);
  CheckSize(op, v, elements, arg);
}

}  // namespace

void Ops::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const View& a,
               int64_t lda, const View& b, int64_t ldb, float beta, const View& c,
               int64_t ldc) const {
  const OpKind op = OpKind::kGemm;
  CheckData(*this, op, c, "c");
  CheckSize(op, c, MatrixSpan(m, n, ldc), "c");
  if (k > 0) {
    CheckData(*this, op, a, "a");
    CheckData(*this, op, b, "b");
    CheckSize(op, a, trans_a ? MatrixSpan(k, m, lda) : MatrixSpan(m, k, lda), "a");
    CheckSize(op, b, trans_b ? MatrixSpan(n, k, ldb) : MatrixSpan(k, n, ldb), "b");
  }
  GemmKernel(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

void Ops::EmbeddingForward(const View& ids, const View& table, const View& out) const {
  const OpKind op = OpKind::kEmbeddingForward;
  CheckIndex(*this, op, ids, "ids");
  CheckData(*this, op, table, "table");
  CheckData(*this, op, out, "out");
  CheckSize(op, out, ids.numel() * table.dim(-1), "out");
  EmbeddingForwardKernel(ids, table, out);
}

void Ops::EmbeddingBackward(const View& ids, const View& dout, int32_t skip_id,
                            const View& dtable) const {
  const OpKind op = OpKind::kEmbeddingBackward;
  CheckIndex(*this, op, ids, "ids");
  CheckData(*this, op, dout, "dout");
  CheckData(*this, op, dtable, "dtable");
  CheckSize(op, dout, ids.numel() * dtable.dim(-1), "dout");
  EmbeddingBackwardKernel(ids, dout, skip_id, dtable);
}

void Ops::RmsNormForward(const View& x, const View& w, float eps, const View& y,
                         const View& rstd) const {
  const OpKind op = OpKind::kRmsNormForward;
  CheckData(*this, op, x, "x");
  CheckData(*this, op, w, "w");
  CheckData(*this, op, y, "y");
  CheckF32(*this, op, rstd, "rstd");
  CheckSameSize(op, x, y, "x, y");
  const int64_t dim = w.numel();
  CheckSize(op, rstd, dim > 0 ? x.numel() / dim : 0, "rstd");
  RmsNormForwardKernel(x, w, eps, y, rstd);
}

void Ops::RmsNormBackward(const View& x, const View& w, const View& rstd, const View& dy,
                          const View& dx, const View& dw) const {
  const OpKind op = OpKind::kRmsNormBackward;
  CheckData(*this, op, x, "x");
  CheckData(*this, op, w, "w");
  CheckData(*this, op, dy, "dy");
  CheckData(*this, op, dx, "dx");
  CheckF32(*this, op, rstd, "rstd");
  if (!dw.empty()) CheckData(*this, op, dw, "dw");
  CheckSameSize(op, x, dy, "x, dy");
  CheckSameSize(op, x, dx, "x, dx");
  const int64_t dim = w.numel();
  CheckSize(op, rstd, dim > 0 ? x.numel() / dim : 0, "rstd");
  if (!dw.empty()) CheckSize(op, dw, dim, "dw");
  RmsNormBackwardKernel(x, w, rstd, dy, dx, dw);
}

void Ops::RopeTables(const View& positions, const View& inv_freq, float scale, const View& cos,
                     const View& sin) const {
  const OpKind op = OpKind::kRopeTables;
  CheckIndex(*this, op, positions, "positions");
  CheckF32(*this, op, inv_freq, "inv_freq");
  CheckF32(*this, op, cos, "cos");
  CheckF32(*this, op, sin, "sin");
  const int64_t entries = positions.numel() * inv_freq.numel();
  CheckSize(op, cos, entries, "cos");
  CheckSize(op, sin, entries, "sin");
  RopeTablesKernel(positions, inv_freq, scale, cos, sin);
}

void Ops::RopeForward(const View& x, const View& cos, const View& sin) const {
  CheckRope(*this, OpKind::kRopeForward, x, "x", cos, sin);
  RopeForwardKernel(x, cos, sin);
}

void Ops::RopeBackward(const View& dx, const View& cos, const View& sin) const {
  CheckRope(*this, OpKind::kRopeBackward, dx, "dx", cos, sin);
  RopeBackwardKernel(dx, cos, sin);
}

void Ops::AttentionForward(const AttentionShape& s, const View& q, const View& k, const View& v,
                           const View& sinks, const View& q_segments, const View& kv_segments,
                           const View& out, const View& lse) const {
  CheckAttention(*this, OpKind::kAttentionForward, s, {{&q, "q"}, {&out, "out"}},
                 {{&k, "k"}, {&v, "v"}}, q_segments, kv_segments, lse, false, sinks, View());
  AttentionForwardKernel(s, q, k, v, sinks, q_segments, kv_segments, out, lse);
}

void Ops::AttentionBackward(const AttentionShape& s, const View& q, const View& k, const View& v,
                            const View& sinks, const View& q_segments, const View& kv_segments,
                            const View& out, const View& lse, const View& dout, const View& dq,
                            const View& dk, const View& dv, const View& dsinks) const {
  const OpKind op = OpKind::kAttentionBackward;
  CheckAttention(*this, op, s, {{&q, "q"}, {&out, "out"}, {&dout, "dout"}, {&dq, "dq"}},
                 {{&k, "k"}, {&v, "v"}, {&dk, "dk"}, {&dv, "dv"}}, q_segments, kv_segments, lse,
                 true, sinks, dsinks);
  CheckSameSize(op, q, dq, "q, dq");
  CheckSameSize(op, k, dk, "k, dk");
  CheckSameSize(op, v, dv, "v, dv");
  AttentionBackwardKernel(s, q, k, v, sinks, q_segments, kv_segments, out, lse, dout, dq, dk, dv,
                          dsinks);
}

void Ops::SwigluForward(const View& gate, const View& up, const View& out) const {
  const OpKind op = OpKind::kSwigluForward;
  CheckData(*this, op, gate, "gate");
  CheckData(*this, op, up, "up");
  CheckData(*this, op, out, "out");
  CheckSameSize(op, gate, up, "gate, up");
  CheckSameSize(op, gate, out, "gate, out");
  SwigluForwardKernel(gate, up, out);
}

void Ops::SwigluBackward(const View& gate, const View& up, const View& dout, const View& dgate,
                         const View& dup) const {
  const OpKind op = OpKind::kSwigluBackward;
  for (const auto& [v, name] : {Named{&gate, "gate"}, Named{&up, "up"}, Named{&dout, "dout"},
                                Named{&dgate, "dgate"}, Named{&dup, "dup"}}) {
    CheckData(*this, op, *v, name);
    CheckSameSize(op, gate, *v, name);
  }
  SwigluBackwardKernel(gate, up, dout, dgate, dup);
}

void Ops::ClampedSwigluForward(const View& gate_up, float alpha, float limit,
                               const View& out) const {
  const OpKind op = OpKind::kClampedSwigluForward;
  CheckData(*this, op, gate_up, "gate_up");
  CheckData(*this, op, out, "out");
  CheckSize(op, gate_up, 2 * out.numel(), "gate_up");
  ClampedSwigluForwardKernel(gate_up, alpha, limit, out);
}

void Ops::ClampedSwigluBackward(const View& gate_up, float alpha, float limit, const View& dout,
                                const View& dgate_up) const {
  const OpKind op = OpKind::kClampedSwigluBackward;
  CheckData(*this, op, gate_up, "gate_up");
  CheckData(*this, op, dout, "dout");
  CheckData(*this, op, dgate_up, "dgate_up");
  CheckSameSize(op, gate_up, dgate_up, "gate_up, dgate_up");
  CheckSize(op, gate_up, 2 * dout.numel(), "gate_up");
  ClampedSwigluBackwardKernel(gate_up, alpha, limit, dout, dgate_up);
}

void Ops::RouterTopK(const View& logits, const View& indices, const View& weights) const {
  const OpKind op = OpKind::kRouterTopK;
  CheckData(*this, op, logits, "logits");
  CheckIndex(*this, op, indices, "indices");
  CheckF32(*this, op, weights, "weights");
  CheckSameSize(op, indices, weights, "indices, weights");
  CheckSize(op, logits, indices.numel(), "logits (fewer experts than k)");
  RouterTopKKernel(logits, indices, weights);
}

void Ops::RouterTopKBackward(const View& indices, const View& weights, const View& dweights,
                             const View& dlogits) const {
  const OpKind op = OpKind::kRouterTopKBackward;
  CheckIndex(*this, op, indices, "indices");
  CheckF32(*this, op, weights, "weights");
  CheckF32(*this, op, dweights, "dweights");
  CheckData(*this, op, dlogits, "dlogits");
  CheckSameSize(op, indices, weights, "indices, weights");
  CheckSameSize(op, indices, dweights, "indices, dweights");
  RouterTopKBackwardKernel(indices, weights, dweights, dlogits);
}

void Ops::MoeDispatch(const View& indices, const View& offsets, const View& token_of_row,
                      const View& row_of_slot) const {
  const OpKind op = OpKind::kMoeDispatch;
  for (const auto& [v, name] :
       {Named{&indices, "indices"}, Named{&offsets, "offsets"},
        Named{&token_of_row, "token_of_row"}, Named{&row_of_slot, "row_of_slot"}}) {
    CheckIndex(*this, op, *v, name);
  }
  CheckSameSize(op, indices, token_of_row, "indices, token_of_row");
  CheckSameSize(op, indices, row_of_slot, "indices, row_of_slot");
  MoeDispatchKernel(indices, offsets, token_of_row, row_of_slot);
}

void Ops::MoeGather(const View& x, const View& token_of_row, const View& grouped) const {
  const OpKind op = OpKind::kMoeGather;
  CheckData(*this, op, x, "x");
  CheckIndex(*this, op, token_of_row, "token_of_row");
  CheckData(*this, op, grouped, "grouped");
  MoeGatherKernel(x, token_of_row, grouped);
}

void Ops::MoeGatherBackward(const View& dgrouped, const View& row_of_slot, const View& dx) const {
  const OpKind op = OpKind::kMoeGatherBackward;
  CheckData(*this, op, dgrouped, "dgrouped");
  CheckIndex(*this, op, row_of_slot, "row_of_slot");
  CheckData(*this, op, dx, "dx");
  const int64_t n = Tokens(row_of_slot);
  CheckSize(op, dgrouped, n > 0 ? row_of_slot.numel() * (dx.numel() / n) : 0, "dgrouped");
  MoeGatherBackwardKernel(dgrouped, row_of_slot, dx);
}

void Ops::MoeCombine(const View& y, const View& weights, const View& row_of_slot,
                     const View& out) const {
  const OpKind op = OpKind::kMoeCombine;
  CheckData(*this, op, y, "y");
  CheckF32(*this, op, weights, "weights");
  CheckIndex(*this, op, row_of_slot, "row_of_slot");
  CheckData(*this, op, out, "out");
  CheckSameSize(op, weights, row_of_slot, "weights, row_of_slot");
  const int64_t n = Tokens(row_of_slot);
  CheckSize(op, y, n > 0 ? row_of_slot.numel() * (out.numel() / n) : 0, "y");
  MoeCombineKernel(y, weights, row_of_slot, out);
}

void Ops::MoeCombineBackward(const View& y, const View& weights, const View& row_of_slot,
                             const View& dout, const View& dy, const View& dweights) const {
  const OpKind op = OpKind::kMoeCombineBackward;
  CheckData(*this, op, y, "y");
  CheckF32(*this, op, weights, "weights");
  CheckIndex(*this, op, row_of_slot, "row_of_slot");
  CheckData(*this, op, dout, "dout");
  CheckData(*this, op, dy, "dy");
  CheckF32(*this, op, dweights, "dweights");
  CheckSameSize(op, y, dy, "y, dy");
  CheckSameSize(op, weights, dweights, "weights, dweights");
  const int64_t n = Tokens(row_of_slot);
  CheckSize(op, y, n > 0 ? row_of_slot.numel() * (dout.numel() / n) : 0, "y");
  MoeCombineBackwardKernel(y, weights, row_of_slot, dout, dy, dweights);
}

void Ops::GroupedGemm(bool trans_w, int64_t n, int64_t k, const View& x, const View& w,
                      const View& bias, const View& offsets, float beta, const View& y) const {
  const OpKind op = OpKind::kGroupedGemm;
  const int64_t groups = CheckGroupOffsets(*this, op, offsets);
  const int64_t rows = k > 0 ? x.numel() / k : 0;
  CheckData(*this, op, x, "x");
  CheckSizedData(*this, op, w, groups * k * n, "w");
  CheckSizedData(*this, op, y, rows * n, "y");
  if (!bias.empty()) CheckSizedData(*this, op, bias, groups * n, "bias");
  GroupedGemmKernel(trans_w, n, k, x, w, bias, offsets, beta, y);
}

void Ops::GroupedGemmWeightGrad(int64_t k, int64_t n, const View& x, const View& dy,
                                const View& offsets, const View& dw, const View& dbias) const {
  const OpKind op = OpKind::kGroupedGemmWeightGrad;
  const int64_t groups = CheckGroupOffsets(*this, op, offsets);
  const int64_t rows = n > 0 ? dy.numel() / n : 0;
  CheckData(*this, op, dy, "dy");
  if (!dw.empty()) {
    CheckSizedData(*this, op, dw, groups * k * n, "dw");
    CheckSizedData(*this, op, x, rows * k, "x");
  }
  if (!dbias.empty()) CheckSizedData(*this, op, dbias, groups * n, "dbias");
  GroupedGemmWeightGradKernel(k, n, x, dy, offsets, dw, dbias);
}

void Ops::DequantizeMxfp4(int64_t experts, int64_t rows, int64_t groups, const View& blocks,
                          const View& scales, const View& out) const {
  const OpKind op = OpKind::kDequantizeMxfp4;
  CheckPacked(*this, op, blocks, "blocks");
  CheckPacked(*this, op, scales, "scales");
  CheckData(*this, op, out, "out");
  const int64_t per_expert = rows * groups;
  CheckSize(op, scales, experts * per_expert, "scales");
  CheckSize(op, blocks, experts * per_expert * 16, "blocks");
  CheckSize(op, out, experts * per_expert * 32, "out");
  DequantizeMxfp4Kernel(experts, rows, groups, blocks, scales, out);
}

void Ops::AddInPlace(const View& y, const View& x) const {
  const OpKind op = OpKind::kAddInPlace;
  CheckData(*this, op, y, "y");
  CheckData(*this, op, x, "x");
  CheckSameSize(op, y, x, "y, x");
  AddInPlaceKernel(y, x);
}

void Ops::AddBias(const View& y, const View& bias) const {
  CheckData(*this, OpKind::kAddBias, y, "y");
  CheckData(*this, OpKind::kAddBias, bias, "bias");
  AddBiasKernel(y, bias);
}

void Ops::BiasBackward(const View& dy, const View& dbias) const {
  CheckData(*this, OpKind::kBiasBackward, dy, "dy");
  CheckData(*this, OpKind::kBiasBackward, dbias, "dbias");
  BiasBackwardKernel(dy, dbias);
}

void Ops::Convert(const View& src, const View& dst) const {
  const OpKind op = OpKind::kConvert;
  CheckData(*this, op, src, "src");
  CheckData(*this, op, dst, "dst");
  CheckSameSize(op, src, dst, "src, dst");
  ConvertKernel(src, dst);
}

void Ops::Dropout(const View& x, float p, uint64_t seed, const View& out) const {
  const OpKind op = OpKind::kDropout;
  CheckData(*this, op, x, "x");
  CheckData(*this, op, out, "out");
  CheckSameSize(op, x, out, "x, out");
  DropoutKernel(x, p, seed, out);
}

void Ops::DropoutMask(int64_t n, float p, uint64_t seed, const View& bits) const {
  const OpKind op = OpKind::kDropoutMask;
  CheckPacked(*this, op, bits, "bits");
  AIR_ENGINE_CHECK(n >= 0, "DropoutMask: n must be >= 0");
  CheckSize(op, bits, (n + 7) / 8, "bits");
  DropoutMaskKernel(n, p, seed, bits);
}

void Ops::ApplyDropoutMask(const View& x, const View& bits, float p, float beta,
                           const View& out) const {
  const OpKind op = OpKind::kApplyDropoutMask;
  CheckData(*this, op, x, "x");
  CheckPacked(*this, op, bits, "bits");
  CheckData(*this, op, out, "out");
  CheckSameSize(op, x, out, "x, out");
  CheckSize(op, bits, (x.numel() + 7) / 8, "bits");
  AIR_ENGINE_CHECK(beta == 0.0f || beta == 1.0f,
                   "ApplyDropoutMask: beta must be 0 (write) or 1 (accumulate)");
  ApplyDropoutMaskKernel(x, bits, p, beta, out);
}

void Ops::GemmDropped(bool drop_b, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                      const View& a, int64_t lda, const View& b, int64_t ldb, float beta,
                      const View& c, int64_t ldc, const View& bits, float p,
                      const View& scratch) const {
  const OpKind op = OpKind::kGemmDropped;
  CheckData(*this, op, c, "c");
  CheckSize(op, c, MatrixSpan(m, n, ldc), "c");
  CheckData(*this, op, a, "a");
  CheckData(*this, op, b, "b");
  CheckSize(op, a, trans_a ? MatrixSpan(k, m, lda) : MatrixSpan(m, k, lda), "a");
  CheckSize(op, b, trans_b ? MatrixSpan(n, k, ldb) : MatrixSpan(k, n, ldb), "b");
  // The dropped operand: its stored row length, which must be its ld, and its element count.
  const int64_t row = drop_b ? (trans_b ? k : n) : (trans_a ? m : k);
  const int64_t elements = drop_b ? k * n : m * k;
  AIR_ENGINE_CHECK((drop_b ? ldb : lda) == row || elements == 0,
                   "GemmDropped: the dropped operand must be contiguous (its ld its row length)");
  CheckPacked(*this, op, bits, "bits");
  CheckSize(op, bits, (elements + 7) / 8, "bits");
  CheckData(*this, op, scratch, "scratch");
  AIR_ENGINE_CHECK(scratch.dtype() == (drop_b ? b : a).dtype(),
                   "GemmDropped: scratch must have the dropped operand's dtype");
  CheckSize(op, scratch, elements, "scratch");
  GemmDroppedKernel(drop_b, trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, bits, p,
                    scratch);
}

void Ops::GemmDroppedThroughScratch(bool drop_b, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                    int64_t k, const View& a, int64_t lda, const View& b,
                                    int64_t ldb, float beta, const View& c, int64_t ldc,
                                    const View& bits, float p, const View& scratch) const {
  const int64_t elements = drop_b ? k * n : m * k;
  const View dropped = scratch.Flat().Slice(0, elements);
  if (elements > 0) {
    ApplyDropoutMaskKernel((drop_b ? b : a).Flat().Slice(0, elements), bits, p, 0.0f, dropped);
  }
  GemmKernel(trans_a, trans_b, m, n, k, drop_b ? a : dropped, lda, drop_b ? dropped : b, ldb, beta,
             c, ldc);
}

void Ops::GemmAddDropped(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const View& a,
                         int64_t lda, const View& b, int64_t ldb, const View& c, const View& bits,
                         float p, const View& scratch) const {
  const OpKind op = OpKind::kGemmAddDropped;
  CheckData(*this, op, c, "c");
  CheckSize(op, c, m * n, "c");
  if (k > 0) {
    CheckData(*this, op, a, "a");
    CheckData(*this, op, b, "b");
    CheckSize(op, a, trans_a ? MatrixSpan(k, m, lda) : MatrixSpan(m, k, lda), "a");
    CheckSize(op, b, trans_b ? MatrixSpan(n, k, ldb) : MatrixSpan(k, n, ldb), "b");
  }
  CheckPacked(*this, op, bits, "bits");
  CheckSize(op, bits, (m * n + 7) / 8, "bits");
  CheckF32(*this, op, scratch, "scratch");
  CheckSize(op, scratch, m * n, "scratch");
  GemmAddDroppedKernel(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, bits, p, scratch);
}

void Ops::GemmAddDroppedThroughScratch(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                       const View& a, int64_t lda, const View& b, int64_t ldb,
                                       const View& c, const View& bits, float p,
                                       const View& scratch) const {
  if (m * n == 0) return;
  const View product = scratch.Flat().Slice(0, m * n);
  GemmKernel(trans_a, trans_b, m, n, k, a, lda, b, ldb, 0.0f, product, n);
  ApplyDropoutMaskKernel(product, bits, p, 1.0f, c.Flat().Slice(0, m * n));
}

void Ops::GemmConcatK(bool trans_b, int64_t m, int64_t n, int64_t k, const View& a, int64_t lda,
                      const View& b, int64_t ldb, int64_t k2, const View& a2, int64_t lda2,
                      const View& b2, int64_t ldb2, const View& c, const View& scratch) const {
  const OpKind op = OpKind::kGemmConcatK;
  CheckData(*this, op, c, "c");
  CheckSize(op, c, m * n, "c");
  const View* operands[] = {&a, &b, &a2, &b2};
  const char* names[] = {"a", "b", "a2", "b2"};
  const int64_t depth[] = {k, k, k2, k2};
  for (int i = 0; i < 4; ++i) {
    if (depth[i] <= 0) continue;
    CheckData(*this, op, *operands[i], names[i]);
    const int64_t span = i % 2 == 0 ? MatrixSpan(m, depth[i], i == 0 ? lda : lda2)
                         : trans_b  ? MatrixSpan(n, depth[i], i == 1 ? ldb : ldb2)
                                    : MatrixSpan(depth[i], n, i == 1 ? ldb : ldb2);
    CheckSize(op, *operands[i], span, names[i]);
  }
  if (c.dtype() == DType::kBF16 && m * n > 0) {
    CheckF32(*this, op, scratch, "scratch");
    AIR_ENGINE_CHECK(scratch.numel() >= n,
                     "GemmConcatK: argument scratch: must hold at least one row of c (N floats)");
  }
  GemmConcatKKernel(trans_b, m, n, k, a, lda, b, ldb, k2, a2, lda2, b2, ldb2, c, scratch);
}

void Ops::GemmConcatKInTwo(bool trans_b, int64_t m, int64_t n, int64_t k, const View& a,
                           int64_t lda, const View& b, int64_t ldb, int64_t k2, const View& a2,
                           int64_t lda2, const View& b2, int64_t ldb2, const View& c,
                           const View& scratch) const {
  if (m * n == 0) return;
  const bool staged = c.dtype() == DType::kBF16;
  const int64_t block = staged ? std::min(m, scratch.numel() / n) : m;
  for (int64_t r0 = 0; r0 < m; r0 += block) {
    const int64_t rows = std::min(block, m - r0);
    const View out = staged ? scratch.Flat().Slice(0, rows * n) : c.Flat().Slice(r0 * n, rows * n);
    const View a_rows = a.Flat().Slice(r0 * lda, a.numel() - r0 * lda);
    const View a2_rows = a2.Flat().Slice(r0 * lda2, a2.numel() - r0 * lda2);
    GemmKernel(false, trans_b, rows, n, k, a_rows, lda, b, ldb, 0.0f, out, n);
    GemmKernel(false, trans_b, rows, n, k2, a2_rows, lda2, b2, ldb2, 1.0f, out, n);
    if (staged) ConvertKernel(out, c.Flat().Slice(r0 * n, rows * n));
  }
}

void Ops::PackGemmB(bool trans_b, int64_t n, int64_t k, const View& b, int64_t ldb,
                    const View& packed) const {
  const OpKind op = OpKind::kPackGemmB;
  CheckData(*this, op, b, "b");
  CheckSize(op, b, trans_b ? MatrixSpan(n, k, ldb) : MatrixSpan(k, n, ldb), "b");
  CheckPacked(*this, op, packed, "packed");
  const int64_t bytes = GemmPackedBBytes(n, k, b.dtype());
  AIR_ENGINE_CHECK(bytes > 0,
                   "PackGemmB: this backend keeps no packed B for this shape and dtype "
                   "(GemmPackedBBytes is 0: call Gemm)");
  CheckSize(op, packed, bytes, "packed");
  PackGemmBKernel(trans_b, n, k, b, ldb, packed);
}

void Ops::GemmPackedB(int64_t m, int64_t n, int64_t k, const View& a, int64_t lda,
                      const View& packed, float beta, const View& c, int64_t ldc) const {
  const OpKind op = OpKind::kGemmPackedB;
  CheckData(*this, op, c, "c");
  CheckSize(op, c, MatrixSpan(m, n, ldc), "c");
  CheckData(*this, op, a, "a");
  CheckSize(op, a, MatrixSpan(m, k, lda), "a");
  CheckPacked(*this, op, packed, "packed");
  AIR_ENGINE_CHECK(packed.numel() > 0, "GemmPackedB: packed is empty (see PackGemmB)");
  GemmPackedBKernel(m, n, k, a, lda, packed, beta, c, ldc);
}

void Ops::RefusePackedB(OpKind op) const {
  std::fprintf(stderr, "engine invariant failed: %s: the %s backend keeps no packed B\n",
               OpName(op), name().c_str());
  std::abort();
}

void Ops::DroppedLinearBackward(int64_t n, int64_t r, int64_t in, const View& x, const View& bits,
                                float p, const View& w, const View& dy, float beta,
                                const View& w_grad, const View& dx, const View& x_scratch,
                                const View& f32_scratch) const {
  const OpKind op = OpKind::kDroppedLinearBackward;
  AIR_ENGINE_CHECK(n >= 0 && r >= 0 && in >= 0, "DroppedLinearBackward: negative shape");
  CheckData(*this, op, w_grad, "w_grad");
  CheckSize(op, w_grad, r * in, "w_grad");
  if (n > 0) {
    CheckData(*this, op, x, "x");
    CheckSize(op, x, n * in, "x");
    CheckData(*this, op, dy, "dy");
    CheckSize(op, dy, n * r, "dy");
    CheckPacked(*this, op, bits, "bits");
    CheckSize(op, bits, (n * in + 7) / 8, "bits");
    CheckData(*this, op, x_scratch, "x_scratch");
    AIR_ENGINE_CHECK(x_scratch.dtype() == x.dtype(),
                     "DroppedLinearBackward: x_scratch must have x's dtype");
    CheckSize(op, x_scratch, n * in, "x_scratch");
  }
  if (!dx.empty() && n > 0) {
    CheckData(*this, op, dx, "dx");
    CheckSize(op, dx, n * in, "dx");
    CheckData(*this, op, w, "w");
    CheckSize(op, w, r * in, "w");
    CheckF32(*this, op, f32_scratch, "f32_scratch");
    CheckSize(op, f32_scratch, n * in, "f32_scratch");
  }
  AIR_ENGINE_CHECK(beta == 0.0f || beta == 1.0f,
                   "DroppedLinearBackward: beta must be 0 (write w_grad) or 1 (accumulate)");
  DroppedLinearBackwardKernel(n, r, in, x, bits, p, w, dy, beta, w_grad, dx, x_scratch,
                              f32_scratch);
}

void Ops::DroppedLinearBackwardInTwo(int64_t n, int64_t r, int64_t in, const View& x,
                                     const View& bits, float p, const View& w, const View& dy,
                                     float beta, const View& w_grad, const View& dx,
                                     const View& x_scratch, const View& f32_scratch) const {
  // w_grad (R, IN) = dy^T (dy stored (N, R)) drop(x) (N, IN) + beta * w_grad
  GemmDroppedKernel(true, true, false, r, in, n, dy, r, x, in, beta, w_grad, in, bits, p,
                    x_scratch);
  if (dx.empty() || n * in == 0 || r == 0) return;
  // dx (N, IN) += drop'(dy (N, R) W (R, IN))
  GemmAddDroppedKernel(false, false, n, in, r, dy, r, w, in, dx, bits, p, f32_scratch);
}

void Ops::CrossEntropyForward(const View& logits, const View& targets, const View& lse,
                              const View& loss_sum) const {
  const OpKind op = OpKind::kCrossEntropyForward;
  CheckData(*this, op, logits, "logits");
  CheckIndex(*this, op, targets, "targets");
  CheckF32(*this, op, lse, "lse");
  CheckScalar(*this, op, loss_sum, "loss_sum");
  CheckSize(op, lse, targets.numel(), "lse");
  CrossEntropyForwardKernel(logits, targets, lse, loss_sum);
}

void Ops::CrossEntropyBackward(const View& logits, const View& targets, const View& lse,
                               float scale, const View& dlogits) const {
  const OpKind op = OpKind::kCrossEntropyBackward;
  CheckData(*this, op, logits, "logits");
  CheckData(*this, op, dlogits, "dlogits");
  CheckIndex(*this, op, targets, "targets");
  CheckF32(*this, op, lse, "lse");
  CheckSameSize(op, logits, dlogits, "logits, dlogits");
  CrossEntropyBackwardKernel(logits, targets, lse, scale, dlogits);
}

void Ops::AdamWUpdate(const AdamWScalars& s, const View& p, const View& g, const View& m,
                      const View& v, const View& p_copy) const {
  const OpKind op = OpKind::kAdamWUpdate;
  for (const auto& [x, name] : {Named{&p, "p"}, Named{&g, "g"}, Named{&m, "m"}, Named{&v, "v"}}) {
    CheckData(*this, op, *x, name);
    CheckSameSize(op, p, *x, name);
  }
  if (!p_copy.empty()) {
    CheckData(*this, OpKind::kConvert, p_copy, "p_copy (written as Convert writes)");
    CheckSameSize(op, p, p_copy, "p_copy");
  }
  AdamWUpdateKernel(s, p, g, m, v, p_copy);
}

void Ops::SumOfSquares(const View& x, const View& sum) const {
  CheckData(*this, OpKind::kSumOfSquares, x, "x");
  CheckScalar(*this, OpKind::kSumOfSquares, sum, "sum");
  SumOfSquaresKernel(x, sum);
}

void Ops::Scale(const View& x, float factor) const {
  CheckData(*this, OpKind::kScale, x, "x");
  ScaleKernel(x, factor);
}

}  // namespace air::engine
