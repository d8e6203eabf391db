// ReferenceOps: every op as its fp32 loop (reference_loops.cc) on fp32 staging of its views —
// BF16 inputs widened exactly, BF16 outputs rounded once (see reference_ops.h).
#include "engine/backend/cpu/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "engine/backend/cpu/convert.h"
#include "engine/backend/cpu/reference_loops.h"
#include "engine/dtype.h"
#include "engine/ops/op_checks.h"
#include "engine/ops/op_sizes.h"

namespace air::engine {

bool ReferenceOps::Supports(OpKind, DType dtype) const {
  return dtype == DType::kF32 || dtype == DType::kBF16;
}

namespace {

// An operand of a bf16 GEMM: widened when BF16; an F32 operand rounded to bf16 and widened
// back, since the other operand's dtype makes the whole product bf16 (ops.h).
std::vector<float> Bf16Operand(const View& v, int64_t elements) {
  std::vector<float> out(static_cast<size_t>(elements));
  LoadF32(v, 0, elements, out.data());
  if (v.dtype() == DType::kF32) {
    for (float& x : out) x = Bf16ToF32(F32ToBf16(x));
  }
  return out;
}

const int32_t* IndexOrNull(const View& v) { return v.empty() ? nullptr : v.i32(); }

}  // namespace

void ReferenceOps::GemmKernel(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                              const View& a, int64_t lda, const View& b, int64_t ldb, float beta,
                              const View& c, int64_t ldc) const {
  const int64_t a_span = trans_a ? MatrixSpan(k, m, lda) : MatrixSpan(m, k, lda);
  const int64_t b_span = trans_b ? MatrixSpan(n, k, ldb) : MatrixSpan(k, n, ldb);
  std::vector<float> a32, b32;
  if (k > 0 && (a.dtype() == DType::kBF16 || b.dtype() == DType::kBF16)) {
    a32 = Bf16Operand(a, a_span);
    b32 = Bf16Operand(b, b_span);
  } else if (k > 0) {
    a32.resize(static_cast<size_t>(a_span));
    b32.resize(static_cast<size_t>(b_span));
    LoadF32(a, 0, a_span, a32.data());
    LoadF32(b, 0, b_span, b32.data());
  }
  // Only C's addressed elements are staged (a strided C keeps what lies between its rows).
  F32Output c32(c.Slice(0, MatrixSpan(m, n, ldc)), /*load=*/true);
  RefGemm(trans_a, trans_b, m, n, k, a32.data(), lda, b32.data(), ldb, beta, c32.get(), ldc);
  c32.Store();
}

void ReferenceOps::EmbeddingForwardKernel(const View& ids, const View& table,
                                          const View& out) const {
  const int64_t n = ids.numel(), dim = table.dim(-1);
  F32Input t(table);
  F32Output o(out, false);
  RefEmbeddingForward(ids.i32(), n, t.get(), dim, o.get());
  o.Store();
}

void ReferenceOps::EmbeddingBackwardKernel(const View& ids, const View& dout, int32_t skip_id,
                                           const View& dtable) const {
  const int64_t n = ids.numel(), dim = dtable.dim(-1);
  F32Input d(dout);
  F32Output t(dtable, true);
  RefEmbeddingBackward(ids.i32(), n, d.get(), dim, skip_id, t.get());
  t.Store();
}

void ReferenceOps::RmsNormForwardKernel(const View& x, const View& w, float eps, const View& y,
                                        const View& rstd) const {
  const int64_t dim = w.numel(), rows = x.numel() / dim;
  F32Input xs(x), ws(w);
  F32Output ys(y, false);
  RefRmsNormForward(xs.get(), ws.get(), rows, dim, eps, ys.get(), rstd.f32());
  ys.Store();
}

void ReferenceOps::RmsNormBackwardKernel(const View& x, const View& w, const View& rstd,
                                         const View& dy, const View& dx, const View& dw) const {
  const int64_t dim = w.numel(), rows = x.numel() / dim;
  F32Input xs(x), ws(w), dys(dy);
  F32Output dxs(dx, true);
  std::optional<F32Output> dws;
  if (!dw.empty()) dws.emplace(dw, true);
  RefRmsNormBackward(xs.get(), ws.get(), rstd.f32(), dys.get(), rows, dim, dxs.get(),
                     dws ? dws->get() : nullptr);
  dxs.Store();
  if (dws) dws->Store();
}

void ReferenceOps::RopeTablesKernel(const View& positions, const View& inv_freq, float scale,
                                    const View& cos, const View& sin) const {
  const int64_t n = positions.numel(), half = inv_freq.numel();
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      RopeAngle(positions.i32()[t], inv_freq.f32()[i], scale, &cos.f32()[t * half + i],
                &sin.f32()[t * half + i]);
    }
  }
}

