// ReferenceOps' mixture-of-experts kernels (GPT-OSS): the fp32 loops of reference_moe_loops.cc on
// fp32 staging of the data views (see reference_ops.h; ops_checked.cc checked the arguments).
#include "engine/backend/cpu/convert.h"
#include "engine/backend/cpu/reference_loops.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/ops/op_sizes.h"

namespace air::engine {

void ReferenceOps::ClampedSwigluForwardKernel(const View& gate_up, float alpha, float limit,
                                              const View& out) const {
  F32Input g(gate_up);
  F32Output o(out, false);
  RefClampedSwigluForward(g.get(), out.numel(), alpha, limit, o.get());
  o.Store();
}

void ReferenceOps::ClampedSwigluBackwardKernel(const View& gate_up, float alpha, float limit,
                                               const View& dout, const View& dgate_up) const {
  F32Input g(gate_up), d(dout);
  F32Output dg(dgate_up, true);
  RefClampedSwigluBackward(g.get(), d.get(), dout.numel(), alpha, limit, dg.get());
  dg.Store();
}

void ReferenceOps::RouterTopKKernel(const View& logits, const View& indices,
                                    const View& weights) const {
  const int64_t k = TopK(indices), n = indices.numel() / k;
  const int64_t experts = n > 0 ? logits.numel() / n : 0;
  F32Input l(logits);
  RefRouterTopK(l.get(), n, experts, k, indices.i32(), weights.f32());
}

void ReferenceOps::RouterTopKBackwardKernel(const View& indices, const View& weights,
                                            const View& dweights, const View& dlogits) const {
  const int64_t k = TopK(indices), n = indices.numel() / k;
  const int64_t experts = n > 0 ? dlogits.numel() / n : 0;
  F32Output d(dlogits, true);
  RefRouterTopKBackward(indices.i32(), weights.f32(), dweights.f32(), n, experts, k, d.get());
  d.Store();
}

void CpuMoeDispatch(const View& indices, const View& offsets, const View& token_of_row,
                    const View& row_of_slot) {
  const int64_t k = TopK(indices), n = indices.numel() / k;
  RefMoeDispatch(indices.i32(), n, k, offsets.numel() - 1, offsets.i32(), token_of_row.i32(),
                 row_of_slot.i32());
}

void ReferenceOps::MoeDispatchKernel(const View& indices, const View& offsets,
                                     const View& token_of_row, const View& row_of_slot) const {
  CpuMoeDispatch(indices, offsets, token_of_row, row_of_slot);
}

void ReferenceOps::MoeGatherKernel(const View& x, const View& token_of_row,
                                   const View& grouped) const {
  const int64_t rows = token_of_row.numel(), dim = rows > 0 ? grouped.numel() / rows : 0;
  F32Input xs(x);
  F32Output g(grouped, false);
  RefMoeGather(xs.get(), token_of_row.i32(), rows, dim, g.get());
  g.Store();
}

void ReferenceOps::MoeGatherBackwardKernel(const View& dgrouped, const View& row_of_slot,
                                           const View& dx) const {
  const int64_t k = TopK(row_of_slot), n = row_of_slot.numel() / k;
  const int64_t dim = n > 0 ? dx.numel() / n : 0;
  F32Input d(dgrouped);
  F32Output dxs(dx, true);
  RefMoeGatherBackward(d.get(), row_of_slot.i32(), n, k, dim, dxs.get());
  dxs.Store();
}

void ReferenceOps::MoeCombineKernel(const View& y, const View& weights, const View& row_of_slot,
                                    const View& out) const {
  const int64_t k = TopK(row_of_slot), n = row_of_slot.numel() / k;
  const int64_t dim = n > 0 ? out.numel() / n : 0;
  F32Input ys(y);
  F32Output o(out, false);
  RefMoeCombine(ys.get(), weights.f32(), row_of_slot.i32(), n, k, dim, o.get());
  o.Store();
}

void ReferenceOps::MoeCombineBackwardKernel(const View& y, const View& weights,
                                            const View& row_of_slot, const View& dout,
                                            const View& dy, const View& dweights) const {
  const int64_t k = TopK(row_of_slot), n = row_of_slot.numel() / k;
  const int64_t dim = n > 0 ? dout.numel() / n : 0;
  F32Input ys(y), d(dout);
  F32Output dys(dy, false);
  RefMoeCombineBackward(ys.get(), weights.f32(), row_of_slot.i32(), d.get(), n, k, dim, dys.get(),
                        dweights.f32());
  dys.Store();
}

}  // namespace air::engine
