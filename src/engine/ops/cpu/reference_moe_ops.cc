// ReferenceOps' mixture-of-experts ops (GPT-OSS): argument checks, then the fp32 loops of
// reference_moe_loops.cc on fp32 staging of the data views (see reference_ops.h).
#include "engine/ops/cpu/convert.h"
#include "engine/ops/cpu/reference_loops.h"
#include "engine/ops/cpu/reference_ops.h"
#include "engine/ops/op_checks.h"

namespace air::engine {

namespace {

// (N, k) of a router's indices view.
int64_t TopK(const View& indices) { return indices.shape().empty() ? 1 : indices.dim(-1); }

}  // namespace

void ReferenceOps::ClampedSwigluForward(const View& gate_up, float alpha, float limit,
                                        const View& out) const {
  const OpKind op = OpKind::kClampedSwigluForward;
  CheckData(*this, op, gate_up, "gate_up");
  CheckData(*this, op, out, "out");
  CheckSize(op, gate_up, 2 * out.numel(), "gate_up");
  F32Input g(gate_up);
  F32Output o(out, false);
  RefClampedSwigluForward(g.get(), out.numel(), alpha, limit, o.get());
  o.Store();
}

void ReferenceOps::ClampedSwigluBackward(const View& gate_up, float alpha, float limit,
                                         const View& dout, const View& dgate_up) const {
  const OpKind op = OpKind::kClampedSwigluBackward;
  CheckData(*this, op, gate_up, "gate_up");
  CheckData(*this, op, dout, "dout");
  CheckData(*this, op, dgate_up, "dgate_up");
  CheckSameSize(op, gate_up, dgate_up, "gate_up, dgate_up");
  CheckSize(op, gate_up, 2 * dout.numel(), "gate_up");
  F32Input g(gate_up), d(dout);
  F32Output dg(dgate_up, true);
  RefClampedSwigluBackward(g.get(), d.get(), dout.numel(), alpha, limit, dg.get());
  dg.Store();
}

void ReferenceOps::RouterTopK(const View& logits, const View& indices, const View& weights) const {
  const OpKind op = OpKind::kRouterTopK;
  CheckData(*this, op, logits, "logits");
  CheckIndex(op, indices, "indices");
  CheckF32(op, weights, "weights");
  CheckSameSize(op, indices, weights, "indices, weights");
  const int64_t k = TopK(indices), n = indices.numel() / k;
  const int64_t experts = n > 0 ? logits.numel() / n : 0;
  CheckSize(op, logits, n * k, "logits (fewer experts than k)");
  F32Input l(logits);
  RefRouterTopK(l.get(), n, experts, k, indices.i32(), weights.f32());
}

void ReferenceOps::RouterTopKBackward(const View& indices, const View& weights,
                                      const View& dweights, const View& dlogits) const {
  const OpKind op = OpKind::kRouterTopKBackward;
  CheckIndex(op, indices, "indices");
  CheckF32(op, weights, "weights");
  CheckF32(op, dweights, "dweights");
  CheckData(*this, op, dlogits, "dlogits");
  CheckSameSize(op, indices, weights, "indices, weights");
  CheckSameSize(op, indices, dweights, "indices, dweights");
  const int64_t k = TopK(indices), n = indices.numel() / k;
  const int64_t experts = n > 0 ? dlogits.numel() / n : 0;
  F32Output d(dlogits, true);
  RefRouterTopKBackward(indices.i32(), weights.f32(), dweights.f32(), n, experts, k, d.get());
  d.Store();
}

void CpuMoeDispatch(const View& indices, const View& offsets, const View& token_of_row,
                    const View& row_of_slot) {
  const OpKind op = OpKind::kMoeDispatch;
  for (const auto& [v, name] :
       {std::pair{&indices, "indices"}, std::pair{&offsets, "offsets"},
        std::pair{&token_of_row, "token_of_row"}, std::pair{&row_of_slot, "row_of_slot"}}) {
    CheckIndex(op, *v, name);
  }
  CheckSameSize(op, indices, token_of_row, "indices, token_of_row");
  CheckSameSize(op, indices, row_of_slot, "indices, row_of_slot");
  const int64_t k = TopK(indices), n = indices.numel() / k;
  RefMoeDispatch(indices.i32(), n, k, offsets.numel() - 1, offsets.i32(), token_of_row.i32(),
                 row_of_slot.i32());
}

void ReferenceOps::MoeDispatch(const View& indices, const View& offsets, const View& token_of_row,
                               const View& row_of_slot) const {
  CpuMoeDispatch(indices, offsets, token_of_row, row_of_slot);
}

void ReferenceOps::MoeGather(const View& x, const View& token_of_row, const View& grouped) const {
  const OpKind op = OpKind::kMoeGather;
  CheckData(*this, op, x, "x");
  CheckIndex(op, token_of_row, "token_of_row");
  CheckData(*this, op, grouped, "grouped");
  const int64_t rows = token_of_row.numel(), dim = rows > 0 ? grouped.numel() / rows : 0;
  F32Input xs(x);
  F32Output g(grouped, false);
  RefMoeGather(xs.get(), token_of_row.i32(), rows, dim, g.get());
  g.Store();
}

void ReferenceOps::MoeGatherBackward(const View& dgrouped, const View& row_of_slot,
                                     const View& dx) const {
  const OpKind op = OpKind::kMoeGatherBackward;
  CheckData(*this, op, dgrouped, "dgrouped");
  CheckIndex(op, row_of_slot, "row_of_slot");
  CheckData(*this, op, dx, "dx");
  const int64_t k = TopK(row_of_slot), n = row_of_slot.numel() / k;
  const int64_t dim = n > 0 ? dx.numel() / n : 0;
  CheckSize(op, dgrouped, n * k * dim, "dgrouped");
  F32Input d(dgrouped);
  F32Output dxs(dx, true);
  RefMoeGatherBackward(d.get(), row_of_slot.i32(), n, k, dim, dxs.get());
  dxs.Store();
}

void ReferenceOps::MoeCombine(const View& y, const View& weights, const View& row_of_slot,
                              const View& out) const {
  const OpKind op = OpKind::kMoeCombine;
  CheckData(*this, op, y, "y");
  CheckF32(op, weights, "weights");
  CheckIndex(op, row_of_slot, "row_of_slot");
  CheckData(*this, op, out, "out");
  CheckSameSize(op, weights, row_of_slot, "weights, row_of_slot");
  const int64_t k = TopK(row_of_slot), n = row_of_slot.numel() / k;
  const int64_t dim = n > 0 ? out.numel() / n : 0;
  CheckSize(op, y, n * k * dim, "y");
  F32Input ys(y);
  F32Output o(out, false);
  RefMoeCombine(ys.get(), weights.f32(), row_of_slot.i32(), n, k, dim, o.get());
  o.Store();
}

void ReferenceOps::MoeCombineBackward(const View& y, const View& weights, const View& row_of_slot,
                                      const View& dout, const View& dy,
                                      const View& dweights) const {
  const OpKind op = OpKind::kMoeCombineBackward;
  CheckData(*this, op, y, "y");
  CheckF32(op, weights, "weights");
  CheckIndex(op, row_of_slot, "row_of_slot");
  CheckData(*this, op, dout, "dout");
  CheckData(*this, op, dy, "dy");
  CheckF32(op, dweights, "dweights");
  CheckSameSize(op, y, dy, "y, dy");
  CheckSameSize(op, weights, dweights, "weights, dweights");
  const int64_t k = TopK(row_of_slot), n = row_of_slot.numel() / k;
  const int64_t dim = n > 0 ? dout.numel() / n : 0;
  CheckSize(op, y, n * k * dim, "y");
  F32Input ys(y), d(dout);
  F32Output dys(dy, false);
  RefMoeCombineBackward(ys.get(), weights.f32(), row_of_slot.i32(), d.get(), n, k, dim, dys.get(),
                        dweights.f32());
  dys.Store();
}

}  // namespace air::engine