void ReferenceOps::RopeForwardKernel(const View& x, const View& cos, const View& sin) const {
  const RopeDims d = RopeShape(x, cos);
  F32Output xs(x, true);
  RefRopeForward(xs.get(), d.n, d.heads, d.head_dim, cos.f32(), sin.f32());
  xs.Store();
}

void ReferenceOps::RopeBackwardKernel(const View& dx, const View& cos, const View& sin) const {
  const RopeDims d = RopeShape(dx, cos);
  F32Output xs(dx, true);
  RefRopeBackward(xs.get(), d.n, d.heads, d.head_dim, cos.f32(), sin.f32());
  xs.Store();
}

void ReferenceOps::AttentionForwardKernel(const AttentionShape& s, const View& q, const View& k,
                                          const View& v, const View& sinks, const View& q_segments,
                                          const View& kv_segments, const View& out,
                                          const View& lse) const {
  F32Input qs(q), ks(k), vs(v);
  std::optional<F32Input> sink_values;
  if (!sinks.empty()) sink_values.emplace(sinks);
  F32Output os(out, false);
  RefAttentionForward(s, qs.get(), ks.get(), vs.get(), sink_values ? sink_values->get() : nullptr,
                      IndexOrNull(q_segments), IndexOrNull(kv_segments), os.get(),
                      lse.empty() ? nullptr : lse.f32());
  os.Store();
}

void ReferenceOps::AttentionBackwardKernel(const AttentionShape& s, const View& q, const View& k,
                                           const View& v, const View& sinks, const View& q_segments,
                                           const View& kv_segments, const View& out,
                                           const View& lse, const View& dout, const View& dq,
                                           const View& dk, const View& dv,
                                           const View& dsinks) const {
  F32Input qs(q), ks(k), vs(v), os(out), dos(dout);
  std::optional<F32Input> sink_values;
  if (!sinks.empty()) sink_values.emplace(sinks);
  F32Output dqs(dq, true), dks(dk, true), dvs(dv, true);
  std::optional<F32Output> dss;
  if (!dsinks.empty()) dss.emplace(dsinks, true);
  RefAttentionBackward(s, qs.get(), ks.get(), vs.get(), sink_values ? sink_values->get() : nullptr,
                       IndexOrNull(q_segments), IndexOrNull(kv_segments), os.get(), lse.f32(),
                       dos.get(), dqs.get(), dks.get(), dvs.get(), dss ? dss->get() : nullptr);
  dqs.Store();
  dks.Store();
  dvs.Store();
  if (dss) dss->Store();
}

void ReferenceOps::SwigluForwardKernel(const View& gate, const View& up, const View& out) const {
  F32Input g(gate), u(up);
  F32Output o(out, false);
  RefSwigluForward(g.get(), u.get(), gate.numel(), o.get());
  o.Store();
}

void ReferenceOps::SwigluBackwardKernel(const View& gate, const View& up, const View& dout,
                                        const View& dgate, const View& dup) const {
  F32Input g(gate), u(up), d(dout);
  F32Output dg(dgate, true), du(dup, true);
  RefSwigluBackward(g.get(), u.get(), d.get(), gate.numel(), dg.get(), du.get());
  dg.Store();
  du.Store();
}

void ReferenceOps::AddInPlaceKernel(const View& y, const View& x) const {
  F32Input xs(x);
  F32Output ys(y, true);
  RefAddInPlace(ys.get(), xs.get(), y.numel());
  ys.Store();
}

void ReferenceOps::DropoutKernel(const View& x, float p, uint64_t seed, const View& out) const {
  const float scale = 1.0f / (1.0f - p);
  F32Input xs(x);
  F32Output ys(out, false);
  for (int64_t i = 0; i < x.numel(); ++i) {
    ys.get()[i] = DropoutUniform(seed, static_cast<uint64_t>(i)) >= p ? xs.get()[i] * scale : 0.0f;
  }
  ys.Store();
}

void ReferenceOps::DropoutMaskKernel(int64_t n, float p, uint64_t seed, const View& bits) const {
  uint8_t* out = static_cast<uint8_t*>(bits.raw());
  std::fill(out, out + (n + 7) / 8, uint8_t{0});
  for (int64_t i = 0; i < n; ++i) {
    if (DropoutUniform(seed, static_cast<uint64_t>(i)) >= p) out[i / 8] |= uint8_t(1u << (i % 8));
  }
}

void ReferenceOps::ApplyDropoutMaskKernel(const View& x, const View& bits, float p, float beta,
                                          const View& out) const {
  const float scale = 1.0f / (1.0f - p);
  const uint8_t* mask = static_cast<const uint8_t*>(bits.raw());
  F32Input xs(x);
  F32Output ys(out, beta != 0.0f);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float kept = (mask[i / 8] >> (i % 8)) & 1u ? xs.get()[i] * scale : 0.0f;
    ys.get()[i] = beta != 0.0f ? ys.get()[i] + kept : kept;
  }
  ys.Store();
}

void ReferenceOps::GemmDroppedKernel(bool drop_b, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                     int64_t k, const View& a, int64_t lda, const View& b,
                                     int64_t ldb, float beta, const View& c, int64_t ldc,
                                     const View& bits, float p, const View& scratch) const {
  GemmDroppedThroughScratch(drop_b, trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, bits,
                            p, scratch);
}

void ReferenceOps::GemmAddDroppedKernel(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                        const View& a, int64_t lda, const View& b, int64_t ldb,
                                        const View& c, const View& bits, float p,
                                        const View& scratch) const {
  GemmAddDroppedThroughScratch(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, bits, p, scratch);
}

// GemmPackedBBytes is 0 here: the ops' checks refuse every call before it reaches these.
void ReferenceOps::PackGemmBKernel(bool, int64_t, int64_t, const View&, int64_t,
                                   const View&) const {
  RefusePackedB(OpKind::kPackGemmB);
}

void ReferenceOps::GemmPackedBKernel(int64_t, int64_t, int64_t, const View&, int64_t, const View&,
                                     float, const View&, int64_t) const {
  RefusePackedB(OpKind::kGemmPackedB);
}

void ReferenceOps::DroppedLinearBackwardKernel(int64_t n, int64_t r, int64_t in, const View& x,
                                               const View& bits, float p, const View& w,
                                               const View& dy, float beta, const View& w_grad,
                                               const View& dx, const View& x_scratch,
                                               const View& f32_scratch) const {
  DroppedLinearBackwardInTwo(n, r, in, x, bits, p, w, dy, beta, w_grad, dx, x_scratch, f32_scratch);
}

void ReferenceOps::GemmConcatKKernel(bool trans_b, int64_t m, int64_t n, int64_t k, const View& a,
                                     int64_t lda, const View& b, int64_t ldb, int64_t k2,
                                     const View& a2, int64_t lda2, const View& b2, int64_t ldb2,
                                     const View& c, const View& scratch) const {
  GemmConcatKInTwo(trans_b, m, n, k, a, lda, b, ldb, k2, a2, lda2, b2, ldb2, c, scratch);
}

void ReferenceOps::AddBiasKernel(const View& y, const View& bias) const {
  const int64_t cols = bias.numel(), rows = cols > 0 ? y.numel() / cols : 0;
  F32Input b(bias);
  F32Output ys(y, true);
  RefAddBias(ys.get(), b.get(), rows, cols);
  ys.Store();
}

void ReferenceOps::BiasBackwardKernel(const View& dy, const View& dbias) const {
  const int64_t cols = dbias.numel(), rows = cols > 0 ? dy.numel() / cols : 0;
  F32Input d(dy);
  F32Output db(dbias, true);
  RefBiasBackward(d.get(), rows, cols, db.get());
  db.Store();
}

void ReferenceOps::ConvertKernel(const View& src, const View& dst) const {
  F32Input s(src);
  StoreF32(s.get(), dst, 0, dst.numel());
}

void ReferenceOps::CrossEntropyForwardKernel(const View& logits, const View& targets,
                                             const View& lse, const View& loss_sum) const {
  const int64_t n = targets.numel(), vocab = n > 0 ? logits.numel() / n : 0;
  F32Input l(logits);
  RefCrossEntropyForward(l.get(), targets.i32(), n, vocab, lse.f32(), loss_sum.f64());
}

void ReferenceOps::CrossEntropyBackwardKernel(const View& logits, const View& targets,
                                              const View& lse, float scale,
                                              const View& dlogits) const {
  const int64_t n = targets.numel(), vocab = n > 0 ? logits.numel() / n : 0;
  F32Input l(logits);
  F32Output d(dlogits, false);
  RefCrossEntropyBackward(l.get(), targets.i32(), lse.f32(), n, vocab, scale, d.get());
  d.Store();
}

void ReferenceOps::AdamWUpdateKernel(const AdamWScalars& s, const View& p, const View& g,
                                     const View& m, const View& v, const View& p_copy) const {
  F32Output ps(p, true), ms(m, true), vs(v, true);
  F32Input gs(g);
  RefAdamWUpdate(s, p.numel(), ps.get(), gs.get(), ms.get(), vs.get());
  ps.Store();
  ms.Store();
  vs.Store();
  if (!p_copy.empty()) ConvertKernel(p, p_copy);
}

void ReferenceOps::SumOfSquaresKernel(const View& x, const View& sum) const {
  F32Input xs(x);
  *sum.f64() += SumOfSquaresLoop(xs.get(), x.numel());
}

void ReferenceOps::ScaleKernel(const View& x, float factor) const {
  F32Output xs(x, true);
  float* p = xs.get();
  for (int64_t j = 0; j < x.numel(); ++j) p[j] *= factor;
  xs.Store();
}

}  // namespace air::engine
